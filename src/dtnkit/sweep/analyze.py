"""The analysis of a sweep's stored points: pure functions of :class:`PointRecord` lists.

- **curves** (:func:`curves`): per RTT (and every other axis but streams and repeats) the
  stream count where throughput peaks, the throughput there, the drop past the peak (%) and the
  knee (the fewest streams reaching ``knee_fraction`` of the peak);
- **fluctuation** (:func:`fluctuation`): the coefficient of variation of each point's samples
  against its utilisation of the rate cap, and the change above ``high_utilisation`` (85 %);
- **efficiency** (:func:`efficiency`): Gbit/s per core, per quota core and per core used;
- **minimum resources** (:func:`minimum_resources`): the fewest cores / origins / streams that
  reach a target rate;
- **origins** (:func:`origins_at_equal_cores`): n small origins against fewer big ones at the
  same total quota;
- **profiles** (:func:`profile_ratios`): each tuning profile against ``none`` as ratios
  paired by repeat, with their spread;
- **tail latency** (:func:`tail_latency`): per configuration, when the last transfer completed
  and the p50/p90/p99 of the transfers' completion times;
- **recommended streams** (:func:`streams_table`): a small JSON table ``dtnkit cp`` reads.

Points the lab's emulator limited (``emulator_bound``) are kept out of the curves, the
fluctuation and the streams table, and :class:`Analysis` lists them with the reason.  docs/
sweep.md explains every figure.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.sweep.grid import Point

# the reader lives where dtnkit cp needs it; re-exported here
from dtnkit.transfer.client.streamtable import STREAMS_TABLE_SCHEMA as STREAMS_TABLE_SCHEMA
from dtnkit.transfer.client.streamtable import read_streams_table as read_streams_table
from dtnkit.transfer.client.streamtable import streams_for_rtt as streams_for_rtt
from dtnkit.units import counted

KNEE_FRACTION = 0.9
#: a sample above this (1 Pbit/s) is not a measurement: it is left out like NaN
MAX_SAMPLE_BPS = 1e15
HIGH_UTILISATION = 0.85


@dataclasses.dataclass(frozen=True)
class PointRecord:
    """What analysis needs of one stored point."""

    point: Point
    samples_bps: tuple[float, ...]  # throughput, one sample per sampling interval
    elapsed_s: float = 0.0  # the measurement's wall time (for cores used)
    cpu_seconds: tuple[float, ...] = ()  # per origin, over the measurement
    completion_s: tuple[float, ...] = ()  # per transfer, from the point's start
    emulator_bound: bool = False
    emulator_why: str = ""  # e.g. "delay stage 92% of a core" or "release lateness 31% of RTT"
    failed: str = ""  # the error of a failed point (kept out of everything)

    @property
    def throughput_bps(self) -> float | None:
        good = self.good_samples
        return statistics.fmean(good) if good else None

    @property
    def good_samples(self) -> list[float]:
        return [s for s in self.samples_bps if math.isfinite(s) and 0 <= s <= MAX_SAMPLE_BPS]

    @property
    def cv(self) -> float | None:
        """Coefficient of variation of the samples (stdev / mean), None below 2 samples."""
        good = self.good_samples
        if len(good) < 2:
            return None
        mean = statistics.fmean(good)
        return statistics.stdev(good) / mean if mean > 0 else None

    @property
    def cores_used(self) -> float | None:
        if not self.cpu_seconds or self.elapsed_s <= 0:
            return None
        return sum(self.cpu_seconds) / self.elapsed_s

    @property
    def tail_s(self) -> float | None:
        """Tail latency: when the last transfer completed."""
        good = self.good_completions
        return max(good) if good else None

    @property
    def good_completions(self) -> list[float]:
        return sorted(t for t in self.completion_s if math.isfinite(t) and t >= 0)

    def completion_percentile(self, q: float) -> float | None:
        """The q-th percentile (0-100) of the transfers' completion times."""
        return percentile(self.good_completions, q)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation between the closest ranks (numpy's
    default), None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not in 0-100")
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


# ---------------------------------------------------------------- grouping

#: the axes that name a curve (everything but streams and the repeat)
CURVE_KEYS = ("rtt_ms", "rate_bps", "loss", "origins", "cores", "profile", "tool", "file_size")


def _key(point: Point, names: Sequence[str]) -> tuple[Any, ...]:
    return tuple(getattr(point, n) for n in names)


def _as_dict(names: Sequence[str], key: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(names, key, strict=True))


def _usable(records: Iterable[PointRecord]) -> list[PointRecord]:
    return [r for r in records if not r.failed and r.throughput_bps is not None]


@dataclasses.dataclass(frozen=True)
class CurveLevel:
    """One stream count of a curve: the mean over repeats and its spread."""

    streams: int
    mean_bps: float
    min_bps: float
    max_bps: float
    repeats: int


@dataclasses.dataclass(frozen=True)
class Curve:
    key: Mapping[str, Any]
    levels: tuple[CurveLevel, ...]  # by streams
    peak_streams: int
    peak_bps: float
    drop_pct: float | None  # None: nothing measured past the peak
    knee_streams: int

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.key,
            "peak_streams": self.peak_streams,
            "peak_bps": self.peak_bps,
            "drop_pct": self.drop_pct,
            "knee_streams": self.knee_streams,
            "levels": [dataclasses.asdict(level) for level in self.levels],
        }


def curve_of(
    levels: Sequence[CurveLevel],
    key: Mapping[str, Any] | None = None,
    knee_fraction: float = KNEE_FRACTION,
) -> Curve:
    """Peak (the fewest streams at the highest mean), drop past it (the lowest mean at more
    streams, as % of the peak), knee (the fewest streams reaching knee_fraction x peak)."""
    ordered = tuple(sorted(levels, key=lambda lv: lv.streams))
    if not ordered:
        raise ValueError("a curve needs at least one stream count")
    peak = max(ordered, key=lambda lv: (lv.mean_bps, -lv.streams))
    past = [lv.mean_bps for lv in ordered if lv.streams > peak.streams]
    drop = None
    if past and peak.mean_bps > 0:
        drop = max(0.0, (peak.mean_bps - min(past)) / peak.mean_bps * 100)
    knee = next(lv.streams for lv in ordered if lv.mean_bps >= knee_fraction * peak.mean_bps)
    return Curve(
        key=dict(key or {}),
        levels=ordered,
        peak_streams=peak.streams,
        peak_bps=peak.mean_bps,
        drop_pct=drop,
        knee_streams=knee,
    )


def curves(records: Iterable[PointRecord], knee_fraction: float = KNEE_FRACTION) -> list[Curve]:
    """One curve per combination of the other axes, sorted by RTT first."""
    by_curve: dict[tuple[Any, ...], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in _usable(records):
        if r.emulator_bound:
            continue
        by_curve[_key(r.point, CURVE_KEYS)][r.point.streams].append(r.throughput_bps or 0.0)
    out = []
    for key in sorted(by_curve, key=_sort_key):
        levels = [
            CurveLevel(
                streams=s,
                mean_bps=statistics.fmean(v),
                min_bps=min(v),
                max_bps=max(v),
                repeats=len(v),
            )
            for s, v in by_curve[key].items()
        ]
        out.append(curve_of(levels, _as_dict(CURVE_KEYS, key), knee_fraction))
    return out


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        (v is not None, v if v is not None else 0) if not isinstance(v, str) else (True, v)
        for v in key
    )


# ---------------------------------------------------------------- fluctuation


@dataclasses.dataclass(frozen=True)
class Fluctuation:
    points: tuple[tuple[str, float, float], ...]  # (point id, utilisation 0..1, cv)
    threshold: float
    cv_below: float | None  # mean CV of the points below the threshold
    cv_above: float | None
    change_pct: float | None  # (cv_above / cv_below - 1) x 100: the study's "+40 %"

    def as_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "cv_below": self.cv_below,
            "cv_above": self.cv_above,
            "change_pct": self.change_pct,
            "points": [{"id": i, "utilisation": u, "cv": c} for i, u, c in self.points],
        }


def fluctuation(records: Iterable[PointRecord], threshold: float = HIGH_UTILISATION) -> Fluctuation:
    """Fluctuation (CV of the samples) against utilisation of the rate cap; points without a
    cap or with fewer than two samples have no utilisation or CV and are left out."""
    pts = []
    for r in _usable(records):
        cv, tput = r.cv, r.throughput_bps
        if r.emulator_bound or cv is None or tput is None or not r.point.rate_bps:
            continue
        pts.append((r.point.id, tput / r.point.rate_bps, cv))
    below = [c for _, u, c in pts if u < threshold]
    above = [c for _, u, c in pts if u >= threshold]
    cv_below = statistics.fmean(below) if below else None
    cv_above = statistics.fmean(above) if above else None
    change = None
    if cv_below and cv_above is not None:
        change = (cv_above / cv_below - 1) * 100
    return Fluctuation(
        points=tuple(sorted(pts, key=lambda p: p[1])),
        threshold=threshold,
        cv_below=cv_below,
        cv_above=cv_above,
        change_pct=change,
    )


# ---------------------------------------------------------------- efficiency and resources


@dataclasses.dataclass(frozen=True)
class ConfigMean:
    """One configuration (a point without its repeat), its mean throughput over repeats."""

    point: Point
    mean_bps: float
    repeats: int
    cores_used: float | None

    @property
    def gbit_per_quota_core(self) -> float | None:
        total = self.point.total_cores
        return self.mean_bps / 1e9 / total if total else None

    @property
    def gbit_per_core_used(self) -> float | None:
        return self.mean_bps / 1e9 / self.cores_used if self.cores_used else None

    def as_dict(self) -> dict[str, Any]:
        p = self.point
        return {
            "rtt_ms": p.rtt_ms,
            "rate_bps": p.rate_bps,
            "tool": p.tool,
            "profile": p.profile,
            "origins": p.origins,
            "cores": p.cores,
            "total_cores": p.total_cores,
            "streams": p.streams,
            "throughput_bps": self.mean_bps,
            "repeats": self.repeats,
            "cores_used": self.cores_used,
            "gbit_per_quota_core": self.gbit_per_quota_core,
            "gbit_per_core_used": self.gbit_per_core_used,
        }


def configs(records: Iterable[PointRecord]) -> list[ConfigMean]:
    groups: dict[tuple[Any, ...], list[PointRecord]] = defaultdict(list)
    for r in _usable(records):
        groups[(*_key(r.point, CURVE_KEYS), r.point.streams)].append(r)
    out = []
    for key in sorted(groups, key=_sort_key):
        rs = groups[key]
        used = [u for u in (r.cores_used for r in rs) if u is not None]
        out.append(
            ConfigMean(
                point=dataclasses.replace(rs[0].point, repeat=0),
                mean_bps=statistics.fmean(r.throughput_bps or 0.0 for r in rs),
                repeats=len(rs),
                cores_used=statistics.fmean(used) if used else None,
            )
        )
    return out


def efficiency(records: Iterable[PointRecord]) -> list[ConfigMean]:
    """Every configuration with its Gbit/s per quota core and per core used."""
    return configs(records)


@dataclasses.dataclass(frozen=True)
class Minimum:
    rtt_ms: float
    target_bps: float
    reached: bool
    cheapest: ConfigMean | None  # fewest total cores, then origins, then streams
    min_cores: float | None  # each minimum on its own, over configs reaching the target
    min_origins: int | None
    min_streams: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "rtt_ms": self.rtt_ms,
            "target_bps": self.target_bps,
            "reached": self.reached,
            "min_total_cores": self.min_cores,
            "min_origins": self.min_origins,
            "min_streams": self.min_streams,
            "cheapest": self.cheapest.as_dict() if self.cheapest else None,
        }


def minimum_resources(records: Iterable[PointRecord], target_bps: float) -> list[Minimum]:
    """Per RTT, the fewest cores / origins / streams whose mean throughput reaches target.
    Cores are the quota (origins x cores), or the cores used when no quota was set."""
    by_rtt: dict[float, list[ConfigMean]] = defaultdict(list)
    for c in configs(records):
        by_rtt[c.point.rtt_ms].append(c)
    out = []
    for rtt in sorted(by_rtt):
        hit = [c for c in by_rtt[rtt] if c.mean_bps >= target_bps]

        def cores(c: ConfigMean) -> float:
            total = c.point.total_cores
            if total is None:
                total = c.cores_used
            return math.inf if total is None else total

        cheapest = min(
            hit, key=lambda c: (cores(c), c.point.origins, c.point.streams), default=None
        )
        finite = [cores(c) for c in hit if math.isfinite(cores(c))]
        out.append(
            Minimum(
                rtt_ms=rtt,
                target_bps=target_bps,
                reached=bool(hit),
                cheapest=cheapest,
                min_cores=round(min(finite), 3) if finite else None,
                min_origins=min((c.point.origins for c in hit), default=None),
                min_streams=min((c.point.streams for c in hit), default=None),
            )
        )
    return out


# ---------------------------------------------------------------- origins and profiles


@dataclasses.dataclass(frozen=True)
class OriginsComparison:
    key: Mapping[str, Any]  # rtt, rate, tool, profile, ...
    total_cores: float
    best: tuple[ConfigMean, ...]  # per origins count: its best stream count, fewest origins first

    @property
    def ratios(self) -> tuple[float | None, ...]:
        base = self.best[0].mean_bps
        return tuple(c.mean_bps / base if base > 0 else None for c in self.best)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.key,
            "total_cores": self.total_cores,
            "entries": [
                {
                    "origins": c.point.origins,
                    "cores": c.point.cores,
                    "streams": c.point.streams,
                    "throughput_bps": c.mean_bps,
                    "ratio": r,
                }
                for c, r in zip(self.best, self.ratios, strict=True)
            ],
        }


ORIGIN_KEYS = ("rtt_ms", "rate_bps", "loss", "profile", "tool", "file_size")


def origins_at_equal_cores(records: Iterable[PointRecord]) -> list[OriginsComparison]:
    """Where two or more origin counts share a total quota (4 x 0.5 and 1 x 2 cores), each at
    its best stream count, as ratios to the fewest origins."""
    groups: dict[tuple[Any, ...], dict[int, ConfigMean]] = defaultdict(dict)
    for c in configs(records):
        total = c.point.total_cores
        if total is None:
            continue
        slot = groups[(*_key(c.point, ORIGIN_KEYS), total)]
        held = slot.get(c.point.origins)
        if held is None or c.mean_bps > held.mean_bps:
            slot[c.point.origins] = c
    out = []
    for key in sorted(groups, key=_sort_key):
        if len(groups[key]) < 2:
            continue
        best = tuple(groups[key][o] for o in sorted(groups[key]))
        out.append(
            OriginsComparison(key=_as_dict(ORIGIN_KEYS, key[:-1]), total_cores=key[-1], best=best)
        )
    return out


@dataclasses.dataclass(frozen=True)
class ProfileRatio:
    profile: str
    baseline: str
    pairs: int  # (configuration, repeat) pairs measured with both
    ratio: float | None  # geometric mean of the paired ratios
    min_ratio: float | None
    max_ratio: float | None
    stdev: float | None  # of the paired ratios

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def profile_ratios(
    records: Iterable[PointRecord], baseline: str | None = None
) -> list[ProfileRatio]:
    """Each profile's throughput over the baseline's (``none`` when the grid has it, else the
    first profile), paired by configuration and repeat, so drift between repeats cancels."""
    usable = _usable(records)
    names = [] if not usable else list(dict.fromkeys(r.point.profile for r in usable))
    if len(names) < 2:
        return []
    base = None if None in names else names[0]
    if baseline is not None:
        base = None if baseline == "none" else baseline
    keys = (
        "rtt_ms",
        "rate_bps",
        "loss",
        "origins",
        "cores",
        "tool",
        "file_size",
        "streams",
        "repeat",
    )
    table: dict[tuple[Any, ...], dict[str | None, float]] = defaultdict(dict)
    for r in usable:
        table[_key(r.point, keys)][r.point.profile] = r.throughput_bps or 0.0
    out = []
    for name in names:
        if name == base:
            continue
        ratios = [
            row[name] / row[base]
            for row in table.values()
            if name in row and base in row and row[base] > 0 and row[name] > 0
        ]
        geo = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else None
        out.append(
            ProfileRatio(
                profile=name or "none",
                baseline=base or "none",
                pairs=len(ratios),
                ratio=geo,
                min_ratio=min(ratios, default=None),
                max_ratio=max(ratios, default=None),
                stdev=statistics.stdev(ratios) if len(ratios) > 1 else None,
            )
        )
    return out


# ---------------------------------------------------------------- tail latency


@dataclasses.dataclass(frozen=True)
class Tail:
    """One configuration's transfer completion times (seconds from the point's start), each
    the mean over its repeats: the last transfer's (the study's tail latency) and the
    p50/p90/p99 of all its transfers."""

    key: Mapping[str, Any]  # the curve's axes (CURVE_KEYS)
    streams: int
    repeats: int
    transfers: int  # completed transfers, all repeats
    last_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    emulator_bound: int  # repeats the emulator bound (kept: a bound point's times are real)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.key,
            "streams": self.streams,
            "repeats": self.repeats,
            "transfers": self.transfers,
            "last_s": self.last_s,
            "p50_s": self.p50_s,
            "p90_s": self.p90_s,
            "p99_s": self.p99_s,
            "emulator_bound": self.emulator_bound,
        }


def tail_latency(records: Iterable[PointRecord]) -> list[Tail]:
    """Per configuration with completed transfers: the last completion and the p50/p90/p99
    of the completion times, each computed per repeat and averaged over repeats."""
    groups: dict[tuple[Any, ...], list[PointRecord]] = defaultdict(list)
    for r in records:
        if not r.failed and r.good_completions:
            groups[(*_key(r.point, CURVE_KEYS), r.point.streams)].append(r)
    out = []
    for key in sorted(groups, key=_sort_key):
        rs = groups[key]

        def mean_of(q: float, rs: list[PointRecord] = rs) -> float:
            return statistics.fmean(r.completion_percentile(q) or 0.0 for r in rs)

        out.append(
            Tail(
                key=_as_dict(CURVE_KEYS, key[:-1]),
                streams=key[-1],
                repeats=len(rs),
                transfers=sum(len(r.good_completions) for r in rs),
                last_s=statistics.fmean(r.tail_s or 0.0 for r in rs),
                p50_s=mean_of(50),
                p90_s=mean_of(90),
                p99_s=mean_of(99),
                emulator_bound=sum(1 for r in rs if r.emulator_bound),
            )
        )
    return out


# ---------------------------------------------------------------- recommended streams


def streams_table(found: Sequence[Curve], knee_fraction: float = KNEE_FRACTION) -> dict[str, Any]:
    """Per RTT, the knee of the curve with the highest peak: the fewest streams within
    ``knee_fraction`` of the best measured.  The JSON that ``dtnkit cp`` reads (schema in
    docs/sweep.md)."""
    best: dict[float, Curve] = {}
    for c in found:
        rtt = float(c.key["rtt_ms"])
        if rtt not in best or c.peak_bps > best[rtt].peak_bps:
            best[rtt] = c
    return {
        "schema": STREAMS_TABLE_SCHEMA,
        "knee_fraction": knee_fraction,
        "rtts": [
            {
                "rtt_ms": rtt,
                "streams": c.knee_streams,
                "peak_streams": c.peak_streams,
                "peak_bps": c.peak_bps,
                "tool": c.key.get("tool"),
                "rate_bps": c.key.get("rate_bps"),
            }
            for rtt, c in sorted(best.items())
        ],
    }


# ---------------------------------------------------------------- all of it


@dataclasses.dataclass(frozen=True)
class Analysis:
    curves: tuple[Curve, ...]
    fluctuation: Fluctuation
    efficiency: tuple[ConfigMean, ...]
    minimum: tuple[Minimum, ...]
    origins: tuple[OriginsComparison, ...]
    profiles: tuple[ProfileRatio, ...]
    streams_table: Mapping[str, Any]
    excluded: tuple[tuple[str, str], ...]  # (point id, why): emulator-bound points
    failed: tuple[tuple[str, str], ...]  # (point id, error)
    tails: tuple[Tail, ...] = ()
    hint: str = ""  # what to change when the lab bound points (empty: nothing to say)

    def as_dict(self) -> dict[str, Any]:
        """The JSON document: strict JSON (a ratio that overflowed is null, never inf)."""
        doc: dict[str, Any] = _strict(
            {
                "curves": [c.as_dict() for c in self.curves],
                "fluctuation": self.fluctuation.as_dict(),
                "efficiency": [c.as_dict() for c in self.efficiency],
                "minimum_resources": [m.as_dict() for m in self.minimum],
                "origins_at_equal_cores": [o.as_dict() for o in self.origins],
                "profiles": [p.as_dict() for p in self.profiles],
                "tail_latency": [t.as_dict() for t in self.tails],
                "streams_table": dict(self.streams_table),
                "excluded_count": len(self.excluded),
                "excluded_why": dict(Counter(w for _, w in self.excluded)),
                "excluded": [{"id": i, "why": w} for i, w in self.excluded],
                "failed": [{"id": i, "error": e} for i, e in self.failed],
                "hint": self.hint,
            }
        )
        return doc


def _strict(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def analyze(
    records: Sequence[PointRecord],
    *,
    target_bps: float | None = None,
    knee_fraction: float = KNEE_FRACTION,
    high_utilisation: float = HIGH_UTILISATION,
    baseline: str | None = None,
) -> Analysis:
    """Every figure of the module on one run's records (``baseline``: the profile the others
    are compared with; default ``none``, or the first profile)."""
    if not 0 < knee_fraction <= 1:
        raise BadInput(
            f"bad knee fraction {knee_fraction!r}", "it is above 0 and at most 1", "e.g. 0.9"
        )
    if not 0 < high_utilisation <= 1:
        raise BadInput(
            f"bad utilisation threshold {high_utilisation!r}",
            "it is above 0 and at most 1",
            "e.g. 0.85",
        )
    if target_bps is not None and not (math.isfinite(target_bps) and target_bps > 0):
        raise BadInput(f"bad target {target_bps!r}", "a rate above 0", "e.g. --target 1gbit")
    if baseline is not None:
        names = {r.point.profile or "none" for r in records}
        if records and baseline not in names:
            shown = baseline if len(baseline) <= 40 else baseline[:37] + "..."
            raise BadInput(
                f"no profile {shown!r} in this run",
                f"its profiles: {', '.join(sorted(names))}",
                "give one of them to --baseline",
            )
    found = curves(records, knee_fraction)
    return Analysis(
        curves=tuple(found),
        fluctuation=fluctuation(records, high_utilisation),
        efficiency=tuple(efficiency(records)),
        minimum=tuple(minimum_resources(records, target_bps)) if target_bps else (),
        origins=tuple(origins_at_equal_cores(records)),
        profiles=tuple(profile_ratios(records, baseline)),
        streams_table=streams_table(found, knee_fraction),
        excluded=tuple(
            (r.point.id, r.emulator_why or "the lab's emulator bound")
            for r in records
            if r.emulator_bound and not r.failed
        ),
        failed=tuple(
            (r.point.id, r.failed or "no valid throughput samples")
            for r in records
            if r.failed or r.throughput_bps is None
        ),
        tails=tuple(tail_latency(records)),
        hint=lab_hint(records),
    )


#: an MTU at which the lab's packet rate is a sixth of 1500's for the same bytes
JUMBO_MTU = 9000


def lab_hint(records: Sequence[PointRecord]) -> str:
    """When the lab bound points measured with standard frames: jumbo frames carry the same
    bytes in a sixth of the packets, which is what the 2-core lab runs out of at many
    streams (docs/sweep.md, "Many streams")."""
    small = [r for r in records if r.emulator_bound and not r.failed and r.point.mtu < JUMBO_MTU]
    if not small:
        return ""
    return (
        f"{counted(len(small), 'lab-bound point')} ran at MTU "
        f"{min(r.point.mtu for r in small)}: "
        f"[run] mtu = {JUMBO_MTU} (jumbo frames, as DTNs run) moves the same bytes in a "
        "sixth of the packets, and the 2-core lab then held 128 streams at 1 Gbit/s"
    )
