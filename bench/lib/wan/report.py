"""A WAN cell's tables: each column's median with its runs, the targets' ratios with their
verdicts (and the A/A noise of their baselines), the wire floor and the practical floor."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.lib.core import Bench
from bench.lib.stats import AA_SUFFIX, Samples, aa, compare
from bench.lib.wan.cells import Cell, MiB
from bench.lib.wan.tools import DERIVED, HOLD_RUNS, HOLD_STREAMS

#: round trips before data flows for any HTTPS client: TCP handshake, TLS 1.3, the request
HANDSHAKE_RTTS = 3
#: the baseline of a target against the cell's practical floor (made of its iperf3 runs)
FLOOR = "floor"

Times = Mapping[str, Sequence[float]]


@dataclass(frozen=True)
class Target:
    """One goal: ``measured`` / ``baseline`` (median times) at most ``limit``."""

    measured: str
    baseline: str
    limit: float | None  # None: shown for information
    what: str


def recorded_by(name: str) -> str:
    """The column whose run records *name*: itself, or the run a derived figure ("iperf3 8
    wall", "cp 1 XRootD copy phase") comes from (the floor: made of the iperf3 runs)."""
    for suffix in DERIVED:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


@dataclass(frozen=True)
class Floor:
    """The practical floor of a cell: what TCP on the path gives any HTTPS client."""

    streams: str  # the iperf3 -P value of the best median data phase
    data_s: float  # that median data phase (end.sum_received.seconds)
    rtt_s: float  # the path's measured idle RTT

    @property
    def seconds(self) -> float:
        return self.data_s + HANDSHAKE_RTTS * self.rtt_s


def iperf3_p(name: str, used: Mapping[str, Sequence[int]] | None = None) -> str:
    """The -P of an iperf3 measurement: its name's, or for "iperf3 auto" the counts it ran
    with (those `cp auto` used), e.g. "4" or "4/5"."""
    n = name.split()[1]
    if n.isdigit() or not used or not used.get(name):
        return n
    return "/".join(str(x) for x in sorted(set(used[name])))


def practical_floor(
    times: Times, rtt_ms: float | None, used: Mapping[str, Sequence[int]] | None = None
) -> Floor | None:
    """The best median iperf3 data phase over the -P values measured (*used*: the -P each
    "iperf3 auto" run took), plus the round trips an HTTPS client pays before data flows;
    None without iperf3 runs or an RTT."""
    medians = [
        (statistics.median(t), iperf3_p(name, used))
        for name, t in times.items()
        if name.startswith("iperf3 ") and recorded_by(name) == name and t
    ]
    if not medians or rtt_ms is None or rtt_ms != rtt_ms:  # nan: ping failed
        return None
    best = min(medians)
    return Floor(best[1], best[0], rtt_ms / 1000)


def verdict(
    times: Times, t: Target, floor_s: float | None = None, practical: Floor | None = None
) -> tuple[str, str]:
    """(ratio, met / not met / -) of a target from the medians of the runs that succeeded.

    ``floor_s``, when given, is the path's wire floor: the file's bits at the path's rate cap,
    before any handshake or slow start, so no tool can finish sooner.  A target that asks for a
    time under it is physics, not software, and the verdict says so with both figures.
    ``practical``, when given, is the higher practical floor (iperf3's best data phase on the
    path plus the handshakes' round trips): a target asking for less is out of reach of any
    HTTPS client on that path, and the verdict says so with how the floor was made.
    """
    a, b = times.get(t.measured, []), times.get(t.baseline, [])
    if not a or not b:
        return "-", "no data"
    ratio = statistics.median(a) / statistics.median(b)
    if t.limit is None:
        return f"{ratio:.2f}", "(information)"
    if ratio <= t.limit:
        return f"{ratio:.2f}", "met"
    asked = t.limit * statistics.median(b)
    if floor_s is not None and asked < floor_s:
        return f"{ratio:.2f}", f"not met: asks {asked:.3f} s < wire floor {floor_s:.3f} s"
    if practical is not None and asked < practical.seconds:
        return f"{ratio:.2f}", (
            f"not met: asks {asked:.3f} s < practical floor "
            f"{practical.seconds:.3f} s (iperf3 -P {practical.streams} data "
            f"phase {practical.data_s:.3f} s + {HANDSHAKE_RTTS} RTT)"
        )
    return f"{ratio:.2f}", "not met"


def floor_line(
    times: Times, practical: Floor | None, used: Mapping[str, Sequence[int]] | None = None
) -> str:
    """How the practical floor was made, or why there is none."""
    if practical is None:
        return (
            "_Practical floor: none (no iperf3 run succeeded in this cell, or no RTT); "
            "`--only iperf3` or any time target measures it._"
        )
    each = ", ".join(
        f"-P {iperf3_p(name, used)}"
        f"{' (as cp auto)' if name == 'iperf3 auto' else ''} "
        f"{statistics.median(t):.2f} s"
        for name, t in times.items()
        if name.startswith("iperf3 ") and recorded_by(name) == name and t
    )
    return (
        f"_Practical floor: {practical.seconds:.2f} s = iperf3 -P {practical.streams} data "
        f"phase {practical.data_s:.2f} s (the best median of {each}; "
        "`iperf3 -c SRC -R -P N -n SIZE` from dst, src sends) + "
        f"{HANDSHAKE_RTTS} x RTT {practical.rtt_s * 1000:.1f} ms (TCP handshake, TLS 1.3, "
        "the request): what TCP on this path gives any HTTPS client, start-up not "
        "counted._"
    )


#: Share of its cap's payload rate a cell's path must carry (iperf3's best) to count as an
#: honest emulation of that rate.
HELD = 0.98


def payload_share(mtu: int) -> float:
    """TCP payload per byte the rate cap counts: MSS (MTU - 52: IP, TCP, timestamps) of the
    frame (MTU + 14, the Ethernet header htb counts)."""
    return (mtu - 52) / (mtu + 14)


def cap_held(held_bps: float | None, cell: Cell) -> float | None:
    """The share of the cell's cap payload rate that its path carried in the hold check
    (``held_bps``, :func:`bench.lib.wan.tools.hold_check`); None without one."""
    if held_bps is None or held_bps <= 0:
        return None
    return held_bps / (cell.rate_bps * payload_share(cell.mtu))


def noise_of(samples: Samples, a: str, b: str) -> str | None:
    """Whose A/A rounds give the noise of a / b: b's or a's own, else the cell's (the first
    column that ran twice), else none."""
    for name in (b, a):
        if aa(name) in samples.values:
            return name
    twins = [n.removesuffix(AA_SUFFIX) for n in samples.values if n.endswith(AA_SUFFIX)]
    return twins[0] if twins else None


def cell_report(
    b: Bench,
    cell: Cell,
    backend: str,
    rtt_ms: float | None,
    samples: Samples,
    names: list[str],
    goals: list[Target],
    used: dict[str, list[int]],
    hold: tuple[float, int] | None = None,
) -> dict[str, float]:
    """The tables of one cell; its medians by name (the floor's under :data:`FLOOR`), for
    the run's summary.  ``hold``: the hold check's rate (bit/s) and its seconds."""
    times = dict(samples.lists())
    b.heading(cell.label)
    b.note(
        f"Lab path: `dtnkit lab` {backend}, measured idle RTT "
        f"{rtt_ms if rtt_ms is not None else float('nan'):.1f} ms; {b.rounds} rounds, "
        "medians."
    )
    rows = []
    for label in [x for n in names for x in (n, aa(n), *(n + d for d in DERIVED))]:
        if label not in names and label not in times:
            continue
        t = times.get(label, [])
        fails = len(samples.failures.get(label, []))
        med = statistics.median(t) if t else float("nan")
        rate = f"{cell.size * 8 / med / 1e6:.0f}" if t else "-"
        rows.append(
            [
                label,
                f"{med:.2f}" if t else "-",
                rate,
                " ".join(f"{x:.2f}" for x in t),
                str(fails) if fails else "",
            ]
        )
    b.table(["measurement", "median s", "Mbit/s", "runs (s)", "failed"], rows)
    practical = practical_floor(times, rtt_ms, used)
    if practical is not None:
        times[FLOOR] = [practical.seconds]
    trows = []
    for goal in goals:
        if recorded_by(goal.measured) not in names or (
            goal.baseline != FLOOR and recorded_by(goal.baseline) not in names
        ):
            continue  # left out by --only
        ratio, ok = verdict(times, goal, cell.wire_floor_s, practical)
        noise = (
            compare(
                samples,
                goal.measured,
                goal.baseline,
                noise_of(samples, goal.measured, goal.baseline),
            ).noise
            if goal.baseline != FLOOR
            else compare(
                samples,
                goal.measured,
                goal.measured,
                noise_of(samples, goal.measured, goal.measured),
            ).noise
        )
        band = f"±{100 * noise.margin:.0f} %" if noise else ""
        limit = f"<= {goal.limit:g}" if goal.limit is not None else ""
        trows.append([f"{goal.measured} / {goal.baseline}", goal.what, ratio, band, limit, ok])
    if trows:  # none under --only iperf3
        b.table(["ratio (median times)", "what", "ratio", "A/A noise", "target", "verdict"], trows)
    b.note(
        f"_Wire floor: {cell.size // MiB} MiB at {cell.rate_bps / 1e9:g} Gbit/s = "
        f"{cell.wire_floor_s:.2f} s (no handshake, no slow start): no tool can finish "
        "sooner._"
    )
    b.note(floor_line(times, practical, used))
    share = cap_held(hold[0] if hold else None, cell)
    if hold is not None and share is not None:
        verdict_text = (
            ": an honest emulation of the rate"
            if share >= HELD
            else ": below 98 %, the lab stage (or the machine) binds this cell"
        )
        b.note(
            f"_The path held {share:.1%} of its cap's payload rate ({hold[0] / 1e9:.3f} "
            f"Gbit/s over the second half of `iperf3 -R -P {HOLD_STREAMS} -t {hold[1]}`, the "
            f"better of {HOLD_RUNS} runs before the cell's rounds, against "
            f"{cell.rate_bps / 1e9:g} Gbit/s x {payload_share(cell.mtu):.4f}, TCP/IP headers "
            f"with timestamps in Ethernet frames at MTU {cell.mtu}){verdict_text}._"
        )
    for label, errs in samples.failures.items():
        b.out(f"- {label} failed: {errs[0][:200]}")
    if samples.failures:
        b.out()
    return {name: statistics.median(t) for name, t in times.items() if t}


#: The run's summary: (heading, the column whose median it shows), one row per cell.
SUMMARY = (
    ("cp auto", "cp auto XRootD"),
    ("cp auto serve", "cp auto dtnkit"),
    ("cp 1", "cp 1 XRootD"),
    ("curl", "curl XRootD"),
    ("gfal-copy -K", "gfal-copy -K adler32"),
    ("xrdcp -S 8", "xrdcp -S 8"),
    ("TPC XRootD", "tpc XRootD 8"),
    ("TPC dtnkit", "tpc dtnkit 8"),
)


def summary(b: Bench, cells: Sequence[tuple[Cell, Mapping[str, float]]]) -> None:
    """One table for the run, one row per cell: the floor, then each column of
    :data:`SUMMARY` as median seconds and as x the floor."""
    rows = []
    for cell, med in cells:
        floor = med.get(FLOOR)
        row = [cell.short_label, f"{floor:.2f}" if floor else "-"]
        for _heading, name in SUMMARY:
            m = med.get(name)
            row.append("-" if m is None else f"{m:.2f} ({m / floor:.2f})" if floor else f"{m:.2f}")
        rows.append(row)
    b.table(
        ["cell", "floor s", *(h for h, _ in SUMMARY)],
        rows,
        title=f"All cells: median seconds of {b.rounds} interleaved rounds (x the floor)",
    )
    b.note(
        "_cp auto, cp 1 and curl from XRootD, cp auto serve from dtnkit serve (verified "
        "adler32, wall times as a user runs them); TPC: HTTP-TPC pulls of 8 streams from "
        "XRootD on src, made by XRootD or dtnkit serve on dst (the COPY request); floor: "
        "the best median iperf3 data phase of the cell (-P 1, 8 and as cp auto) + 3 "
        "RTT._"
    )
