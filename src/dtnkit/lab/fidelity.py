"""Is a measurement on a lab path the network's, or the delay stage's?

The NFQUEUE delay stage (:mod:`dtnkit.lab.nfqdelay`) is Python on one or two cores: at many
flows and high packet rates it releases packets late, and a throughput figure measured then
shows the emulator's limit, not TCP's.  A caller (a sweep's point, a benchmark) samples the
stage's stats document (``LabPath.emulator_stats()``, rewritten every 0.5 s) while it measures,
:func:`summarize` turns the samples into one :class:`StageWindow`, and :func:`emulator_bound`
applies the rule:

    the point is emulator-bound when, over the window,
      - the median release lateness (median of the 0.5 s intervals' p50) is above
        ``LATE_FRACTION`` (5 %) of the path's RTT and above ``LATE_FLOOR_MS`` (0.5 ms): each
        packet crosses the stage twice per round trip, so the round trip is stretched by 10 %
        or more, and the floor keeps a VM's ordinary timer wake-up (0.1-0.3 ms) out; or
      - the tail is late by half a round trip: the median of the intervals' p99 lateness is
        above ``TAIL_FRACTION`` (50 %) of the RTT and above ``TAIL_FLOOR_MS`` (5 ms) (bursts,
        as in slow start at 100 ms, that the stage cannot keep up with); or
      - one of the stage's packet threads used ``CPU_BOUND_PERCENT`` (90 %) of a core or more
        on average (it has no headroom left: lateness follows as soon as the rate grows); or
      - the kernel dropped packets at the stage's queues (queue full, or the netlink message
        undeliverable): losses TCP would not see on the real path.

Nothing here reads the environment or starts processes.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LATE_FRACTION = 0.05
LATE_FLOOR_MS = 0.5
TAIL_FRACTION = 0.5
TAIL_FLOOR_MS = 5.0
CPU_BOUND_PERCENT = 90.0
#: below this share of the machine's CPU time idle during a measurement, the lab (both ends,
#: the path and the stage on one machine) is what binds, whatever the stage's lateness says
MACHINE_IDLE_FLOOR_PERCENT = 10.0


@dataclass(frozen=True)
class StageWindow:
    """The delay stage over one measurement: CPU, lateness and its own drops."""

    samples: int
    cpu_percent: float | None  # the process, % of one core, mean over the window
    cpu_thread_max_percent: float | None  # the busiest packet thread, mean over the window
    lateness_p50_ms: float | None  # median of the intervals' p50
    lateness_p99_ms: float | None  # median of the intervals' p99
    kernel_drops: int  # queue full + netlink undeliverable, during the window
    packets: int  # packets through the stage during the window
    lateness_p99_worst_ms: float | None = None  # the worst interval's p99

    def as_json(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "cpu_percent": self.cpu_percent,
            "cpu_thread_max_percent": self.cpu_thread_max_percent,
            "lateness_p50_ms": self.lateness_p50_ms,
            "lateness_p99_ms": self.lateness_p99_ms,
            "lateness_p99_worst_ms": self.lateness_p99_worst_ms,
            "kernel_drops": self.kernel_drops,
            "packets": self.packets,
        }


@dataclass(frozen=True)
class Verdict:
    bound: bool
    reasons: tuple[str, ...] = field(default=())

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def _drops(doc: Mapping[str, Any]) -> int:
    total = 0
    for q in (doc.get("queues") or {}).values():
        k = q.get("kernel") or {}
        total += int(k.get("queue_dropped", 0)) + int(k.get("user_dropped", 0))
    return total


def _packets(doc: Mapping[str, Any]) -> int:
    return sum(int(q.get("packets", 0)) for q in (doc.get("queues") or {}).values())


def summarize(samples: Sequence[Mapping[str, Any]]) -> StageWindow:
    """One window from the stage's stats documents sampled during a measurement (each a
    distinct 0.5 s interval, oldest first).  CPU: the mean of the intervals (cpu_seconds
    over the wall time when there are two samples or more)."""
    docs = [s for s in samples if s]
    if not docs:
        return StageWindow(0, None, None, None, None, 0, 0)
    busy = [
        s["lateness_ms"]
        for s in docs
        if (s.get("lateness_ms") or {}).get("count") and s["lateness_ms"].get("p50") is not None
    ]
    p50 = round(statistics.median(float(x["p50"]) for x in busy), 3) if busy else None
    p99s = [float(x["p99"]) for x in busy if x.get("p99") is not None]
    p99 = round(statistics.median(p99s), 3) if p99s else None
    first, last = docs[0], docs[-1]
    wall = float(last.get("updated", 0)) - float(first.get("updated", 0))
    cpu: float | None
    if len(docs) >= 2 and wall > 0 and "cpu_seconds" in first and "cpu_seconds" in last:
        cpu = round((float(last["cpu_seconds"]) - float(first["cpu_seconds"])) / wall * 100, 1)
    else:
        cpu = round(statistics.mean(float(s.get("cpu_percent") or 0) for s in docs), 1)
    threads = [
        float(s["cpu_thread_max_percent"])
        for s in docs[1:] or docs
        if s.get("cpu_thread_max_percent") is not None
    ]
    thread_max = round(statistics.mean(threads), 1) if threads else cpu
    return StageWindow(
        len(docs),
        cpu,
        thread_max,
        p50,
        p99,
        max(0, _drops(last) - _drops(first)),
        max(0, _packets(last) - _packets(first)),
        max(p99s, default=None),
    )


def emulator_bound(
    window: StageWindow,
    *,
    rtt_ms: float,
    late_fraction: float = LATE_FRACTION,
    late_floor_ms: float = LATE_FLOOR_MS,
    tail_fraction: float = TAIL_FRACTION,
    tail_floor_ms: float = TAIL_FLOOR_MS,
    cpu_percent: float = CPU_BOUND_PERCENT,
) -> Verdict:
    """The module's rule: is this window's measurement limited by the delay stage?"""
    reasons: list[str] = []
    limit = max(late_fraction * rtt_ms, late_floor_ms)
    if window.lateness_p50_ms is not None and window.lateness_p50_ms > limit:
        reasons.append(
            f"lateness p50 {window.lateness_p50_ms:g} ms > {limit:g} ms "
            f"({late_fraction:.0%} of {rtt_ms:g} ms RTT)"
        )
    tail = max(tail_fraction * rtt_ms, tail_floor_ms)
    if window.lateness_p99_ms is not None and window.lateness_p99_ms > tail:
        reasons.append(
            f"lateness p99 {window.lateness_p99_ms:g} ms > {tail:g} ms "
            f"({tail_fraction:.0%} of {rtt_ms:g} ms RTT)"
        )
    thread = window.cpu_thread_max_percent
    if thread is not None and thread >= cpu_percent:
        reasons.append(f"stage thread at {thread:.0f} % of a core (>= {cpu_percent:.0f} %)")
    if window.kernel_drops > 0:
        reasons.append(f"{window.kernel_drops} packets dropped at the stage's queues")
    return Verdict(bool(reasons), tuple(reasons))


def machine_bound(
    idle_percent: float | None, floor_percent: float = MACHINE_IDLE_FLOOR_PERCENT
) -> Verdict:
    """Is the one machine that holds the lab's hosts and its path out of CPU?  The stage can
    keep its own lateness low while the end hosts' TCP, the tools and the servers starve:
    throughput then falls with few retransmits, a limit of the lab and not of the network
    (on 2 cores, iperf3 -P 64 through a 5 ms path: 521-601 Mbit/s of 1 Gbit/s, 1-3k
    retransmits where 8 streams had 100k)."""
    if idle_percent is None or idle_percent >= floor_percent:
        return Verdict(False)
    return Verdict(
        True,
        (
            f"the machine {idle_percent:.0f} % idle (< {floor_percent:.0f} %): "
            "the lab's hosts and path share its CPUs",
        ),
    )
