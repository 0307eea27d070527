"""``dtnkit results push``: copy one store's rows (a host's SQLite file) into another (the
fleet's shared PostgreSQL), idempotently.

The origin key: every store has a random ID of its own (``store_info``, made at the first
push), and a pushed row keeps where it came from: ``origin`` (that store ID), ``origin_id``
(the result's id there) and ``origin_host`` (the name of the pushing host, ``--host``).

- results (measurements) are immutable: one is inserted once per (origin, origin_id) (a
  unique index); pushing again skips it (``present``).  The ``results`` count is the probes'
  (``made_by`` ``probe``); a sweep point's measurement goes with its point;
- experiments (by ID) and sweep runs (by name) may change (a run goes on, an experiment is
  redone): a row from the same origin is rewritten with the source's content (``present``),
  its sweep points with it (a point by (run, point ID), its ``result_id`` the target's id of
  its measurement; a measurement a rewritten point no longer refers to is deleted); a row of
  that key from another origin, or made in the target itself, is left alone and counted a
  ``conflict`` (with its points and their measurements);
- a row the source itself got by a push keeps its first origin, so pushing on through a
  second store does not duplicate either, and a row that came from the target itself is
  not pushed back.

Keying by the store, not the host name or a content hash: two stores on one host (test
hosts share a file system and a hostname) stay apart, a copy of a file is the same origin,
and a row whose content changed replaces its earlier self.  Everything is written in one
transaction: a push that fails leaves the target as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dtnkit.db.backend import Database, connect, store_id, upsert_sql
from dtnkit.db.location import Location
from dtnkit.errors import BadInput

TABLES = ("results", "experiments", "sweep_runs", "sweep_points")
ORIGIN = ("origin", "origin_id", "origin_host")
BATCH = 500

#: ``progress(table, done, total)`` after each batch
PushProgress = Callable[[str, int, int], None]


@dataclass
class Count:
    read: int = 0
    new: int = 0
    present: int = 0
    conflicts: int = 0


@dataclass
class PushSummary:
    source: str  # shown (a URL redacted)
    target: str
    origin: str  # the source store's ID
    host: str
    target_id: str = ""  # the target store's ID: rows that came from it are its own
    own: list[tuple[str, str]] = field(default_factory=list)  # (table, key) of those
    tables: dict[str, Count] = field(default_factory=lambda: {t: Count() for t in TABLES})
    conflicts: list[dict[str, str]] = field(default_factory=list)  # {"table", "key"}
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": "dtnkit.push/1",
            "source": self.source,
            "target": self.target,
            "origin": self.origin,
            "host": self.host,
            "tables": {t: vars(c) for t, c in self.tables.items()},
            "conflicts": self.conflicts,
            "elapsed_s": self.elapsed_s,
        }


def _columns(row: Any, drop: Sequence[str] = ()) -> list[str]:
    names = row.keys()  # a row iterates over its values, its keys are the column names
    return [k for k in names if k not in ORIGIN and k not in drop]


def push(
    source: Location, target: Location, *, host: str, progress: PushProgress | None = None
) -> PushSummary:
    """Copy ``source``'s rows into ``target`` (see the module's docstring)."""
    started = time.monotonic()
    if isinstance(source, Path) and not source.is_file():
        raise BadInput(
            f"no results store {source}",
            "the file does not exist",
            "give the host's store with --db (or $DTNKIT_DB)",
        )
    same = (
        source == target
        if not isinstance(source, Path) or not isinstance(target, Path)
        else source.resolve() == target.resolve()
    )
    if same:
        raise BadInput(
            f"cannot push {source} into itself",
            "the source and the target are the same store",
            "give the shared store's URL, and the host's file with --db",
        )
    say = progress or (lambda table, done, total: None)
    with connect(source) as src:
        origin = store_id(src)
        with connect(target) as dst:
            summary = PushSummary(str(source), str(target), origin, host, store_id(dst))
            _results(src, dst, summary, say)
            _experiments(src, dst, summary, say)
            _sweeps(src, dst, summary, say)
    summary.elapsed_s = time.monotonic() - started
    return summary


def _origin_of(row: Any, origin: str, host: str) -> tuple[str, str]:
    """A source row's origin and host: its own when it was pushed there, else the source's."""
    return (row["origin"] or origin, row["origin_host"] or host)


def _results(src: Database, dst: Database, summary: PushSummary, say: PushProgress) -> None:
    count = summary.tables["results"]
    total = int(src.execute("SELECT COUNT(*) FROM results WHERE made_by = 'probe'").fetchone()[0])
    say("results", 0, total)
    known: dict[str, set[int]] = {}
    last = 0
    while True:
        rows = src.execute(
            "SELECT * FROM results WHERE id > ? AND made_by = 'probe' ORDER BY id LIMIT ?",
            (last, BATCH),
        ).fetchall()
        if not rows:
            break
        last = int(rows[-1]["id"])
        cols = _columns(rows[0], drop=("id",))
        out = []
        for row in rows:
            origin, host = _origin_of(row, summary.origin, summary.host)
            local = int(row["origin_id"] if row["origin"] else row["id"])
            if origin not in known:
                known[origin] = {
                    int(r[0])
                    for r in dst.execute(
                        "SELECT origin_id FROM results WHERE origin = ?", (origin,)
                    ).fetchall()
                }
            count.read += 1
            if local in known[origin] or origin == summary.target_id:
                count.present += 1
                continue
            known[origin].add(local)
            count.new += 1
            out.append([row[c] for c in cols] + [origin, local, host])
        names = [*cols, *ORIGIN]
        dst.executemany(
            f"INSERT INTO results ({', '.join(names)}) VALUES "
            f"({', '.join('?' for _ in names)}) "
            "ON CONFLICT (origin, origin_id) DO NOTHING",
            out,
        )
        say("results", count.read, total)


def _keyed(
    src: Database, dst: Database, summary: PushSummary, table: str, key: str, say: PushProgress
) -> list[str]:
    """Experiments or sweep runs: upsert the source's rows whose key is free in the target
    or holds a row of the same origin; the keys written."""
    count = summary.tables[table]
    rows = src.execute(f"SELECT * FROM {table} ORDER BY {key}").fetchall()
    say(table, 0, len(rows))
    theirs = {r[0]: r[1] for r in dst.execute(f"SELECT {key}, origin FROM {table}").fetchall()}
    written: list[str] = []
    out = []
    names: list[str] = []
    for row in rows:
        origin, host = _origin_of(row, summary.origin, summary.host)
        count.read += 1
        k = row[key]
        if origin == summary.target_id:  # pushed from the target once: its own row
            count.present += 1
            summary.own.append((table, str(k)))
            continue
        if k in theirs and theirs[k] != origin:
            count.conflicts += 1
            summary.conflicts.append({"table": table, "key": str(k)})
            continue
        if k in theirs:
            count.present += 1
        else:
            count.new += 1
        names = [*_columns(row), "origin", "origin_host"]
        out.append([row[c] for c in _columns(row)] + [origin, host])
        written.append(k)
    if out:
        dst.executemany(upsert_sql(table, names, (key,)), out)
    say(table, count.read, len(rows))
    return written


def _experiments(src: Database, dst: Database, summary: PushSummary, say: PushProgress) -> None:
    _keyed(src, dst, summary, "experiments", "id", say)


def _sweeps(src: Database, dst: Database, summary: PushSummary, say: PushProgress) -> None:
    runs = _keyed(src, dst, summary, "sweep_runs", "name", say)
    count = summary.tables["sweep_points"]
    skipped = {c["key"] for c in summary.conflicts if c["table"] == "sweep_runs"}
    total = int(src.execute("SELECT COUNT(*) FROM sweep_points").fetchone()[0])
    say("sweep_points", 0, total)
    for run in runs:
        theirs = {
            r[0]: r[1]
            for r in dst.execute(
                "SELECT point_id, result_id FROM sweep_points WHERE run = ?", (run,)
            ).fetchall()
        }
        rows = src.execute(
            "SELECT * FROM sweep_points WHERE run = ? ORDER BY seq", (run,)
        ).fetchall()
        if not rows:
            continue
        ids = _measurements(src, dst, summary, [int(row["result_id"]) for row in rows])
        cols = _columns(rows[0])
        for row in rows:
            count.read += 1
            if row["point_id"] in theirs:
                count.present += 1
            else:
                count.new += 1
        dst.executemany(
            upsert_sql("sweep_points", cols, ("run", "point_id")),
            [[ids[int(row[c])] if c == "result_id" else row[c] for c in cols] for row in rows],
        )
        for row in rows:  # a point rewritten with another measurement: the old one goes
            before = theirs.get(row["point_id"])
            if before is not None and int(before) != ids[int(row["result_id"])]:
                dst.execute(
                    "DELETE FROM results WHERE id = ? AND made_by = 'sweep' AND NOT "
                    "EXISTS (SELECT 1 FROM sweep_points WHERE result_id = ?)",
                    (before, before),
                )
        say("sweep_points", count.read, total)
    own = {key for table, key in summary.own if table == "sweep_runs"}
    for run in sorted(skipped | own):
        n = int(
            src.execute("SELECT COUNT(*) FROM sweep_points WHERE run = ?", (run,)).fetchone()[0]
        )
        count.read += n
        if run in own:
            count.present += n
        else:
            count.conflicts += n


def _measurements(
    src: Database, dst: Database, summary: PushSummary, ids: Sequence[int]
) -> dict[int, int]:
    """The source's measurements ``ids`` (sweep points') in the target, inserted once per
    origin key as the probes' are: the source's id -> the target's."""
    out: dict[int, int] = {}
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        rows = src.execute(
            f"SELECT * FROM results WHERE id IN ({', '.join('?' for _ in chunk)})", chunk
        ).fetchall()
        cols = _columns(rows[0], drop=("id",)) if rows else []
        names = [*cols, *ORIGIN]
        wanted: dict[str, dict[int, int]] = {}  # origin -> {origin_id: source id}
        new = []
        for row in rows:
            origin, host = _origin_of(row, summary.origin, summary.host)
            local = int(row["origin_id"] if row["origin"] else row["id"])
            if (
                origin == summary.target_id
                and dst.execute("SELECT 1 FROM results WHERE id = ?", (local,)).fetchone()
                is not None
            ):
                out[int(row["id"])] = local  # the target's own measurement, pushed back
                continue
            wanted.setdefault(origin, {})[local] = int(row["id"])
            new.append([row[c] for c in cols] + [origin, local, host])
        dst.executemany(
            f"INSERT INTO results ({', '.join(names)}) VALUES "
            f"({', '.join('?' for _ in names)}) "
            "ON CONFLICT (origin, origin_id) DO NOTHING",
            new,
        )
        for origin, locals_ in wanted.items():
            keys = list(locals_)
            for there in dst.execute(
                "SELECT origin_id, id FROM results WHERE origin = ? AND origin_id IN "
                f"({', '.join('?' for _ in keys)})",
                (origin, *keys),
            ).fetchall():
                out[locals_[int(there[0])]] = int(there[1])
    missing = set(ids) - set(out)
    if missing:
        raise BadInput(
            f"cannot push the sweep points of {summary.source}",
            f"{len(missing)} of them have no measurement (result "
            f"{min(missing)} is not in the source)",
            "repair the source (each point needs its results row), or run the sweep again",
        )
    return out
