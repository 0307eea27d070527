"""The sweep tables: runs, points, resume IDs, records for the analysis."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dtnkit.errors import BadInput
from dtnkit.measure.tool import MAX_RAW_BYTES, Transfer
from dtnkit.sweep import store
from dtnkit.sweep.grid import Grid, parse_grid_flags


def _grid() -> Grid:
    return parse_grid_flags(
        ["rtt=5ms,100ms", "streams=1,2", "duration=1s", "sample_interval=500ms"], known_profiles=[]
    )


def test_run_points_records_round_trip(tmp_path: Path) -> None:
    grid = _grid()
    s = store.SweepStore(tmp_path / "r.db")
    info = s.create_run("r1", grid.to_toml(), {"host": "h"}, len(grid))
    assert (info.points_total, info.points_ok, info.status) == (4, 0, "running")
    p0, p1 = grid.points()[:2]
    s.store_point(
        "r1",
        store.PointResult(
            point=p0,
            status="ok",
            samples=((0.5, 1e9), (1.0, 3e9)),
            cpu_seconds=(0.4,),
            transfers=(Transfer(0.0, 0.9, 100, True),),
            series={"cpu_cores.0": [0.5, None]},
            emulator={"cpu_percent": 50.0},
            emulator_bound=True,
            emulator_why="x",
            raw="y" * (MAX_RAW_BYTES + 10),
        ),
    )
    s.store_point("r1", store.PointResult(point=p1, status="failed", error="boom"))
    assert s.done_point_ids("r1") == {p0.id}
    recs = store.load_records(tmp_path / "r.db", "r1")
    assert [r.point for r in recs] == [p0, p1]
    assert recs[0].throughput_bps == 2e9 and recs[0].completion_s == (0.9,)
    assert recs[0].emulator_bound and recs[1].failed == "boom"
    got = s.point("r1", p0.id[:6])
    assert len(got.raw) == MAX_RAW_BYTES and got.transfers[0].verified
    series = store.point_series(tmp_path / "r.db", "r1", p0.id)
    assert series["t_s"] == [0.5, 1.0] and series["cpu_cores.0"] == [0.5, None]
    info = store.run_info(tmp_path / "r.db", "r1")
    assert (info.points_ok, info.points_failed) == (1, 1)
    # a failed point rerun ok replaces its row; a NaN sample is stored as null
    s.store_point("r1", store.PointResult(point=p1, status="ok", samples=((1.0, math.nan),)))
    assert s.done_point_ids("r1") == {p0.id, p1.id}
    assert math.isnan(store.load_records(tmp_path / "r.db", "r1")[1].samples_bps[0])


def test_names_and_reuse(tmp_path: Path) -> None:
    s = store.SweepStore(tmp_path / "r.db")
    for bad in ("", "../x", "a/b", "a..b", ".hidden", "x" * 65, "a b"):
        with pytest.raises(BadInput, match="bad run name"):
            s.create_run(bad, "", {}, 1)
    s.create_run("a", "grid1", {}, 1)
    with pytest.raises(BadInput, match="exists"):
        s.create_run("a", "grid1", {}, 1)
    with pytest.raises(BadInput, match="another grid"):
        s.create_run("a", "grid2", {}, 1, reuse=True)
    assert s.create_run("a", "grid1", {}, 1, reuse=True).status == "running"
    with pytest.raises(BadInput, match="no sweep run"):
        s.run_info("nope")
    assert [r.name for r in store.list_runs(tmp_path / "r.db")] == ["a"]
