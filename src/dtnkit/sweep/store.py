"""A sweep's runs and points in the results database (the SQLite file or PostgreSQL database
of :class:`dtnkit.measure.store.ResultStore`, ``$DTNKIT_DB``).

Tables (plain SQL; every JSON value is a TEXT column; declared in
:mod:`dtnkit.db.migrations` with the rest of the schema):

- ``sweep_schema``: one row, the schema version of these tables (:data:`SCHEMA_VERSION`);
- ``sweep_runs``: one row per run: its name, the grid's TOML text, the environment and
  versions, its status (``running``, ``done``, ``interrupted``) and the number of points;
- ``sweep_points``: one row per (run, point ID): the point's axis values (the grid's
  coordinates), ``ok`` or ``failed``, its order in the run, and ``result_id``: its
  measurement, a row of ``results`` like a probe's (``made_by`` ``sweep``), whose columns
  hold what :class:`PointResult` holds (:func:`measurement_row`).

A point is written in one transaction when it is finished (ok or failed), never half; a point
stored again (a failed point rerun) replaces the earlier point and its measurement.

The API (stable; :mod:`dtnkit.sweep.runner` writes, ``sweep analyze`` and ``sweep report`` read):

- :class:`SweepStore` (``SweepStore(db_path)``): :meth:`~SweepStore.create_run`,
  :meth:`~SweepStore.store_point`, :meth:`~SweepStore.set_status`,
  :meth:`~SweepStore.run_info`, :meth:`~SweepStore.runs`,
  :meth:`~SweepStore.done_point_ids`, :meth:`~SweepStore.points`,
  :meth:`~SweepStore.point`, :meth:`~SweepStore.records`;
- module functions on a database path: :func:`list_runs`, :func:`run_info`,
  :func:`load_records` (-> ``list[analyze.PointRecord]``), :func:`load_points` (every stored
  point in full, run order) and :func:`point_series` (one point's time series);
- :func:`check_run_name`: the rule for run names (``^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$``, no
  ``..``).

Unknown runs and points raise :class:`~dtnkit.errors.BadInput`; a database that cannot be
opened raises it too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dtnkit.db.backend import Database, clean, connect, upsert_sql
from dtnkit.db.location import DbUrl, Location, parse_location
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.measure import registry
from dtnkit.measure.pathsampler import sample_starts
from dtnkit.measure.tool import MAX_RAW_BYTES, Transfer
from dtnkit.sweep.analyze import PointRecord
from dtnkit.sweep.grid import Point, registry_tool

#: the version of the sweep tables this code writes and reads (the ``sweep_schema`` row; the
#: database as a whole has its own, :data:`dtnkit.db.migrations.LATEST`)
SCHEMA_VERSION = 2
#: a point's columns, in the order :meth:`SweepStore.store_point` writes them
POINT_COLUMNS = ("run", "point_id", "seq", "status", "point", "result_id")
#: the ``results`` columns of a point's measurement, in the order :func:`measurement_row`
#: gives them
RESULT_COLUMNS = (
    "made_by",
    "kind",
    "host",
    "netns",
    "started",
    "duration_s",
    "ok",
    "error",
    "error_fields",
    "tuning_id",
    "tuning",
    "spec",
    "summary",
    "samples",
    "raw",
    "experiment_id",
    "label",
    "origin_host",
)
#: what a point's measurement keeps in its ``summary``: its figures, and the names of its
#: series (each a key of its samples)
SUMMARY_KEYS = (
    "throughput_bps",
    "tool_s",
    "retransmits",
    "retransmits_note",
    "ctxt",
    "cpu_seconds",
    "softirq",
    "nic_drops",
    "transfers",
    "emulator",
    "emulator_bound",
    "emulator_why",
    "extra",
    "series",
)
#: the keys of a sample that are the sample itself (the rest are the point's series)
SAMPLE_KEYS = ("t_s", "throughput_bps")
RUN_STATUSES = ("running", "done", "interrupted")
POINT_STATUSES = ("ok", "failed")
RUN_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_run_name(name: str) -> str:
    """A run name: letters, digits, ``.``, ``_`` and ``-``, at most 64, no ``..`` (it may
    become a directory name in a report)."""
    if not isinstance(name, str) or not RUN_NAME_RE.fullmatch(name) or ".." in name:
        shown = repr(name) if len(repr(name)) <= 40 else repr(name)[:37] + "..."
        raise BadInput(
            f"bad run name {shown}",
            "a run name is 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit, without '..' or '/'",
            "e.g. --name metro-1",
        )
    return name


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """One run: its grid (TOML text), environment and progress."""

    name: str
    created: float  # epoch seconds
    updated: float
    status: str  # one of RUN_STATUSES
    points_total: int  # the grid's points
    points_ok: int
    points_failed: int
    grid_toml: str
    environment: dict[str, Any]  # host, kernel, versions (dtnkit, iperf3, xrootd, ...), lab

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PointResult:
    """Everything stored of one point (what the runner measured).

    Times are seconds from the point's start (the tool's start).  ``samples`` are
    ``(t_s, bits per second)`` at the sampling interval; ``series`` holds further per-sample
    series by name (e.g. ``"cpu_cores.0"`` for origin 0's cores used, ``"softirq_pct.dst"``),
    each aligned to the samples' times.  ``cpu_seconds`` is per origin (index order).
    ``softirq`` and ``nic_drops`` are per lab host name.  ``retransmits`` are TCP segments
    retransmitted during the point in the sending namespaces, less DSACK-detected spurious
    ones where the kernel counts them (``retransmits_note`` says which).  ``tuning`` maps
    each end (``src``, ``dst``) to the tuning live during the point.
    """

    point: Point
    status: str  # "ok" or "failed"
    error: str = ""  # the error as one line (what: why. Next: next step)
    #: the error's own fields: ``what``, ``why``, ``next``, ``exit_status``
    #: (:meth:`dtnkit.errors.DtnkitError.as_dict`); None: no error, or a point stored before
    #: they were kept (its ``error`` alone says it)
    error_fields: Mapping[str, Any] | None = None
    started: float = 0.0  # epoch seconds
    elapsed_s: float = 0.0  # the point's wall time, servers and path change included
    tool_s: float | None = None  # the tool's own measured time
    samples: tuple[tuple[float, float], ...] = ()
    series: Mapping[str, Sequence[float | None]] = dataclasses.field(default_factory=dict)
    cpu_seconds: tuple[float, ...] = ()
    softirq: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    retransmits: int | None = None
    retransmits_note: str = ""
    ctxt: int | None = None  # context switches (the whole machine) during the point
    nic_drops: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    transfers: tuple[Transfer, ...] = ()
    raw: str = ""
    tuning: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    emulator: Mapping[str, Any] | None = None  # fidelity.StageWindow.as_json()
    emulator_bound: bool = False
    emulator_why: str = ""
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def measured_samples(self) -> tuple[tuple[float, float], ...]:
        """The samples of the transfer itself: those that began at or after the tool's set-up
        ended (``extra["measure_from_s"]``, when the tool reported it) and before the tool
        stopped its transfers (``extra["measure_until_s"]``: dtnkit-cp's cut at the
        duration), else all of them."""
        start, until = self.extra.get("measure_from_s"), self.extra.get("measure_until_s")
        if not isinstance(start, int | float) or isinstance(start, bool):
            start = -math.inf
        if not isinstance(until, int | float) or isinstance(until, bool):
            until = math.inf
        if start == -math.inf and until == math.inf:
            return self.samples
        kept = tuple(
            s
            for prev, s in zip(sample_starts(t for t, _ in self.samples), self.samples, strict=True)
            if start <= prev < until
        )
        return kept or self.samples

    @property
    def throughput_bps(self) -> float | None:
        good = [bps for _, bps in self.measured_samples if math.isfinite(bps) and bps >= 0]
        return sum(good) / len(good) if good else None

    def record(self) -> PointRecord:
        return PointRecord(
            point=self.point,
            samples_bps=tuple(bps for _, bps in self.measured_samples),
            elapsed_s=self.tool_s if self.tool_s is not None else self.elapsed_s,
            cpu_seconds=self.cpu_seconds,
            completion_s=tuple(t.end_s for t in self.transfers if t.end_s is not None),
            emulator_bound=self.emulator_bound,
            emulator_why=self.emulator_why,
            failed=self.error if self.status != "ok" else "",
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, the shape ``--format json`` shows."""
        return {
            "id": self.point.id,
            "point": self.point.as_dict(),
            "status": self.status,
            "error": self.error,
            "error_fields": dict(self.error_fields) if self.error_fields is not None else None,
            "started": self.started,
            "elapsed_s": self.elapsed_s,
            "tool_s": self.tool_s,
            "throughput_bps": self.throughput_bps,
            "samples": [list(s) for s in self.samples],
            "series": {k: list(v) for k, v in self.series.items()},
            "cpu_seconds": list(self.cpu_seconds),
            "softirq": {k: dict(v) for k, v in self.softirq.items()},
            "retransmits": self.retransmits,
            "retransmits_note": self.retransmits_note,
            "ctxt": self.ctxt,
            "nic_drops": {k: dict(v) for k, v in self.nic_drops.items()},
            "transfers": [dataclasses.asdict(t) for t in self.transfers],
            "raw": self.raw,
            "tuning": dict(self.tuning),
            "emulator": dict(self.emulator) if self.emulator is not None else None,
            "emulator_bound": self.emulator_bound,
            "emulator_why": self.emulator_why,
            "extra": dict(self.extra),
        }


def error_of(exc: DtnkitError) -> dict[str, Any]:
    """A point's ``error`` and ``error_fields`` from the error that failed it."""
    return {"error": exc.render().removeprefix("dtnkit: error: "), "error_fields": exc.as_dict()}


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False, default=str)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def point_from_dict(doc: Mapping[str, Any]) -> Point:
    """A :class:`Point` from its stored dict (``Point.as_dict()``; the ``id`` is derived)."""
    names = {f.name for f in dataclasses.fields(Point)}
    return Point(**{k: v for k, v in doc.items() if k in names})


def kind_of(point: Point) -> str:
    """What a point measures: the kind of its tool in measure's registry (net, e2e, tpc)."""
    return registry.named(registry_tool(point.tool)).kind


def samples_doc(
    samples: Sequence[tuple[float, float | None]], series: Mapping[str, Sequence[float | None]]
) -> list[dict[str, Any]]:
    """A point's samples and series as one list of samples, as a probe's: ``{"t_s",
    "throughput_bps", NAME: value, ...}``, each series by index; a series longer than the
    samples goes on in entries without ``t_s``."""
    n = max([len(samples), *(len(v) for v in series.values())], default=0)
    docs: list[dict[str, Any]] = [{} for _ in range(n)]
    for doc, (t_s, bps) in zip(docs, samples, strict=False):
        doc["t_s"], doc["throughput_bps"] = t_s, bps
    for name, values in series.items():
        for doc, value in zip(docs, values, strict=False):
            doc[name] = value
    return docs


def tuning_id(tuning: Mapping[str, Any]) -> str | None:
    """The hash a results row names its live tuning by (as a probe's ``tuning_id``)."""
    if not tuning:
        return None
    return hashlib.sha256(json.dumps(tuning, sort_keys=True).encode()).hexdigest()[:16]


def measurement_row(result: PointResult, host: str) -> list[Any]:
    """The ``results`` row (:data:`RESULT_COLUMNS`) of a point's measurement: kind (its
    tool's), ``host`` (the run's), when and how long (the point's wall time), ok and the
    error, the tuning, the spec (the point), the figures (``summary``: the throughput in
    bit/s, :data:`SUMMARY_KEYS`), the samples with the series, the tool's raw output."""
    raw = result.raw
    if len(raw.encode("utf-8", "replace")) > MAX_RAW_BYTES:
        raw = raw.encode("utf-8", "replace")[-MAX_RAW_BYTES:].decode("utf-8", "replace")
    samples = [(round(t, 6), _finite(bps)) for t, bps in result.samples]
    series = {k: [_finite(v) for v in vs] for k, vs in result.series.items()}
    summary = {
        "throughput_bps": _finite(result.throughput_bps),
        "tool_s": _finite(result.tool_s),
        # text that was a column of its own is cleaned as one (NUL, lone surrogates)
        "retransmits": result.retransmits,
        "retransmits_note": clean(result.retransmits_note),
        "ctxt": result.ctxt,
        "cpu_seconds": [_finite(c) for c in result.cpu_seconds],
        "softirq": {k: dict(v) for k, v in result.softirq.items()},
        "nic_drops": {k: dict(v) for k, v in result.nic_drops.items()},
        "transfers": [dataclasses.asdict(t) for t in result.transfers],
        "emulator": dict(result.emulator) if result.emulator is not None else None,
        "emulator_bound": result.emulator_bound,
        "emulator_why": clean(result.emulator_why),
        "extra": dict(result.extra),
        "series": sorted(series),
    }
    return [
        "sweep",
        kind_of(result.point),
        host,
        None,
        result.started,
        result.elapsed_s,
        1 if result.status == "ok" else 0,
        result.error or None,
        _dump(dict(result.error_fields)) if result.error_fields is not None else None,
        tuning_id(result.tuning),
        _dump(dict(result.tuning)),
        _dump(result.point.as_dict()),
        _dump(summary),
        _dump(samples_doc(samples, series)),
        raw,
        None,
        None,
        None,
    ]


def _or_zero(value: Any) -> float:
    """A stored time; 0.0 for none (a point without its measurement).  -0.0 stays -0.0."""
    return float(value) if value is not None else 0.0


def _nan(value: Any) -> float:
    return float(value) if value is not None else math.nan


def point_result(row: Any) -> PointResult:
    """A stored point (a ``sweep_points`` row joined with its measurement's columns)."""
    summary = json.loads(row["summary"]) if row["summary"] is not None else {}
    docs = json.loads(row["samples"]) if row["samples"] is not None else []
    series: dict[str, list[float | None]] = {name: [] for name in summary.get("series", ())}
    for doc in docs:
        for key, value in doc.items():
            if key not in SAMPLE_KEYS:
                series.setdefault(key, []).append(value)
    emulator = summary.get("emulator")
    error_fields = row["error_fields"]
    return PointResult(
        point=point_from_dict(json.loads(row["point"])),
        status=row["status"],
        error=row["error"] or "",
        started=_or_zero(row["started"]),
        elapsed_s=_or_zero(row["duration_s"]),
        tool_s=summary.get("tool_s"),
        samples=tuple((float(d["t_s"]), _nan(d.get("throughput_bps"))) for d in docs if "t_s" in d),
        series={k: series[k] for k in sorted(series)},
        cpu_seconds=tuple(_nan(c) for c in summary.get("cpu_seconds", ())),
        softirq=summary.get("softirq", {}),
        retransmits=summary.get("retransmits"),
        retransmits_note=summary.get("retransmits_note", ""),
        ctxt=summary.get("ctxt"),
        nic_drops=summary.get("nic_drops", {}),
        transfers=tuple(Transfer(**t) for t in summary.get("transfers", ())),
        raw=row["raw"] or "",
        tuning=json.loads(row["tuning"] or "{}"),
        emulator=emulator,
        emulator_bound=bool(summary.get("emulator_bound", False)),
        emulator_why=summary.get("emulator_why", ""),
        extra=summary.get("extra", {}),
        error_fields=json.loads(error_fields) if error_fields else None,
    )


#: a run's points with their measurements, in run order
POINTS_SQL = (
    "SELECT p.run, p.point_id, p.seq, p.status, p.point, p.result_id, r.started, "
    "r.duration_s, r.error, r.error_fields, r.tuning, r.summary, r.samples, r.raw "
    "FROM sweep_points p LEFT JOIN results r ON r.id = p.result_id "
    "WHERE p.run = ?"
)


class SweepStore:
    """The sweep tables of one results database."""

    def __init__(self, path: Path | str | DbUrl) -> None:
        self.location: Location = parse_location(path)

    @property
    def path(self) -> Location:
        return self.location

    @contextmanager
    def _db(self) -> Iterator[Database]:
        with connect(self.location) as db:
            yield db

    # ---- runs ----
    def create_run(
        self,
        name: str,
        grid_toml: str,
        environment: Mapping[str, Any],
        points_total: int,
        *,
        reuse: bool = False,
    ) -> RunInfo:
        """A new run ``name``; with ``reuse`` an existing run of the same grid text is
        continued (its status set back to ``running``).  A new run whose name exists, or a
        reused run whose grid differs, raises BadInput."""
        check_run_name(name)
        now = time.time()
        with self._db() as db:
            row = db.execute("SELECT grid FROM sweep_runs WHERE name = ?", (name,)).fetchone()
            if row is not None:
                if not reuse:
                    raise BadInput(
                        f"run {name!r} exists",
                        f"in {self.path}",
                        "add --resume to continue it, or give another --name",
                    )
                if row["grid"] != grid_toml:
                    raise BadInput(
                        f"run {name!r} was started with another grid",
                        "a resumed run must sweep the same grid",
                        "give the same grid, or another --name",
                    )
                db.execute(
                    "UPDATE sweep_runs SET status = 'running', updated = ?, "
                    "environment = ?, points_total = ? WHERE name = ?",
                    (now, _dump(dict(environment)), points_total, name),
                )
            else:
                db.execute(
                    "INSERT INTO sweep_runs (name, created, updated, status, "
                    "points_total, grid, environment) VALUES (?, ?, ?, 'running', ?, "
                    "?, ?)",
                    (name, now, now, points_total, grid_toml, _dump(dict(environment))),
                )
        return self.run_info(name)

    def set_status(self, name: str, status: str) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r}")
        with self._db() as db:
            db.execute(
                "UPDATE sweep_runs SET status = ?, updated = ? WHERE name = ?",
                (status, time.time(), name),
            )

    def _info(self, db: Database, row: Any) -> RunInfo:
        counts = {
            r[0]: r[1]
            for r in db.execute(
                "SELECT status, COUNT(*) FROM sweep_points WHERE run = ? GROUP BY status",
                (row["name"],),
            ).fetchall()
        }
        return RunInfo(
            name=row["name"],
            created=row["created"],
            updated=row["updated"],
            status=row["status"],
            points_total=row["points_total"],
            points_ok=int(counts.get("ok", 0)),
            points_failed=int(counts.get("failed", 0)),
            grid_toml=row["grid"],
            environment=json.loads(row["environment"]),
        )

    def _missing(self) -> bool:
        """No database file yet: reading finds nothing (and creates no file).  A server is
        never missing (an unreachable one is an error)."""
        return isinstance(self.location, Path) and not self.location.exists()

    def run_info(self, name: str) -> RunInfo:
        """The run ``name``; BadInput when there is none."""
        if self._missing():
            shown = name if len(name) <= 40 else name[:37] + "..."
            raise BadInput(
                f"no sweep run {shown!r}",
                f"{self.path} does not exist",
                "see `dtnkit sweep list`, or give --db",
            )
        with self._db() as db:
            row = db.execute("SELECT * FROM sweep_runs WHERE name = ?", (name,)).fetchone()
            if row is None:
                shown = name if len(name) <= 40 else name[:37] + "..."
                raise BadInput(
                    f"no sweep run {shown!r}", f"in {self.path}", "see `dtnkit sweep list`"
                )
            return self._info(db, row)

    def runs(self) -> list[RunInfo]:
        """Every run, newest first."""
        if self._missing():
            return []
        with self._db() as db:
            rows = db.execute("SELECT * FROM sweep_runs ORDER BY created DESC, name").fetchall()
            return [self._info(db, r) for r in rows]

    # ---- points ----
    def store_point(self, name: str, result: PointResult) -> None:
        """Store one finished point (one transaction): its measurement as a ``results`` row,
        the point with its coordinates and that row's id; replaces an earlier point of the
        same ID and its measurement."""
        if result.status not in POINT_STATUSES:
            raise ValueError(f"point status {result.status!r}")
        with self._db() as db:
            run = db.execute(
                "SELECT environment FROM sweep_runs WHERE name = ?", (name,)
            ).fetchone()
            if run is None:
                raise BadInput(f"no sweep run {name!r}", f"in {self.path}", "create the run first")
            environment = json.loads(run["environment"])
            host = environment.get("host") if isinstance(environment, dict) else None
            row = measurement_row(result, host if isinstance(host, str) else "")
            before = db.execute(
                "SELECT result_id FROM sweep_points WHERE run = ? AND point_id = ?",
                (name, result.point.id),
            ).fetchone()
            seq_row = db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM sweep_points WHERE run = ?", (name,)
            ).fetchone()
            result_id = db.insert(
                f"INSERT INTO results ({', '.join(RESULT_COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in RESULT_COLUMNS)})",
                row,
            )
            db.execute(
                upsert_sql("sweep_points", POINT_COLUMNS, ("run", "point_id")),
                (
                    name,
                    result.point.id,
                    int(seq_row[0]),
                    result.status,
                    _dump(result.point.as_dict()),
                    result_id,
                ),
            )
            if before is not None:
                forget_measurement(db, before[0])
            db.execute("UPDATE sweep_runs SET updated = ? WHERE name = ?", (time.time(), name))

    def done_point_ids(self, name: str) -> set[str]:
        """The IDs of the run's points stored ``ok`` (what ``--resume`` skips)."""
        with self._db() as db:
            rows = db.execute(
                "SELECT point_id FROM sweep_points WHERE run = ? AND status = 'ok'", (name,)
            ).fetchall()
        return {r[0] for r in rows}

    def points(self, name: str) -> list[PointResult]:
        """Every stored point of the run (ok and failed), in the order they were run.
        BadInput when the run does not exist."""
        self.run_info(name)
        with self._db() as db:
            rows = db.execute(POINTS_SQL + " ORDER BY p.seq", (name,)).fetchall()
        return [point_result(r) for r in rows]

    def point(self, name: str, point_id: str) -> PointResult:
        """One stored point by ID (a unique prefix of 4 or more characters works too)."""
        self.run_info(name)
        with self._db() as db:
            rows = db.execute(
                POINTS_SQL + " AND p.point_id LIKE ? ESCAPE '\\'", (name, _like_prefix(point_id))
            ).fetchall()
        exact = [r for r in rows if r["point_id"] == point_id]
        if exact:
            return point_result(exact[0])
        if len(rows) == 1 and len(point_id) >= 4:
            return point_result(rows[0])
        shown = point_id if len(point_id) <= 20 else point_id[:17] + "..."
        why = f"{len(rows)} points start with it" if rows else f"not in run {name!r}"
        raise BadInput(f"no point {shown!r}", why, f"see `dtnkit sweep analyze {name}`")

    def records(self, name: str) -> list[PointRecord]:
        """The run's points as the analysis reads them."""
        return [p.record() for p in self.points(name)]


def forget_measurement(db: Database, result_id: int | None) -> None:
    """Delete a point's measurement that no point refers to any more (it was replaced)."""
    if result_id is not None:
        db.execute(
            "DELETE FROM results WHERE id = ? AND made_by = 'sweep' AND NOT EXISTS "
            "(SELECT 1 FROM sweep_points WHERE result_id = ?)",
            (result_id, result_id),
        )


def _like_prefix(text: str) -> str:
    return re.sub(r"([\\%_])", r"\\\1", text) + "%"


# ---------------------------------------------------------------- on a database path


def list_runs(db_path: Path | str | DbUrl) -> list[RunInfo]:
    return SweepStore(db_path).runs()


def run_info(db_path: Path | str | DbUrl, run: str) -> RunInfo:
    return SweepStore(db_path).run_info(run)


def load_records(db_path: Path | str | DbUrl, run: str) -> list[PointRecord]:
    """The run's stored points (ok and failed; a failed one carries ``failed``) as
    :class:`~dtnkit.sweep.analyze.PointRecord`, in run order."""
    return SweepStore(db_path).records(run)


def load_points(db_path: Path | str | DbUrl, run: str) -> list[PointResult]:
    return SweepStore(db_path).points(run)


def point_series(
    db_path: Path | str | DbUrl, run: str, point_id: str
) -> dict[str, list[float | None]]:
    """One point's time series: ``t_s`` and ``throughput_bps`` (the samples) and every
    further series stored with it (``cpu_cores.N``, ``softirq_pct.HOST``, ...)."""
    p = SweepStore(db_path).point(run, point_id)
    out: dict[str, list[float | None]] = {
        "t_s": [t for t, _ in p.samples],
        "throughput_bps": [b if math.isfinite(b) else None for _, b in p.samples],
    }
    for key, values in p.series.items():
        out[key] = list(values)
    return out
