"""Tuning drift: per profile group, whether the host still matches the profile (the audit).

An audit reads a few hundred files and runs ethtool per data device (0.5-1 s), so it runs
on a scrape at most once per ``interval`` seconds and its result answers the scrapes in
between (``dtnkit_tuning_audit_timestamp_seconds`` says how old it is).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from dtnkit.monitor.base import View
from dtnkit.tune.audit import Audit
from dtnkit.tune.status import NOT_COMPLIANT, AuditStatus


def reason(audit: Audit, group: str) -> str:
    """Why a group is not compliant, short and bounded: the first item that differs or is
    unknown, and how many more there are; empty when it complies."""
    bad = [f for f in audit.findings if f.group == group and f.status in NOT_COMPLIANT]
    if not bad:
        return ""
    first = bad[0]
    where = f" on {first.device}" if first.device else ""
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"{first.key}{where} {first.status}{more}"


class DriftCollector:
    name = "drift"

    def __init__(self, run: Callable[[View], Audit], interval: float = 300.0) -> None:
        self.run = run
        self.interval = interval
        self._lock = threading.Lock()
        self._audit: Audit | None = None
        self._when = 0.0
        self._mono = float("-inf")

    def audit(self, view: View) -> tuple[Audit, float]:
        with self._lock:  # two scrapes at once run one audit
            if self._audit is None or time.monotonic() - self._mono >= self.interval:
                self._audit = self.run(view)
                self._when, self._mono = time.time(), time.monotonic()
            return self._audit, self._when

    def collect(self, view: View) -> Iterator[Metric]:
        audit, when = self.audit(view)
        groups = sorted({f.group for f in audit.findings})
        # the reason is free text: as a label of the alerting series it would start a new
        # series (and restart the alert's `for:`) whenever it changes, so it is an info
        # series of its own, for the alert's annotation to read
        compliant = GaugeMetricFamily(
            "dtnkit_tuning_compliant",
            "1 if every item of the profile group matches the host, 0 if one differs or "
            "cannot be judged (why: dtnkit_tuning_drift_info).",
            labels=["group", "profile"],
        )
        info = GaugeMetricFamily(
            "dtnkit_tuning_drift_info",
            "1 for a group that does not comply; reason: its first item that differs or "
            "cannot be judged, and how many more.",
            labels=["group", "profile", "reason"],
        )
        items = GaugeMetricFamily(
            "dtnkit_tuning_items",
            "Audited items of the group by status.",
            labels=["group", "profile", "status"],
        )
        for group in groups:
            why = reason(audit, group)
            compliant.add_metric([group, audit.profile.name], 0.0 if why else 1.0)
            if why:
                info.add_metric([group, audit.profile.name, why], 1.0)
            for status in AuditStatus:
                n = sum(1 for f in audit.findings if f.group == group and f.status == status)
                items.add_metric([group, audit.profile.name, status.value], float(n))
        stamp = GaugeMetricFamily(
            "dtnkit_tuning_audit_timestamp_seconds",
            "When the audit behind dtnkit_tuning_compliant ran.",
        )
        stamp.add_metric([], when)
        yield from (compliant, info, items, stamp)
