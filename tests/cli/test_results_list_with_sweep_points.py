"""A sweep point's measurement is a result like a probe's, in one store: `dtnkit results list`
lists the probes' as it did, `results list --sweeps` the points' with them (labelled
RUN/POINT, the kind their tool's, the rate the point's), `results show ID` shows any of
them; a point stored again (a rerun) leaves one measurement, and `results export` stays the
probes'."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore
from dtnkit.sweep import store
from dtnkit.sweep.grid import parse_grid_flags

GRID = parse_grid_flags(
    ["rtt=5ms", "streams=1", "tool=iperf3,dtnkit-tpc", "duration=2s", "sample_interval=500ms"],
    known_profiles=[],
)


def run(env: Environment, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), env)
    return code, taken(env.stdout), taken(env.stderr)


@pytest.fixture
def env(environment: Environment) -> Environment:
    return replace(environment, terminal_width=80)


def point(i: int, bps: float, status: str = "ok") -> store.PointResult:
    return store.PointResult(
        point=GRID.points()[i],
        status=status,
        started=1.7e9 + i,
        elapsed_s=3.0,
        tool_s=2.0,
        samples=((0.5, bps), (1.0, bps), (1.5, bps)),
        error="" if status == "ok" else "boom: it failed",
    )


def fill(env: Environment) -> tuple[int, list[str]]:
    probe = ResultStore(env.results_db).add(
        ProbeResult(
            "net",
            {"peer": "demo/dst", "tool": "iperf3"},
            {"throughput_bps": 9.41e9},
            host="dtn1",
            started=1.6e9,
            duration_s=10.0,
            label="baseline",
        )
    )
    s = store.SweepStore(env.results_db)
    s.create_run("metro", GRID.to_toml(), {"host": "dtn1"}, len(GRID))
    s.store_point("metro", point(0, 2e9))
    s.store_point("metro", point(1, 1e9, "failed"))
    s.store_point("metro", point(1, 3e9))  # the failed point rerun: it replaces the first
    return probe, [p.id for p in GRID.points()]


def test_results_list_is_the_probes_and_with_sweeps_the_points_too(env: Environment) -> None:
    probe, ids = fill(env)
    code, out, err = run(env, "results", "list", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["id"] for r in rows] == [probe] and "sweep" not in rows[0]
    code, out, err = run(env, "results", "list", "--sweeps", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r.get("sweep") for r in rows] == [
        {"run": "metro", "point_id": ids[1]},
        {"run": "metro", "point_id": ids[0]},
        None,
    ]
    assert [(r["kind"], r["ok"], r["summary"]["throughput_bps"]) for r in rows] == [
        ("tpc", True, 3e9),
        ("net", True, 2e9),
        ("net", True, 9.41e9),
    ]
    assert [r["spec"]["rtt_ms"] for r in rows[:2]] == [5.0, 5.0]  # the grid's coordinates
    code, out, err = run(env, "results", "list", "--sweeps")
    assert code == 0, err
    assert f"metro/{ids[0]}" in out and f"metro/{ids[1]}" in out and "baseline" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    code, out, err = run(env, "results", "export", "--format", "json")
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == [probe]


def test_results_show_shows_a_points_measurement(env: Environment) -> None:
    _probe, ids = fill(env)
    code, out, _ = run(env, "results", "list", "--sweeps", "--kind", "net", "--format", "json")
    sweep_id = next(r["id"] for r in json.loads(out) if r.get("sweep"))
    code, out, err = run(env, "results", "show", str(sweep_id))
    assert code == 0, err
    assert out.splitlines()[0] == (
        f"net measurement {sweep_id} (sweep metro, point {ids[0]}): 2.00 Gbit/s to -"
    )
    code, out, err = run(env, "results", "show", str(sweep_id), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["sweep"] == {"run": "metro", "point_id": ids[0]}
    assert [s["throughput_bps"] for s in doc["samples"]] == [2e9, 2e9, 2e9]
