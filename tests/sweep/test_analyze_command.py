"""`dtnkit sweep analyze RUN`: tail latency percentiles, --baseline, and the command on a
synthetic run stored in a real results database (tables that fit 80 columns, JSON, the
streams table saved atomically, one-line errors)."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.sweep.synthetic import BASE, results, store_run

from dtnkit.cli import main as cli_main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.sweep import analyze as A
from dtnkit.transfer.client import streamtable

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def dtnkit(tmp_path: Path) -> Iterator[Run]:
    def run(*argv: str, width: int = 80) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        env = Environment(
            state_dir=tmp_path / "state",
            results_db=tmp_path / "r.sqlite",
            stdout=out,
            stderr=err,
            terminal_width=width,
        )
        code = cli_main.main(list(argv), env)
        return code, out.getvalue(), err.getvalue()

    yield run


# ---------------------------------------------------------------- tail latency (pure)


def test_percentile_interpolates_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert A.percentile(values, 0) == 1.0 and A.percentile(values, 100) == 4.0
    assert A.percentile(values, 50) == pytest.approx(2.5)
    assert A.percentile(values, 90) == pytest.approx(3.7)
    assert A.percentile([], 50) is None
    with pytest.raises(ValueError):
        A.percentile(values, 101)


@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=40))
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_percentiles_are_ordered_and_bounded(values: list[float]) -> None:
    p50, p90, p99 = (A.percentile(values, q) for q in (50, 90, 99))
    assert p50 is not None and p90 is not None and p99 is not None
    assert min(values) <= p50 <= p90 <= p99 <= max(values)


def rec(streams: int, ends: list[float], repeat: int = 0, **kw: object) -> A.PointRecord:
    return A.PointRecord(
        point=dataclasses.replace(BASE, streams=streams, repeat=repeat),
        samples_bps=(1e8, 1e8),
        completion_s=tuple(ends),
        **kw,
    )  # type: ignore[arg-type]


def test_tail_latency_per_configuration_mean_over_repeats() -> None:
    ends_a = [float(i) for i in range(1, 101)]  # 1..100 s: p50 50.5, p90 90.1, p99 99.01
    ends_b = [x + 10 for x in ends_a]
    tails = A.tail_latency(
        [
            rec(4, ends_a, 0),
            rec(4, ends_b, 1),
            rec(8, [1.0, math.nan, -1.0, 2.0]),
            rec(16, [5.0], failed="refused"),
            rec(32, []),
        ]
    )
    assert [(t.streams, t.repeats) for t in tails] == [(4, 2), (8, 1)]
    t4, t8 = tails
    assert t4.last_s == pytest.approx(105.0)  # (100 + 110) / 2
    assert t4.p50_s == pytest.approx(55.5) and t4.p90_s == pytest.approx(95.1)
    assert t4.p99_s == pytest.approx(104.01) and t4.transfers == 200
    assert t8.transfers == 2 and t8.last_s == 2.0  # NaN and negative times are left out
    doc = A.analyze([rec(4, ends_a)]).as_dict()
    assert doc["tail_latency"][0]["p99_s"] == pytest.approx(99.01)


def test_baseline_chooses_the_profile_compared_with() -> None:
    records = [
        A.PointRecord(
            point=dataclasses.replace(BASE, profile=prof, repeat=r), samples_bps=(bps,) * 3
        )
        for r in range(2)
        for prof, bps in ((None, 1e8), ("dtn", 2e8), ("big", 4e8))
    ]
    default = {p.profile: p.ratio for p in A.analyze(records).profiles}
    assert default == pytest.approx({"dtn": 2.0, "big": 4.0})
    vs_dtn = {p.profile: p.ratio for p in A.analyze(records, baseline="dtn").profiles}
    assert vs_dtn == pytest.approx({"none": 0.5, "big": 2.0})
    with pytest.raises(BadInput, match="no profile 'fast'"):
        A.analyze(records, baseline="fast")


# ---------------------------------------------------------------- the command


def test_analyze_table_shows_every_figure_in_80_columns(tmp_path: Path, dtnkit: Run) -> None:
    store_run(tmp_path / "r.sqlite")
    code, out, err = dtnkit("sweep", "analyze", "synth", "--target", "700mbit")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    for title in (
        "Peak, drop and knee per RTT",
        "Fluctuation",
        "Gbit/s per core",
        "Minimum resources for 700 Mbit/s",
        "Tail latency",
        "Recommended streams per RTT",
        "origins at equal total cores",
        "profiles: one profile only",
    ):
        assert title in out, title
    # the known shape: 5 ms peaks at 8 streams and drops 30 %; 100 ms peaks at 16
    line5 = next(line for line in out.splitlines() if line.lstrip().startswith("5 ms"))
    assert line5.split()[2:4] == ["8", "950"] and "30%" in line5
    assert "2 points the lab's emulator bound" in out
    assert "delay stage at 97% of a core (2)" in out
    assert "1 point failed" in out and "connection refused" in out


def test_analyze_json_is_the_analysis_with_the_run(tmp_path: Path, dtnkit: Run) -> None:
    store_run(tmp_path / "r.sqlite")
    code, out, _ = dtnkit("sweep", "analyze", "synth", "--format", "json", "--target", "1g")
    assert code == 0
    doc = json.loads(out)
    assert doc["run"] == {
        "name": "synth",
        "status": "done",
        "points_total": 24,
        "points_ok": 23,
        "points_failed": 1,
    }
    c5, c100 = doc["curves"]
    assert (c5["peak_streams"], c100["peak_streams"]) == (8, 16)
    assert c5["drop_pct"] == pytest.approx(30.0, abs=0.5)
    assert doc["excluded_count"] == 2 and len(doc["failed"]) == 1
    assert doc["fluctuation"]["change_pct"] > 300  # +-10 % above 85 % against +-2 % below
    assert [m["reached"] for m in doc["minimum_resources"]] == [False, False]
    assert doc["tail_latency"] and doc["streams_saved_to"] is None


def test_save_streams_writes_the_table_cp_reads(tmp_path: Path, dtnkit: Run) -> None:
    store_run(tmp_path / "r.sqlite")
    target = tmp_path / "t" / "streams.json"
    target.parent.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    target.symlink_to(victim)  # a planted symlink is replaced, not written through
    code, out, _ = dtnkit("sweep", "analyze", "synth", "--save-streams", str(target))
    assert code == 0 and f"saved the streams table to {target}" in out
    assert victim.read_text() == "keep" and not target.is_symlink()
    table = streamtable.load(target)
    assert table == [(5.0, 8), (100.0, 16)]  # knees: 0.85 < 0.9 x 0.95 at 4; 0.6 < 0.72 at 8
    assert oct(os.stat(target).st_mode & 0o777) == "0o644"
    assert os.listdir(target.parent) == ["streams.json"]
    code, _, _ = dtnkit("sweep", "analyze", "synth", "--save-streams", "default")
    assert code == 0
    assert streamtable.load(tmp_path / "state" / "streams.json") == table


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (("nosuch",), "no sweep run 'nosuch'", ExitStatus.BAD_INPUT),
        (("synth", "--target", "fast"), "bad target 'fast'", ExitStatus.BAD_INPUT),
        (("synth", "--baseline", "x"), "no profile 'x' in this run", ExitStatus.BAD_INPUT),
        (("synth", "--save-streams", "{dir}"), "it is a directory", ExitStatus.BAD_INPUT),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, dtnkit: Run, argv: tuple[str, ...], message: str, status: ExitStatus
) -> None:
    store_run(tmp_path / "r.sqlite")
    (tmp_path / "d").mkdir()
    args = [a.replace("{dir}", str(tmp_path / "d")) for a in argv]
    code, out, err = dtnkit("sweep", "analyze", *args)
    assert code == status and out == ""
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: ") and message in err
    assert os.listdir(tmp_path / "d") == []


def test_nothing_to_save_from_a_run_without_curves(tmp_path: Path, dtnkit: Run) -> None:
    pts = [dataclasses.replace(p, status="failed", error="refused", samples=()) for p in results(1)]
    store_run(tmp_path / "r.sqlite", "dead", points=pts)
    code, out, _ = dtnkit("sweep", "analyze", "dead")
    assert code == 0 and "no curve" in out
    code, _, err = dtnkit("sweep", "analyze", "dead", "--save-streams", str(tmp_path / "s.json"))
    assert code == ExitStatus.BAD_INPUT and "no streams table to save" in err
    assert not (tmp_path / "s.json").exists()
