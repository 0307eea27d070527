"""A timeline of one copy (``dtnkit cp --timeline FILE``): what each of its connections moved
over time, as the kernel counts it (``TCP_INFO``: bytes received, bytes acknowledged, the
smoothed RTT and the congestion window, sampled every :data:`INTERVAL`), and the copy's steps
with their times (each connection's TCP and TLS handshakes, the streams decision, the first
answer, each stream's start, requests and end, the last byte, the digest, fsync, the commit),
so that where a copy spends its time beyond the path's floor can be seen.  ``python -m bench
wan --timeline DIR`` draws it.

The document (:meth:`Timeline.document`, JSON) has a ``schema``; times are seconds from the
copy's start (``process_start_s``: when the process started, before it, at the kernel's
clock-tick resolution)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.transfer.wire import tcpinfo

SCHEMA = 1
#: Seconds between two samples of every open connection.
INTERVAL = 0.005


class _Connection:
    """One connection's samples: time, bytes received, bytes acknowledged, RTT, cwnd."""

    __slots__ = ("closed", "index", "rows", "sock")

    def __init__(self, index: int) -> None:
        self.index = index
        self.sock: socket.socket | None = None
        self.rows: list[tuple[float, int, int, float | None, int | None]] = []
        self.closed = False


class Timeline:
    """The steps and per-connection samples of one copy; a thread samples the connections
    from the first one's handshake until :meth:`close`."""

    def __init__(
        self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self.clock = clock
        self.t0 = clock()
        self.process_start = process_age()
        self.events: list[dict[str, Any]] = []
        self._connections: list[_Connection] = []
        self._lock = threading.Lock()
        self._sampling = threading.Lock()  # one reader of the connections at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def now(self) -> float:
        return self.clock() - self.t0

    # ------------------------------------------------------------------ what happened
    def mark(self, what: str, **where: int | str | None) -> None:
        """A step at this moment, with where it happened (``connection=``, ``stream=``)."""
        with self._lock:  # the time taken under the lock: the events stay in time order
            event: dict[str, Any] = {"t": round(self.now(), 6), "what": what}
            event.update((k, v) for k, v in where.items() if v is not None)
            self.events.append(event)

    def connection(self) -> int:
        """A connection being opened: its number (``connect`` marked)."""
        with self._lock:
            index = len(self._connections)
            self._connections.append(_Connection(index))
        self.mark("connect", connection=index)
        return index

    def sample(self, index: int, sock: socket.socket) -> None:
        """Sample *sock* (connection *index*, its handshakes over) until it closes."""
        with self._lock:
            self._connections[index].sock = sock
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="dtnkit-timeline", daemon=True
                )
                self._thread.start()
        self._read(self._connections[index])

    def last(self, index: int) -> None:
        """Connection *index* is about to close: its last sample."""
        self._read(self._connections[index])

    def _read(self, c: _Connection) -> None:
        with self._sampling:
            self._read_locked(c)

    def _read_locked(self, c: _Connection) -> None:
        sock = c.sock
        if sock is None or c.closed:
            return
        try:
            info = tcpinfo.parse(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, tcpinfo.SIZE))
        except (OSError, ValueError, AttributeError):
            info = None
        if info is None or info.bytes_received is None or info.bytes_acked is None:
            c.closed = True  # closed (or no byte counts on this kernel)
            self.mark("closed", connection=c.index)
            return
        row = (
            round(self.now(), 6),
            info.bytes_received,
            info.bytes_acked,
            None if info.rtt_s is None else round(info.rtt_s * 1e3, 3),
            info.cwnd,
        )
        rows = c.rows
        if len(rows) >= 2 and rows[-1][1:3] == row[1:3] == rows[-2][1:3]:
            rows[-1] = row  # a flat run keeps its first and latest rows, not one per sample
        else:
            rows.append(row)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                open_ = [c for c in self._connections if c.sock is not None and not c.closed]
            for c in open_:
                self._read(c)

    # ------------------------------------------------------------------ the end
    def close(self) -> None:
        """Stop sampling (one last sample of every open connection first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        for c in list(self._connections):
            self._read(c)
        self.mark("end")

    def document(self) -> dict[str, Any]:
        with self._lock:
            return {
                "schema": SCHEMA,
                "interval_s": self.interval,
                "process_start_s": (
                    None if self.process_start is None else round(-self.process_start, 3)
                ),
                "events": list(self.events),
                "connections": [
                    {
                        "index": c.index,
                        "columns": ["t", "received", "acked", "rtt_ms", "cwnd"],
                        "rows": [list(r) for r in c.rows],
                    }
                    for c in self._connections
                ],
            }


def process_age() -> float | None:
    """Seconds since this process started (the kernel's clock ticks), or None."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().decode()
        started = int(stat.rpartition(")")[2].split()[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError):
        return None


def check_path(path: Path) -> Path:
    """Where ``--timeline`` writes, checked before the copy: a directory that exists, and
    not a directory itself (one clear error, nothing written)."""
    if path.is_dir():
        raise BadInput(
            f"--timeline {path}", "is a directory", "give a file name, e.g. copy-timeline.json"
        )
    if not path.parent.is_dir():
        raise BadInput(
            f"--timeline {path}",
            "its directory does not exist",
            "create it first, or give another path",
        )
    return path


def write(path: Path, doc: dict[str, Any]) -> None:
    """*doc* as JSON at *path*, atomically (a temporary file beside it, renamed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
