"""One measurement, whatever made it (a probe, or a sweep's point) and whatever tool measured
it: spec, tool-neutral summary, samples, raw output.

The summary's keys carry their units (``throughput_bps``, ``rtt_ms_mean``); ``raw`` is the
tool's own output, kept beside the parsed figures so a figure can be checked against it.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from dtnkit.units import MISSING, format_time

RESULT_SCHEMA = "dtnkit.result/1"


def iso_utc(epoch: object) -> str | None:
    """A moment as JSON shows it: ISO 8601 UTC (``2026-12-01T10:00:00Z``), None when not
    one."""
    shown = format_time(epoch)
    return None if shown == MISSING else shown


@dataclass
class ProbeResult:
    kind: str  # net | disk | e2e
    spec: dict[str, Any]
    summary: dict[str, Any]
    samples: list[dict[str, Any]] = field(default_factory=list)
    raw: str = ""
    ok: bool = True
    error: str | None = None
    host: str = field(default_factory=socket.gethostname)
    netns: str | None = None
    started: float = field(default_factory=time.time)
    duration_s: float = 0.0
    tuning: dict[str, Any] | None = None
    id: int | None = None
    experiment_id: str | None = None
    label: str = ""
    #: the host a pushed row came from (`results push --host`); None: made in this store
    origin_host: str | None = None
    #: a sweep point's measurement: its run and point ID (``{"run", "point_id"}``); None:
    #: a probe's
    sweep: dict[str, str] | None = None
    #: a failed measurement's error as its fields (what, why, next, exit_status), when kept
    error_fields: dict[str, Any] | None = None

    @property
    def tuning_id(self) -> str | None:
        if self.tuning is None:
            return None
        blob = json.dumps(self.tuning, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def as_dict(self, *, with_raw: bool = True) -> dict[str, Any]:
        doc = {
            "schema": RESULT_SCHEMA,
            "id": self.id,
            "kind": self.kind,
            "host": self.host,
            "netns": self.netns,
            "started": iso_utc(self.started),
            "started_epoch": self.started,
            "duration_s": self.duration_s,
            "ok": self.ok,
            "error": self.error,
            "tuning_id": self.tuning_id,
            "experiment_id": self.experiment_id,
            "label": self.label,
            "origin_host": self.origin_host,
            "spec": self.spec,
            "summary": self.summary,
            "samples": self.samples,
        }
        if self.sweep is not None:  # a probe's record keeps its shape
            doc["sweep"] = self.sweep
        if self.error_fields is not None:
            doc["error_fields"] = self.error_fields
        if with_raw:
            doc["raw"] = self.raw
            doc["tuning"] = self.tuning
        return doc
