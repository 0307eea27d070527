"""A results store made before failed sweep points kept their error's fields (schema version
2: the SQL below is what dtnkit wrote then, copied from its migrations, with rows as its
stores wrote them) opens, upgrades in place and reads as it did; a failed point stored now
keeps what, why, next step and exit status apart, beside the one-line text."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtnkit.db import backend
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.measure.store import ResultStore
from dtnkit.sweep import store
from dtnkit.sweep.grid import parse_grid_flags

#: the schema of a version-2 store, as dtnkit spelled it for SQLite
SCHEMA_2 = [
    """CREATE TABLE IF NOT EXISTS results (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL, host TEXT NOT NULL, netns TEXT, started REAL NOT NULL,
        duration_s REAL NOT NULL, ok INTEGER NOT NULL, error TEXT,
        tuning_id TEXT, tuning TEXT, spec TEXT NOT NULL, summary TEXT NOT NULL,
        samples TEXT NOT NULL, raw TEXT NOT NULL, experiment_id TEXT, label TEXT)""",
    """CREATE TABLE IF NOT EXISTS experiments (
        id TEXT PRIMARY KEY, started REAL NOT NULL, doc TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS sweep_schema (
        id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS sweep_runs (
        name TEXT PRIMARY KEY, created REAL NOT NULL, updated REAL NOT NULL,
        status TEXT NOT NULL, points_total INTEGER NOT NULL,
        grid TEXT NOT NULL, environment TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS sweep_points (
        run TEXT NOT NULL, point_id TEXT NOT NULL, seq INTEGER NOT NULL,
        status TEXT NOT NULL, error TEXT NOT NULL,
        started REAL NOT NULL, elapsed_s REAL NOT NULL, tool_s REAL,
        point TEXT NOT NULL, throughput_bps REAL, samples TEXT NOT NULL,
        series TEXT NOT NULL, cpu_seconds TEXT NOT NULL, softirq TEXT NOT NULL,
        retransmits INTEGER, retransmits_note TEXT NOT NULL, ctxt INTEGER,
        nic_drops TEXT NOT NULL, transfers TEXT NOT NULL, raw TEXT NOT NULL,
        tuning TEXT NOT NULL, emulator TEXT, emulator_bound INTEGER NOT NULL,
        emulator_why TEXT NOT NULL, extra TEXT NOT NULL,
        PRIMARY KEY (run, point_id))""",
    "INSERT INTO sweep_schema (id, version) VALUES (1, 1) ON CONFLICT DO NOTHING",
    "CREATE TABLE IF NOT EXISTS store_info (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "ALTER TABLE results ADD COLUMN origin TEXT",
    "ALTER TABLE results ADD COLUMN origin_id INTEGER",
    "ALTER TABLE results ADD COLUMN origin_host TEXT",
    "CREATE UNIQUE INDEX IF NOT EXISTS results_origin ON results (origin, origin_id)",
    "ALTER TABLE experiments ADD COLUMN origin TEXT",
    "ALTER TABLE experiments ADD COLUMN origin_host TEXT",
    "ALTER TABLE sweep_runs ADD COLUMN origin TEXT",
    "ALTER TABLE sweep_runs ADD COLUMN origin_host TEXT",
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
    "name TEXT NOT NULL, applied REAL NOT NULL)",
    "INSERT INTO schema_version VALUES (1, 'probe results, experiments and sweeps', 0)",
    "INSERT INTO schema_version VALUES (2, 'where pushed rows came from', 0)",
]
GRID = parse_grid_flags(["rtt=5ms", "streams=1,2", "duration=2s", "sample_interval=1s"])
#: a version-2 point's columns, in the order dtnkit wrote them
POINT_COLUMNS_2 = (
    "run",
    "point_id",
    "seq",
    "status",
    "error",
    "started",
    "elapsed_s",
    "tool_s",
    "point",
    "throughput_bps",
    "samples",
    "series",
    "cpu_seconds",
    "softirq",
    "retransmits",
    "retransmits_note",
    "ctxt",
    "nic_drops",
    "transfers",
    "raw",
    "tuning",
    "emulator",
    "emulator_bound",
    "emulator_why",
    "extra",
)
FAILED = "iperf3 to origin 0: unable to connect to server: Connection refused"


def made_by_schema_2(path: Path) -> None:
    """A version-2 store holding one probe result, and one run with an ok and a failed
    point, written as dtnkit wrote them then."""
    ok, bad = GRID.points()
    with sqlite3.connect(path) as con:
        for sql in SCHEMA_2:
            con.execute(sql)
        con.execute(
            "INSERT INTO results (kind, host, netns, started, duration_s, ok, error, tuning_id, "
            "tuning, spec, summary, samples, raw, experiment_id, label) VALUES "
            "('net', 'dtn1', NULL, 1764787200.5, 10.2, 1, NULL, NULL, 'null', ?, ?, '[]', "
            "'{}', NULL, 'before')",
            (
                json.dumps({"peer": "demo/dst", "tool": "iperf3"}),
                json.dumps({"throughput_bps": 9.4e9, "retransmits": 3}),
            ),
        )
        con.execute(
            "INSERT INTO sweep_runs (name, created, updated, status, points_total, "
            "grid, environment) VALUES ('old', 1.0, 2.0, 'done', 2, ?, '{}')",
            (GRID.to_toml(),),
        )
        for seq, (point, status, error) in enumerate(((ok, "ok", ""), (bad, "failed", FAILED)), 1):
            con.execute(
                f"INSERT INTO sweep_points ({', '.join(POINT_COLUMNS_2)}) VALUES "
                f"({', '.join('?' for _ in POINT_COLUMNS_2)})",
                (
                    "old",
                    point.id,
                    seq,
                    status,
                    error,
                    10.0 * seq,
                    1.5,
                    1.0,
                    json.dumps(point.as_dict()),
                    8e8 if status == "ok" else None,
                    "[[0.5, 8e8], [1.0, 8e8]]" if status == "ok" else "[]",
                    "{}",
                    "[]",
                    "{}",
                    None,
                    "",
                    None,
                    "{}",
                    "[]",
                    "raw",
                    "{}",
                    None,
                    0,
                    "",
                    "{}",
                ),
            )


def test_a_version_2_store_upgrades_and_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    made_by_schema_2(path)
    (result,) = ResultStore(path).results()
    assert (result.kind, result.host, result.label) == ("net", "dtn1", "before")
    assert result.summary == {"throughput_bps": 9.4e9, "retransmits": 3}
    ok, bad = store.load_points(path, "old")
    assert (ok.status, ok.error, ok.error_fields, ok.throughput_bps) == ("ok", "", None, 8e8)
    assert (bad.status, bad.error, bad.error_fields) == ("failed", FAILED, None)
    assert bad.as_dict()["error_fields"] is None
    assert [r.failed for r in store.load_records(path, "old")] == ["", FAILED]
    with backend.connect(path) as db:
        versions = [
            r[0]
            for r in db.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        ]
    assert versions == [1, 2, 3, 4]
    # the upgraded store takes a failed point with its error's fields
    exc = BadInput("no tool 'nosuch'", "tools: iperf3, fio", "pick one of them")
    again = store.PointResult(point=bad.point, status="failed", **store.error_of(exc))
    store.SweepStore(path).store_point("old", again)
    got = store.SweepStore(path).point("old", bad.point.id)
    assert got.error == "no tool 'nosuch': tools: iperf3, fio. Next: pick one of them"
    assert got.error_fields == {
        "what": "no tool 'nosuch'",
        "why": "tools: iperf3, fio",
        "next": "pick one of them",
        "exit_status": 9,
    }


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(what=st.text(min_size=1, max_size=80), why=st.text(max_size=200), step=st.text(max_size=80))
def test_any_error_text_round_trips_as_its_fields(
    tmp_path: Path, what: str, why: str, step: str
) -> None:
    """Whatever an error says (quotes, NUL, lone surrogates, SQL) is stored as the error
    had it, field by field: nothing lost, nothing run."""
    path = tmp_path / "p.sqlite"
    s = store.SweepStore(path)
    s.create_run("r", GRID.to_toml(), {}, 2, reuse=True)
    point = GRID.points()[0]
    fields = DtnkitError(what, why, step).as_dict()
    s.store_point(
        "r",
        store.PointResult(
            point=point, status="failed", **store.error_of(DtnkitError(what, why, step))
        ),
    )
    assert s.point("r", point.id).error_fields == fields
    assert s.point("r", point.id).status == "failed"
