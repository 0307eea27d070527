"""One connection to the results database, SQLite or PostgreSQL, with the differences handled
here once.

SQL is written once, in the form both databases run: ``?`` placeholders (turned into ``%s``
for psycopg, a literal ``%`` doubled), ``INSERT ... ON CONFLICT (...) DO UPDATE/NOTHING``
(not ``INSERT OR REPLACE``), ``RETURNING id`` (not ``lastrowid``).  Rows are read by column
name or by index (:class:`Row`, ``sqlite3.Row``).  Text values are cleaned the same way for
both: a NUL or a lone surrogate (a non-UTF-8 byte decoded with ``surrogateescape``) becomes
U+FFFD, since PostgreSQL's text refuses NUL and neither driver encodes surrogates.

``connect(location)`` opens the database, applies any pending migration
(:mod:`dtnkit.db.migrations`) and returns a :class:`Database`; used as a context manager it
is one transaction, committed at the end (rolled back on an error) and closed.  psycopg is
imported only for a URL; without it the error names ``pip install 'dtnkit[postgresql]'``.
"""

from __future__ import annotations

import re
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from dtnkit.db import migrations
from dtnkit.db.location import DbUrl, Location, redact
from dtnkit.errors import BadInput, DtnkitError, ExitStatus, ToolMissing

PIP_HINT = "pip install 'dtnkit[postgresql]'"
CONNECT_TIMEOUT_S = 10
#: the key of the PostgreSQL advisory lock held while migrating ("dtnk")
MIGRATION_LOCK = 0x64746E6B
_SURROGATE = re.compile("[\ud800-\udfff]")
#: servers seen at the latest schema in this process (no check at the next connection; an
#: SQLite file is checked every time: it is cheap, and a test may replace the file)
_CURRENT: set[tuple[str, str]] = set()


class StoreUnavailable(DtnkitError):
    """The server cannot be reached or refuses the login."""

    status = ExitStatus.ERROR


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Row(tuple[Any, ...]):
    """A PostgreSQL row read by column name or index (as ``sqlite3.Row``)."""

    _index: Mapping[str, int]

    def __new__(cls, values: Iterable[Any], index: Mapping[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._index[key])
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Any:
    index = {col.name: i for i, col in enumerate(cursor.description or ())}

    def make(values: Sequence[Any]) -> Row:
        return Row(values, index)

    return make


def clean(value: Any) -> Any:
    """A parameter as both databases store it (see the module's docstring)."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\ufffd")
        if not value.isascii() and _SURROGATE.search(value):
            value = _SURROGATE.sub("\ufffd", value)
    return value


@lru_cache(maxsize=256)
def to_pyformat(sql: str) -> str:
    """``?`` placeholders outside quoted strings as ``%s``; every ``%`` doubled."""
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        out.append("%%" if ch == "%" else ch)
    return "".join(out)


class Database:
    """A connection: :meth:`execute`, :meth:`executemany`, :meth:`insert` (the new row's
    id); one transaction when used as ``with``."""

    def __init__(self, location: Location, conn: Any, dialect: str) -> None:
        self.location = location
        self.conn = conn
        self.dialect = dialect
        self._tx: Any = None

    @property
    def shown(self) -> str:
        return str(self.location)

    def _sql(self, sql: str) -> str:
        return to_pyformat(sql) if self.dialect == "postgresql" else sql

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """A database error (either backend's) as this store's one error line."""
        try:
            yield
        except (sqlite3.Error, OverflowError) as exc:
            raise self.failed(exc) from None
        except Exception as exc:
            if _is_psycopg_error(exc):
                raise self.failed(exc) from None
            raise

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        with self._errors():
            cur: Cursor = self.conn.execute(self._sql(sql), [clean(p) for p in params])
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        cleaned = [[clean(p) for p in row] for row in rows]
        if not cleaned:
            return
        with self._errors():
            if self.dialect == "postgresql":
                with self.conn.cursor() as cur:
                    cur.executemany(self._sql(sql), cleaned)
            else:
                self.conn.executemany(sql, cleaned)

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """An INSERT (without RETURNING); the id the database gave the row."""
        row = self.execute(sql + " RETURNING id", params).fetchone()
        return int(row[0])

    def failed(self, exc: BaseException) -> DtnkitError:
        return BadInput(
            f"cannot use the results store {self.shown}",
            scrub(
                str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                self.location,
            ),
            "check the database and the disk (or the server's log)",
        )

    # ---- transactions ----
    def begin(self, *, immediate: bool = False) -> None:
        if self.dialect == "postgresql":
            self._tx = self.conn.transaction()
            self._tx.__enter__()
        else:
            self.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")

    def end(self, ok: bool) -> None:
        if self.dialect == "postgresql":
            tx, self._tx = self._tx, None
            if tx is not None:
                err = None if ok else RuntimeError("rolled back")
                try:
                    tx.__exit__(type(err) if err else None, err, None)
                except Exception as exc:
                    if ok and _is_psycopg_error(exc):
                        raise self.failed(exc) from None
                    if ok:
                        raise
        elif self.conn.in_transaction:
            try:
                self.conn.execute("COMMIT" if ok else "ROLLBACK")
            except sqlite3.Error as exc:
                if ok:
                    raise self.failed(exc) from None

    @contextmanager
    def transaction(self, *, immediate: bool = False) -> Iterator[Database]:
        self.begin(immediate=immediate)
        ok = False
        try:
            yield self
            ok = True
        finally:
            self.end(ok)

    def close(self) -> None:
        with suppress(Exception):  # closing a broken connection: nothing left to do
            self.conn.close()

    def __enter__(self) -> Database:
        self.begin()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.end(kind is None)
        finally:
            self.close()


def _is_psycopg_error(exc: BaseException) -> bool:
    return any(
        c.__module__.startswith("psycopg") and c.__name__ == "Error" for c in type(exc).__mro__
    )


def scrub(text: str, location: Location) -> str:
    """``text`` without the URL's password (a driver's message may echo the URL)."""
    if isinstance(location, DbUrl):
        text = text.replace(location.url, redact(location.url))
        secret = location.password
        if secret:
            text = text.replace(secret, "***")
    return text


# ---------------------------------------------------------------- opening


def connect(location: Location, *, migrate: bool = True) -> Database:
    """Open the store at ``location`` (creating an SQLite file and its directory), with the
    schema at :data:`~dtnkit.db.migrations.LATEST`.  Errors are one DtnkitError each: a bad
    URL or a store of a newer dtnkit (BadInput), no psycopg (ToolMissing), a server that
    cannot be reached or refuses the login (StoreUnavailable)."""
    db = _open_postgres(location) if isinstance(location, DbUrl) else _open_sqlite(location)
    if migrate:
        try:
            ensure_schema(db)
        except BaseException:
            db.close()
            raise
    return db


def _open_sqlite(path: Path) -> Database:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise BadInput(
            f"cannot open the results store {path}",
            str(exc),
            "give another file with --db or $DTNKIT_DB",
        ) from None
    conn.row_factory = sqlite3.Row
    # SQLite declares foreign keys but checks them only when asked, per connection; asked,
    # a point's measurement (sweep_points.result_id) is enforced as PostgreSQL enforces it
    conn.execute("PRAGMA foreign_keys = ON")
    return Database(path, conn, "sqlite")


def _open_postgres(url: DbUrl) -> Database:
    try:  # optional (the [postgresql] extra), needed only for a postgresql:// store
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise ToolMissing(
            f"cannot use the results store {url}",
            "a postgresql:// store needs psycopg 3, which is not installed",
            PIP_HINT,
        ) from None
    try:
        # the URL's own connect_timeout wins; without one, 10 s rather than libpq's forever
        extra: dict[str, Any] = (
            {}
            if "connect_timeout" in conninfo_to_dict(url.url)
            else {"connect_timeout": CONNECT_TIMEOUT_S}
        )
        conn = psycopg.connect(url.url, autocommit=True, row_factory=_row_factory, **extra)
    except psycopg.ProgrammingError as exc:
        raise bad_url(url, exc) from None
    except psycopg.Error as exc:
        if _first_line(exc).startswith("invalid "):  # libpq: invalid port number, ... value
            raise bad_url(url, exc) from None
        raise unavailable(url, exc) from None
    return Database(url, conn, "postgresql")


def bad_url(url: DbUrl, exc: BaseException) -> DtnkitError:
    return BadInput(
        f"bad results store URL {url}",
        scrub(_first_line(exc), url),
        "e.g. postgresql://dtnkit@db.example.org:5432/dtnkit, or "
        "postgresql://dtnkit@/dtnkit?host=/run/postgresql",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    text = text.removeprefix("connection is bad: ").removeprefix("connection failed: ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def unavailable(url: DbUrl, exc: BaseException) -> DtnkitError:
    """One error for a server that cannot be reached, refuses the login or has no such
    database."""
    why = scrub(_first_line(exc), url)
    low = why.lower()
    if "password" in low or "authentication" in low or ("role" in low and "does not exist" in low):
        return StoreUnavailable(
            f"cannot log in to the results store {url}",
            why,
            "check the user and the password (kept in ~/.pgpass or $PGPASSWORD, not in the URL)",
        )
    if "database" in low and "does not exist" in low:
        return StoreUnavailable(
            f"no such database: {url}", why, "create it (createdb) or fix the URL's database name"
        )
    return StoreUnavailable(
        f"cannot reach the results store {url}",
        why,
        "check that the server runs and the URL's host and port (or socket directory)",
    )


# ---------------------------------------------------------------- the schema


def _key(db: Database) -> tuple[str, str]:
    loc = db.location
    return (db.dialect, loc.url if isinstance(loc, DbUrl) else str(Path(loc).resolve()))


def schema_version(db: Database) -> int:
    """The store's schema version: 0 when it has no ``schema_version`` table (new, or made
    by dtnkit before versions)."""
    if db.dialect == "postgresql":
        if not db.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()[0]:
            return 0
        return int(db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0)
    try:  # one statement: a file is checked at every connection
        row = db.conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise db.failed(exc) from None
        return 0
    except sqlite3.DatabaseError as exc:  # "file is not a database"
        raise BadInput(
            f"{db.shown} is not a results store",
            scrub(str(exc), db.location)[:200] or type(exc).__name__,
            "give --db a dtnkit results store, or a new file (the file is as it was)",
        ) from None
    return int(row[0] or 0)


def too_new(db: Database, version: int) -> DtnkitError:
    return BadInput(
        f"the results store {db.shown} has schema version {version}",
        f"this dtnkit knows versions up to {migrations.LATEST} (a newer dtnkit wrote it)",
        "upgrade dtnkit on this host, or give another --db",
    )


def ensure_schema(db: Database) -> int:
    """Apply the pending migrations, in order, in one transaction (PostgreSQL: under an
    advisory lock, so two hosts migrating at once wait for each other); the version."""
    key = _key(db)
    if key in _CURRENT and db.dialect == "postgresql":  # a file is checked every time
        return migrations.LATEST
    version = schema_version(db)
    if version > migrations.LATEST:
        raise too_new(db, version)
    if version < migrations.LATEST:
        with db.transaction(immediate=True):
            if db.dialect == "postgresql":
                db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            db.execute(migrations.spelled(migrations.SCHEMA_VERSION_DDL, db.dialect))
            version = schema_version(db)  # another process may have migrated meanwhile
            if version > migrations.LATEST:
                raise too_new(db, version)
            for step in migrations.MIGRATIONS:
                if step.version <= version:
                    continue
                for statement in step.statements:
                    if isinstance(statement, str):
                        _ddl_step(db, step, statement)
                    else:
                        _data_step(db, step, statement)
                db.execute(
                    "INSERT INTO schema_version (version, name, applied) VALUES (?, ?, ?)",
                    (step.version, step.name, time.time()),
                )
            version = migrations.LATEST
    _CURRENT.add(key)
    return version


def _ddl_step(db: Database, step: migrations.Migration, statement: str) -> None:
    """Run a migration's SQL; one that fails (a store another program made, or one changed
    by hand: a table without the columns dtnkit's has) is one error (nothing changed)."""
    try:
        db.execute(migrations.spelled(statement, db.dialect))
    except DtnkitError as exc:
        raise not_ours(db, step, exc) from None


def not_ours(db: Database, step: migrations.Migration, exc: DtnkitError) -> BadInput:
    return BadInput(
        f"cannot upgrade the results store {db.shown} to schema version {step.version}",
        f"{exc.why} (is it a results store dtnkit made?)",
        "give --db a dtnkit results store, or a new file (the store is as it was)",
    )


def _data_step(db: Database, step: migrations.Migration, function: migrations.DataStep) -> None:
    """Run a migration's data step; a row it cannot read is one error (nothing changed)."""
    try:
        function(db)
    except DtnkitError as exc:  # its SQL failed: a table without dtnkit's columns
        raise not_ours(db, step, exc) from None
    except (ValueError, TypeError, LookupError, AttributeError) as exc:
        raise BadInput(
            f"cannot upgrade the results store {db.shown} to schema version {step.version}",
            f"a row it holds cannot be read: "
            f"{type(exc).__name__}: {scrub(str(exc), db.location)[:200]}",
            "keep this dtnkit's previous version for that store, or repair the "
            "row (the store is as it was)",
        ) from None


def forget_schema_cache() -> None:
    """Check the schema again at the next connection (tests that rewrite a store)."""
    _CURRENT.clear()


def store_id(db: Database) -> str:
    """This store's own random ID (made at the first call): the origin of its rows when
    they are pushed elsewhere."""
    row = db.execute("SELECT value FROM store_info WHERE key = 'store_id'").fetchone()
    if row is not None:
        return str(row[0])
    db.execute(
        "INSERT INTO store_info (key, value) VALUES ('store_id', ?) ON CONFLICT (key) DO NOTHING",
        (uuid.uuid4().hex,),
    )
    return str(db.execute("SELECT value FROM store_info WHERE key = 'store_id'").fetchone()[0])


def upsert_sql(table: str, columns: Sequence[str], key: Sequence[str]) -> str:
    """``INSERT ... ON CONFLICT (key) DO UPDATE`` of every other column (both databases)."""
    rest = [c for c in columns if c not in key]
    marks = ", ".join("?" for _ in columns)
    sets = ", ".join(f"{c} = excluded.{c}" for c in rest)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets}"
    )
