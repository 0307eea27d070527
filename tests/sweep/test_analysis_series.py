"""Sweep analysis on synthetic series with a known peak, drop, knee and fluctuation."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.errors import BadInput
from dtnkit.sweep import analyze as A
from dtnkit.sweep.grid import Point

BASE = Point(
    rtt_ms=5.0,
    rate_bps=10**9,
    loss=0.0,
    origins=1,
    cores=None,
    profile=None,
    tool="dtnkit-cp",
    file_size=2**28,
    streams=1,
    repeat=0,
    duration_s=30.0,
    bytes=None,
    sample_interval_s=5.0,
    time_limit_s=600.0,
)
G = 1e9


def rec(samples: list[float] | float, **values: object) -> A.PointRecord:
    series = [samples] * 6 if isinstance(samples, int | float) else samples
    bound = bool(values.pop("bound", False))
    extra = {
        k: values.pop(k)
        for k in ("cpu_seconds", "elapsed_s", "failed", "completion_s")
        if k in values
    }
    return A.PointRecord(
        point=dataclasses.replace(BASE, **values),  # type: ignore[arg-type]
        samples_bps=tuple(float(s) for s in series),
        emulator_bound=bound,
        emulator_why="delay stage at 95% of a core" if bound else "",
        **extra,
    )  # type: ignore[arg-type]


# the study's shape at 5 ms: rises fast, peaks at 64, falls 30 % past it
SHAPE_5MS = {1: 0.20, 2: 0.40, 4: 0.70, 8: 0.85, 16: 0.92, 32: 0.97, 64: 1.00, 128: 0.70, 256: 0.75}
# at 100 ms: rises slowly, peaks at 128, falls 15 % past it
SHAPE_100MS = {
    1: 0.05,
    2: 0.10,
    4: 0.20,
    8: 0.35,
    16: 0.55,
    32: 0.80,
    64: 0.95,
    128: 1.00,
    256: 0.85,
}


def study(scale: float = 0.8 * G, repeats: int = 2) -> list[A.PointRecord]:
    out = []
    for rtt, shape in ((5.0, SHAPE_5MS), (100.0, SHAPE_100MS)):
        for streams, frac in shape.items():
            for r in range(repeats):
                jitter = 1 + (0.01 if r % 2 else -0.01)
                out.append(rec(scale * frac * jitter, rtt_ms=rtt, streams=streams, repeat=r))
    return out


def test_known_peak_drop_and_knee() -> None:
    curves = A.curves(study())
    assert [c.key["rtt_ms"] for c in curves] == [5.0, 100.0]
    c5, c100 = curves
    assert c5.peak_streams == 64 and c5.peak_bps == pytest.approx(0.8 * G)
    assert c5.drop_pct == pytest.approx(30.0)
    assert c5.knee_streams == 16  # 0.92 >= 0.9, 0.85 < 0.9
    assert c100.peak_streams == 128 and c100.drop_pct == pytest.approx(15.0)
    assert c100.knee_streams == 64
    assert [lv.repeats for lv in c5.levels] == [2] * 9
    assert c5.levels[0].min_bps < c5.levels[0].mean_bps < c5.levels[0].max_bps


def test_emulator_bound_points_are_excluded_and_counted() -> None:
    records = study()
    # the emulator binds at 256 streams, 5 ms: a deeper false drop
    records += [rec(0.1 * G, rtt_ms=5.0, streams=512, bound=True)]
    analysis = A.analyze(records)
    assert analysis.curves[0].drop_pct == pytest.approx(30.0)
    assert [lv.streams for lv in analysis.curves[0].levels][-1] == 256
    assert len(analysis.excluded) == 1 and "95% of a core" in analysis.excluded[0][1]
    doc = analysis.as_dict()
    assert doc["excluded"][0]["why"] == "delay stage at 95% of a core"
    assert doc["excluded_count"] == 1
    assert doc["excluded_why"] == {"delay stage at 95% of a core": 1}
    json.dumps(doc, allow_nan=False)  # strict JSON
    # measured with standard frames: the analysis says what would let the lab carry them
    assert "mtu = 9000" in analysis.hint and "1 lab-bound point ran at MTU 1500" in doc["hint"]


def test_no_hint_without_bound_points_or_with_jumbo_frames() -> None:
    assert A.analyze(study()).hint == ""
    jumbo = [rec(0.1 * G, rtt_ms=5.0, streams=512, bound=True, mtu=9000)]
    assert A.analyze([*study(), *jumbo]).hint == ""


def test_failed_points_are_left_out_and_listed() -> None:
    records = [*study(), rec(5 * G, rtt_ms=5.0, streams=1000, failed="timed out")]
    analysis = A.analyze(records)
    assert analysis.curves[0].peak_bps == pytest.approx(0.8 * G)
    assert analysis.failed == ((records[-1].point.id, "timed out"),)


levels_st = st.dictionaries(st.integers(1, 1024), st.floats(1e3, 1e12), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None, database=None)
@given(levels_st, st.floats(1e-3, 1e3))
def test_scaling_scales_peak_not_its_position(levels: dict[int, float], k: float) -> None:
    def curve(factor: float) -> A.Curve:
        return A.curve_of(
            [A.CurveLevel(s, v * factor, v * factor, v * factor, 1) for s, v in levels.items()]
        )

    a, b = curve(1.0), curve(k)
    # exact ties can flip under rounding; compare where the peak is clear
    top = sorted(levels.values(), reverse=True)
    if len(top) > 1 and top[0] - top[1] < 1e-9 * top[0]:
        return
    assert b.peak_streams == a.peak_streams
    assert b.peak_bps == pytest.approx(a.peak_bps * k, rel=1e-9)
    if a.drop_pct is None:
        assert b.drop_pct is None
    else:
        assert b.drop_pct == pytest.approx(a.drop_pct, rel=1e-6, abs=1e-9)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.floats(1e3, 1e12), min_size=1, max_size=12))
def test_a_monotone_curve_has_no_drop(values: list[float]) -> None:
    values = sorted(values)
    curve = A.curve_of([A.CurveLevel(2**i, v, v, v, 1) for i, v in enumerate(values)])
    assert curve.drop_pct in (None, 0.0)
    assert curve.knee_streams <= curve.peak_streams
    assert curve.levels[-1].mean_bps == curve.peak_bps


def test_fluctuation_grows_above_85_percent_utilisation() -> None:
    rate = 10**9
    records = []
    for i, util in enumerate((0.3, 0.5, 0.7, 0.8, 0.9, 0.95)):
        spread = 0.05 if util < 0.85 else 0.07  # +40 % fluctuation above 85 %
        mean = util * rate
        series = [mean * (1 + spread), mean * (1 - spread)] * 3
        records.append(rec(series, streams=2**i, rate_bps=rate))
    fl = A.fluctuation(records)
    assert len(fl.points) == 6
    assert fl.change_pct == pytest.approx(40.0, rel=1e-6)
    assert fl.cv_below is not None and fl.cv_above is not None
    # a point without a cap has no utilisation: it is left out
    fl2 = A.fluctuation([*records, rec([1.0, 2.0], rate_bps=None)])
    assert len(fl2.points) == 6


def test_cv_of_a_known_series() -> None:
    r = rec([1.0, 3.0])
    assert r.cv == pytest.approx(math.sqrt(2) / 2)
    assert rec([5.0]).cv is None and rec([0.0, 0.0]).cv is None


def test_efficiency_minimum_resources_and_origins() -> None:
    records = []
    # 1 origin x 2 cores; 4 origins x 0.5 cores (same total) 18 % better; 1 x 1 core half
    for origins, cores, best in ((1, 2.0, 1.0), (4, 0.5, 1.18), (1, 1.0, 0.55)):
        for streams, frac in ((4, 0.6), (16, 1.0), (64, 0.9)):
            for r in range(2):
                records.append(
                    rec(
                        best * frac * G,
                        origins=origins,
                        cores=cores,
                        streams=streams,
                        repeat=r,
                        cpu_seconds=(15.0,) * origins,
                        elapsed_s=30.0,
                    )
                )
    eff = {(c.point.origins, c.point.cores, c.point.streams): c for c in A.efficiency(records)}
    one = eff[(1, 2.0, 16)]
    assert one.gbit_per_quota_core == pytest.approx(0.5)
    assert one.cores_used == pytest.approx(0.5)
    assert one.gbit_per_core_used == pytest.approx(2.0)
    mins = A.minimum_resources(records, target_bps=0.9 * G)
    assert len(mins) == 1 and mins[0].reached
    assert mins[0].min_cores == 2.0 and mins[0].min_origins == 1 and mins[0].min_streams == 16
    assert mins[0].cheapest is not None and mins[0].cheapest.point.origins == 1
    assert not A.minimum_resources(records, target_bps=5 * G)[0].reached
    comps = A.origins_at_equal_cores(records)
    assert len(comps) == 1 and comps[0].total_cores == 2.0
    assert [c.point.origins for c in comps[0].best] == [1, 4]
    assert comps[0].ratios[1] == pytest.approx(1.18)
    assert all(c.point.streams == 16 for c in comps[0].best)


def test_profiles_are_compared_as_paired_ratios() -> None:
    records = []
    for r, drift in enumerate((1.0, 0.8, 1.2)):  # drift between repeats cancels in the pairs
        for streams in (1, 8):
            records.append(rec(G * 0.5 * drift, profile=None, streams=streams, repeat=r))
            records.append(
                rec(G * 0.6 * drift * (1 + 0.01 * r), profile="dtn", streams=streams, repeat=r)
            )
    (ratio,) = A.profile_ratios(records)
    assert ratio.profile == "dtn" and ratio.baseline == "none" and ratio.pairs == 6
    assert ratio.ratio == pytest.approx(1.2 * (1.0 * 1.01 * 1.02) ** (1 / 3), rel=1e-9)
    assert ratio.min_ratio == pytest.approx(1.2) and ratio.max_ratio == pytest.approx(1.224)
    assert ratio.stdev is not None and ratio.stdev < 0.02
    assert A.profile_ratios([r for r in records if r.point.profile is None]) == []


def test_streams_table_round_trips_through_json() -> None:
    analysis = A.analyze(study(), target_bps=0.5 * G)
    table = json.loads(json.dumps(analysis.streams_table))
    assert table["schema"] == A.STREAMS_TABLE_SCHEMA
    rows = A.read_streams_table(table)
    assert rows == [(5.0, 16), (100.0, 64)]
    assert A.streams_for_rtt(rows, 2.0) == 16
    assert A.streams_for_rtt(rows, 50.0) == 64
    assert A.streams_for_rtt(rows, 300.0) == 64
    assert [m.min_streams for m in analysis.minimum] == [4, 32]  # 0.56 and 0.64 of 0.8 G


@pytest.mark.parametrize(
    "doc",
    [
        None,
        [],
        {"schema": "x"},
        {"schema": A.STREAMS_TABLE_SCHEMA, "rtts": []},
        {"schema": A.STREAMS_TABLE_SCHEMA, "rtts": [{"rtt_ms": 5}]},
        {"schema": A.STREAMS_TABLE_SCHEMA, "rtts": [{"rtt_ms": math.nan, "streams": 4}]},
        {"schema": A.STREAMS_TABLE_SCHEMA, "rtts": [{"rtt_ms": 5, "streams": True}]},
    ],
)
def test_bad_streams_tables(doc: object) -> None:
    with pytest.raises(BadInput, match="not a streams table"):
        A.read_streams_table(doc)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"knee_fraction": 0.0},
        {"high_utilisation": 1.5},
        {"target_bps": math.nan},
        {"target_bps": -1.0},
    ],
)
def test_bad_analysis_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(BadInput):
        A.analyze(study(), **kwargs)  # type: ignore[arg-type]


def test_empty_and_degenerate_inputs() -> None:
    analysis = A.analyze([])
    assert analysis.curves == () and analysis.streams_table["rtts"] == []
    weird = [rec([math.nan, math.inf, -1.0]), rec([], streams=2)]
    result = A.analyze(weird)
    assert result.curves == ()
    assert [why for _, why in result.failed] == ["no valid throughput samples"] * 2


record_st = st.builds(
    lambda samples, rtt, streams, origins, cores, profile, repeat, bound, cpu: rec(
        samples,
        rtt_ms=rtt,
        streams=streams,
        origins=origins,
        cores=cores,
        profile=profile,
        repeat=repeat,
        bound=bound,
        cpu_seconds=cpu,
        elapsed_s=10.0,
    ),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=5),
    st.sampled_from([5.0, 100.0]),
    st.sampled_from([1, 4, 16]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([None, 0.5, 1.0, 2.0]),
    st.sampled_from([None, "dtn"]),
    st.integers(0, 2),
    st.booleans(),
    st.lists(st.floats(0, 100), max_size=3).map(tuple),
)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(record_st, max_size=15), st.floats(1e3, 1e10))
def test_any_records_give_strict_json(records: list[A.PointRecord], target: float) -> None:
    doc = A.analyze(records, target_bps=target).as_dict()
    json.dumps(doc, allow_nan=False)
    for curve in doc["curves"]:
        assert curve["knee_streams"] <= curve["peak_streams"]
        assert curve["drop_pct"] is None or 0 <= curve["drop_pct"] <= 100
