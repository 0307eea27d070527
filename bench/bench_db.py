#!/usr/bin/env python3
"""The results store on PostgreSQL against SQLite: a push, a result's write, a probe.

    .venv/bin/python bench/bench_db.py [--results 2000] [--repeat 5] [--probes 4]
                                       [--probe-duration 1]

Needs PostgreSQL 15's binaries and psycopg (tests/support/postgres.py starts a server on a
temporary Unix socket).  Three comparisons, each interleaved (SQLite, PostgreSQL, SQLite, ...)
and given as the median of the repeats and the ratio PostgreSQL / SQLite:

- push: ``dtnkit results push`` of a host store with N results and a sweep run of 16 points
  into an empty SQLite file, and into an empty PostgreSQL database;
- add: ``ResultStore.add`` of one result, N/10 times (each opens the store, as a probe does);
- probe: ``dtnkit probe net --peer localhost --duration 1`` (``--probe-duration``) as a
  process, with ``--db`` a file or a ``postgresql://`` URL (what a user waits for).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from tests.support.postgres import missing_postgres, postgres_server  # noqa: E402

from benchlib import CpuWatch, log, out, table  # noqa: E402
from dtnkit.db.backend import connect  # noqa: E402
from dtnkit.db.location import DbUrl, Location  # noqa: E402
from dtnkit.db.push import push  # noqa: E402
from dtnkit.measure.result import ProbeResult  # noqa: E402
from dtnkit.measure.store import COLUMNS, ResultStore  # noqa: E402
from dtnkit.sweep import store as sweep_store  # noqa: E402
from dtnkit.sweep.grid import parse_grid_flags  # noqa: E402


def result(i: int) -> ProbeResult:
    return ProbeResult(kind="net", spec={"peer": "localhost", "streams": 4, "i": i},
                       summary={"throughput_bps": 9.4e9, "retransmits": i, "rtt_ms_mean": 0.1},
                       samples=[{"t": t / 2, "bps": 9.4e9} for t in range(20)],
                       raw="x" * 4000, ok=True, host="bench", started=1.7e9 + i,
                       duration_s=10.0, tuning={"net.core.rmem_max": "67108864"},
                       label=f"r{i}")


def host_store(path: Path, n: int) -> Path:
    """N results (one transaction: the bench times the push, not this) and a sweep run."""
    with connect(path) as db:
        db.executemany(f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES "
                       f"({', '.join('?' for _ in COLUMNS)})",
                       [[json.dumps(v) if isinstance(v, dict | list) else v
                         for v in (r.kind, r.host, r.netns, r.started, r.duration_s, int(r.ok),
                                   r.error, r.tuning_id, r.tuning, r.spec, r.summary,
                                   r.samples, r.raw, r.experiment_id, r.label)]
                        for r in map(result, range(n))])
    grid = parse_grid_flags(["rtt=5ms,10ms,20ms,50ms", "streams=1,2,4,8", "duration=1s",
                             "sample_interval=500ms"],
                            known_profiles=[])
    ss = sweep_store.SweepStore(path)
    ss.create_run("bench", grid.to_toml(), {"host": "bench"}, len(grid))
    for p in grid.points():
        ss.store_point("bench", sweep_store.PointResult(
            point=p, status="ok", samples=tuple((t / 2, 9e9) for t in range(20))))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--probes", type=int, default=4)
    ap.add_argument("--probe-duration", type=int, default=1, help="seconds of each probe")
    args = ap.parse_args()
    reason = missing_postgres()
    if reason:
        print(f"bench_db: {reason}", file=sys.stderr)
        return 2
    watch = CpuWatch()
    with tempfile.TemporaryDirectory(prefix="s20p-bench-") as tmp_s, \
            postgres_server(Path(tmp_s), "s20p") as pg:
        tmp = Path(tmp_s)
        log(f"a host store of {args.results} results and 16 sweep points")
        src = host_store(tmp / "host.sqlite", args.results)
        times: dict[str, list[float]] = {k: [] for k in
                                         ("push sqlite", "push pg", "add sqlite", "add pg",
                                          "probe sqlite", "probe pg")}

        def fresh(kind: str, k: int) -> Location:
            if kind == "sqlite":
                return tmp / f"{uuid.uuid4().hex}.sqlite"
            return DbUrl(pg.create_database(f"s20p_b{k}_{uuid.uuid4().hex[:6]}"))

        for k in range(args.repeat):
            log(f"push and add, round {k + 1} of {args.repeat}")
            for kind in ("sqlite", "pg"):
                target = fresh("sqlite" if kind == "sqlite" else "pg", k)
                ResultStore(target).results(limit=1)  # create the schema outside the timing
                t = time.perf_counter()
                push(src, target, host="bench")
                times[f"push {kind}"].append(time.perf_counter() - t)
                adds = max(1, args.results // 10)
                store = ResultStore(target)
                t = time.perf_counter()
                for i in range(adds):
                    store.add(result(i))
                times[f"add {kind}"].append((time.perf_counter() - t) / adds)
        pg_db = DbUrl(pg.create_database("s20p_probe"))
        dtnkit = str(ROOT / ".venv" / "bin" / "dtnkit")
        for k in range(args.probes):
            log(f"probe, round {k + 1} of {args.probes}")
            for kind, db in (("sqlite", str(tmp / "probe.sqlite")), ("pg", pg_db.url)):
                argv = [dtnkit, "probe", "net", "--peer", "localhost", "--duration",
                        str(args.probe_duration),
                        "--db", db, "--format", "json"]
                t = time.perf_counter()
                subprocess.run(argv, check=True, capture_output=True)
                times[f"probe {kind}"].append(time.perf_counter() - t)
        rows = []
        for what, unit, scale in (("push", "s", 1.0), ("add", "ms", 1e3), ("probe", "s", 1.0)):
            a = statistics.median(times[f"{what} sqlite"])
            b = statistics.median(times[f"{what} pg"])
            rows.append([what, f"{a * scale:.3g} {unit}", f"{b * scale:.3g} {unit}",
                         f"{(b - a) * scale:+.3g} {unit}", f"{b / a:.2f}"])
    out(f"N = {args.results} results (+16 sweep points), {args.repeat} rounds; "
        f"{args.probes} probes each")
    out()
    table(["what", "SQLite (median)", "PostgreSQL (median)", "difference",
           "PostgreSQL / SQLite"], rows)
    out(watch.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
