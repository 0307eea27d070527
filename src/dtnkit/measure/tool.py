"""What every measuring tool offers: ``can_run`` -> (ok, reasons), ``run``, a pure ``parse``.

A tool measures one probe kind (:mod:`dtnkit.measure.probes`).  ``run`` takes a probe's spec
(one transfer, one flow test: ``dtnkit probe``, diagnose, experiment) or a load
(:class:`~dtnkit.measure.probes.load.LoadSpec`: many transfers at once from servers the
caller started, within a deadline: a sweep point).  A probe runs the sampler around exactly
the part it measures (a load's caller samples the whole path itself) and returns the parsed
figures with the tool's raw output (the diags), so a stored figure can always be checked
against what the tool printed.  :class:`ToolRun` is what every tool returns, whoever asked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from dtnkit.host.host import Host
from dtnkit.measure.probes.net import LabPeers
from dtnkit.progress import SILENT, Progress

if TYPE_CHECKING:
    from dtnkit.measure.procs import Procs

#: the raw tool output kept of a load (a sweep point), at most (the tail is kept)
MAX_RAW_BYTES = 64 * 1024

# turns a tool's argv into the one actually run (e.g. inside a throttling cgroup)
Wrap = Callable[[Sequence[str]], list[str]]


class ProbeSpec(Protocol):
    """A probe's spec: its kind, the sampler period, and its own checks."""

    kind: ClassVar[str]
    interval_s: float

    def validate(self) -> None: ...


@dataclass(frozen=True)
class ToolContext:
    """What the caller knows and a tool may use: a wrapper for its argv, the lab's peers,
    and where to report progress (intervals while the tool runs)."""

    wrap: Wrap | None = None
    lab_peers: LabPeers | None = None
    progress: Progress = SILENT
    #: the password a tool authenticates with (iperf3: a campaign's token); never stored
    password: str | None = field(default=None, repr=False)
    # ---- what a caller that holds the servers and samples itself gives (a sweep) ----
    #: time.monotonic() after which the tool must have stopped everything it started
    deadline: float | None = None
    #: a private, empty directory for the run's files (downloads, headers, logs)
    workdir: Path | None = None
    #: where the tool starts its processes (stopped by the caller too, on Ctrl-C); None: a
    #: registry of the run's own
    procs: Procs | None = None
    #: bytes received so far on the receiving link (None: unreadable): a tool that cuts its
    #: transfers at the duration starts the duration when data flows, as iperf3's -t does
    received_bytes: Callable[[], int | None] | None = None

    def argv(self, argv: Sequence[str]) -> list[str]:
        return self.wrap(argv) if self.wrap is not None else list(argv)


@dataclass(frozen=True)
class Transfer:
    """One transfer of a load (or one stream of a tool without transfers), times in seconds
    from the tool's start."""

    start_s: float
    end_s: float | None  # None: did not complete (with no error: cut at the duration)
    bytes: int  # moved (a cut copy: what its destination held when it was cut)
    verified: bool = False  # a checksum was compared end to end
    error: str = ""


@dataclass
class ToolRun:
    """What a tool returns of one run, probe or load."""

    summary: dict[str, Any]  # the tool's figures, units in key names
    raw: str  # the tool's own output (a load's: its tail, at most MAX_RAW_BYTES)
    samples: list[dict[str, Any]] = field(default_factory=list)
    resolved: dict[str, Any] = field(default_factory=dict)  # e.g. the peer's address
    #: a load's transfers, in order
    transfers: tuple[Transfer, ...] = ()
    #: a load's error (a failed sweep point is stored and the sweep goes on); a probe's
    #: failure is raised instead
    failed: str = ""
    #: seconds from the tool's start at which its own set-up was over and data flowed, when
    #: the tool knows (iperf3 connects its -P streams one after the other, one round trip
    #: each: 13 s for 128 streams at 100 ms); samples before it are set-up, not throughput
    measure_from_s: float | None = None
    #: seconds from the tool's start at which its measured time ended, when it stopped its
    #: transfers itself (dtnkit-cp cuts its copies at the duration: stopping them is not data)
    measure_until_s: float | None = None
    #: how long the data flowed, when the tool knows that but not exactly when: iperf3
    #: reports its test's seconds and exits after a results exchange that a loaded machine
    #: can draw out, so ``measure_from_s`` (its exit less those seconds) is the latest the
    #: data can have started; the samples place the window (:func:`~dtnkit.measure.
    #: pathsampler.data_window`)
    measure_seconds: float | None = None


def tail(text: str, limit: int = MAX_RAW_BYTES) -> str:
    """The last ``limit`` bytes of ``text`` (UTF-8)."""
    data = text.encode("utf-8", "replace")
    return data[-limit:].decode("utf-8", "replace") if len(data) > limit else text


class Tool(Protocol):
    """A way to measure: the one protocol every tool (iperf3, fio, dtnkit cp, a command,
    the third-party copies) has, whether a probe or a sweep runs it."""

    name: str  # what --tool takes
    kind: str  # the probe kind it measures
    about: str  # one line for --help
    package: str  # what to install when it cannot run

    def can_run(self) -> tuple[bool, list[str]]: ...

    def run(self, host: Host, spec: Any, context: ToolContext) -> ToolRun: ...

    def parse(self, text: str) -> dict[str, Any]: ...
