"""A ``--db`` that is not a dtnkit results store (a file that is not SQLite, another
program's database whose tables have dtnkit's names but not its columns), on both backends:
every command that reads or writes the store says so in one line (exit 9, no traceback) and
leaves it as it was (the upgrade to the current schema is rolled back whole).
"""

from __future__ import annotations

import io
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.postgres import PostgresServer, needs_postgres, postgres_server

from dtnkit.cli.main import main
from dtnkit.db import backend
from dtnkit.db.location import DbUrl, Location
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

#: other programs' tables named as dtnkit's: (table, its DDL, a row)
FOREIGN = {
    "results": ("CREATE TABLE results (x TEXT)", "INSERT INTO results VALUES ('theirs')"),
    "sweep_points": (
        "CREATE TABLE sweep_points (run TEXT, point_id TEXT, foo TEXT)",
        "INSERT INTO sweep_points VALUES ('a', 'b', 'theirs')",
    ),
    "sweep_runs": (
        "CREATE TABLE sweep_runs (name TEXT PRIMARY KEY, created REAL)",
        "INSERT INTO sweep_runs VALUES ('a', 1.0)",
    ),
}
COMMANDS = (
    ("results", "list"),
    ("results", "list", "--sweeps"),
    ("results", "export"),
    ("sweep", "list"),
    ("sweep", "analyze", "a"),
)


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with postgres_server(tmp_path_factory.mktemp("notours"), "notours") as server:
        yield server


def cli(db: Location, *argv: str) -> tuple[int, str, str]:
    env = Environment(
        results_db=db, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()
    )
    code = main(list(argv), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return code, env.stdout.getvalue(), env.stderr.getvalue()


def refused_in_one_line(db: Location, what: str) -> None:
    for argv in COMMANDS:
        backend.forget_schema_cache()
        code, out, err = cli(db, *argv)
        assert code == ExitStatus.BAD_INPUT, (argv, err)
        assert err.startswith(f"dtnkit: error: {what}") and err.count("\n") == 1, (argv, err)
        assert "Traceback" not in err and out == "", (argv, err)


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("table", sorted(FOREIGN))
def test_another_programs_sqlite_database_is_refused_and_kept(tmp_path: Path, table: str) -> None:
    path = tmp_path / "theirs.sqlite"
    with sqlite3.connect(path) as raw:
        for statement in FOREIGN[table]:
            raw.execute(statement)
    raw.close()
    before = files(tmp_path)
    refused_in_one_line(path, f"cannot upgrade the results store {path} to schema version")
    assert files(tmp_path) == before


@needs_postgres[0]
@needs_postgres[1]
@pytest.mark.parametrize("table", sorted(FOREIGN))
def test_another_programs_postgresql_database_is_refused_and_kept(
    pg: PostgresServer, table: str
) -> None:
    url = DbUrl(pg.create_database(f"notours_{uuid.uuid4().hex[:10]}"))
    with backend.connect(url, migrate=False) as db:
        for statement in FOREIGN[table]:
            db.execute(statement)
    refused_in_one_line(url, "cannot upgrade the results store")
    with backend.connect(url, migrate=False) as db:
        tables = {
            r[0]
            for r in db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchall()
        }
        assert tables == {table}
        assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 1


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(min_size=1, max_size=4096))
def test_a_file_that_is_not_sqlite_is_refused_and_kept(tmp_path: Path, data: bytes) -> None:
    """Any bytes but an SQLite database's (a text file, a tarball, a truncated header)."""
    directory = tmp_path / uuid.uuid4().hex
    directory.mkdir()
    path = directory / "results.sqlite"
    path.write_bytes(
        b"SQLite format 3\x00"[: len(data) % 17] + data if not data.startswith(b"SQLite") else data
    )
    before = files(directory)
    refused_in_one_line(path, f"{path} is not a results store")
    assert files(directory) == before
