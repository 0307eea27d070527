"""The delay stage's engine: its queues, one netlink socket and the loop that holds and
releases packets (see :mod:`dtnkit.lab.nfqdelay` for how it works and what it costs).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import random
import resource
import select
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dtnkit.host.parsers.netlink import NETLINK_NETFILTER, SOL_NETLINK
from dtnkit.lab.delay.config import Config, QueueConfig, load_config
from dtnkit.lab.delay.stats import (
    StatsWriter,
    bytes_source,
    cpu_shares,
    kernel_queue_counters,
    lateness_stats,
    queue_stats,
    stats_head,
    write_stats_file,
)
from dtnkit.lab.nfqueue import (
    NF_ACCEPT,
    NF_DROP,
    NFQNL_COPY_META,
    NFQNL_COPY_PACKET,
    bind_msg,
    decode,
    unbind_msg,
    verdict_msg,
)

NETLINK_NO_ENOBUFS = 5
SO_RCVBUFFORCE = 33
DEFAULT_QUEUE_MAXLEN = 1 << 20
DEFAULT_RCVBUF = 64 << 20
STATS_INTERVAL_S = 0.5
RECV_BUFSIZE = 1 << 16
EARLY_WAKE = 0.0004  # s; a VM's timer overshoots ~0.1-0.3 ms after longer sleeps
MAX_DRAIN = 256  # messages read before the engine looks at due packets again
LATENESS_SAMPLES = 200_000  # per stats interval; the max is kept exactly beyond that
CONFIG_ERRORS_KEPT = 20


class NetlinkError(OSError):
    """The kernel refused a request (an NLMSG_ERROR ack with a negative error)."""


class QueueState:
    __slots__ = (
        "bytes",
        "delay",
        "dropped",
        "held",
        "held_max",
        "last_due",
        "loss",
        "num",
        "packets",
        "released",
        "rng",
    )

    def __init__(self, num: int, cfg: QueueConfig, seed: int) -> None:
        self.num = num
        self.delay = cfg.delay_ms / 1000.0
        self.loss = cfg.loss
        self.rng = random.Random(f"{seed}:{num}")
        self.held: deque[tuple[float, int]] = deque()
        self.last_due = 0.0
        self.packets = 0
        self.bytes = 0
        self.dropped = 0
        self.released = 0
        self.held_max = 0


class Engine:
    """The queues, the netlink socket and the main loop."""

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
        drain_until_due: bool = False,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.stats_path = stats_path
        self.queue_maxlen = queue_maxlen
        self.rcvbuf = rcvbuf
        self.count_bytes = count_bytes
        self.interval = interval
        self.spin = spin
        self.sched = "normal"
        # stop reading new packets once a held one is due (the split engine's lanes): at
        # 50-100k packets/s a full drain of MAX_DRAIN messages delays due packets by ms
        self.drain_until_due = drain_until_due
        self.next_due = math.inf
        self.pending: Config | None = None  # a config handed over by the split engine
        self.queues = {q: QueueState(q, c, config.seed) for q, c in config.queues.items()}
        self.sock: socket.socket | None = None
        self.portid = 0
        self.bound: list[int] = []
        self.buf = bytearray(RECV_BUFSIZE)
        self.out: list[bytes] = []
        self.lateness: list[float] = []
        self.late_max = 0.0
        self.enobufs = 0
        self.verdict_errors = 0
        self.last_verdict_error = ""
        self.acks: dict[int, int] = {}
        self.seq = 0
        self.config_errors: list[dict[str, Any]] = []
        self.started = time.time()
        self.stop = False
        self.reload = False
        self.rcvbuf_actual = 0
        self.writer = StatsWriter(stats_path, self) if stats_path is not None else None
        self._cpu_mark = (time.monotonic(), resource.getrusage(resource.RUSAGE_SELF))
        self.cpu_last = {"cpu_percent": 0.0, "cpu_user_percent": 0.0, "cpu_sys_percent": 0.0}

    # -- socket --------------------------------------------------------------------------
    def open(self) -> None:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock = sock
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, self.rcvbuf)
        except OSError:  # without CAP_NET_ADMIN: as much as rmem_max allows
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.rcvbuf)
        self.rcvbuf_actual = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        sock.bind((0, 0))
        self.portid = sock.getsockname()[0]
        sock.setblocking(False)
        mode, rng = (NFQNL_COPY_PACKET, 1) if self.count_bytes else (NFQNL_COPY_META, 0)
        for q in sorted(self.queues):
            try:
                self.request(
                    functools.partial(
                        bind_msg, q, copy_mode=mode, copy_range=rng, maxlen=self.queue_maxlen
                    )
                )
            except OSError as exc:
                owner = kernel_queue_counters().get(q, {}).get("portid")
                if exc.errno in (errno.EPERM, errno.EBUSY) and owner not in (None, self.portid):
                    hint = f" (another process has bound this queue: netlink portid {owner})"
                elif exc.errno == errno.EPERM:
                    hint = " (needs CAP_NET_ADMIN in this network namespace)"
                else:
                    hint = ""
                raise OSError(
                    exc.errno, f"cannot bind NFQUEUE queue {q}: {os.strerror(exc.errno or 0)}{hint}"
                ) from None
            self.bound.append(q)

    def request(self, build: Callable[[int], bytes], timeout: float = 5.0) -> None:
        """Send a config request and wait for its ack, handling packets meanwhile."""
        assert self.sock is not None
        self.seq += 1
        seq = self.seq
        self.sock.sendto(build(seq), (0, 0))
        deadline = time.monotonic() + timeout
        while seq not in self.acks:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OSError(errno.ETIMEDOUT, "no answer from nfnetlink_queue")
            select.select([self.sock], [], [], left)
            self.drain()
            self.flush()
        err = self.acks.pop(seq)
        if err:
            raise NetlinkError(-err, os.strerror(-err))

    def flush(self) -> None:
        if self.out and self.sock is not None:
            data = b"".join(self.out)
            self.out.clear()
            self.sock.sendto(data, (0, 0))

    # -- hot path ------------------------------------------------------------------------
    def drain(self) -> None:
        """Read every message waiting (bounded), queue or drop each packet."""
        assert self.sock is not None
        recv_into = self.sock.recv_into
        buf = self.buf
        queues = self.queues
        out = self.out
        monotonic = time.monotonic
        count_bytes = self.count_bytes
        due_mark = self.next_due
        packets: list[tuple[int, int, int]] = []
        acks: list[tuple[int, int]] = []
        for _ in range(MAX_DRAIN):
            try:
                n = recv_into(buf)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    self.enobufs += 1
                    continue
                raise
            now = monotonic()
            decode(buf, n, count_bytes, packets, acks)
            for queue, pid, size in packets:
                st = queues.get(queue)
                if st is None:  # a queue we did not bind: let it pass
                    out.append(verdict_msg(queue, pid, NF_ACCEPT, batch=False))
                    continue
                st.packets += 1
                st.bytes += size
                if st.loss and st.rng.random() < st.loss:
                    st.dropped += 1
                    out.append(verdict_msg(st.num, pid, NF_DROP, batch=False))
                    continue
                due = now + st.delay
                if due < st.last_due:
                    due = st.last_due
                st.last_due = due
                held = st.held
                held.append((due, pid))
                if len(held) > st.held_max:
                    st.held_max = len(held)
            packets.clear()
            for seq, err in acks:
                if seq and seq <= self.seq:
                    self.acks[seq] = err
                elif err:
                    self.verdict_errors += 1
                    self.last_verdict_error = os.strerror(-err)
            acks.clear()
            if now >= due_mark:
                return

    def release_due(self, now: float) -> float | None:
        """Accept everything due (one batch verdict per queue); the next due time."""
        nxt: float | None = None
        lateness = self.lateness
        out = self.out
        for st in self.queues.values():
            held = st.held
            if held and held[0][0] <= now:
                pid = 0
                count = 0
                worst = now - held[0][0]
                room = len(lateness) < LATENESS_SAMPLES
                while held and held[0][0] <= now:
                    due, pid = held.popleft()
                    if room:
                        lateness.append(now - due)
                    count += 1
                st.released += count
                if worst > self.late_max:
                    self.late_max = worst
                out.append(verdict_msg(st.num, pid, NF_ACCEPT, batch=True))
            if held and (nxt is None or held[0][0] < nxt):
                nxt = held[0][0]
        return nxt

    def release_all(self) -> None:
        for st in self.queues.values():
            if st.held:
                st.released += len(st.held)
                self.out.append(verdict_msg(st.num, st.held[-1][1], NF_ACCEPT, batch=True))
                st.held.clear()
        self.flush()

    # -- control -------------------------------------------------------------------------
    def apply_reload(self) -> None:
        self.reload = False
        new, self.pending = self.pending, None
        if new is None:
            new = self.load_new()
        if new is not None:
            self.apply_config(new)

    def load_new(self, queues: set[int] | None = None) -> Config | None:
        """The config file again, validated; None (and the error recorded) if it is bad.
        ``queues``: the queue numbers it must have (default: this engine's)."""
        want = set(self.queues) if queues is None else queues
        try:
            new = load_config(self.config_path)
            if set(new.queues) != want:
                raise ValueError(
                    f"{self.config_path}: the queues changed from "
                    f"{sorted(want)} to {sorted(new.queues)}; "
                    "restart the engine to bind other queues"
                )
        except ValueError as exc:
            self.config_errors.append({"time": time.time(), "error": str(exc)})
            del self.config_errors[:-CONFIG_ERRORS_KEPT]
            print(f"nfqdelay: SIGHUP: kept the old config: {exc}", file=sys.stderr, flush=True)
            return None
        return new

    def apply_config(self, new: Config) -> None:
        for q, st in self.queues.items():
            st.delay = new.queues[q].delay_ms / 1000.0
            st.loss = new.queues[q].loss
            if new.seed != self.config.seed:
                st.rng = random.Random(f"{new.seed}:{q}")
        self.config = new

    def _cpu(self, now: float) -> None:
        then, ru0 = self._cpu_mark
        ru = resource.getrusage(resource.RUSAGE_SELF)
        wall = now - then
        if wall > 0.05:
            self.cpu_last = cpu_shares(ru0, ru, wall)
            self._cpu_mark = (now, ru)

    def stats(self, *, running: bool = True) -> dict[str, Any]:
        now = time.monotonic()
        self._cpu(now)
        lateness = lateness_stats(self.lateness, self.late_max)
        self.lateness = []
        self.late_max = 0.0
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return {
            **stats_head(
                self.started,
                running,
                self.config.as_json(),
                queue_stats(self.queues, self.count_bytes),
            ),
            "lateness_ms": lateness,
            **self.cpu_last,
            "engine": "single",
            "sched": self.sched,
            "cpu_thread_max_percent": self.cpu_last["cpu_percent"],
            "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 3),
            "enobufs": self.enobufs,
            "verdict_errors": self.verdict_errors,
            "last_verdict_error": self.last_verdict_error or None,
            "config_errors": list(self.config_errors),
            "bytes_source": bytes_source(self.count_bytes),
            "netlink": {
                "portid": self.portid,
                "rcvbuf": self.rcvbuf_actual,
                "queue_maxlen": self.queue_maxlen,
            },
        }

    def write_stats(self, *, running: bool = True) -> None:
        """Write the stats now, from this thread (at start and at exit)."""
        if self.stats_path is not None:
            write_stats_file(self.stats_path, self.stats(running=running), self.portid)

    def try_write_stats(self) -> None:
        """Hand the stats to the writer thread: a file write and rename take 0.3-1.5 ms
        here, long enough to delay a due packet or the timestamp of an arriving one."""
        if self.writer is not None:
            self.writer.submit(self.stats())

    def run(self, wake_fd: int) -> None:
        """Until SIGTERM/SIGINT: wait for packets or the next due time, queue, release."""
        assert self.sock is not None
        fds = [self.sock.fileno(), wake_fd]
        monotonic = time.monotonic
        sel = select.select
        drain = self.drain
        release_due = self.release_due
        flush = self.flush
        next_stats = monotonic() + self.interval
        nxt: float | None = None
        spin = self.spin
        lead = spin or EARLY_WAKE
        while not self.stop:
            now = monotonic()
            wait = next_stats - now
            if nxt is not None and nxt - now < wait:
                wait = nxt - now
                if wait <= spin:
                    wait = 0.0  # --spin-ms: poll without sleeping until the packet is due
                elif wait > lead:  # long sleeps overshoot more: wake early, then top up
                    wait -= lead
            if wait > 0:
                ready = sel(fds, [], [], wait)[0]
                if wake_fd in ready:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_fd, 512)
            drain()
            now = monotonic()
            nxt = release_due(now)
            if self.drain_until_due:
                self.next_due = math.inf if nxt is None else nxt
            flush()
            if self.reload:
                self.apply_reload()
                self.try_write_stats()
                next_stats = now + self.interval
            elif now >= next_stats:
                self.try_write_stats()
                next_stats = now + self.interval

    def shutdown(self) -> None:
        """Accept everything held and everything still unread, then unbind."""
        if self.sock is None:
            return
        self.next_due = math.inf  # read everything that is left
        with contextlib.suppress(OSError):
            self.release_all()
            self.drain()
            self.release_all()
        for q in self.bound:
            with contextlib.suppress(OSError):
                self.request(functools.partial(unbind_msg, q), timeout=1.0)
            # accept what the other queues sent meanwhile; a packet that reaches a queue in
            # the instant of its unbind is dropped by the kernel (unless --queue-bypass)
            with contextlib.suppress(OSError):
                self.release_all()
        self.bound.clear()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
