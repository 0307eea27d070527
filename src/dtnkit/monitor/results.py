"""The last probe results and the last finished sweep in the results store: what a site saw
the last time it measured, next to what the host does now.

The store is read, never created: with no database file there are no series (and the
collector still succeeds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from dtnkit.db.location import Location
from dtnkit.measure.store import ResultStore
from dtnkit.monitor.base import View

KINDS = ("net", "disk", "e2e")


@dataclass(frozen=True)
class FinishedSweep:
    """One finished sweep run (``build.last_sweep`` reads it from the sweep store)."""

    name: str
    finished: float  # unix time
    points: int
    points_ok: int
    best_rate_bytes_per_second: float | None


class ResultsCollector:
    name = "results"

    def __init__(
        self, db: Location, sweeps: Callable[[Location], Iterable[FinishedSweep]] | None = None
    ) -> None:
        self.db = db
        self.sweeps = sweeps

    def collect(self, view: View) -> Iterator[Metric]:
        if isinstance(self.db, Path) and not self.db.is_file():
            return
        store = ResultStore(self.db)
        labels = ["kind"]
        stamp = GaugeMetricFamily(
            "dtnkit_probe_last_timestamp_seconds",
            "When the last probe of this kind started.",
            labels=labels,
        )
        ok = GaugeMetricFamily(
            "dtnkit_probe_last_success",
            "1 if the last probe of this kind succeeded.",
            labels=labels,
        )
        took = GaugeMetricFamily(
            "dtnkit_probe_last_duration_seconds",
            "How long the last probe of this kind ran.",
            labels=labels,
        )
        rate = GaugeMetricFamily(
            "dtnkit_probe_last_rate_bytes_per_second",
            "Throughput the last probe of this kind measured.",
            labels=labels,
        )
        rtt = GaugeMetricFamily(
            "dtnkit_probe_last_rtt_seconds",
            "Mean RTT the last probe of this kind measured.",
            labels=labels,
        )
        for kind in KINDS:
            found = store.results(kind=kind, limit=1)
            if not found:
                continue
            r = found[0]
            stamp.add_metric([kind], r.started)
            ok.add_metric([kind], 1.0 if r.ok else 0.0)
            took.add_metric([kind], float(r.duration_s))
            if isinstance(r.summary.get("throughput_bps"), int | float):
                rate.add_metric([kind], float(r.summary["throughput_bps"]) / 8)
            if isinstance(r.summary.get("rtt_ms_mean"), int | float):
                rtt.add_metric([kind], float(r.summary["rtt_ms_mean"]) / 1000)
        yield from (stamp, ok, took, rate, rtt)
        if self.sweeps is not None:
            yield from sweep_families(self.sweeps(self.db))


def sweep_families(sweeps: Iterable[FinishedSweep]) -> Iterator[Metric]:
    """The last run of each sweep: when it finished, its points, the best rate."""
    labels = ["sweep"]
    stamp = GaugeMetricFamily(
        "dtnkit_sweep_last_timestamp_seconds", "When the sweep's last run finished.", labels=labels
    )
    points = GaugeMetricFamily(
        "dtnkit_sweep_last_points", "Points of the sweep's last run.", labels=labels
    )
    points_ok = GaugeMetricFamily(
        "dtnkit_sweep_last_points_ok",
        "Points of the sweep's last run that succeeded.",
        labels=labels,
    )
    best = GaugeMetricFamily(
        "dtnkit_sweep_last_best_rate_bytes_per_second",
        "Best throughput of the sweep's last run.",
        labels=labels,
    )
    for s in sweeps:
        stamp.add_metric([s.name], s.finished)
        points.add_metric([s.name], float(s.points))
        points_ok.add_metric([s.name], float(s.points_ok))
        if s.best_rate_bytes_per_second is not None:
            best.add_metric([s.name], s.best_rate_bytes_per_second)
    yield from (stamp, points, points_ok, best)
