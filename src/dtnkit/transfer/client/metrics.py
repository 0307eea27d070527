"""``dtnkit cp --metrics-textfile FILE``: the copy's own series, in the Prometheus text
format, for node_exporter's textfile collector (or any reader): written to a temporary name
in the same directory and renamed (a reader never sees half a file), every
:data:`INTERVAL` seconds while the copy runs and once at its end.

The names are those of ``dtnkit serve --metrics`` (:mod:`dtnkit.transfer.server.metrics`):
``dtnkit_transfer_active_transfers`` (1 while copying, 0 at the end),
``..._active_streams``, ``..._sent_bytes_total`` / ``..._received_bytes_total`` (bytes of
file data, by direction), ``..._stream_rate_bytes_per_second`` (the copy's rate over its
streams), ``..._stream_utilisation_ratio`` (against ``--capacity``, when given) and
``..._last_success_timestamp_seconds`` once it succeeded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from dtnkit.atomicfile import replace_file
from dtnkit.errors import BadInput
from dtnkit.transfer.wire.exposition import Family, render

INTERVAL = 5.0
PREFIX = "dtnkit_transfer_"


def check_path(path: Path) -> Path:
    """*path* when its directory exists and it is not a directory; BadInput otherwise."""
    if path.is_dir():
        raise BadInput(
            f"--metrics-textfile {path}",
            "is a directory",
            "pass a file name, e.g. /var/lib/prometheus/node-exporter/dtnkit_cp.prom",
        )
    if not path.parent.is_dir():
        raise BadInput(
            f"--metrics-textfile {path}",
            "its directory does not exist",
            "create it, or pass a file in an existing directory",
        )
    return path


def write_atomic(path: Path, text: str) -> None:
    """*text* into *path* through a temporary file in the same directory and a rename."""
    replace_file(path, text, durable=False)  # rewritten every interval: no fsync each time


class CopyMetrics:
    """Counts a copy's bytes (wrap its progress callback) and writes the textfile."""

    def __init__(
        self,
        path: Path,
        *,
        streams: int,
        upload: bool,
        capacity: float | None = None,
        interval: float = INTERVAL,
    ) -> None:
        self.path = path
        self.streams = streams
        self.upload = upload
        self.capacity = capacity  # bytes/s
        self.interval = interval
        self.bytes = 0
        self.t0 = time.monotonic()
        self.finished: bool | None = None  # None while running; True ok, False failed
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0

    def wrap(self, progress: Callable[[int], None] | None) -> Callable[[int], None]:
        def advance(n: int) -> None:
            with self.lock:
                self.bytes += n
            if progress is not None:
                progress(n)

        return advance

    def families(self) -> list[Family]:
        with self.lock:
            moved, finished = self.bytes, self.finished
        seconds = max(time.monotonic() - self.t0, 1e-3)
        running = finished is None
        rate = moved / seconds / max(self.streams, 1) if running else 0.0
        out = [
            Family(PREFIX + "active_transfers", "gauge", "Copies in progress.").add(
                1 if running else 0
            ),
            Family(PREFIX + "active_streams", "gauge", "Streams of the copy in progress.").add(
                self.streams if running else 0
            ),
            Family(PREFIX + "sent_bytes_total", "counter", "File bytes sent.").add(
                moved if self.upload else 0
            ),
            Family(PREFIX + "received_bytes_total", "counter", "File bytes received.").add(
                0 if self.upload else moved
            ),
            Family(
                PREFIX + "stream_rate_bytes_per_second",
                "gauge",
                "Mean rate of a stream of the copy in progress.",
            ).add(rate),
        ]
        if self.capacity:
            out.append(
                Family(
                    PREFIX + "capacity_bytes_per_second",
                    "gauge",
                    "Capacity the streams share (--capacity).",
                ).add(self.capacity)
            )
            share = self.capacity / max(self.streams, 1)
            out.append(
                Family(
                    PREFIX + "stream_utilisation_ratio",
                    "gauge",
                    "Mean stream rate against its fair share of the capacity (0-1).",
                ).add(rate / share)
            )
        if finished:
            out.append(
                Family(
                    PREFIX + "last_success_timestamp_seconds",
                    "gauge",
                    "When the copy succeeded (Unix time).",
                ).add(round(time.time(), 3))
            )
        return out

    def write(self) -> None:
        try:
            write_atomic(self.path, render(self.families()))
        except OSError:
            self.errors += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.write()

    def start(self) -> None:
        self.write()
        self._thread = threading.Thread(target=self._run, name="cp-metrics", daemon=True)
        self._thread.start()

    def stop(self, ok: bool) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self.lock:
            self.finished = ok
        self.write()
