"""A results store made at schema version 3, when a sweep point's measurement sat in
``sweep_points`` beside its coordinates, upgrades in place on both backends and every reader
reads it as before (`results list/show/export`, `sweep list/analyze`, the points in full, the
exporter's metrics); after the upgrade a point's measurement is a ``results`` row like a
probe's (``made_by`` ``sweep``) and ``sweep_points`` keeps the coordinates, run and status.

tests/db/data/store_schema_3.sqlite and store_schema_3.json were made by the stores of
commit 599cf68 (tests/db/data/make_store_schema_3.py says how); the property tests write
rows as that commit's ``SweepStore.store_point`` wrote them and read them as its
``SweepStore._result`` did (both copied below, frozen).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import shutil
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.db.data.make_store_schema_3 import EXPECTED, STORE, readings
from tests.support.postgres import PostgresServer, needs_postgres, postgres_server

from dtnkit.cli.main import main
from dtnkit.db import backend, migrations
from dtnkit.db.location import DbUrl, Location
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.measure import registry
from dtnkit.measure.store import ResultStore
from dtnkit.measure.tool import MAX_RAW_BYTES, Transfer
from dtnkit.sweep import store
from dtnkit.sweep.grid import TOOLS, Point, parse_grid_flags, registry_tool

#: the tables of a version-3 store, parents first
TABLES_3 = ("store_info", "results", "experiments", "sweep_schema", "sweep_runs", "sweep_points")
#: a version-3 point's columns, in the order dtnkit wrote them
POINT_COLUMNS_3 = (
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
    "error_fields",
)
#: the results columns that hold JSON text
JSON_COLUMNS = ("error_fields", "tuning", "spec", "summary", "samples")
GRID = parse_grid_flags(
    [
        "rtt=5ms,50ms",
        "streams=1,4",
        "tool=iperf3,dtnkit-cp,dtnkit-tpc",
        "duration=2s",
        "sample_interval=500ms",
    ],
    known_profiles=[],
)


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with postgres_server(tmp_path_factory.mktemp("up3"), "up3") as server:
        yield server


def new_pg_db(server: PostgresServer) -> DbUrl:
    return DbUrl(server.create_database(f"up3_{uuid.uuid4().hex[:10]}"))


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=needs_postgres),
]


def zero_signless(a: Any) -> Any:
    """``a`` with -0.0 as 0.0: an SQLite REAL column keeps no sign of zero, JSON text does."""
    if isinstance(a, float) and a == 0.0:
        return 0.0
    if isinstance(a, dict):
        return {k: zero_signless(v) for k, v in a.items()}
    if isinstance(a, list | tuple):
        return [zero_signless(v) for v in a]
    return a


def text(a: Any) -> str:
    """As JSON text, to compare (NaN, which the points keep, is equal to itself there; a zero
    is one whatever its sign)."""
    return json.dumps(zero_signless(a), sort_keys=True, indent=1)


# ---------------------------------------------------------------- a version-3 store


def schema_3(location: Location) -> backend.Database:
    """An empty store at schema version 3 (its migrations as this dtnkit declares them: they
    are never changed once released), open and not migrated further."""
    db = backend.connect(location, migrate=False)
    db.execute(migrations.spelled(migrations.SCHEMA_VERSION_DDL, db.dialect))
    for step in migrations.MIGRATIONS[:3]:
        for statement in step.statements:
            assert isinstance(statement, str)
            db.execute(migrations.spelled(statement, db.dialect))
        db.execute(
            "INSERT INTO schema_version (version, name, applied) VALUES (?, ?, 0)",
            (step.version, step.name),
        )
    return db


def copy_store_3(source: Path, location: Location) -> None:
    """The rows of the version-3 SQLite file ``source`` into a new version-3 store (on
    PostgreSQL: the store a fleet's hosts would have pushed them into)."""
    db = schema_3(location)
    try:
        db.execute("DELETE FROM sweep_schema")
        with sqlite3.connect(source) as raw:
            raw.row_factory = sqlite3.Row
            for table in TABLES_3:
                rows = raw.execute(f"SELECT * FROM {table}").fetchall()
                if rows:
                    names = rows[0].keys()
                    db.executemany(
                        f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                        f"({', '.join('?' for _ in names)})",
                        [tuple(r) for r in rows],
                    )
        if db.dialect == "postgresql":  # as after inserts that took their ids from it
            db.execute(
                "SELECT setval(pg_get_serial_sequence('results', 'id'), "
                "(SELECT MAX(id) FROM results))"
            )
    finally:
        db.close()
    backend.forget_schema_cache()


def layout(location: Location) -> dict[str, Any]:
    with backend.connect(location, migrate=False) as db:
        cols = list(db.execute("SELECT * FROM sweep_points LIMIT 1").fetchone().keys())
        versions = [
            r[0]
            for r in db.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        ]
        points = db.execute("SELECT COUNT(*) FROM sweep_points").fetchone()[0]
        measured = db.execute(
            "SELECT COUNT(*) FROM sweep_points p JOIN results r ON r.id = "
            "p.result_id WHERE r.made_by = 'sweep'"
        ).fetchone()[0]
        sweep_rows = db.execute("SELECT COUNT(*) FROM results WHERE made_by = 'sweep'").fetchone()[
            0
        ]
        kinds = sorted(
            {
                r[0]
                for r in db.execute("SELECT kind FROM results WHERE made_by = 'sweep'").fetchall()
            }
        )
    return {
        "columns": cols,
        "versions": versions,
        "points": points,
        "measured": measured,
        "sweep_rows": sweep_rows,
        "kinds": kinds,
    }


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_schema_3_store_upgrades_and_reads_the_same(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrations, "BATCH_4", 4)  # the points are moved in many batches
    location: Location
    if kind == "sqlite":
        location = tmp_path / "v3.sqlite"
        shutil.copy(STORE, location)
    else:
        location = new_pg_db(request.getfixturevalue("pg"))
        copy_store_3(STORE, location)
    want = json.loads(EXPECTED.read_text())
    got = readings(location)  # the first connection upgrades it
    for what in want:
        assert text(got[what]) == text(want[what]), what
    shape = layout(location)
    assert shape["columns"] == list(store.POINT_COLUMNS)
    assert shape["versions"] == [m.version for m in migrations.MIGRATIONS]
    assert shape["points"] == shape["measured"] == shape["sweep_rows"] == 26
    assert shape["kinds"] == ["e2e", "net", "tpc"]
    with backend.connect(location) as db:  # the measurements' ids follow the run order
        for run in ("metro", "pushed"):
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT result_id FROM sweep_points WHERE run = ? ORDER BY seq", (run,)
                ).fetchall()
            ]
            assert ids == sorted(ids) and len(ids) > 1, run


# ---------------------------------------------------------------- generated rows


def write_3(db: backend.Database, run: str, seq: int, r: store.PointResult) -> None:
    """A point as commit 599cf68's ``SweepStore.store_point`` wrote it."""

    def dump(value: Any) -> str:
        return json.dumps(value, sort_keys=True, allow_nan=False, default=str)

    def finite(value: float | None) -> float | None:
        return value if value is not None and math.isfinite(value) else None

    raw = r.raw
    if len(raw.encode("utf-8", "replace")) > MAX_RAW_BYTES:
        raw = raw.encode("utf-8", "replace")[-MAX_RAW_BYTES:].decode("utf-8", "replace")
    samples = [[round(t, 6), finite(bps)] for t, bps in r.samples]
    series = {k: [finite(v) for v in vs] for k, vs in r.series.items()}
    emulator = dump(dict(r.emulator)) if r.emulator is not None else None
    db.execute(
        backend.upsert_sql("sweep_points", POINT_COLUMNS_3, ("run", "point_id")),
        (
            run,
            r.point.id,
            seq,
            r.status,
            r.error,
            r.started,
            r.elapsed_s,
            finite(r.tool_s),
            dump(r.point.as_dict()),
            finite(r.throughput_bps),
            dump(samples),
            dump(series),
            dump([finite(c) for c in r.cpu_seconds]),
            dump({k: dict(v) for k, v in r.softirq.items()}),
            r.retransmits,
            r.retransmits_note,
            r.ctxt,
            dump({k: dict(v) for k, v in r.nic_drops.items()}),
            dump([dataclasses.asdict(t) for t in r.transfers]),
            raw,
            dump(dict(r.tuning)),
            emulator,
            int(r.emulator_bound),
            r.emulator_why,
            dump(dict(r.extra)),
            dump(dict(r.error_fields)) if r.error_fields is not None else None,
        ),
    )


def read_3(row: Any) -> store.PointResult:
    """A version-3 point as commit 599cf68's ``SweepStore._result`` read it."""
    emulator = row["emulator"]
    return store.PointResult(
        point=store.point_from_dict(json.loads(row["point"])),
        status=row["status"],
        error=row["error"],
        started=row["started"],
        elapsed_s=row["elapsed_s"],
        tool_s=row["tool_s"],
        samples=tuple(
            (float(t), float(b) if b is not None else math.nan)
            for t, b in json.loads(row["samples"])
        ),
        series=json.loads(row["series"]),
        cpu_seconds=tuple(
            float(c) if c is not None else math.nan for c in json.loads(row["cpu_seconds"])
        ),
        softirq=json.loads(row["softirq"]),
        retransmits=row["retransmits"],
        retransmits_note=row["retransmits_note"],
        ctxt=row["ctxt"],
        nic_drops=json.loads(row["nic_drops"]),
        transfers=tuple(Transfer(**t) for t in json.loads(row["transfers"])),
        raw=row["raw"],
        tuning=json.loads(row["tuning"]),
        emulator=json.loads(emulator) if emulator is not None else None,
        emulator_bound=bool(row["emulator_bound"]),
        emulator_why=row["emulator_why"],
        extra=json.loads(row["extra"]),
        error_fields=json.loads(row["error_fields"]) if row["error_fields"] else None,
    )


floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
names = st.text(min_size=1, max_size=12).filter(lambda n: n not in store.SAMPLE_KEYS)
plain = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), finite, st.text(max_size=20)
)
figures = st.dictionaries(names, st.dictionaries(names, finite, max_size=3), max_size=3)


@st.composite
def point_results(draw: st.DrawFn, point: Point) -> store.PointResult:
    n = draw(st.integers(0, 6))
    failed = draw(st.booleans())
    return store.PointResult(
        point=point,
        status="failed" if failed else "ok",
        error=draw(st.text(max_size=40)) if failed or draw(st.booleans()) else "",
        error_fields=draw(st.none() | st.dictionaries(names, plain, max_size=4)),
        started=draw(finite),
        elapsed_s=draw(finite),
        tool_s=draw(st.none() | floats),
        samples=tuple((draw(finite), draw(floats)) for _ in range(n)),
        series=draw(
            st.dictionaries(names, st.lists(st.none() | floats, max_size=n + 2), max_size=3)
        ),
        cpu_seconds=tuple(draw(st.lists(floats, max_size=3))),
        softirq=draw(figures),
        retransmits=draw(st.none() | st.integers(0, 2**62)),
        retransmits_note=draw(st.text(max_size=20)),
        ctxt=draw(st.none() | st.integers(0, 2**62)),
        nic_drops=draw(
            st.dictionaries(
                names, st.dictionaries(names, st.integers(0, 2**40), max_size=2), max_size=2
            )
        ),
        transfers=tuple(
            Transfer(
                draw(finite),
                draw(st.none() | finite),
                draw(st.integers(0, 2**50)),
                draw(st.booleans()),
            )
            for _ in range(draw(st.integers(0, 2)))
        ),
        raw=draw(st.text(max_size=60)),
        tuning=draw(
            st.dictionaries(
                st.sampled_from(["dst", "src"]),
                st.none() | st.dictionaries(names, st.text(max_size=10), max_size=2),
            )
        ),
        emulator=draw(st.none() | st.dictionaries(names, plain, max_size=3)),
        emulator_bound=draw(st.booleans()),
        emulator_why=draw(st.text(max_size=20)),
        extra=draw(st.dictionaries(names, plain, max_size=4)),
    )


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[int, store.PointResult]]:
    """A run's points (some stored twice: a rerun keeps the later row)."""
    chosen = draw(st.lists(st.sampled_from(GRID.points()), min_size=1, max_size=5))
    return [(seq, draw(point_results(p))) for seq, p in enumerate(chosen, 1)]


def upgrade_reads_as_version_3(location: Location, points: Sequence[tuple[int, Any]]) -> None:
    db = schema_3(location)
    try:
        db.execute(
            "INSERT INTO results (kind, host, netns, started, duration_s, ok, error, "
            "tuning_id, tuning, spec, summary, samples, raw, experiment_id, label) "
            "VALUES ('net', 'h', NULL, 1.5, 2.0, 1, NULL, NULL, 'null', '{}', "
            "'{\"throughput_bps\": 1.0}', '[]', 'r', NULL, 'probe')"
        )
        db.execute(
            "INSERT INTO sweep_runs (name, created, updated, status, points_total, "
            "grid, environment) VALUES ('g', 1.0, 2.0, 'done', ?, ?, ?)",
            (len(GRID), GRID.to_toml(), json.dumps({"host": "gen"})),
        )
        for seq, r in points:
            write_3(db, "g", seq, r)
        before = [
            read_3(row).as_dict()
            for row in db.execute(
                "SELECT * FROM sweep_points WHERE run = 'g' ORDER BY seq"
            ).fetchall()
        ]
    finally:
        db.close()
    backend.forget_schema_cache()
    after = [p.as_dict() for p in store.load_points(location, "g")]
    assert text(after) == text(before)
    assert [r.label for r in ResultStore(location).results()] == ["probe"]
    shape = layout(location)
    assert shape["points"] == shape["measured"] == shape["sweep_rows"] == len(before)
    # what the upgrade made is what this dtnkit writes for the same points
    again = store.SweepStore(location)
    again.create_run("h", GRID.to_toml(), {"host": "gen"}, len(GRID))
    for _seq, r in sorted(points):
        again.store_point("h", r)
    assert text([p.as_dict() for p in store.load_points(location, "h")]) == text(after)
    with backend.connect(location) as db:
        rows = {
            name: [
                tuple(
                    json.loads(v) if k in JSON_COLUMNS and v is not None else v
                    for k, v in zip(r.keys(), r, strict=True)
                    if k not in ("id", "origin_host")
                )
                for r in db.execute(
                    "SELECT r.* FROM sweep_points p JOIN results r ON r.id = p.result_id WHERE "
                    "p.run = ? ORDER BY p.seq",
                    (name,),
                ).fetchall()
            ]
            for name in ("g", "h")
        }
    assert text(rows["g"]) == text(rows["h"])


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(points=runs())
def test_generated_version_3_points_read_the_same_after_the_upgrade_sqlite(
    tmp_path: Path, points: list[tuple[int, store.PointResult]]
) -> None:
    """Whatever a version-3 point held (NaN and infinite samples, series longer or shorter
    than the samples or empty, NUL and odd text, huge counters) reads the same after the
    upgrade, and the upgrade writes each point's measurement as this dtnkit writes it."""
    upgrade_reads_as_version_3(tmp_path / f"{uuid.uuid4().hex}.sqlite", points)


@needs_postgres[0]
@needs_postgres[1]
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(points=runs())
def test_generated_version_3_points_read_the_same_after_the_upgrade_postgresql(
    pg: PostgresServer, points: list[tuple[int, store.PointResult]]
) -> None:
    upgrade_reads_as_version_3(new_pg_db(pg), points)


# ---------------------------------------------------------------- a store that cannot upgrade


def cli(db: Location, *argv: str) -> tuple[int, str, str]:
    env = Environment(
        results_db=db, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()
    )
    code = main(list(argv), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return code, env.stdout.getvalue(), env.stderr.getvalue()


@pytest.mark.parametrize(
    "column, value",
    [("samples", "not json"), ("series", "[1, 2]"), ("point", "null"), ("transfers", '[{"x": 1}]')],
)
def test_a_point_that_cannot_be_read_stops_the_upgrade_with_one_line(
    tmp_path: Path, column: str, value: str
) -> None:
    """A version-3 point whose JSON is broken (a store edited by hand): one error line
    naming the store and the version, exit 9, no traceback, the store left as it was."""
    path = tmp_path / "v3.sqlite"
    shutil.copy(STORE, path)
    with sqlite3.connect(path) as raw:
        raw.execute(f"UPDATE sweep_points SET {column} = ? WHERE seq = 3", (value,))
        before = raw.execute("SELECT * FROM sweep_points ORDER BY run, seq").fetchall()
    for argv in (("results", "list"), ("sweep", "list"), ("sweep", "analyze", "metro")):
        code, out, err = cli(path, *argv)
        assert code == ExitStatus.BAD_INPUT, err
        assert (
            err.startswith(
                f"dtnkit: error: cannot upgrade the results store {path} to schema version 4"
            )
            and err.count("\n") == 1
        ), err
        assert "Traceback" not in err and out == ""
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT * FROM sweep_points ORDER BY run, seq").fetchall() == before
        assert [r[0] for r in raw.execute("SELECT version FROM schema_version")] == [1, 2, 3]


def test_the_upgrade_names_the_kind_the_registry_gives_each_grid_tool() -> None:
    """The upgrade's frozen table of kinds is what measure's registry says today, its frozen
    transfer keys what a Transfer has."""
    for tool in (*TOOLS, "command:mine"):
        kind = registry.named(registry_tool(tool)).kind
        frozen = "e2e" if tool.startswith("command:") else migrations.KINDS_4[tool]
        assert kind == frozen, tool
    # and the transfers it lets through are those the readers can rebuild
    fields = dataclasses.fields(Transfer)
    assert {f.name for f in fields} == migrations.TRANSFER_KEYS_4
    assert {
        f.name for f in fields if f.default is dataclasses.MISSING
    } == migrations.TRANSFER_NEEDS_4
