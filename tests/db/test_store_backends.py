"""The results database on both backends: the same store tests against an SQLite file and a
real PostgreSQL (tests/support/postgres.py: one server for the module, a database per test),
migrations (a file made by dtnkit before schema versions upgrades in place; a newer schema is
refused), hostile values, and the password of a URL never shown.

tests/db/data/store_before_schema_versions.sqlite was made by the stores of commit 490dc67 (the
last before dtnkit.db): two results, one experiment, the sweep run "old-run" with two points.
"""

from __future__ import annotations

import io
import math
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.postgres import PostgresServer, needs_postgres, postgres_server

from dtnkit.cli.main import main
from dtnkit.db import backend, migrations
from dtnkit.db.location import DbUrl, Location, parse_location, redact
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, DtnkitError, ExitStatus, ToolMissing
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore
from dtnkit.measure.tool import Transfer
from dtnkit.sweep import store as sweep_store
from dtnkit.sweep.grid import Grid, parse_grid_flags

FIXTURE = Path(__file__).parent / "data" / "store_before_schema_versions.sqlite"


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    with postgres_server(tmp_path_factory.mktemp("dbs"), "dbs") as server:
        yield server


def new_pg_db(request: pytest.FixtureRequest) -> DbUrl:
    server: PostgresServer = request.getfixturevalue("pg")
    return DbUrl(server.create_database(f"dbs_{uuid.uuid4().hex[:10]}"))


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=needs_postgres),
]


@pytest.fixture(params=BACKENDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    if request.param == "sqlite":
        return tmp_path / "results.sqlite"
    return new_pg_db(request)


def result(i: int, **kw: object) -> ProbeResult:
    fields: dict[str, object] = dict(
        kind="net" if i % 2 == 0 else "disk",
        spec={"peer": "p", "i": i},
        summary={"throughput_bps": 1e9 * (i + 1)},
        samples=[{"t": 0.5, "bps": 1e9}],
        raw=f"raw {i}",
        ok=True,
        host="h1",
        started=1.7e9 + i + 0.123456789,
        duration_s=10.5,
        tuning={"net.core.rmem_max": "212992"},
        label=f"l{i}",
    )
    fields.update(kw)
    return ProbeResult(**fields)  # type: ignore[arg-type]


def grid() -> Grid:
    return parse_grid_flags(
        ["rtt=5ms,100ms", "streams=1,2", "duration=1s", "sample_interval=500ms"], known_profiles=[]
    )


def env_for(db: Location) -> Environment:
    return Environment(
        results_db=db, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()
    )


def cli(db: Location, *argv: str) -> tuple[int, str, str]:
    env = env_for(db)
    code = main(list(argv), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return code, env.stdout.getvalue(), env.stderr.getvalue()


# ---------------------------------------------------------------- the stores on both backends


def test_results_round_trip(location: Location) -> None:
    s = ResultStore(location)
    ids = [s.add(result(i, experiment_id="exp-1" if i == 1 else None)) for i in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    got = s.get(ids[1])
    want = result(1, experiment_id="exp-1")
    assert (
        got.kind,
        got.spec,
        got.summary,
        got.samples,
        got.raw,
        got.tuning,
        got.label,
        got.started,
        got.duration_s,
        got.experiment_id,
        got.ok,
    ) == (
        want.kind,
        want.spec,
        want.summary,
        want.samples,
        want.raw,
        want.tuning,
        want.label,
        want.started,
        want.duration_s,
        "exp-1",
        True,
    )
    assert [r.id for r in s.results()] == ids[::-1]
    assert [r.id for r in s.results(kind="net")] == [ids[2], ids[0]]
    assert [r.id for r in s.results(limit=1)] == [ids[2]]
    assert [r.id for r in s.results(experiment_id="exp-1")] == [ids[1]]
    with pytest.raises(BadInput, match=f"no result {ids[2] + 100}"):
        s.get(ids[2] + 100)


def test_experiments(location: Location) -> None:
    s = ResultStore(location)
    s.add_experiment("exp-a", {"id": "exp-a", "started": 1.0, "groups": []})
    s.add_experiment("exp-b", {"id": "exp-b", "started": 2.0, "groups": []})
    s.add_experiment("exp-a", {"id": "exp-a", "started": 3.0, "groups": ["again"]})
    assert s.get_experiment("exp-a")["groups"] == ["again"]
    assert [e["id"] for e in s.experiments()] == ["exp-a", "exp-b"]
    with pytest.raises(BadInput, match="no experiment 'exp-c'"):
        s.get_experiment("exp-c")


def test_sweep_runs_and_points(location: Location) -> None:
    g = grid()
    s = sweep_store.SweepStore(location)
    assert s.runs() == []
    info = s.create_run("r1", g.to_toml(), {"host": "h"}, len(g))
    assert (info.points_total, info.points_ok, info.status) == (4, 0, "running")
    with pytest.raises(BadInput, match="exists"):
        s.create_run("r1", g.to_toml(), {}, len(g))
    p0, p1 = g.points()[:2]
    s.store_point(
        "r1",
        sweep_store.PointResult(
            point=p0,
            status="ok",
            samples=((0.5, 1e9), (1.0, 3e9)),
            cpu_seconds=(0.4,),
            transfers=(Transfer(0.0, 0.9, 100, True),),
            series={"cpu_cores.0": [0.5, None]},
            retransmits=2**40,
            raw="x",
        ),
    )
    s.store_point("r1", sweep_store.PointResult(point=p1, status="failed", error="boom"))
    assert s.done_point_ids("r1") == {p0.id}
    assert s.point("r1", p0.id[:6]).retransmits == 2**40  # a prefix, LIKE with ESCAPE
    with pytest.raises(BadInput, match="no point"):
        s.point("r1", "%")
    s.store_point("r1", sweep_store.PointResult(point=p1, status="ok", samples=((1.0, math.nan),)))
    recs = sweep_store.load_records(location, "r1")
    assert [r.point for r in recs] == [p0, p1] and math.isnan(recs[1].samples_bps[0])
    s.set_status("r1", "done")
    info = sweep_store.run_info(location, "r1")
    assert (info.status, info.points_ok, info.points_failed) == ("done", 2, 0)
    assert [r.name for r in sweep_store.list_runs(location)] == ["r1"]


def test_a_points_measurement_is_held_by_its_foreign_key_on_both_backends(
    location: Location,
) -> None:
    """sweep_points.result_id references results(id): PostgreSQL always checks it, SQLite
    only on a connection that asks (each of the store's does), so a measurement a point
    holds is not deleted underneath it on either backend."""
    g = grid()
    s = sweep_store.SweepStore(location)
    s.create_run("fk", g.to_toml(), {}, len(g))
    s.store_point("fk", sweep_store.PointResult(point=g.points()[0], status="ok"))
    with backend.connect(location) as db:
        [held] = [r[0] for r in db.execute("SELECT result_id FROM sweep_points").fetchall()]
        with pytest.raises(DtnkitError) as refused:
            db.execute("DELETE FROM results WHERE id = ?", (held,))
        assert "foreign key" in refused.value.as_dict()["why"].lower()
    with backend.connect(location) as db:
        assert db.execute("SELECT count(*) FROM results WHERE id = ?", (held,)).fetchone()[0] == 1


def test_fresh_store_has_every_migration_once(location: Location) -> None:
    ResultStore(location).results()
    ResultStore(location).results()
    with backend.connect(location) as db:
        rows = db.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [m.version for m in migrations.MIGRATIONS]
        assert (
            db.execute("SELECT version FROM sweep_schema").fetchone()[0]
            == sweep_store.SCHEMA_VERSION
            == 2
        )


def test_hostile_values_round_trip_alike(location: Location) -> None:
    """NUL and undecodable bytes (surrogate-escaped) become U+FFFD on both backends, instead
    of a driver's traceback (sqlite3 cannot encode a surrogate, PostgreSQL refuses NUL)."""
    s = ResultStore(location)
    odd = "a\x00b" + b"\xff\xfe".decode("utf-8", "surrogateescape") + "é🙂' \"; DROP TABLE x --%s?"
    rid = s.add(result(0, raw=odd, label=odd, host=odd, error=odd))
    got = s.get(rid)
    cleaned = "a\ufffdb\ufffd\ufffdé🙂' \"; DROP TABLE x --%s?"
    assert (got.raw, got.label, got.host, got.error) == (cleaned,) * 4
    assert s.results(kind="net' OR '1'='1") == []


def test_newer_schema_is_refused(location: Location, tmp_path: Path) -> None:
    ResultStore(location).results()
    with backend.connect(location) as db:
        db.execute(
            "INSERT INTO schema_version (version, name, applied) VALUES (?, 'x', 0)",
            (migrations.LATEST + 1,),
        )
    backend.forget_schema_cache()
    with pytest.raises(BadInput, match=f"schema version {migrations.LATEST + 1}"):
        ResultStore(location).results()
    code, out, err = cli(location, "results", "list")
    assert code == ExitStatus.BAD_INPUT and out == ""
    assert err.count("\n") == 1 and "a newer dtnkit wrote it" in err
    assert "Traceback" not in err
    host = host_store(tmp_path / "host.sqlite", "h")
    target = location.url if isinstance(location, DbUrl) else str(location)
    code, out, err = cli(host, "results", "push", target, "--format", "json")
    assert code == ExitStatus.BAD_INPUT and "a newer dtnkit wrote it" in err
    assert '"schema version' in out or "schema version" in out  # {"error": ...} in JSON mode


# ---------------------------------------------------------------- upgrade in place (SQLite)


def test_file_from_before_versions_upgrades_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, db)
    with sqlite3.connect(db) as raw:  # as dtnkit 490dc67 left it
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "schema_version" not in tables and "results" in tables
    s = ResultStore(db)
    old = s.results()
    assert [(r.kind, r.label, r.raw, r.host) for r in old] == [
        ("disk", "old 1", "raw 1 é", "oldhost"),
        ("net", "old 0", "raw 0 é", "oldhost"),
    ]
    assert s.get_experiment("exp-20231114-abcd")["groups"][0]["verdict"] == "helps"
    info = sweep_store.run_info(db, "old-run")
    assert (info.status, info.points_ok, info.points_failed) == ("done", 1, 1)
    assert sweep_store.load_points(db, "old-run")[0].transfers[0].verified
    new_id = s.add(result(5))
    assert new_id > max(r.id or 0 for r in old)
    with sqlite3.connect(db) as raw:
        versions = [r[0] for r in raw.execute("SELECT version FROM schema_version")]
        cols = {r[1] for r in raw.execute("PRAGMA table_info(results)")}
    assert (
        versions == [m.version for m in migrations.MIGRATIONS]
        and {"origin", "origin_id", "origin_host"} <= cols
    )


# ---------------------------------------------------------------- push


def host_store(path: Path, tag: str, run: str = "run-a") -> Path:
    """A host's SQLite store: 3 results, 1 experiment, a sweep run with 2 points."""
    s = ResultStore(path)
    for i in range(3):
        s.add(result(i, host=tag, label=f"{tag}-{i}"))
    s.add_experiment(f"exp-{tag}", {"id": f"exp-{tag}", "started": 5.0, "groups": []})
    g = grid()
    ss = sweep_store.SweepStore(path)
    ss.create_run(run, g.to_toml(), {"host": tag}, len(g))
    for p in g.points()[:2]:
        ss.store_point(run, sweep_store.PointResult(point=p, status="ok", samples=((0.5, 1e9),)))
    return path


def counts(doc: dict[str, object], what: str) -> dict[str, tuple[int, ...]]:
    tables = doc["tables"]
    assert isinstance(tables, dict)
    return {t: tuple(c[k] for k in what.split()) for t, c in tables.items()}


def test_push_is_idempotent_and_records_the_origin(location: Location, tmp_path: Path) -> None:
    from dtnkit.db.push import push

    a = host_store(tmp_path / "a.sqlite", "ha")
    first = push(a, location, host="ha.example").as_dict()
    assert counts(first, "read new present conflicts") == {
        "results": (3, 3, 0, 0),
        "experiments": (1, 1, 0, 0),
        "sweep_runs": (1, 1, 0, 0),
        "sweep_points": (2, 2, 0, 0),
    }
    again = push(a, location, host="ha.example").as_dict()
    assert counts(again, "new present") == {
        "results": (0, 3),
        "experiments": (0, 1),
        "sweep_runs": (0, 1),
        "sweep_points": (0, 2),
    }
    assert again["origin"] == first["origin"]
    # more on the host: only that is added; a point rerun replaces its row
    ResultStore(a).add(result(9, host="ha"))
    g = grid()
    sweep_store.SweepStore(a).store_point(
        "run-a", sweep_store.PointResult(point=g.points()[0], status="failed", error="rerun")
    )
    third = push(a, location, host="ha.example").as_dict()
    assert counts(third, "new present")["results"] == (1, 3)
    shared = ResultStore(location)
    assert sorted(r.label for r in shared.results()) == ["ha-0", "ha-1", "ha-2", "l9"]
    assert [p.status for p in sweep_store.load_points(location, "run-a")] == ["ok", "failed"]
    with backend.connect(location) as db:
        rows = db.execute(
            "SELECT origin, origin_id, origin_host FROM results "
            "WHERE made_by = 'probe' ORDER BY origin_id"
        ).fetchall()
        assert [(r[0], r[1], r[2]) for r in rows] == [
            (first["origin"], i, "ha.example")
            for i in sorted(r.id for r in ResultStore(a).results())
        ]
        assert db.execute("SELECT origin_host FROM sweep_runs").fetchone()[0] == "ha.example"
    # another host with the same run name: its run is a conflict, the rest goes in
    b = host_store(tmp_path / "b.sqlite", "hb")
    other = push(b, location, host="hb.example").as_dict()
    assert counts(other, "new conflicts") == {
        "results": (3, 0),
        "experiments": (1, 0),
        "sweep_runs": (0, 1),
        "sweep_points": (0, 2),
    }
    assert other["conflicts"] == [{"table": "sweep_runs", "key": "run-a"}]
    assert sweep_store.run_info(location, "run-a").environment == {"host": "ha"}
    assert len(shared.results(limit=100)) == 7


def test_push_through_a_second_store_keeps_the_first_origin(tmp_path: Path) -> None:
    from dtnkit.db.push import push

    a = host_store(tmp_path / "a.sqlite", "ha")
    mid, top = tmp_path / "mid.sqlite", tmp_path / "top.sqlite"
    push(a, mid, host="ha")
    push(a, top, host="ha")
    via = push(mid, top, host="mid").as_dict()
    assert counts(via, "new present")["results"] == (0, 3)
    assert counts(via, "conflicts")["sweep_runs"] == (0,)
    back = push(mid, a, host="mid").as_dict()  # home again: nothing new, nothing rewritten
    assert counts(back, "new present conflicts") == {
        "results": (0, 3, 0),
        "experiments": (0, 1, 0),
        "sweep_runs": (0, 1, 0),
        "sweep_points": (0, 2, 0),
    }
    assert len(ResultStore(a).results()) == 3


def test_push_cli(location: Location, tmp_path: Path) -> None:
    # a path longer than the 80-column terminal: the "pushed" line is not wrapped (it was,
    # once pytest's own temporary directory reached 4 digits), so it is copied whole
    deep = tmp_path / ("stores-of-site-" * 5)
    deep.mkdir()
    a = host_store(deep / "a.sqlite", "ha")
    target = location.url if isinstance(location, DbUrl) else str(location)
    code, out, err = cli(a, "results", "push", target, "--host", "h-a", "--format", "json")
    assert code == 0 and err == ""
    import json

    doc = json.loads(out)
    assert doc["schema"] == "dtnkit.push/1" and doc["host"] == "h-a"
    assert doc["source"] == str(a) and doc["tables"]["results"]["new"] == 3
    code, out, err = cli(a, "results", "push", target, "--host", "h-a")
    assert code == 0
    assert out.splitlines()[0].startswith(f"pushed {a} to ")
    assert "results" in out and " 3 " in out.splitlines()[2] + " "
    code, out, err = cli(a, "results", "push", str(a))
    assert code == ExitStatus.BAD_INPUT and "into itself" in err
    code, out, err = cli(tmp_path / "none.sqlite", "results", "push", target)
    assert code == ExitStatus.BAD_INPUT and "no results store" in err
    assert not (tmp_path / "none.sqlite").exists()


# ---------------------------------------------------------------- URLs, errors, secrets


def test_redact_and_parse() -> None:
    assert redact("postgresql://u:p%40ss@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact("postgresql://u:a@b@h/db?host=/x") == "postgresql://u:***@h/db?host=/x"
    assert (
        redact("postgres://h/db?user=u&password=pw&x=1")
        == "postgres://h/db?user=u&password=***&x=1"
    )
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact("/var/lib/x:y@z") == "/var/lib/x:y@z"
    url = parse_location("postgresql://u:s3cret@/db?host=/tmp/x")
    assert isinstance(url, DbUrl) and "s3cret" not in f"{url} {url!r}" and url.password == "s3cret"
    assert parse_location("results.sqlite") == Path("results.sqlite")
    with pytest.raises(BadInput, match="unsupported results store URL 'mysql://u:\\*\\*\\*@h'"):
        parse_location("mysql://u:pw@h")
    with pytest.raises(BadInput, match="empty --db"):
        parse_location(" ")
    assert (
        backend.to_pyformat("SELECT '?%' , ? WHERE a LIKE ?") == "SELECT '?%%' , %s WHERE a LIKE %s"
    )


def test_env_variable_takes_a_url() -> None:
    env = Environment.from_os({"DTNKIT_DB": "postgresql://u:pw@/d?host=/x"})
    assert (
        isinstance(env.results_db, DbUrl) and str(env.results_db) == "postgresql://u:***@/d?host=/x"
    )
    assert Environment.from_os({"DTNKIT_DB": "/a/b.sqlite"}).results_db == Path("/a/b.sqlite")


def test_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    with pytest.raises(ToolMissing) as got:
        backend.connect(DbUrl("postgresql://u:pw@/d?host=/nonexistent"))
    assert "pip install 'dtnkit[postgresql]'" in got.value.render()
    assert "pw" not in got.value.render().replace("psycopg", "")


@needs_postgres[0]
@needs_postgres[1]
def test_connection_errors_are_one_line_without_the_password(
    pg: PostgresServer, tmp_path: Path
) -> None:
    pw = pg.password
    down = tmp_path / "down"
    down.mkdir()
    cases = {
        "cannot reach the results store": f"postgresql://dtnkit:{pw}@/dtnkit?host={down}",
        "cannot log in to the results store": pg.password_url.replace(f":{pw}@", f":{pw}x@"),
        "no such database": f"postgresql://dtnkit:{pw}@/dbs_absent?host={pg.socket_dir}",
        "bad results store URL": f"postgresql://dtnkit:{pw}@[::1/db",
    }
    statuses = {"bad results store URL": ExitStatus.BAD_INPUT}
    for what, url in cases.items():
        for argv in (
            ["results", "list", "--db", url],
            [
                "results",
                "push",
                url,
                "--db",
                str(host_store(tmp_path / f"{len(what)}.sqlite", "h")),
            ],
        ):
            code, out, err = cli(tmp_path / "unused.sqlite", *argv)
            assert code == statuses.get(what, ExitStatus.ERROR), (what, err)
            assert err.startswith(f"dtnkit: error: {what}") and err.count("\n") == 1, err
            assert pw not in out + err and "Traceback" not in err
    # the good password works, and nothing shows it
    code, out, err = cli(
        pg.password_url,
        "results",
        "push",
        pg.password_url.replace("/dtnkit?", "/postgres?"),
        "--db",
        pg.password_url,
    )
    assert code == 0, err
    assert pw not in out + err and "dtnkit:***@" in out
    code, out, err = cli(tmp_path, "results", "list", "--db", pg.password_url, "--format", "json")
    assert code == 0 and pw not in out + err


@needs_postgres[0]
@needs_postgres[1]
def test_psycopg_errors_in_use_are_bad_input(pg: PostgresServer) -> None:
    url = DbUrl(pg.create_database(f"dbs_{uuid.uuid4().hex[:10]}"))
    ResultStore(url).results()
    with (
        pytest.raises(DtnkitError, match="cannot use the results store") as got,
        backend.connect(url) as db,
    ):
        db.execute("SELECT nothing FROM results")
    assert got.value.status == ExitStatus.BAD_INPUT


@needs_postgres[0]
@needs_postgres[1]
def test_commands_read_a_shared_store_by_url(pg: PostgresServer, tmp_path: Path) -> None:
    """The callers take the URL as they took a file: `--db`, $DTNKIT_DB, the exporter."""
    import json

    from dtnkit.db.push import push

    url = DbUrl(pg.create_database(f"dbs_{uuid.uuid4().hex[:10]}"))
    push(host_store(tmp_path / "a.sqlite", "ha"), url, host="ha")
    code, out, err = cli(
        tmp_path / "unused.sqlite", "sweep", "list", "--db", url.url, "--format", "json"
    )
    assert code == 0, err
    assert [r["name"] for r in json.loads(out)] == ["run-a"]
    code, out, err = cli(
        tmp_path / "unused.sqlite", "sweep", "analyze", "run-a", "--db", url.url, "--format", "json"
    )
    assert code == 0, err
    env = Environment.from_os({"DTNKIT_DB": url.url}, stdout=io.StringIO(), stderr=io.StringIO())
    assert main(["results", "list", "--format", "json"], env) == 0
    assert isinstance(env.stdout, io.StringIO)
    assert sorted(r["label"] for r in json.loads(env.stdout.getvalue())) == ["ha-0", "ha-1", "ha-2"]
    code, out, err = cli(
        tmp_path / "unused.sqlite", "metrics", "--db", url.url, "--no-drift", "--format", "prom"
    )
    assert "dtnkit_probe_last_success" in out, err
    assert not (tmp_path / "unused.sqlite").exists()


def test_hosts_migrating_at_once_apply_each_migration_once(location: Location) -> None:
    """Four connections to a new store at once (hosts of a fleet starting together): the
    migration lock makes them wait for each other; every add lands."""
    import threading

    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            ResultStore(location).add(result(i))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(ResultStore(location).results()) == 4
    with backend.connect(location) as db:
        assert [
            r[0]
            for r in db.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        ] == [m.version for m in migrations.MIGRATIONS]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@/d" + b"\xff".decode("utf-8", "surrogateescape") + "?host=/nonexistent",
        "postgresql://u:pw@/d\x00x?host=/nonexistent",
        "postgresql://u:pw@/d\nx?host=/nonexistent",
        "postgresql://u:pw@/d?host=/nonexistent&port=99999",
        "postgresql://u:pw@/d?host=/nonexistent&connect_timeout=abc",
    ],
)
def test_odd_urls_are_one_bad_input_line(url: str, tmp_path: Path) -> None:
    """Not UTF-8 (a traceback before), a NUL (libpq cut the URL there and tried the default
    socket), a control character, a port or option libpq refuses: bad input, nothing tried."""
    pytest.importorskip("psycopg")
    code, _out, err = cli(tmp_path / "unused.sqlite", "results", "list", "--db", url)
    assert code == ExitStatus.BAD_INPUT, err
    assert err.startswith("dtnkit: error: bad results store URL") and err.count("\n") == 1
    assert "pw" not in err and "Traceback" not in err
