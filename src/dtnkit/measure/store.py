"""Measurements and experiments in the results database (an SQLite file, or PostgreSQL).

Each measurement is one row of ``results``, whatever made it (``made_by``: ``probe`` for
probe, diagnose and experiment, ``sweep`` for a sweep's point, which ``sweep_points`` refers
to by ``result_id``).  It keeps its kind, spec (with the tool), summary (units in key names),
the sampler's samples, the raw tool output and the tuning that was live (values and their
hash), so a figure can always be traced back to the host state that produced it.  The
probes' results are what this store lists unless asked for the sweeps' too.
"""

from __future__ import annotations

import calendar
import csv
import io
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtnkit.db.backend import Database, connect
from dtnkit.db.location import DbUrl, Location, parse_location
from dtnkit.errors import BadInput
from dtnkit.measure.probes import disk
from dtnkit.measure.result import ProbeResult, iso_utc

#: the columns of a result, in the order :meth:`ResultStore.add` writes them
COLUMNS = (
    "kind",
    "host",
    "netns",
    "started",
    "duration_s",
    "ok",
    "error",
    "tuning_id",
    "tuning",
    "spec",
    "summary",
    "samples",
    "raw",
    "experiment_id",
    "label",
)


#: a measurement with the sweep point it is, if any
WITH_POINT = (
    "SELECT r.*, p.run AS sweep_run, p.point_id AS sweep_point FROM results r "
    "LEFT JOIN sweep_points p ON p.result_id = r.id"
)


class ResultStore:
    """The results and experiments of one results database: an SQLite file or a
    ``postgresql://`` URL (:mod:`dtnkit.db`)."""

    def __init__(self, path: Path | str | DbUrl) -> None:
        self.location: Location = parse_location(path)

    @property
    def path(self) -> Location:
        return self.location

    def _db(self) -> Database:
        return connect(self.location)

    def add(self, r: ProbeResult) -> int:
        with self._db() as db:
            r.id = db.insert(
                f"INSERT INTO results ({', '.join(COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in COLUMNS)})",
                (
                    r.kind,
                    r.host,
                    r.netns,
                    r.started,
                    r.duration_s,
                    int(r.ok),
                    r.error,
                    r.tuning_id,
                    json.dumps(r.tuning),
                    json.dumps(r.spec),
                    json.dumps(r.summary),
                    json.dumps(r.samples),
                    r.raw,
                    r.experiment_id,
                    r.label,
                ),
            )
        return r.id

    @staticmethod
    def _result(row: Any) -> ProbeResult:
        summary = json.loads(row["summary"])
        if row["kind"] == disk.KIND and isinstance(summary, dict):
            summary = disk.upgrade_summary(summary)  # rates once stored in bytes/s
        keys = row.keys()
        sweep = (
            {"run": row["sweep_run"], "point_id": row["sweep_point"]}
            if "sweep_run" in keys and row["sweep_run"] is not None
            else None
        )
        fields = row["error_fields"] if "error_fields" in keys else None
        return ProbeResult(
            kind=row["kind"],
            spec=json.loads(row["spec"]),
            summary=summary,
            samples=json.loads(row["samples"]),
            raw=row["raw"],
            ok=bool(row["ok"]),
            error=row["error"],
            host=row["host"],
            netns=row["netns"],
            started=row["started"],
            duration_s=row["duration_s"],
            tuning=json.loads(row["tuning"] or "null"),
            id=row["id"],
            experiment_id=row["experiment_id"],
            label=row["label"] or "",
            origin_host=row["origin_host"],
            sweep=sweep,
            error_fields=json.loads(fields) if fields else None,
        )

    def get(self, result_id: int) -> ProbeResult:
        """One measurement by id, a probe's or a sweep point's."""
        with self._db() as db:
            row = db.execute(f"{WITH_POINT} WHERE r.id = ?", (result_id,)).fetchone()
        if row is None:
            raise BadInput(
                f"no result {result_id}", f"in {self.location}", "see `dtnkit results list`"
            )
        return self._result(row)

    def results(
        self,
        *,
        kind: str | None = None,
        limit: int = 50,
        experiment_id: str | None = None,
        sweeps: bool = False,
    ) -> list[ProbeResult]:
        """The newest measurements, the probes' (``sweeps``: the sweep points' too)."""
        query = (
            f"{WITH_POINT} WHERE 1=1"
            if sweeps
            else "SELECT * FROM results r WHERE r.made_by = 'probe'"
        )
        args: list[Any] = []
        if kind:
            query += " AND r.kind = ?"
            args.append(kind)
        if experiment_id:
            query += " AND r.experiment_id = ?"
            args.append(experiment_id)
        query += " ORDER BY r.id DESC LIMIT ?"
        with self._db() as db:
            rows = db.execute(query, (*args, limit)).fetchall()
        return [self._result(r) for r in rows]

    def add_experiment(self, exp_id: str, doc: dict[str, Any]) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO experiments (id, started, doc) VALUES (?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET started = excluded.started, "
                "doc = excluded.doc",
                (exp_id, _started_epoch(doc), json.dumps(with_iso_times(doc))),
            )

    def get_experiment(self, exp_id: str) -> dict[str, Any]:
        with self._db() as db:
            row = db.execute("SELECT doc FROM experiments WHERE id = ?", (exp_id,)).fetchone()
        if row is None:
            raise BadInput(
                f"no experiment {exp_id!r}",
                f"in {self.location}",
                "see `dtnkit results list --experiments`",
            )
        doc: dict[str, Any] = with_iso_times(json.loads(row["doc"]))
        return doc

    def experiments(self) -> list[dict[str, Any]]:
        with self._db() as db:
            rows = db.execute("SELECT doc FROM experiments ORDER BY started DESC").fetchall()
        return [with_iso_times(json.loads(r["doc"])) for r in rows]


#: the moments of an experiment's document
TIMES = ("started", "finished")


def with_iso_times(doc: Any) -> Any:
    """An experiment's document with its moments in ISO 8601 UTC and their epoch seconds
    beside them (``started`` and ``started_epoch``), as dtnkit writes them now; a document
    stored with epoch seconds (before) reads the same way."""
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    for key in TIMES:
        value = out.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{key}_epoch"] = value
            out[key] = iso_utc(value)
    return out


def _started_epoch(doc: dict[str, Any]) -> float:
    """The epoch seconds an experiment started (its row's order), from either form."""
    for value in (doc.get("started_epoch"), doc.get("started")):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
            except ValueError:
                pass
    return time.time()


CSV_FIELDS = (
    "id",
    "kind",
    "host",
    "netns",
    "started",
    "started_epoch",
    "duration_s",
    "ok",
    "tuning_id",
    "experiment_id",
    "label",
)


def export(results: Sequence[ProbeResult], fmt: str) -> str:
    """The results as JSON (each full record) or CSV: one row per result, the record's
    :data:`CSV_FIELDS`, then every summary key (units in its name, rates in bit/s); a
    summary key that is also a record field (a net probe's ``duration_s``, iperf3's own
    measured time) is the column ``summary.KEY``, so no column name appears twice."""
    if fmt == "json":
        return json.dumps([r.as_dict() for r in results], indent=2)
    keys = sorted({k for r in results for k in r.summary})
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*CSV_FIELDS, *(f"summary.{k}" if k in CSV_FIELDS else k for k in keys)])
    for r in results:
        doc = r.as_dict(with_raw=False)
        writer.writerow([doc[f] for f in CSV_FIELDS] + [r.summary.get(k) for k in keys])
    return out.getvalue()
