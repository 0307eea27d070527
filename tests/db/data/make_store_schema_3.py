"""Make store_schema_3.sqlite and what dtnkit read from it (store_schema_3.json) with the
stores of a dtnkit at schema version 3 (commit 599cf68, the last before a sweep point's
measurement became a results row):

    git archive 599cf68 src | tar -x -C /tmp/v3
    PYTHONPATH=/tmp/v3/src .venv/bin/python tests/db/data/make_store_schema_3.py

The store holds probe results (net, disk, e2e; one failed, one of an experiment, three
pushed from another host), an experiment, and three sweep runs: "metro" (points of every
grid tool: ok, failed with and without the error's fields, a point rerun, NaN samples,
series longer and shorter than the samples, the emulator, transfers, tuning), "pushed"
(pushed from another host's store) and "empty" (interrupted before its first point).  The
JSON holds each command's --format json output (and the CSV export, the results metrics,
every point in full) as that dtnkit printed them: the newer dtnkit must read the same.
"""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path
from typing import Any

from dtnkit.cli.main import main
from dtnkit.db import migrations
from dtnkit.db.push import push
from dtnkit.environment import Environment
from dtnkit.errors import DtnkitError
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore
from dtnkit.measure.tool import Transfer
from dtnkit.sweep import store
from dtnkit.sweep.grid import parse_grid_flags

HERE = Path(__file__).parent
STORE = HERE / "store_schema_3.sqlite"
EXPECTED = HERE / "store_schema_3.json"
GRID_FLAGS = [
    "rtt=5ms,50ms",
    "streams=1,4",
    "tool=iperf3,dtnkit-cp,dtnkit-cp-upload,dtnkit-tpc,gfal-tpc,command:mine",
    "command.mine=cp {src} {dst}",
    "duration=2s",
    "sample_interval=500ms",
]


def probe(i: int, **kw: Any) -> ProbeResult:
    fields: dict[str, Any] = dict(
        kind="net",
        spec={"peer": "demo/dst", "streams": 4, "tool": "iperf3"},
        summary={"throughput_bps": 9.41e9 + i, "retransmits": 12, "rtt_ms_mean": 0.25},
        samples=[{"t_s": 1.0, "cpu": None, "errors": []}],
        raw=f"iperf3 raw {i} é",
        host="dtn1",
        netns="dkl-demo-src",
        started=1764787200.25 + i,
        duration_s=10.5,
        tuning={"sysctl/net.core.rmem_max": "67108864"},
        label=f"p{i}",
    )
    fields.update(kw)
    return ProbeResult(**fields)


def points(s: store.SweepStore, run: str) -> None:
    grid = parse_grid_flags(GRID_FLAGS, known_profiles=[])
    every = grid.points()
    nan = math.nan
    for k, point in enumerate(every):
        kind = k % 6
        if kind == 0:  # ok, everything measured
            result = store.PointResult(
                point=point,
                status="ok",
                started=1764790000.0 + k,
                elapsed_s=3.25 + k,
                tool_s=2.0 + k / 8,
                samples=((0.5, 8e8 + k), (1.0, nan), (1.5, 9e8)),
                series={"cpu_cores.0": [0.5, None, 0.75], "idle_pct.machine": [50.0, 40.0, 30.0]},
                cpu_seconds=(0.4 + k, nan),
                softirq={"dst": {"NET_RX": 12.5}},
                retransmits=2**40 + k,
                retransmits_note="DSACK-corrected",
                ctxt=12345 + k,
                nic_drops={"dst": {"rx_dropped": 1}},
                transfers=(Transfer(0.0, 1.9, 2**30, True), Transfer(0.1, None, 10, False)),
                raw=f"tool output {k} ✓",
                tuning={"dst": {"sysctl/net.core.rmem_max": "67108864"}, "src": None},
                emulator={"cpu_percent": 50.0, "drops": 0},
                emulator_bound=bool(k % 4),
                emulator_why="the delay stage was busy" if k % 4 else "",
                extra={
                    "measure_from_s": 0.25,
                    "measure_until_s": 1.4,
                    "throughput_bps": 7e8,
                    "phases_s": {"path_s": 0.1},
                },
            )
        elif kind == 1:  # failed, with its error's fields
            result = store.PointResult(
                point=point,
                status="failed",
                started=1764790000.0 + k,
                elapsed_s=0.5,
                **store.error_of(
                    DtnkitError("iperf3 to origin 0", "connection refused", "check the server")
                ),
            )
        elif kind == 2:  # failed, the text alone (as stored before the fields were kept)
            result = store.PointResult(
                point=point,
                status="failed",
                error="boom ' \" %s ?",
                started=1764790000.0 + k,
                elapsed_s=0.25,
                raw="partial output",
            )
        elif kind == 3:  # series longer and shorter than the samples
            result = store.PointResult(
                point=point,
                status="ok",
                started=1764790000.0 + k,
                elapsed_s=2.0,
                samples=((0.5, 1e9),),
                series={"long": [1.0, 2.0, None], "short": []},
                cpu_seconds=(),
                tuning={},
            )
        elif kind == 4:  # no samples at all
            result = store.PointResult(
                point=point, status="ok", started=1764790000.0 + k, elapsed_s=1.0, tool_s=None
            )
        else:  # failed, then rerun ok: stored twice
            s.store_point(
                run,
                store.PointResult(
                    point=point, status="failed", error="first", started=1764790000.0 + k
                ),
            )
            result = store.PointResult(
                point=point,
                status="ok",
                started=1764790100.0 + k,
                elapsed_s=2.5,
                samples=((0.5, 2e9), (1.0, 3e9)),
            )
        s.store_point(run, result)


def cli(db: Path, *argv: str) -> str:
    env = Environment(
        results_db=db, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()
    )
    code = main(list(argv), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    assert code == 0, (argv, env.stderr.getvalue())
    return env.stdout.getvalue()


def readings(db: Path) -> dict[str, Any]:
    """What the commands and the stores read from ``db`` (the test compares these)."""
    ids = [r["id"] for r in json.loads(cli(db, "results", "list", "--format", "json"))]
    runs = [r["name"] for r in json.loads(cli(db, "sweep", "list", "--format", "json"))]
    metrics = cli(db, "metrics", "--no-drift", "--format", "prom")
    return {
        "results list": json.loads(cli(db, "results", "list", "--format", "json")),
        "results list --kind net": json.loads(
            cli(db, "results", "list", "--kind", "net", "--format", "json")
        ),
        "results list --experiments": json.loads(
            cli(db, "results", "list", "--experiments", "--format", "json")
        ),
        "results show": {
            str(i): json.loads(cli(db, "results", "show", str(i), "--format", "json")) for i in ids
        },
        "results export json": json.loads(cli(db, "results", "export")),
        "results export csv": cli(db, "results", "export", "--format", "csv"),
        "sweep list": json.loads(cli(db, "sweep", "list", "--format", "json")),
        "sweep analyze": {
            run: json.loads(cli(db, "sweep", "analyze", run, "--format", "json"))
            for run in runs
            if run != "empty"
        },
        "points": {run: [p.as_dict() for p in store.load_points(db, run)] for run in runs},
        "metrics": sorted(
            line
            for line in metrics.splitlines()
            if line.startswith(("dtnkit_probe_", "dtnkit_sweep_"))
        ),
    }


def make(path: Path) -> None:
    results = ResultStore(path)
    results.add(probe(0))
    results.add(
        probe(
            1,
            kind="disk",
            spec={"path": "/data", "tool": "fio"},
            summary={"read_bps": 2.5e10, "write_bps": 1.5e10},
            netns=None,
        )
    )
    results.add(
        probe(
            2,
            kind="e2e",
            ok=False,
            error="dtnkit cp failed: 404",
            summary={},
            tuning=None,
            label="",
        )
    )
    results.add(probe(3, experiment_id="exp-20261201-abcd"))
    results.add_experiment(
        "exp-20261201-abcd",
        {
            "id": "exp-20261201-abcd",
            "started": 1764787300.0,
            "spec": {"probe": "net"},
            "groups": [],
        },
    )
    grid = parse_grid_flags(GRID_FLAGS, known_profiles=[])
    s = store.SweepStore(path)
    s.create_run("metro", grid.to_toml(), {"host": "dtn1", "kernel": "6.1"}, len(grid))
    points(s, "metro")
    s.set_status("metro", "done")
    s.create_run("empty", grid.to_toml(), {}, len(grid))
    s.set_status("empty", "interrupted")
    other = path.with_name("other.sqlite")
    other.unlink(missing_ok=True)
    o = store.SweepStore(other)
    o.create_run("pushed", grid.to_toml(), {"host": "dtn2"}, len(grid))
    p0, p1 = grid.points()[:2]
    o.store_point(
        "pushed",
        store.PointResult(
            point=p0, status="ok", started=1764791000.0, elapsed_s=2.0, samples=((0.5, 5e9),)
        ),
    )
    o.store_point(
        "pushed", store.PointResult(point=p1, status="failed", error="x", started=1764791001.0)
    )
    for i in range(3):
        ResultStore(other).add(probe(10 + i, host="dtn2", label=f"dtn2-{i}"))
    push(other, path, host="dtn2.example.org")
    other.unlink()


if __name__ == "__main__":
    assert migrations.LATEST == 3, "run with the stores of schema version 3 (see above)"
    STORE.unlink(missing_ok=True)
    make(STORE)
    EXPECTED.write_text(json.dumps(readings(STORE), indent=1, sort_keys=True) + "\n")
    print(f"wrote {STORE} and {EXPECTED}", file=sys.stderr)
