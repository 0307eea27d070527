"""A sweep point's measurement is a result like a probe's, in one store: `dtnkit results list`
lists the probes' as it did, `results list --sweeps` the points' with them (labelled
RUN/POINT, the kind their tool's, the rate the point's), `results show ID` shows any of
them; a point stored again (a rerun) leaves one measurement, and `results export` stays the
probes'.  `--kind tpc` finds a sweep's third-party copies, and `results show` of a point says
its path, its load and the figures a sweep keeps (not the probe layout's `- -> -`), in 80
columns."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.sweep.synthetic import BASE, results, store_run

from conftest import taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
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
        f"net measurement {sweep_id} (sweep metro, point {ids[0]}): 2.00 Gbit/s"
    )  # a point has no peer: the probe layout's "to -" is not there
    code, out, err = run(env, "results", "show", str(sweep_id), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["sweep"] == {"run": "metro", "point_id": ids[0]}
    assert [s["throughput_bps"] for s in doc["samples"]] == [2e9, 2e9, 2e9]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A run of dtnkit-cp points (one failed, one bound by the lab's stage) and one TPC
    point (gfal-tpc, 3 origins, no core cap, 0.1 % loss)."""
    tpc = store.PointResult(
        point=dataclasses.replace(
            BASE, tool="gfal-tpc", origins=3, cores=None, loss=0.001, rtt_ms=50.0, streams=8
        ),
        status="ok",
        started=1.7e9,
        elapsed_s=9.0,
        tool_s=8.0,
        samples=tuple((float(i + 1), 4.2e8) for i in range(8)),
        cpu_seconds=(1.5, 1.25, 1.0),
        retransmits=42,
    )
    path = tmp_path / "r.sqlite"
    store_run(path, "mix", points=[*results(repeats=1), tpc])
    return path


def listed(env: Environment, db: Path, *argv: str) -> list[dict[str, object]]:
    code, out, err = run(env, "results", "list", "--db", str(db), "--format", "json", *argv)
    assert code == ExitStatus.OK, err
    doc = json.loads(out)
    assert isinstance(doc, list)
    return doc


def test_list_sweeps_by_kind_finds_the_third_party_copies(env: Environment, db: Path) -> None:
    tpc = listed(env, db, "--sweeps", "--kind", "tpc")
    assert [(r["kind"], r["spec"]["tool"]) for r in tpc] == [("tpc", "gfal-tpc")]  # type: ignore[index]
    e2e = listed(env, db, "--sweeps", "--kind", "e2e", "--limit", "100")
    assert len(e2e) == 12 and {r["kind"] for r in e2e} == {"e2e"}
    # without --sweeps the probes alone: none here, whatever the kind
    assert listed(env, db, "--kind", "tpc") == []


def test_an_unknown_kind_is_one_line_naming_the_choices(env: Environment, db: Path) -> None:
    code, _, err = run(env, "results", "list", "--sweeps", "--kind", "xrootd", "--db", str(db))
    assert code != ExitStatus.OK and "Traceback" not in err
    assert "'net', 'disk', 'e2e', 'tpc'" in err


def show(env: Environment, db: Path, result_id: int) -> list[str]:
    code, out, err = run(env, "results", "show", str(result_id), "--db", str(db))
    assert code == ExitStatus.OK, err
    lines = [line.rstrip() for line in out.splitlines()]
    # 80 columns, but for a failure's line, printed whole so that it is found whole
    assert all(len(line) <= 80 for line in lines if ": failed: " not in line), out
    return lines


def by_kind(env: Environment, db: Path, kind: str) -> list[int]:
    rows = listed(env, db, "--sweeps", "--kind", kind, "--limit", "100")
    return [int(r["id"]) for r in rows]  # type: ignore[call-overload]


def test_show_of_a_tpc_point_says_its_path_load_and_figures(env: Environment, db: Path) -> None:
    [tpc] = by_kind(env, db, "tpc")
    lines = show(env, db, tpc)
    assert lines[0].startswith(f"tpc measurement {tpc} (sweep mix, point ")
    assert lines[0].endswith("): 420 Mbit/s")
    text = "\n".join(lines)
    assert "path         50 ms RTT, capped at 1.00 Gbit/s, loss 0.1%, MTU 1500" in text
    assert "load         gfal-tpc, 3 origins (dtnkit), 8 streams, no core cap, 6.00 s" in text
    assert "CPU          1.50 s (origin 0), 1.25 s (origin 1), 1.00 s (origin 2)" in text
    assert "retransmits  42" in text
    assert "samples      8;" in text
    assert "- -> -" not in text and "emulator" not in text


def test_show_of_points_bound_or_failed_says_so(env: Environment, db: Path) -> None:
    shown = {i: "\n".join(show(env, db, i)) for i in by_kind(env, db, "e2e")}
    bound = [t for t in shown.values() if "emulator     bound: delay stage at 97% of a core" in t]
    assert len(bound) == 1 and "32 streams, 1 core each" in bound[0]
    failed = [t for t in shown.values() if ": failed: connection refused" in t]
    assert len(failed) == 1 and "samples      0;" in failed[0]
    assert failed[0].count(" measurement ") == 1  # one head line: the failure
    assert not any("- -> -" in t or "-, - in -" in t for t in shown.values())
