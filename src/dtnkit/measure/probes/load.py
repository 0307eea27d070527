"""A load: many transfers at once, from servers the caller started, within a deadline.

This is what a sweep point measures: ``streams`` concurrent transfers (or flows) from the
point's ``origins`` (the sending servers, each in a lab host's namespace) to the host the
tool runs on, for ``duration_s`` seconds or ``bytes`` in all.  The tools are the probes'
(:mod:`dtnkit.measure.registry`): a tool given a :class:`LoadSpec` instead of its probe's
spec runs the load and reports each transfer (:class:`~dtnkit.measure.tool.Transfer`) and a
failure as text, never raising for a transfer that failed.  The caller (the sweep runner)
starts the servers, samples, and stores the run with the grid's coordinates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

#: server kinds an origin (or a third-party copy's destination) can run
SERVER_KINDS = ("dtnkit", "xrootd", "iperf3")
#: what the command tool's template may name in a load, filled in per run (``{dst}`` is the
#: run's own file)
PLACEHOLDERS = frozenset(
    {
        "src",
        "dst",
        "url",
        "host",
        "port",
        "streams",
        "file_size",
        "duration",
        "bytes",
        "rtt_ms",
        "rate_bps",
        "origin",
        "workdir",
    }
)


class OriginHost(Protocol):
    """The host an origin runs on: its name (for messages), address, and the command line
    that runs a command in its namespace (a lab host)."""

    @property
    def name(self) -> str: ...

    @property
    def address(self) -> str: ...

    def argv(self, argv: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True)
class Origin:
    """One running server of a load, in one host's namespace."""

    index: int  # 0 .. origins-1 (a third-party copy's destination is index -1)
    kind: str  # one of SERVER_KINDS
    host: OriginHost
    port: int
    url_base: str  # e.g. "https://10.77.1.2:8443" or "davs://..." for gfal; "" for iperf3
    pid: int  # the server's PID (stopped by PID)
    cgroup: str | None  # the cgroup path the server runs in (its CPU quota), None: no quota
    files: tuple[str, ...] = ()  # paths (relative to url_base) of the prepared source files
    token: str = ""  # a bearer token that may read and write, "" for none
    ca_file: Path | None = None  # the CA the clients must trust for url_base, None: plain
    root: Path | None = None  # its data directory on this machine (None: unknown, or iperf3)


@dataclass(frozen=True)
class LoadSpec:
    """What a tool moves in one load (one sweep point)."""

    origins: tuple[Origin, ...]  # the sending servers, one per origin
    streams: int  # concurrent transfers (iperf3: -P over all its clients)
    file_size: int  # bytes of each source file
    time_limit_s: float  # the deadline's length: said when the tool stops at it
    duration_s: float | None = None  # move data for this long (as iperf3's -t) ...
    bytes: int | None = None  # ... or this many bytes in all
    destination: Origin | None = None  # a server on this side (a third-party copy's target)
    upload: bool = False  # the movers upload a local file to each origin instead ...
    source: Path | None = None  # ... this one, of file_size bytes
    command: str | None = None  # the command tool's template
    #: further values a command template may name (``rtt_ms``, ``rate_bps``)
    fields: Mapping[str, str] = field(default_factory=dict)
    interval_s: float = 1.0  # the sampler's period (when the tool samples)
