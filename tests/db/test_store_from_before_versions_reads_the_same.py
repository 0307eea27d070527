"""The store dtnkit wrote before schema versions (tests/db/data/store_before_schema_versions.sqlite,
made by commit 490dc67's stores) goes through every migration in place, 1 to the latest, and
reads the same figures: each probe result as its columns held them, each sweep point in full
as that layout is read (its measurement now a results row of the point's)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from tests.db.test_store_from_schema_3_upgrades import read_3, text

from dtnkit.db import backend, migrations
from dtnkit.measure.store import ResultStore
from dtnkit.sweep import store

FIXTURE = Path(__file__).parent / "data" / "store_before_schema_versions.sqlite"


class Before(dict[str, Any]):
    """A row of the layout before versions: it had no error_fields column."""

    def __missing__(self, key: str) -> Any:
        if key == "error_fields":
            return None
        raise KeyError(key)


def test_the_store_from_before_versions_reads_the_same_after_every_migration(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, path)
    with sqlite3.connect(path) as raw:
        raw.row_factory = sqlite3.Row
        points = [
            read_3(Before(dict(r))).as_dict()
            for r in raw.execute(
                "SELECT * FROM sweep_points WHERE run = 'old-run' ORDER BY seq"
            ).fetchall()
        ]
        probes = [dict(r) for r in raw.execute("SELECT * FROM results ORDER BY id DESC").fetchall()]
    raw.close()
    assert len(points) == 2 and len(probes) == 2
    backend.forget_schema_cache()
    got = [p.as_dict() for p in store.load_points(path, "old-run")]
    assert text(got) == text(points)
    results = ResultStore(path).results()
    assert [
        (r.id, r.kind, r.host, r.started, r.duration_s, r.ok, r.raw, r.label) for r in results
    ] == [
        (
            p["id"],
            p["kind"],
            p["host"],
            p["started"],
            p["duration_s"],
            bool(p["ok"]),
            p["raw"],
            p["label"],
        )
        for p in probes
    ]
    assert [r.summary for r in results] == [json.loads(p["summary"]) for p in probes]
    assert [r.samples for r in results] == [json.loads(p["samples"]) for p in probes]
    with backend.connect(path) as db:
        versions = [
            r[0]
            for r in db.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        ]
        made_by = sorted(r[0] for r in db.execute("SELECT made_by FROM results").fetchall())
    assert versions == [m.version for m in migrations.MIGRATIONS]
    assert made_by == ["probe", "probe", "sweep", "sweep"]
