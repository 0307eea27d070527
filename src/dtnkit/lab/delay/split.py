"""The delay stage's default engine: one :class:`~dtnkit.lab.delay.engine.Engine` lane per
queue (direction), each with its own socket and thread.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any

from dtnkit.lab.delay.config import Config
from dtnkit.lab.delay.engine import (
    DEFAULT_QUEUE_MAXLEN,
    DEFAULT_RCVBUF,
    STATS_INTERVAL_S,
    Engine,
    QueueState,
)
from dtnkit.lab.delay.stats import (
    StatsWriter,
    bytes_source,
    cpu_shares,
    lateness_stats,
    queue_stats,
    stats_head,
    write_stats_file,
)


def _thread_cpu_seconds(tid: int) -> float:
    """A thread's CPU seconds (user + system) from /proc; 0 once it is gone."""
    try:
        fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class SplitEngine:
    """One lane per queue (direction): each an :class:`Engine` with its own netlink socket
    and thread, so a verdict that re-injects a burst of data (forwarding and the receiver's
    TCP work run inside that system call) does not hold up the other direction's ACKs, and
    the two system calls run on two cores.  The main thread takes signals, reloads the
    config and writes the merged stats."""

    def __init__(
        self,
        config: Config,
        config_path: Path,
        stats_path: Path | None,
        *,
        queue_maxlen: int = DEFAULT_QUEUE_MAXLEN,
        rcvbuf: int = DEFAULT_RCVBUF,
        count_bytes: bool = False,
        interval: float = STATS_INTERVAL_S,
        spin: float = 0.0,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.stats_path = stats_path
        self.interval = interval
        self.count_bytes = count_bytes
        self.lanes = [
            Engine(
                Config({q: c}, config.seed),
                config_path,
                None,
                queue_maxlen=queue_maxlen,
                rcvbuf=rcvbuf,
                count_bytes=count_bytes,
                interval=interval,
                spin=spin,
                drain_until_due=True,
            )
            for q, c in sorted(config.queues.items())
        ]
        self.portid: int | None = None  # the kernel counters of every lane's queue
        self.writer = StatsWriter(stats_path, self) if stats_path is not None else None
        self.config_errors = self.lanes[0].config_errors
        self.sched = "normal"
        self.started = time.time()
        self.stop = False
        self.reload = False
        self.main_wake = socket.socketpair()  # a lane that fails wakes the main thread
        self.failure: BaseException | None = None
        self.wakes = [socket.socketpair() for _ in self.lanes]
        for r, w in [*self.wakes, self.main_wake]:
            r.setblocking(False)
            w.setblocking(False)
        self.tids: list[int] = [0] * len(self.lanes)
        self._cpu_mark = (
            time.monotonic(),
            resource.getrusage(resource.RUSAGE_SELF),
            [0.0] * len(self.lanes),
        )
        self.cpu_last: dict[str, Any] = {
            "cpu_percent": 0.0,
            "cpu_user_percent": 0.0,
            "cpu_sys_percent": 0.0,
        }
        self.thread_cpu = [0.0] * len(self.lanes)
        self.threads: list[threading.Thread] = []

    @property
    def queues(self) -> dict[int, QueueState]:
        return {q: st for lane in self.lanes for q, st in lane.queues.items()}

    def open(self) -> None:
        for lane in self.lanes:
            lane.open()

    def _wake(self, i: int) -> None:
        with contextlib.suppress(OSError):
            self.wakes[i][1].send(b"x")

    def _lane(self, i: int) -> None:
        self.tids[i] = threading.get_native_id()
        try:
            self.lanes[i].run(self.wakes[i][0].fileno())
        except BaseException as exc:
            self.failure = exc
            self.stop = True
            with contextlib.suppress(OSError):
                self.main_wake[1].send(b"x")

    def apply_reload(self) -> None:
        self.reload = False
        # the first lane reads the file, checked against every lane's queues, and keeps
        # the errors (its config_errors list is this engine's)
        new = self.lanes[0].load_new(set(self.queues))
        if new is None:
            return
        for i, lane in enumerate(self.lanes):
            lane.pending = Config({q: new.queues[q] for q in lane.queues}, new.seed)
            lane.reload = True
            self._wake(i)
        self.config = new

    def _cpu(self, now: float) -> None:
        then, ru0, t0 = self._cpu_mark
        ru = resource.getrusage(resource.RUSAGE_SELF)
        threads = [_thread_cpu_seconds(t) if t else 0.0 for t in self.tids]
        wall = now - then
        if wall > 0.05:
            self.cpu_last = cpu_shares(ru0, ru, wall)
            self.thread_cpu = [
                round(max(0.0, b - a) / wall * 100, 1) for a, b in zip(t0, threads, strict=True)
            ]
            self._cpu_mark = (now, ru, threads)

    def stats(self, *, running: bool = True) -> dict[str, Any]:
        now = time.monotonic()
        self._cpu(now)
        lat: list[float] = []
        late_max = 0.0
        for lane in self.lanes:
            got, lane.lateness = lane.lateness, []
            lat.extend(got)
            late_max = max(late_max, lane.late_max)
            lane.late_max = 0.0

        ru = resource.getrusage(resource.RUSAGE_SELF)
        return {
            **stats_head(
                self.started,
                running,
                self.config.as_json(),
                queue_stats(self.queues, self.count_bytes),
            ),
            "lateness_ms": lateness_stats(lat, late_max),
            **self.cpu_last,
            "engine": "split",
            "sched": self.sched,
            "cpu_thread_max_percent": max(self.thread_cpu, default=0.0),
            "threads": {
                str(q): {"cpu_percent": cpu}
                for lane, cpu in zip(self.lanes, self.thread_cpu, strict=True)
                for q in lane.queues
            },
            "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 3),
            "enobufs": sum(lane.enobufs for lane in self.lanes),
            "verdict_errors": sum(lane.verdict_errors for lane in self.lanes),
            "last_verdict_error": next(
                (lane.last_verdict_error for lane in self.lanes if lane.last_verdict_error), None
            ),
            "config_errors": list(self.config_errors),
            "bytes_source": bytes_source(self.count_bytes),
            "netlink": {
                "portid": [lane.portid for lane in self.lanes],
                "rcvbuf": self.lanes[0].rcvbuf_actual if self.lanes else 0,
                "queue_maxlen": self.lanes[0].queue_maxlen if self.lanes else 0,
            },
        }

    def write_stats(self, *, running: bool = True) -> None:
        if self.stats_path is not None:
            write_stats_file(self.stats_path, self.stats(running=running), self.portid)

    def try_write_stats(self) -> None:
        if self.writer is not None:
            self.writer.submit(self.stats())

    def run(self, wake_fd: int) -> None:
        """Start a thread per lane; until SIGTERM/SIGINT: reload and stats; then stop them."""
        self.threads = [
            threading.Thread(
                target=self._lane, args=(i,), name=f"nfqdelay-q{min(lane.queues)}", daemon=True
            )
            for i, lane in enumerate(self.lanes)
        ]
        for t in self.threads:
            t.start()
        monotonic = time.monotonic
        next_stats = monotonic() + self.interval
        try:
            while not self.stop:
                fds = [wake_fd, self.main_wake[0].fileno()]
                for fd in select.select(fds, [], [], max(0.0, next_stats - monotonic()))[0]:
                    with contextlib.suppress(BlockingIOError):
                        os.read(fd, 512)
                now = monotonic()
                if self.reload:
                    self.apply_reload()
                    self.try_write_stats()
                    next_stats = now + self.interval
                elif now >= next_stats:
                    self.try_write_stats()
                    next_stats = now + self.interval
        finally:
            for i, lane in enumerate(self.lanes):
                lane.stop = True
                self._wake(i)
            for t in self.threads:
                t.join(5)
        if self.failure is not None:
            raise self.failure

    def shutdown(self) -> None:
        for lane in self.lanes:
            lane.shutdown()

    def close(self) -> None:
        for lane in self.lanes:
            lane.close()
        for r, w in [*self.wakes, self.main_wake]:
            r.close()
            w.close()
