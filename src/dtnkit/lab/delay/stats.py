"""The delay stage's stats document: its parts, the kernel's queue counters, and the thread
that writes it (the keys are described in :mod:`dtnkit.lab.nfqdelay`).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any, Protocol

PROC_QUEUES = "/proc/net/netfilter/nfnetlink_queue"


def cpu_shares(
    ru0: resource.struct_rusage, ru: resource.struct_rusage, wall: float
) -> dict[str, float]:
    """The process's CPU between two getrusage readings ``wall`` seconds apart, in % of a
    core: ``cpu_percent`` and its user and system parts."""
    user = (ru.ru_utime - ru0.ru_utime) / wall * 100
    system = (ru.ru_stime - ru0.ru_stime) / wall * 100
    return {
        "cpu_percent": round(user + system, 1),
        "cpu_user_percent": round(user, 1),
        "cpu_sys_percent": round(system, 1),
    }


def stats_head(
    started: float, running: bool, config: dict[str, Any], queues: dict[str, Any]
) -> dict[str, Any]:
    """The first keys of the stats file, the same for every engine."""
    return {
        "pid": os.getpid(),
        "started": started,
        "updated": time.time(),
        "running": running,
        "config": config,
        "queues": queues,
    }


def queue_stats(queues: dict[int, Any], count_bytes: bool) -> dict[str, Any]:
    """The stats file's ``queues``: each queue's counters (``bytes`` only when counted)."""
    return {
        str(q): {
            "packets": st.packets,
            "bytes": st.bytes if count_bytes else None,
            "dropped_loss": st.dropped,
            "held_now": len(st.held),
            "held_max": st.held_max,
            "released": st.released,
            "kernel": None,
        }
        for q, st in sorted(queues.items())
    }


def lateness_stats(lateness: list[float], late_max: float) -> dict[str, Any]:
    """The stats file's ``lateness_ms``: p50, p99 and max of release lateness (seconds in)."""
    lat = sorted(lateness)

    def pct(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3) if lat else None

    return {
        "p50": pct(0.5),
        "p99": pct(0.99),
        "max": round(late_max * 1000, 3) if lat else None,
        "count": len(lat),
    }


def bytes_source(count_bytes: bool) -> str:
    """Where the stats' byte counts come from."""
    return (
        "NFQA_CAP_LEN (copy-packet, 1 byte)"
        if count_bytes
        else "none: copy-meta mode carries no packet length"
    )


def read_stats(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The engine's last stats document (written atomically, so never half a file)."""
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a stats document")
    return doc


def kernel_queue_counters(portid: int | None = None) -> dict[int, dict[str, int]]:
    """This namespace's /proc/net/netfilter/nfnetlink_queue, by queue number."""
    out: dict[int, dict[str, int]] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in Path(PROC_QUEUES).read_text().splitlines():
            f = [int(x) for x in line.split()]
            if len(f) >= 8 and (portid is None or f[1] == portid):
                out[f[0]] = {
                    "portid": f[1],
                    "queue_total": f[2],
                    "queue_dropped": f[5],
                    "user_dropped": f[6],
                }
    return out


def write_stats_file(path: Path, doc: dict[str, Any], portid: int | None) -> None:
    """Add the kernel's queue counters and replace the file atomically (temp + rename)."""
    kernel = kernel_queue_counters(portid)
    for q, entry in doc.get("queues", {}).items():
        entry["kernel"] = kernel.get(int(q))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


class Bound(Protocol):
    """An engine whose queues are bound: its netlink port id (None: each lane's own)."""

    @property
    def portid(self) -> int | None: ...


class StatsWriter(threading.Thread):
    """Writes the latest stats document off the packet thread (file I/O releases the GIL)."""

    def __init__(self, path: Path, engine: Bound) -> None:
        super().__init__(name="nfqdelay-stats", daemon=True)
        self.path = path
        self.engine = engine
        self.cond = threading.Condition()
        self.doc: dict[str, Any] | None = None
        self.closed = False
        self.error = ""

    def submit(self, doc: dict[str, Any]) -> None:
        with self.cond:
            self.doc = doc
            self.cond.notify()

    def run(self) -> None:
        while True:
            with self.cond:
                while self.doc is None and not self.closed:
                    self.cond.wait()
                doc, self.doc = self.doc, None
            if doc is None:
                return
            try:
                write_stats_file(self.path, doc, self.engine.portid)
                self.error = ""
            except OSError as exc:  # must not stop the packets; said once
                if not self.error:
                    print(
                        f"nfqdelay: cannot write stats {self.path}: {exc}",
                        file=sys.stderr,
                        flush=True,
                    )
                self.error = str(exc)

    def close(self) -> None:
        """Write what is pending, then stop."""
        with self.cond:
            self.closed = True
            self.cond.notify()
        if self.is_alive():
            self.join(5)
