"""Probe results and experiments in one SQLite file.

Each result keeps its spec, summary (units in key names), the sampler's samples, the raw tool
output and the tuning that was live (values and their hash), so a figure can always be traced
back to the host state that produced it.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.measure.result import ProbeResult

_DDL = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL, host TEXT NOT NULL, netns TEXT, started REAL NOT NULL,
    duration_s REAL NOT NULL, ok INTEGER NOT NULL, error TEXT,
    tuning_id TEXT, tuning TEXT, spec TEXT NOT NULL, summary TEXT NOT NULL,
    samples TEXT NOT NULL, raw TEXT NOT NULL, experiment_id TEXT, label TEXT
);
CREATE TABLE IF NOT EXISTS experiments (
    id TEXT PRIMARY KEY, started REAL NOT NULL, doc TEXT NOT NULL
);
"""


class ResultStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _db(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=10)
            db.executescript(_DDL)
        except (OSError, sqlite3.Error) as exc:
            raise BadInput(f"cannot open the results store {self.path}", str(exc),
                           "give another file with --db or $DTNKIT_DB") from exc
        db.row_factory = sqlite3.Row
        return db

    def add(self, r: ProbeResult) -> int:
        with self._db() as db:
            cur = db.execute(
                "INSERT INTO results (kind, host, netns, started, duration_s, ok, error, "
                "tuning_id, tuning, spec, summary, samples, raw, experiment_id, label) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (r.kind, r.host, r.netns, r.started, r.duration_s, int(r.ok), r.error,
                 r.tuning_id, json.dumps(r.tuning), json.dumps(r.spec), json.dumps(r.summary),
                 json.dumps(r.samples), r.raw, r.experiment_id, r.label))
            r.id = int(cur.lastrowid or 0)
        return r.id

    @staticmethod
    def _result(row: sqlite3.Row) -> ProbeResult:
        return ProbeResult(
            kind=row["kind"], spec=json.loads(row["spec"]), summary=json.loads(row["summary"]),
            samples=json.loads(row["samples"]), raw=row["raw"], ok=bool(row["ok"]),
            error=row["error"], host=row["host"], netns=row["netns"], started=row["started"],
            duration_s=row["duration_s"], tuning=json.loads(row["tuning"] or "null"),
            id=row["id"], experiment_id=row["experiment_id"], label=row["label"] or "")

    def get(self, result_id: int) -> ProbeResult:
        with self._db() as db:
            row = db.execute("SELECT * FROM results WHERE id = ?", (result_id,)).fetchone()
        if row is None:
            raise BadInput(f"no result {result_id}", f"in {self.path}", "see `dtnkit results list`")
        return self._result(row)

    def results(self, *, kind: str | None = None, limit: int = 50,
                experiment_id: str | None = None) -> list[ProbeResult]:
        query, args = "SELECT * FROM results WHERE 1=1", []
        if kind:
            query += " AND kind = ?"
            args.append(kind)
        if experiment_id:
            query += " AND experiment_id = ?"
            args.append(experiment_id)
        query += " ORDER BY id DESC LIMIT ?"
        with self._db() as db:
            rows = db.execute(query, (*args, limit)).fetchall()
        return [self._result(r) for r in rows]

    def add_experiment(self, exp_id: str, doc: dict[str, Any]) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO experiments (id, started, doc) VALUES (?, ?, ?)",
                       (exp_id, doc.get("started", time.time()), json.dumps(doc)))

    def get_experiment(self, exp_id: str) -> dict[str, Any]:
        with self._db() as db:
            row = db.execute("SELECT doc FROM experiments WHERE id = ?", (exp_id,)).fetchone()
        if row is None:
            raise BadInput(f"no experiment {exp_id!r}", f"in {self.path}",
                           "see `dtnkit results list --experiments`")
        doc: dict[str, Any] = json.loads(row["doc"])
        return doc

    def experiments(self) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT doc FROM experiments ORDER BY started DESC").fetchall()
        return [json.loads(r["doc"]) for r in rows]


CSV_FIELDS = ("id", "kind", "host", "netns", "started", "duration_s", "ok", "tuning_id",
              "experiment_id", "label")


def export(results: Sequence[ProbeResult], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([r.as_dict() for r in results], indent=2)
    keys = sorted({k for r in results for k in r.summary})
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*CSV_FIELDS, *keys])
    for r in results:
        doc = r.as_dict(with_raw=False)
        writer.writerow([doc[f] for f in CSV_FIELDS] + [r.summary.get(k) for k in keys])
    return out.getvalue()
