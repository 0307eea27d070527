"""What every measuring tool offers: ``can_run`` -> (ok, reasons), ``run``, a pure ``parse``.

A tool measures one probe kind (:mod:`dtnkit.measure.probes`).  ``run`` runs the sampler
around exactly the part it measures and returns the parsed figures with the tool's raw output
(the diags), so a stored figure can always be checked against what the tool printed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from dtnkit.host.host import Host
from dtnkit.measure.probes.net import LabPeers
from dtnkit.progress import SILENT, Progress

# turns a tool's argv into the one actually run (e.g. inside a throttling cgroup)
Wrap = Callable[[Sequence[str]], list[str]]


class ProbeSpec(Protocol):
    """A probe's spec: its kind, the sampler period, and its own checks."""

    kind: ClassVar[str]
    interval_s: float

    def validate(self) -> None: ...


@dataclass(frozen=True)
class Context:
    """What the caller knows and a tool may use: a wrapper for its argv, the lab's peers,
    and where to report progress (intervals while the tool runs)."""

    wrap: Wrap | None = None
    lab_peers: LabPeers | None = None
    progress: Progress = SILENT
    #: the password a tool authenticates with (iperf3: a campaign's token); never stored
    password: str | None = field(default=None, repr=False)

    def argv(self, argv: Sequence[str]) -> list[str]:
        return self.wrap(argv) if self.wrap is not None else list(argv)


@dataclass
class ToolRun:
    summary: dict[str, Any]  # the tool's figures, units in key names
    raw: str  # the tool's own output
    samples: list[dict[str, Any]] = field(default_factory=list)
    resolved: dict[str, Any] = field(default_factory=dict)  # e.g. the peer's address


class Tool(Protocol):
    name: str  # what --tool takes
    kind: str  # the probe kind it measures
    about: str  # one line for --help
    package: str  # what to install when it cannot run

    def can_run(self) -> tuple[bool, list[str]]: ...

    def run(self, host: Host, spec: Any, context: Context) -> ToolRun: ...

    def parse(self, text: str) -> dict[str, Any]: ...
