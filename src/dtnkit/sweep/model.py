"""The seam between the sweep runner and what it runs: origins (servers under a CPU quota in
the lab path's sending hosts), tools (what moves the bytes of one point) and what a tool
returns.  The runner (:mod:`.runner`) builds a :class:`PointEnv` for each point, starts the
servers a tool asks for (:meth:`Tool.servers`), samples throughput and CPU itself, and stores
the :class:`ToolRun`.  Tools never sample, never start servers and never touch the lab path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dtnkit.lab.path import LabHost, LabPath
    from dtnkit.sweep.grid import Point

#: server kinds an origin (or a TPC destination) can run
SERVER_KINDS = ("dtnkit", "xrootd", "iperf3")
#: the raw tool output kept per point, at most (the tail is kept)
MAX_RAW_BYTES = 64 * 1024


@dataclasses.dataclass(frozen=True)
class Origin:
    """One running server of a point, in one lab host's namespace."""

    index: int  # 0 .. origins-1 (the TPC destination is index -1)
    kind: str  # one of SERVER_KINDS
    host: LabHost
    port: int
    url_base: str  # e.g. "https://10.77.1.2:8443" or "davs://..." for gfal; "" for iperf3
    pid: int  # the server's PID (stopped by PID)
    cgroup: str | None  # the cgroup path the server runs in (its CPU quota), None: no quota
    files: tuple[str, ...] = ()  # paths (relative to url_base) of the prepared source files
    token: str = ""  # a bearer token that may read and write, "" for none
    ca_file: Path | None = None  # the CA the clients must trust for url_base, None: plain
    root: Path | None = None  # its data directory on this machine (None: unknown, or iperf3)


@dataclasses.dataclass(frozen=True)
class PointEnv:
    """Everything a tool needs to run one point."""

    point: Point
    lab: LabPath
    client: LabHost  # where the tool runs (the receiving side's host)
    origins: tuple[Origin, ...]  # the sending servers, one per origin
    destination: Origin | None  # a server on the client side (TPC: the pull's active party)
    workdir: Path  # a private, empty directory for this point (files, logs)
    deadline: float  # time.monotonic() after which the tool must stop everything it started
    #: bytes received so far on the receiving hosts' link (the sampler's counter), None when
    #: it cannot be read: a tool that cuts its transfers at the duration starts the duration
    #: when data flows (its set-up is not measured time), as iperf3's own -t does
    received_bytes: Callable[[], int | None] | None = None


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One transfer (or one stream of a tool without transfers), times from the point start."""

    start_s: float
    end_s: float | None  # None: did not complete (with no error: cut at the duration)
    bytes: int  # moved (a cut copy: what its destination held when it was cut)
    verified: bool = False  # a checksum was compared end to end
    error: str = ""


@dataclasses.dataclass(frozen=True)
class ToolRun:
    """What a tool reports of one point."""

    transfers: tuple[Transfer, ...]
    raw: str = ""  # the tool's output (tail, at most MAX_RAW_BYTES)
    failed: str = ""  # the point's error: a failed point is stored and the sweep goes on
    retransmits: int | None = None  # from the tool itself (iperf3), when it knows
    extra: dict[str, object] = dataclasses.field(default_factory=dict)
    #: seconds from the tool's start at which its own set-up was over and data flowed, when
    #: the tool knows (iperf3 connects its -P streams one after the other, one round trip
    #: each: 13 s for 128 streams at 100 ms); samples before it are set-up, not throughput
    measure_from_s: float | None = None
    #: seconds from the tool's start at which its measured time ended, when it stopped its
    #: transfers itself (dtnkit-cp cuts its copies at the duration: stopping them is not data)
    measure_until_s: float | None = None


class Tool(Protocol):
    """A way to move a point's bytes.  One instance per tool name, declared once in the
    runner's registry."""

    name: str

    def servers(self, point: Point) -> tuple[str | None, str | None]:
        """The server kind each origin runs and the one the client side runs (or None)."""
        ...

    def run(self, env: PointEnv) -> ToolRun:
        """Run the point to completion or ``env.deadline``; stop every process it started."""
        ...
