"""The exporter as the CLI builds it: the sources, the view, the textfile writer, the rules."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from dtnkit.db.location import Location
from dtnkit.errors import BadInput
from dtnkit.host.host import Host
from dtnkit.monitor.base import Exporter, Source, View, registry
from dtnkit.monitor.cpu import CpuCollector
from dtnkit.monitor.drift import DriftCollector
from dtnkit.monitor.netns import NetnsView
from dtnkit.monitor.nic import NicCollector
from dtnkit.monitor.results import FinishedSweep, ResultsCollector
from dtnkit.monitor.softnet import SoftnetCollector
from dtnkit.monitor.tcp import TcpCollector
from dtnkit.sweep import store
from dtnkit.tune.audit import Audit
from dtnkit.tune.judging import Judging

RULES_FILE = "dtnkit-alerts.yml"


@dataclass(frozen=True)
class DriftOptions:
    #: what the drift series judge by: profile, RTT, speed, interfaces (as `tune audit`)
    judging: Judging = field(default_factory=Judging)
    interval: float = 300.0


def _auditor(opts: DriftOptions) -> DriftCollector:
    # a bad profile is an error now, not a failing collector later
    profile = opts.judging.load_profile()

    def run(view: View) -> Audit:
        # a Host of its own each time: its reads are cached until a write, and the audit
        # must see the host as it is now (a namespace's helper ends with the Host)
        return opts.judging.audit(Host.live(view.netns, read_only=True), profile)

    return DriftCollector(run, opts.interval)


def sources(db: Location | None, drift: DriftOptions | None) -> list[Source]:
    out: list[Source] = [TcpCollector(), SoftnetCollector(), NicCollector(), CpuCollector()]
    if drift is not None:
        out.append(_auditor(drift))
    if db is not None:
        out.append(ResultsCollector(db, sweeps=last_sweep))
    return out


def last_sweep(db: Location) -> list[FinishedSweep]:
    """The newest finished sweep run in the results store (none while the only runs are
    running, or without sweep tables): one series set, so the label's values stay few."""
    runs = [r for r in store.list_runs(db) if r.status != "running"]
    if not runs:
        return []
    run = runs[0]
    rates = [
        r.throughput_bps
        for r in store.load_records(db, run.name)
        if not r.failed and r.throughput_bps is not None
    ]
    return [
        FinishedSweep(
            run.name,
            run.updated,
            run.points_ok + run.points_failed,
            run.points_ok,
            max(rates) / 8 if rates else None,
        )
    ]


@contextlib.contextmanager
def exporter(
    netns: str | None, db: Location | None, drift: DriftOptions | None
) -> Iterator[tuple[CollectorRegistry, Exporter]]:
    """The registry for the host, or for ``netns`` read through a process in it."""
    srcs = sources(db, drift)
    if netns is None:
        yield registry(srcs, View())
        return
    with NetnsView(netns) as ns:
        yield registry(srcs, ns.view)


class _Collected(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def collect_once(reg: CollectorRegistry) -> tuple[list[Metric], bytes]:
    """One collection: its families and their text exposition (the format node_exporter's
    textfile collector and promtool read), from the same reads."""
    families = list(reg.collect())
    return families, generate_latest(_Collected(families))


def check_textfile(directory: Path, name: str) -> None:
    """What write_textfile refuses, checked before anything is collected."""
    if not name.endswith(".prom") or "/" in name or name.startswith("."):
        raise BadInput(
            f"bad textfile name {name!r}",
            "node_exporter's textfile collector reads only NAME.prom files",
            "give a plain name ending in .prom",
        )
    try:
        st = os.lstat(directory)
    except OSError as exc:
        raise BadInput(
            f"cannot write metrics to {directory}",
            exc.strerror or str(exc),
            "create the directory, or give node_exporter's --collector.textfile.directory",
        ) from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise BadInput(
            f"cannot write metrics to {directory}",
            "it is a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory",
            "give the real directory node_exporter reads",
        )


def write_textfile(directory: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to DIRECTORY/NAME atomically: a temporary file beside it, then a
    rename, all relative to the directory opened once without following symlinks (so a
    symlink planted as DIRECTORY or as the temporary name is never written through)."""
    check_textfile(directory, name)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    except OSError as exc:
        raise BadInput(
            f"cannot write metrics to {directory / name}",
            exc.strerror or str(exc),
            "check the directory's owner and mode",
        ) from exc
    finally:
        os.close(dfd)
    return directory / name


def rules_text() -> str:
    return resources.files("dtnkit.monitor").joinpath("rules", RULES_FILE).read_text()
