"""How long a sweep will take: said before it runs, with a margin, and refined as it runs.

A point's time is its data time plus its overhead:

- **data time**: what the grid asks for.  ``duration`` bounds iperf3 (its ``-t``) and
  dtnkit-cp (its copies are cut when the duration is over).  It does not bound a third-party
  copy (the servers move the bytes; the sweep runs each copy to its end) nor a command
  template (its run is its own): a TPC point is taken to last the duration plus one copy of
  ``file_size`` at its share of the rate cap, a command's the duration, and the estimate
  says so (:attr:`Estimate.notes`).  With ``bytes``: the bytes at the rate cap
  (without a cap the time depends on the machine: taken at 1 Gbit/s, and said).
- **overhead**: what the runner and the tool do around the data, counted in *starts*: the
  time this machine takes to start one ``dtnkit`` process, measured once before the run
  (:func:`measure_start`), since nearly all of it is starting processes (servers, clients,
  ``ip``, ``tc``, the tuning) and that is what the machine's load stretches.  The lab path's
  round trips are added where a tool waits for them (iperf3 connects its streams one round
  trip each).

The estimate is the data time plus the overhead; its margin is the data time plus half to
:data:`HIGH` times the overhead.  While the sweep runs, :meth:`Estimate.remaining` scales
the overhead still to come by what the points so far actually took.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

from dtnkit.host import process
from dtnkit.sweep.grid import COMMAND_PREFIX, Grid, Point
from dtnkit.units import counted, format_eta

#: tools whose points ``duration`` bounds (the others run each transfer to its end)
BOUNDED = ("iperf3", "dtnkit-cp", "dtnkit-cp-upload")
TPC = ("dtnkit-tpc", "gfal-tpc")
#: without a rate cap, the rate a ``bytes`` point or a copy is taken to move at (bits/s)
UNCAPPED_BPS = 1e9
#: the margin: the overhead may take from LOW to HIGH times what it is estimated at
LOW, HIGH = 0.5, 2.5

# overheads, in starts of one dtnkit process (measured), per event
RUN_STARTS = 14.0  # the tools' versions (twice), building and removing the lab path, the CA
LAB_DOWN_STARTS = 3.0  # of which removing the lab path, at the end
SERVER_STARTS = {"dtnkit": 5.0, "xrootd": 3.0, "iperf3": 1.0}
PATH_CHANGE_STARTS = 1.0  # RTT, rate or loss set in place (tc in the path's namespace)
POINT_STARTS = 0.5  # storing the point, the sampler's start and end
PROFILE_STARTS = 8.0  # a profile applied on both ends and restored, each point
TUNING_READ_STARTS = 2.0  # the live tuning read, once per profile
CP_SETUP_STARTS = 2.0  # the first copies' start-up before data flows
CP_STOP_STARTS = 1.5  # stopping the copies cut at the duration
IPERF3_STARTS = 0.5
TPC_STARTS = 3.0
COMMAND_STARTS = 1.0
#: source files written per second (tmpfs), once per file size
WRITE_BPS = 2e9


def measure_start() -> float:
    """Seconds to start one dtnkit process here and now (``python -m dtnkit --version``)."""
    t0 = time.monotonic()
    with contextlib.suppress(OSError, process.SubprocessError):
        process.run([sys.executable, "-m", "dtnkit", "--version"], text=False, timeout=60)
    return max(0.05, time.monotonic() - t0)


def server_kinds(point: Point) -> tuple[str | None, str | None]:
    """The servers the point's tool needs (origins, destination), as the runner starts them."""
    if point.tool == "iperf3":
        return "iperf3", None
    if point.tool in TPC:
        return point.server, point.server
    return point.server, None


def copy_s(point: Point) -> float:
    """One file's copy at the point's share of the rate cap (one stream of ``streams``)."""
    rate = (point.rate_bps or UNCAPPED_BPS) / max(1, point.streams)
    return point.file_size * 8 / rate


@dataclasses.dataclass(frozen=True)
class PointCost:
    data_s: float
    overhead_starts: float  # in measured starts
    overhead_rtts: float  # round trips of the path the tool waits for


def point_cost(point: Point, previous: Point | None) -> PointCost:
    """What one point costs after ``previous`` (None: the first)."""
    rtt = point.rtt_ms / 1000
    starts, rtts = POINT_STARTS, 0.0
    if previous is None or (previous.rtt_ms, previous.rate_bps, previous.loss) != (
        point.rtt_ms,
        point.rate_bps,
        point.loss,
    ):
        starts += PATH_CHANGE_STARTS
    kinds = server_kinds(point)
    key = (kinds, point.origins, point.cores, point.file_size)
    if previous is None or key != (
        server_kinds(previous),
        previous.origins,
        previous.cores,
        previous.file_size,
    ):
        starts += sum(SERVER_STARTS.get(k or "", 0.0) for k in kinds)
    if point.profile is not None:
        starts += PROFILE_STARTS
        if previous is None or previous.profile != point.profile:
            starts += TUNING_READ_STARTS
    tool = point.tool
    if point.bytes is not None:
        data = point.bytes * 8 / (point.rate_bps or UNCAPPED_BPS)
    else:
        data = point.duration_s or 0.0
        if tool in TPC:
            data += copy_s(point)
    if tool == "iperf3":
        starts += IPERF3_STARTS
        rtts += -(-point.streams // point.origins) + 3  # each stream's connect, then the test
    elif tool in ("dtnkit-cp", "dtnkit-cp-upload"):
        starts += CP_SETUP_STARTS + (CP_STOP_STARTS if point.bytes is None else 0.0)
        rtts += 4  # TCP and TLS handshakes, the first request
    elif tool in TPC:
        starts += TPC_STARTS
        rtts += 6
    else:
        starts += COMMAND_STARTS
    return PointCost(data, starts, rtts * rtt)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A sweep's time, before it runs: ``seconds`` in ``low_s`` .. ``high_s``."""

    points: int
    data_s: float
    overhead_s: float
    start_s: float  # the measured start of one dtnkit process the overhead is counted in
    notes: tuple[str, ...]
    costs: tuple[PointCost, ...] = dataclasses.field(repr=False, default=())
    fixed_start_s: float = 0.0  # before the first point's data: versions, the lab path, CA
    fixed_end_s: float = 0.0  # after the last: the lab path removed

    @property
    def seconds(self) -> float:
        return self.data_s + self.overhead_s

    @property
    def low_s(self) -> float:
        return self.data_s + LOW * self.overhead_s

    @property
    def high_s(self) -> float:
        return self.data_s + HIGH * self.overhead_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "low_s": round(self.low_s, 1),
            "high_s": round(self.high_s, 1),
            "data_s": round(self.data_s, 1),
            "overhead_s": round(self.overhead_s, 1),
            "start_s": round(self.start_s, 3),
            "points": self.points,
            "notes": list(self.notes),
        }

    def line(self) -> str:
        return (
            f"{counted(self.points, 'point')}, about {about(self.seconds)} "
            f"({about(self.low_s)} to {about(self.high_s)}), {about(self.data_s)} of it "
            "measuring"
        )

    def remaining(self, done: int, elapsed_s: float) -> float:
        """Seconds left after the first ``done`` points took ``elapsed_s``: the data time
        still to come, and its overhead scaled by how the overhead so far compared with its
        estimate."""
        costs = self.costs
        data_done = sum(c.data_s for c in costs[:done])
        over_done = self.fixed_start_s + sum(self._over(c) for c in costs[:done])
        ratio = max(0.2, (elapsed_s - data_done) / over_done) if over_done > 0 else 1.0
        return (
            sum(c.data_s + ratio * self._over(c) for c in costs[done:]) + ratio * self.fixed_end_s
        )

    def _over(self, c: PointCost) -> float:
        return c.overhead_starts * self.start_s + c.overhead_rtts


def estimate(points: Sequence[Point], *, start_s: float, new_lab: bool = True) -> Estimate:
    """The estimate of running ``points`` in this order, each overhead counted in
    ``start_s`` (:func:`measure_start`)."""
    costs: list[PointCost] = []
    previous: Point | None = None
    for p in points:
        costs.append(point_cost(p, previous))
        previous = p
    sizes = {p.file_size for p in points if p.tool != "iperf3"}
    lab = RUN_STARTS if new_lab else RUN_STARTS / 2
    start = (lab - LAB_DOWN_STARTS) * start_s + sum(sizes) / WRITE_BPS
    end = LAB_DOWN_STARTS * start_s if new_lab else 0.0
    data = sum(c.data_s for c in costs)
    over = start + end + sum(c.overhead_starts * start_s + c.overhead_rtts for c in costs)
    return Estimate(
        len(points), data, over, start_s, tuple(notes(points)), tuple(costs), start, end
    )


def about(seconds: float) -> str:
    """A time estimated, as the progress lines show times to come: ``45s``, ``3m20s``."""
    return format_eta(seconds)


def notes(points: Sequence[Point]) -> list[str]:
    """Why ``duration`` does not bound some of the points, one line per tool."""
    out = []
    tools = list(dict.fromkeys(p.tool for p in points))
    for tool in tools:
        mine = [p for p in points if p.tool == tool]
        if mine[0].bytes is not None:
            continue
        duration = f"{mine[0].duration_s or 0:g}s"
        longest = max(copy_s(p) for p in mine)
        if tool in TPC:
            out.append(
                f"{tool}: duration={duration} does not bound it: each third-party "
                "copy runs to its end (the servers move the bytes; the sweep does not "
                f"cut them): up to {about(longest)} more per point"
            )
        elif tool.startswith(COMMAND_PREFIX):
            out.append(
                f"{tool}: duration={duration} does not bound it: each run of the "
                "template takes as long as it takes ({duration} is passed to it)"
            )
    if any(p.bytes is not None and p.rate_bps is None for p in points):
        out.append("bytes without a rate cap: the time depends on the machine; taken at 1 Gbit/s")
    return out


def for_grid(
    grid: Grid, points: Sequence[Point] | None = None, *, new_lab: bool = True
) -> Estimate:
    return estimate(
        grid.points() if points is None else points, start_s=measure_start(), new_lab=new_lab
    )
