"""Lab-path helpers for tests and bench cases: buffers on the end hosts, one iperf3 run.

They lived on ``LabPath`` once; production code never used them, and calling the network
probe from the lab made ``lab`` and ``measure`` import each other.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from dtnkit.host.host import Host
from dtnkit.lab.path import LabPath, lab_peers
from dtnkit.measure.probes.net import NetSpec
from dtnkit.measure.registry import run_probe
from dtnkit.measure.tool import ToolContext


def set_tcp_buffers(p: LabPath, value: str) -> None:
    """Set tcp_rmem and tcp_wmem (e.g. ``"4096 131072 4194304"``) on every end host, through
    the Host seam (a write inside each host's namespace)."""
    for h in p.hosts:
        host = Host.live(h.netns)
        for key in ("tcp_rmem", "tcp_wmem"):
            host.write(f"/proc/sys/net/ipv4/{key}", value)


def goodput_bps(p: LabPath, *, seconds: int = 8, streams: int = 1) -> float:
    """One iperf3 run from the first src to the first dst host (the network probe)."""
    spec = NetSpec(f"{p.name}/{p.dst.name}", streams=streams, duration_s=seconds)
    result = run_probe(
        Host.live(p.src.netns), spec, context=ToolContext(lab_peers=lab_peers(p.state_root))
    )
    return float(result.summary["throughput_bps"])


@dataclass
class Round:
    """ping's own summary of one round, in ms (its per-packet times are rounded to 1 ms at
    100 ms), and the delay stage's lateness p99 over the round (0 for the reference)."""

    min: float
    avg: float
    mdev: float
    late: float = 0.0


@dataclass
class DelayCheck:
    """Rounds of pings through the path at its RTT and through the same path at RTT 0 (the
    reference: the same namespaces, the same delay stage, the same load on the machine).
    Medians over rounds: one burst of load spoils one round, not the verdict."""

    rtt_ms: float
    delayed: list[Round]
    reference: list[Round]

    @property
    def excess_ms(self) -> float:
        """The fastest packet's RTT above the configured one, less the reference's fastest:
        the delay stage's own bias.  Load only ever adds delay, so the fastest of a round is
        the one it spared; a stage that adds a constant adds it to every packet."""
        return (
            statistics.median(r.min for r in self.delayed)
            - self.rtt_ms
            - statistics.median(r.min for r in self.reference)
        )

    @property
    def early_ms(self) -> float:
        """How far below the configured RTT the fastest packet is (a delay stage is never
        early, loaded or not)."""
        return self.rtt_ms - statistics.median(r.min for r in self.delayed)

    @property
    def extra_jitter_ms(self) -> float:
        """ping's mdev through the delay beyond what the measured noise explains: the
        reference's mdev twice (a delayed packet waits for two wake-ups of the stage in each
        direction, its arrival and its timer; a reference packet for one) and the lateness of
        the stage's timer wake-ups that it reports itself."""
        return statistics.median(
            r.mdev - 2 * ref.mdev - r.late
            for r, ref in zip(self.delayed, self.reference, strict=True)
        )

    def ok(self, *, bias_ms: float = 0.5, jitter_ms: float = 0.5) -> bool:
        return (
            self.early_ms <= 0.1 and self.excess_ms <= bias_ms and self.extra_jitter_ms <= jitter_ms
        )


def ping_round(p: LabPath, count: int = 10) -> Round | None:
    """ping's summary from the first src to the first dst host, after one unmeasured ping so
    neighbour resolution is not counted."""
    p.src.run(["ping", "-q", "-n", "-c", "1", "-W", "3", p.dst.address], check=False, timeout=10)
    out = p.src.run(
        ["ping", "-q", "-n", "-c", str(count), "-i", "0.05", "-W", "3", p.dst.address],
        check=False,
        timeout=30,
    ).stdout
    m = re.search(r"= ([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms", out)
    return Round(float(m.group(1)), float(m.group(2)), float(m.group(4))) if m else None


def check_delay(p: LabPath, *, rounds: int = 4, count: int = 10) -> DelayCheck:
    """Interleave `rounds` rounds of pings at RTT 0 and at the path's RTT (so a burst of load
    on the machine hits both alike); the path is left at its RTT."""
    rtt = p.spec.rtt_ms
    check = DelayCheck(rtt, [], [])
    try:
        for _ in range(rounds):
            p.set(rtt_ms=0)
            ref = ping_round(p, count)
            p.set(rtt_ms=rtt)
            got = ping_round(p, count)
            assert ref and got, (ref, got)  # the path carries pings
            late = ((p.emulator_stats(fresh=True) or {}).get("lateness_ms") or {}).get("p99")
            got.late = float(late or 0.0)
            check.reference.append(ref)
            check.delayed.append(got)
    finally:
        if p.spec.rtt_ms != rtt:
            p.set(rtt_ms=rtt)
    return check


def assert_delay_accurate(p: LabPath, *, tries: int = 3) -> DelayCheck:
    """The path's RTT is what it was set to, judged against the noise measured in the same
    test (up to `tries` measurements: one burst of steal time cannot fail it, a real bias or
    jitter of the delay stage fails every one)."""
    seen: list[DelayCheck] = []
    for _ in range(tries):
        seen.append(check_delay(p))
        if seen[-1].ok():
            return seen[-1]
    raise AssertionError(
        "delay stage off in every try: "
        + "; ".join(
            f"early {c.early_ms:.3f} ms, excess {c.excess_ms:.3f} ms, extra mdev "
            f"{c.extra_jitter_ms:.3f} ms ({c})"
            for c in seen
        )
    )
