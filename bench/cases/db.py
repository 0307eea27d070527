"""What does the results store cost on PostgreSQL against SQLite: a push, a write, a probe?

Needs PostgreSQL 15's binaries and psycopg (tests/support/postgres.py starts a server on a
temporary Unix socket).  Three comparisons, each interleaved (SQLite, PostgreSQL, ...), the
median of the rounds and the ratio PostgreSQL / SQLite:

- push: ``dtnkit results push`` of a host store with --results results and a sweep run of 16
  points into an empty SQLite file, and into an empty PostgreSQL database;
- add: ``ResultStore.add`` of one result, N/10 times (each opens the store, as a probe does);
- probe: ``dtnkit probe net --peer localhost --duration 1`` (--probe-duration) as a process,
  with ``--db`` a file or a ``postgresql://`` URL (what a user waits for), --probes rounds.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.support.postgres import PostgresServer, missing_postgres, postgres_server

from bench.lib import Bench, CannotRun, Case
from dtnkit.db.backend import connect
from dtnkit.db.location import DbUrl, Location
from dtnkit.db.push import push
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import COLUMNS, ResultStore
from dtnkit.sweep import store as sweep_store
from dtnkit.sweep.grid import parse_grid_flags


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", type=int, default=2000, help="results in the host store")
    p.add_argument("--probes", type=int, default=4, help="probe rounds (default 4)")
    p.add_argument("--probe-duration", type=int, default=1, help="seconds of each probe")


def quick(args: argparse.Namespace) -> None:
    args.results, args.probes = 200, 1


def result(i: int) -> ProbeResult:
    return ProbeResult(
        kind="net",
        spec={"peer": "localhost", "streams": 4, "i": i},
        summary={"throughput_bps": 9.4e9, "retransmits": i, "rtt_ms_mean": 0.1},
        samples=[{"t": t / 2, "bps": 9.4e9} for t in range(20)],
        raw="x" * 4000,
        ok=True,
        host="bench",
        started=1.7e9 + i,
        duration_s=10.0,
        tuning={"net.core.rmem_max": "67108864"},
        label=f"r{i}",
    )


def host_store(path: Path, n: int) -> Path:
    """N results (one transaction: the bench times the push, not this) and a sweep run."""
    with connect(path) as db:
        db.executemany(
            f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES "
            f"({', '.join('?' for _ in COLUMNS)})",
            [
                [
                    json.dumps(v) if isinstance(v, dict | list) else v
                    for v in (
                        r.kind,
                        r.host,
                        r.netns,
                        r.started,
                        r.duration_s,
                        int(r.ok),
                        r.error,
                        r.tuning_id,
                        r.tuning,
                        r.spec,
                        r.summary,
                        r.samples,
                        r.raw,
                        r.experiment_id,
                        r.label,
                    )
                ]
                for r in map(result, range(n))
            ],
        )
    grid = parse_grid_flags(
        ["rtt=5ms,10ms,20ms,50ms", "streams=1,2,4,8", "duration=1s", "sample_interval=500ms"],
        known_profiles=[],
    )
    ss = sweep_store.SweepStore(path)
    ss.create_run("bench", grid.to_toml(), {"host": "bench"}, len(grid))
    for p in grid.points():
        ss.store_point(
            "bench",
            sweep_store.PointResult(
                point=p, status="ok", samples=tuple((t / 2, 9e9) for t in range(20))
            ),
        )
    return path


def run(b: Bench) -> None:
    reason = missing_postgres()
    if reason:
        raise CannotRun(reason)
    a = b.args
    tmp = b.workdir(where="/tmp")
    pg: PostgresServer = b.stack.enter_context(postgres_server(tmp, b.prefix))
    src = host_store(tmp / "host.sqlite", a.results)
    adds: dict[str, list[float]] = {"sqlite": [], "pg": []}

    def fresh(kind: str) -> Location:
        if kind == "sqlite":
            return tmp / f"{uuid.uuid4().hex}.sqlite"
        return DbUrl(pg.create_database(f"{b.prefix}_b{uuid.uuid4().hex[:8]}"))

    def push_and_add(kind: str) -> float:
        target = fresh(kind)
        ResultStore(target).results(limit=1)  # the schema, outside the timing
        t = time.perf_counter()
        push(src, target, host="bench")
        took = time.perf_counter() - t
        n, store = max(1, a.results // 10), ResultStore(target)
        t = time.perf_counter()
        for i in range(n):
            store.add(result(i))
        adds[kind].append((time.perf_counter() - t) / n)
        return took

    pushes = b.rounds_of(
        {k: functools.partial(push_and_add, k) for k in ("sqlite", "pg")}, label="push"
    )
    pg_db = DbUrl(pg.create_database(f"{b.prefix}_probe"))
    dtnkit = [sys.executable, "-m", "dtnkit"]

    def probe(db: str) -> float:
        t = time.perf_counter()
        subprocess.run(
            [
                *dtnkit,
                "probe",
                "net",
                "--peer",
                "localhost",
                "--duration",
                str(a.probe_duration),
                "--db",
                db,
                "--format",
                "json",
            ],
            check=True,
            capture_output=True,
        )
        return time.perf_counter() - t

    probes = b.rounds_of(
        {
            "sqlite": functools.partial(probe, str(tmp / "probe.sqlite")),
            "pg": functools.partial(probe, pg_db.url),
        },
        rounds=a.probes,
        label="probe",
    )
    rows = []
    for what, unit, scale, x, y in (
        ("push", "s", 1.0, pushes.median("sqlite"), pushes.median("pg")),
        ("add", "ms", 1e3, statistics.median(adds["sqlite"]), statistics.median(adds["pg"])),
        ("probe", "s", 1.0, probes.median("sqlite"), probes.median("pg")),
    ):
        assert x is not None and y is not None
        rows.append(
            [
                what,
                f"{x * scale:.3g} {unit}",
                f"{y * scale:.3g} {unit}",
                f"{(y - x) * scale:+.3g} {unit}",
                f"{y / x:.2f}",
            ]
        )
    b.table(
        ["what", "SQLite (median)", "PostgreSQL (median)", "difference", "PostgreSQL / SQLite"],
        rows,
        title=f"N = {a.results} results (+16 sweep points), {b.rounds} rounds; "
        f"{a.probes} probes each",
    )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=5,
    tools=("iperf3",),
    quick_help="200 results, one round, one probe",
)
