"""The seam every collector plugs into: where counters are read (the host's /proc, or a
network namespace's through a process living in it) and how each collector reports its own
success and duration.

A collector reads on every scrape (no background thread) and returns fresh metric families;
:class:`Exporter` runs them one after the other, times each and catches each one's failure,
so one unreadable file costs one collector's series, never the scrape.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from dtnkit import __version__


@dataclass(frozen=True)
class View:
    """Where a collector reads.  ``proc_net``: the namespace's /proc/net (``/proc/net`` or
    ``/proc/PID/net`` of a process in the namespace); ``sys_class_net``: its interfaces;
    ``proc``: the host-wide /proc (/proc/stat, /proc/softirqs are not per namespace).
    ``netns``: the namespace's name, or None for the exporter's own."""

    proc_net: Path = Path("/proc/net")
    sys_class_net: Path = Path("/sys/class/net")
    proc: Path = Path("/proc")
    netns: str | None = None

    @property
    def foreign(self) -> bool:
        """A namespace node_exporter cannot see: dtnkit then exports the base counters too."""
        return self.netns is not None


class Source(Protocol):
    """One collector: a name (the ``collector`` label) and fresh families on each call."""

    name: str

    def collect(self, view: View) -> Iterable[Metric]: ...


class Exporter(Collector):
    """The prometheus_client collector: every source, then each one's success and duration."""

    def __init__(self, sources: Sequence[Source], view: View) -> None:
        self.sources = list(sources)
        self.view = view
        self.errors: dict[str, str] = {}  # the last failure of each source, for the CLI

    def collect(self) -> Iterator[Metric]:
        success = GaugeMetricFamily(
            "dtnkit_collector_success",
            "1 if the collector's last read succeeded, 0 if it failed.",
            labels=["collector"],
        )
        duration = GaugeMetricFamily(
            "dtnkit_collector_duration_seconds",
            "Time the collector's last read took.",
            labels=["collector"],
        )
        info = GaugeMetricFamily(
            "dtnkit_exporter_build_info",
            "dtnkit's version and the namespace it reads (1).",
            labels=["version", "netns"],
        )
        info.add_metric([__version__, self.view.netns or ""], 1)
        yield info
        for source in self.sources:
            start = time.perf_counter()
            try:
                families = list(source.collect(self.view))
            except Exception as exc:  # one failing read costs only its collector's series
                families, ok = [], False
                self.errors[source.name] = f"{type(exc).__name__}: {exc}"
            else:
                ok = True
                self.errors.pop(source.name, None)
            duration.add_metric([source.name], time.perf_counter() - start)
            success.add_metric([source.name], 1.0 if ok else 0.0)
            yield from families
        yield success
        yield duration


def registry(sources: Sequence[Source], view: View) -> tuple[CollectorRegistry, Exporter]:
    """A registry of its own (no auto-describe: nothing is read until the first scrape)."""
    reg = CollectorRegistry(auto_describe=False)
    exporter = Exporter(sources, view)
    reg.register(exporter)
    return reg, exporter


def read_table(path: Path, prefix: str) -> dict[str, int]:
    """The ``prefix:`` header/value line pair of /proc/net/snmp or /proc/net/netstat as
    {field: value}; empty when the file has no such pair."""
    lines = [ln.split() for ln in path.read_text().splitlines() if ln.startswith(prefix + ":")]
    out: dict[str, int] = {}
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        for name, value in zip(head[1:], values[1:], strict=False):
            try:
                out[name] = int(value)
            except ValueError:
                continue
    return out
