"""A userspace one-way delay and loss stage for emulated WAN paths, over NFQUEUE.

Run it inside the middle ("router") namespace of an emulated path::

    ip netns exec NS python -m dtnkit.lab.nfqdelay --config CONFIG.json --stats STATS.json

while that namespace sends forwarded packets to it, one queue per direction::

    iptables -A FORWARD -i SRC_SIDE_DEV -j NFQUEUE --queue-num 0
    iptables -A FORWARD -i DST_SIDE_DEV -j NFQUEUE --queue-num 1

(add ``--queue-bypass`` to the rules if packets should pass undelayed while no engine is bound;
without it the kernel drops them).

How it works.  The engine speaks nfnetlink_queue itself over a raw ``NETLINK_NETFILTER``
socket.  Each queue is bound in copy-meta mode (the kernel sends ~100 bytes of metadata, never
the payload) with ``NFQA_CFG_F_GSO`` (GSO super-packets are queued whole, not segmented) and a
long kernel queue, so *the packets stay in the kernel*; the engine only remembers
``(due time, packet id)`` in a FIFO per queue.  Once packets are due it releases all of them
with one ``NFQNL_MSG_VERDICT_BATCH`` (accept every id up to the highest due one: ids increase
per queue and the delay is FIFO per direction).  A packet chosen for loss (``random.Random``
seeded per queue from the config's seed) gets an individual ``NF_DROP`` verdict at once.

Engines (``--engine``, default ``split``; ``$DTNKIT_NFQDELAY_ENGINE`` sets the default, for
A/B benchmarks): ``split`` gives every queue (direction) its own netlink socket and thread, so
the forward direction's verdicts, which re-inject bursts of data and run the receiver's TCP
work inside the system call, do not hold up the reverse direction's ACKs, and the two system
calls run on two cores; a lane stops reading new packets as soon as a held one is due.
``single`` is one thread for all queues (the engine before issue 13).  Scheduling (``--sched``,
default ``normal``; ``$DTNKIT_NFQDELAY_SCHED``): ``fifo`` runs the engine at real-time
priority 1 (SCHED_FIFO), so it releases packets on time (lateness p50 0.04 ms at 64 streams)
even when the end hosts' TCP and other jobs keep the CPUs busy, but it wakes for every packet
instead of taking them in batches and so takes the CPU from the end hosts: on 2 cores 64
iperf3 streams on a 5 ms / 1 Gbit/s path got 0.42-0.48 Gbit/s with it against 0.79-0.87
without (`python -m bench lab-stage`, docs/lab.md), so it is not the default.  Not with
``--spin-ms`` (a busy-poll at real-time priority would starve the machine); if the kernel
refuses, the engine runs as an ordinary process and says so in the stats' ``sched``.

Config (JSON; re-read on SIGHUP, so a path's parameters change in place)::

    {"queues": {"0": {"delay_ms": 25.0, "loss": 0.0001},
                "1": {"delay_ms": 25.0, "loss": 0.0}},
     "seed": 1}

``delay_ms`` is 0..10000 ms, ``loss`` 0..1 (default 0), ``seed`` an integer (default 1).
Queue ``q`` draws from ``random.Random(f"{seed}:{q}")``, one draw per packet and only when its
loss is above 0, so a run with a fixed seed and a fixed packet sequence drops the same packets.
A bad file at start: exit status 2 and one line on stderr.  A bad file on SIGHUP (or one that
adds or removes queues, which needs a restart) keeps the old config and is recorded in the
stats' ``config_errors``.  When the delay is lowered, packets still keep FIFO order: new
packets are not released before the ones already held.

Stats (JSON, replaced atomically about every 0.5 s, right after a SIGHUP and at exit; its
first appearance means the queues are bound)::

    pid, started, updated (Unix time), running, config,
    queues: {"0": {packets, bytes, dropped_loss, held_now, held_max, released, kernel}},
    lateness_ms: {p50, p99, max, count}   verdict time minus due time, last interval
    cpu_percent, cpu_user_percent, cpu_sys_percent   last interval, of one core
    cpu_thread_max_percent   the busiest packet thread, last interval, of one core
    engine, sched, threads   split/single; fifo 1 or normal; split: each lane's CPU
    cpu_seconds, enobufs, verdict_errors, config_errors, bytes_source

``bytes``: in copy-meta mode the kernel sends no length attribute at all (``NFQA_CAP_LEN``
is only sent when a copied payload was truncated, and there is no payload), so ``bytes`` is
``null``.  With ``--count-bytes`` the queues use copy-packet mode with a 1-byte copy range
instead, and the kernel then reports every packet's full length in ``NFQA_CAP_LEN``.
``kernel`` is this queue's line of ``/proc/net/netfilter/nfnetlink_queue``: ``queue_total``
(held in the kernel), ``queue_dropped`` (queue full) and ``user_dropped`` (the netlink
message could not be delivered: the receive buffer was full).

Timing: the loop sleeps in ``select`` until the next packet is due (microsecond timeout),
waking 0.4 ms early and topping up, since long sleeps overshoot more on a VM; the stats file is
written by a helper thread (a write + rename costs 0.3-1.5 ms on ext4).  Sleeping still costs
0.1 ms typical (and now and then 1-3 ms on a VM) of wake-up latency; ``--spin-ms N``
busy-polls the last N ms before each due packet instead, for microsecond release times at the
price of CPU even when idle (about 20-40 % of a core at 100 pings/s).

CPU: a verdict re-injects the released packets *in the engine's system call* (forwarding, and
often the receiving host's TCP processing from the softirq run on return), so the engine's
system time includes kernel work the path would need anyway; under load one such system call
can take milliseconds, which shows as release lateness.

SIGTERM/SIGINT: every held packet is accepted at once (one batch verdict per queue), the
final stats are written, the queues are unbound and the exit status is 0.  Once a queue is
unbound (or the engine is killed), the kernel drops what reaches that queue, unless the rule
has ``--queue-bypass``.  Exit status 1: the queues could not be bound (EPERM means another
process holds the queue, or no CAP_NET_ADMIN) or netlink failed; 2: bad config or arguments.

Loss is drawn per *queued packet*: with the GSO flag a TCP super-packet (up to 64 KiB, ~45
wire segments) is one draw, so loss on bulk TCP comes in bursts of whole GSO packets (the drop
rate in bytes is still ``loss``).  Use UDP or small packets where per-segment loss matters.
IPv6 needs the same rules in ip6tables; the engine itself does not care about the family.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import json
import math
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ---- nfnetlink_queue constants (linux/netlink.h, linux/netfilter/nfnetlink{,_queue}.h) ------
NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
SO_RCVBUFFORCE = 33

NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_NOOP = 1
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLMSG_OVERRUN = 4
NLA_TYPE_MASK = 0x3FFF  # without NLA_F_NESTED / NLA_F_NET_BYTEORDER

NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQNL_MSG_VERDICT_BATCH = 3

NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_PAYLOAD = 10
NFQA_CAP_LEN = 13

NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_CFG_CMD_UNBIND = 2
NFQNL_COPY_META = 1
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_GSO = 1 << 2

NF_DROP = 0
NF_ACCEPT = 1

MSG_PACKET = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET

# ---- limits and defaults -----------------------------------------------------------------
MAX_DELAY_MS = 10_000.0
DEFAULT_SEED = 1
DEFAULT_QUEUE_MAXLEN = 1 << 20
DEFAULT_RCVBUF = 64 << 20
STATS_INTERVAL_S = 0.5
RECV_BUFSIZE = 1 << 16
EARLY_WAKE = 0.0004  # s; a VM's timer overshoots ~0.1-0.3 ms after longer sleeps
MAX_DRAIN = 256  # messages read before the engine looks at due packets again
LATENESS_SAMPLES = 200_000  # per stats interval; the max is kept exactly beyond that
CONFIG_ERRORS_KEPT = 20
PROC_QUEUES = "/proc/net/netfilter/nfnetlink_queue"
ENGINES = ("split", "single")
ENGINE_ENV = "DTNKIT_NFQDELAY_ENGINE"  # the default --engine (A/B benchmarks)
SCHEDS = ("normal", "fifo")
SCHED_ENV = "DTNKIT_NFQDELAY_SCHED"  # the default --sched (A/B benchmarks)
FIFO_PRIORITY = 1  # the lowest real-time priority: above every normal process, below the rest

_NLH = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, portid
_NLH_LEN_TYPE = struct.Struct("=IH")
_NFGEN = struct.Struct(">BBH")  # nfgenmsg: family, version, res_id (queue number, big-endian)
_NLA = struct.Struct("=HH")  # nlattr: len, type
_BE16 = struct.Struct(">H")
_BE32 = struct.Struct(">I")
_BE32X2 = struct.Struct(">II")
_I32 = struct.Struct("=i")
_VERDICT_LEN = _NLH.size + _NFGEN.size + _NLA.size + _BE32X2.size
_VERDICT_ATTR = _NLA.pack(_NLA.size + _BE32X2.size, NFQA_VERDICT_HDR)


# ---- stats ---------------------------------------------------------------------------------

def cpu_shares(ru0: resource.struct_rusage, ru: resource.struct_rusage,
               wall: float) -> dict[str, float]:
    """The process's CPU between two getrusage readings ``wall`` seconds apart, in % of a
    core: ``cpu_percent`` and its user and system parts."""
    user = (ru.ru_utime - ru0.ru_utime) / wall * 100
    system = (ru.ru_stime - ru0.ru_stime) / wall * 100
    return {"cpu_percent": round(user + system, 1), "cpu_user_percent": round(user, 1),
            "cpu_sys_percent": round(system, 1)}


def stats_head(started: float, running: bool, config: dict[str, Any],
               queues: dict[str, Any]) -> dict[str, Any]:
    """The first keys of the stats file, the same for every engine."""
    return {"pid": os.getpid(), "started": started, "updated": time.time(),
            "running": running, "config": config, "queues": queues}


def queue_stats(queues: dict[int, Any], count_bytes: bool) -> dict[str, Any]:
    """The stats file's ``queues``: each queue's counters (``bytes`` only when counted)."""
    return {str(q): {"packets": st.packets,
                     "bytes": st.bytes if count_bytes else None,
                     "dropped_loss": st.dropped,
                     "held_now": len(st.held),
                     "held_max": st.held_max,
                     "released": st.released,
                     "kernel": None}
            for q, st in sorted(queues.items())}


def lateness_stats(lateness: list[float], late_max: float) -> dict[str, Any]:
    """The stats file's ``lateness_ms``: p50, p99 and max of release lateness (seconds in)."""
    lat = sorted(lateness)

    def pct(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3) if lat else None

    return {"p50": pct(0.5), "p99": pct(0.99),
            "max": round(late_max * 1000, 3) if lat else None, "count": len(lat)}


def bytes_source(count_bytes: bool) -> str:
    """Where the stats' byte counts come from."""
    return ("NFQA_CAP_LEN (copy-packet, 1 byte)" if count_bytes
            else "none: copy-meta mode carries no packet length")


# ---- config ------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueConfig:
    """One direction: its one-way delay and its drop probability."""

    delay_ms: float
    loss: float = 0.0


@dataclass(frozen=True)
class Config:
    """Queue number -> its delay and loss; the loss generators' seed."""

    queues: Mapping[int, QueueConfig]
    seed: int = DEFAULT_SEED

    def as_json(self) -> dict[str, Any]:
        return {"queues": {str(q): {"delay_ms": c.delay_ms, "loss": c.loss}
                           for q, c in sorted(self.queues.items())},
                "seed": self.seed}


def _number(value: object, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, not {json.dumps(value)}")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(f"{what} is {value}, allowed {low:g} to {high:g}")
    return number


def parse_config(doc: object) -> Config:
    """Validate a decoded config document; ValueError says what is wrong and where."""
    if not isinstance(doc, dict):
        raise ValueError("the config must be a JSON object with \"queues\" (and \"seed\")")
    unknown = sorted(set(doc) - {"queues", "seed"})
    if unknown:
        raise ValueError(f"unknown {'key' if len(unknown) == 1 else 'keys'} "
                         f"{', '.join(map(repr, unknown))}: "
                         "allowed \"queues\" and \"seed\"")
    seed = doc.get("seed", DEFAULT_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, not {json.dumps(seed)}")
    raw = doc.get("queues")
    if not isinstance(raw, dict) or not raw:
        raise ValueError("\"queues\" must be a non-empty object: "
                         "{\"0\": {\"delay_ms\": 25, \"loss\": 0}, ...}")
    queues: dict[int, QueueConfig] = {}
    for key, entry in raw.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()
                and 0 <= int(key) <= 65535):
            raise ValueError(f"queue {key!r}: the key must be a queue number 0..65535")
        where = f"queue {key}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: must be an object with \"delay_ms\" and \"loss\"")
        extra = sorted(set(entry) - {"delay_ms", "loss"})
        if extra:
            raise ValueError(f"{where}: unknown {'key' if len(extra) == 1 else 'keys'} "
                             f"{', '.join(map(repr, extra))}: "
                             "allowed \"delay_ms\" and \"loss\"")
        if "delay_ms" not in entry:
            raise ValueError(f"{where}: \"delay_ms\" is missing")
        delay = _number(entry["delay_ms"], f"{where}: delay_ms", 0.0, MAX_DELAY_MS)
        loss = _number(entry.get("loss", 0.0), f"{where}: loss", 0.0, 1.0)
        if int(key) in queues:
            raise ValueError(f"{where}: given twice")
        queues[int(key)] = QueueConfig(delay, loss)
    return Config(queues, seed)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a config file; raises ValueError with a one-line message."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    try:
        return parse_config(doc)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def read_stats(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The engine's last stats document (written atomically, so never half a file)."""
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a stats document")
    return doc


# ---- netlink -----------------------------------------------------------------------------
class NetlinkError(OSError):
    """The kernel refused a request (an NLMSG_ERROR ack with a negative error)."""


def _attr(kind: int, data: bytes) -> bytes:
    length = _NLA.size + len(data)
    return _NLA.pack(length, kind) + data + b"\0" * (-length & 3)


def _nfq_msg(msg_type: int, flags: int, seq: int, queue: int, payload: bytes) -> bytes:
    body = _NFGEN.pack(socket.AF_UNSPEC, 0, queue) + payload
    return _NLH.pack(_NLH.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, flags, seq,
                     0) + body


def verdict_msg(queue: int, packet_id: int, verdict: int, *, batch: bool) -> bytes:
    """A verdict for one packet id, or (batch) for every queued id up to it."""
    return _NLH.pack(_VERDICT_LEN,
                     (NFNL_SUBSYS_QUEUE << 8)
                     | (NFQNL_MSG_VERDICT_BATCH if batch else NFQNL_MSG_VERDICT),
                     NLM_F_REQUEST, 0, 0) + _NFGEN.pack(socket.AF_UNSPEC, 0, queue) \
        + _VERDICT_ATTR + _BE32X2.pack(verdict, packet_id)


def bind_msg(queue: int, seq: int, *, copy_mode: int, copy_range: int, maxlen: int) -> bytes:
    """Bind a queue and set copy mode, queue length and the GSO flag in one request."""
    attrs = (_attr(NFQA_CFG_CMD, struct.pack(">BxH", NFQNL_CFG_CMD_BIND, socket.AF_UNSPEC))
             + _attr(NFQA_CFG_PARAMS, struct.pack(">IB", copy_range, copy_mode))
             + _attr(NFQA_CFG_QUEUE_MAXLEN, _BE32.pack(maxlen))
             + _attr(NFQA_CFG_FLAGS, _BE32.pack(NFQA_CFG_F_GSO))
             + _attr(NFQA_CFG_MASK, _BE32.pack(NFQA_CFG_F_GSO)))
    return _nfq_msg(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, queue, attrs)


def unbind_msg(queue: int, seq: int) -> bytes:
    attrs = _attr(NFQA_CFG_CMD, struct.pack(">BxH", NFQNL_CFG_CMD_UNBIND, socket.AF_UNSPEC))
    return _nfq_msg(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, queue, attrs)


def kernel_queue_counters(portid: int | None = None) -> dict[int, dict[str, int]]:
    """This namespace's /proc/net/netfilter/nfnetlink_queue, by queue number."""
    out: dict[int, dict[str, int]] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in Path(PROC_QUEUES).read_text().splitlines():
            f = [int(x) for x in line.split()]
            if len(f) >= 8 and (portid is None or f[1] == portid):
                out[f[0]] = {"portid": f[1], "queue_total": f[2], "queue_dropped": f[5],
                             "user_dropped": f[6]}
    return out


def write_stats_file(path: Path, doc: dict[str, Any], portid: int | None) -> None:
    """Add the kernel's queue counters and replace the file atomically (temp + rename)."""
    kernel = kernel_queue_counters(portid)
    for q, entry in doc.get("queues", {}).items():
        entry["kernel"] = kernel.get(int(q))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


class StatsWriter(threading.Thread):
    """Writes the latest stats document off the packet thread (file I/O releases the GIL)."""

    def __init__(self, path: Path, engine: Engine | SplitEngine) -> None:
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
                    print(f"nfqdelay: cannot write stats {self.path}: {exc}", file=sys.stderr,
                          flush=True)
                self.error = str(exc)

    def close(self) -> None:
        """Write what is pending, then stop."""
        with self.cond:
            self.closed = True
            self.cond.notify()
        if self.is_alive():
            self.join(5)


# ---- engine ------------------------------------------------------------------------------
class _Queue:
    __slots__ = ("bytes", "delay", "dropped", "held", "held_max", "last_due", "loss", "num",
                 "packets", "released", "rng")

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

    def __init__(self, config: Config, config_path: Path, stats_path: Path | None, *,
                 queue_maxlen: int = DEFAULT_QUEUE_MAXLEN, rcvbuf: int = DEFAULT_RCVBUF,
                 count_bytes: bool = False, interval: float = STATS_INTERVAL_S,
                 spin: float = 0.0, drain_until_due: bool = False) -> None:
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
        self.queues = {q: _Queue(q, c, config.seed) for q, c in config.queues.items()}
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
                self.request(functools.partial(bind_msg, q, copy_mode=mode, copy_range=rng,
                                               maxlen=self.queue_maxlen))
            except OSError as exc:
                owner = kernel_queue_counters().get(q, {}).get("portid")
                if exc.errno in (errno.EPERM, errno.EBUSY) and owner not in (None, self.portid):
                    hint = f" (another process has bound this queue: netlink portid {owner})"
                elif exc.errno == errno.EPERM:
                    hint = " (needs CAP_NET_ADMIN in this network namespace)"
                else:
                    hint = ""
                raise OSError(exc.errno, f"cannot bind NFQUEUE queue {q}: "
                              f"{os.strerror(exc.errno or 0)}{hint}") from None
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
        len_type = _NLH_LEN_TYPE.unpack_from
        be16 = _BE16.unpack_from
        be32 = _BE32.unpack_from
        nla = _NLA.unpack_from
        count_bytes = self.count_bytes
        due_mark = self.next_due
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
            off = 0
            while off + 16 <= n:
                mlen, mtype = len_type(buf, off)
                if mlen < 16 or off + mlen > n:
                    break
                if mtype == MSG_PACKET:
                    st = queues.get(be16(buf, off + 18)[0])
                    pid = -1
                    size = 0
                    a = off + 20
                    end = off + mlen
                    if not count_bytes and nla(buf, a)[1] == NFQA_PACKET_HDR:
                        pid = be32(buf, a + 4)[0]  # the kernel puts the header first
                    else:
                        while a + 4 <= end:
                            alen, atype = nla(buf, a)
                            if alen < 4:
                                break
                            atype &= NLA_TYPE_MASK
                            if atype == NFQA_PACKET_HDR:
                                pid = be32(buf, a + 4)[0]
                            elif atype == NFQA_CAP_LEN:
                                size = be32(buf, a + 4)[0]
                            elif atype == NFQA_PAYLOAD and not size:
                                size = alen - 4
                            a += (alen + 3) & ~3
                    if pid >= 0:
                        if st is None:  # a queue we did not bind: let it pass
                            out.append(verdict_msg(be16(buf, off + 18)[0], pid, NF_ACCEPT,
                                                   batch=False))
                        else:
                            st.packets += 1
                            st.bytes += size
                            if st.loss and st.rng.random() < st.loss:
                                st.dropped += 1
                                out.append(verdict_msg(st.num, pid, NF_DROP, batch=False))
                            else:
                                due = now + st.delay
                                if due < st.last_due:
                                    due = st.last_due
                                st.last_due = due
                                held = st.held
                                held.append((due, pid))
                                if len(held) > st.held_max:
                                    st.held_max = len(held)
                elif mtype == NLMSG_ERROR and mlen >= 20:
                    err = _I32.unpack_from(buf, off + 16)[0]
                    seq = _NLH.unpack_from(buf, off + 20)[3] if mlen >= 36 else 0
                    if seq and seq <= self.seq:
                        self.acks[seq] = err
                    elif err:
                        self.verdict_errors += 1
                        self.last_verdict_error = os.strerror(-err)
                off += (mlen + 3) & ~3
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
                    "restart the engine to bind other queues")
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
            **stats_head(self.started, running, self.config.as_json(),
                         queue_stats(self.queues, self.count_bytes)),
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
            "netlink": {"portid": self.portid, "rcvbuf": self.rcvbuf_actual,
                        "queue_maxlen": self.queue_maxlen},
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

    def __init__(self, config: Config, config_path: Path, stats_path: Path | None, *,
                 queue_maxlen: int = DEFAULT_QUEUE_MAXLEN, rcvbuf: int = DEFAULT_RCVBUF,
                 count_bytes: bool = False, interval: float = STATS_INTERVAL_S,
                 spin: float = 0.0) -> None:
        self.config = config
        self.config_path = config_path
        self.stats_path = stats_path
        self.interval = interval
        self.count_bytes = count_bytes
        self.lanes = [Engine(Config({q: c}, config.seed), config_path, None,
                             queue_maxlen=queue_maxlen, rcvbuf=rcvbuf, count_bytes=count_bytes,
                             interval=interval, spin=spin, drain_until_due=True)
                      for q, c in sorted(config.queues.items())]
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
        self._cpu_mark = (time.monotonic(), resource.getrusage(resource.RUSAGE_SELF),
                          [0.0] * len(self.lanes))
        self.cpu_last: dict[str, Any] = {"cpu_percent": 0.0, "cpu_user_percent": 0.0,
                                         "cpu_sys_percent": 0.0}
        self.thread_cpu = [0.0] * len(self.lanes)
        self.threads: list[threading.Thread] = []

    @property
    def queues(self) -> dict[int, _Queue]:
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
            self.thread_cpu = [round(max(0.0, b - a) / wall * 100, 1)
                               for a, b in zip(t0, threads, strict=True)]
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
            **stats_head(self.started, running, self.config.as_json(),
                         queue_stats(self.queues, self.count_bytes)),
            "lateness_ms": lateness_stats(lat, late_max),
            **self.cpu_last,
            "engine": "split",
            "sched": self.sched,
            "cpu_thread_max_percent": max(self.thread_cpu, default=0.0),
            "threads": {str(q): {"cpu_percent": cpu}
                        for lane, cpu in zip(self.lanes, self.thread_cpu, strict=True)
                        for q in lane.queues},
            "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 3),
            "enobufs": sum(lane.enobufs for lane in self.lanes),
            "verdict_errors": sum(lane.verdict_errors for lane in self.lanes),
            "last_verdict_error": next((lane.last_verdict_error for lane in self.lanes
                                        if lane.last_verdict_error), None),
            "config_errors": list(self.config_errors),
            "bytes_source": bytes_source(self.count_bytes),
            "netlink": {"portid": [lane.portid for lane in self.lanes],
                        "rcvbuf": self.lanes[0].rcvbuf_actual if self.lanes else 0,
                        "queue_maxlen": self.lanes[0].queue_maxlen if self.lanes else 0},
        }

    def write_stats(self, *, running: bool = True) -> None:
        if self.stats_path is not None:
            write_stats_file(self.stats_path, self.stats(running=running), self.portid)

    def try_write_stats(self) -> None:
        if self.writer is not None:
            self.writer.submit(self.stats())

    def run(self, wake_fd: int) -> None:
        """Start a thread per lane; until SIGTERM/SIGINT: reload and stats; then stop them."""
        self.threads = [threading.Thread(target=self._lane, args=(i,),
                                         name=f"nfqdelay-q{min(lane.queues)}", daemon=True)
                        for i, lane in enumerate(self.lanes)]
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dtnkit.lab.nfqdelay",
        description="One-way delay and loss for forwarded packets, via NFQUEUE "
                    "(run inside the router namespace).")
    parser.add_argument("--config", required=True, type=Path,
                        help="JSON config, re-read on SIGHUP")
    parser.add_argument("--stats", type=Path, help="JSON stats file, replaced every 0.5 s")
    parser.add_argument("--queue-maxlen", type=int, default=DEFAULT_QUEUE_MAXLEN,
                        help="packets the kernel may hold per queue (default %(default)s)")
    parser.add_argument("--rcvbuf", type=int, default=DEFAULT_RCVBUF,
                        help="netlink receive buffer in bytes (default %(default)s)")
    parser.add_argument("--count-bytes", action="store_true",
                        help="count bytes (copy-packet mode with a 1-byte copy range)")
    parser.add_argument("--spin-ms", type=float, default=0.0,
                        help="busy-poll the last MS before a packet is due instead of sleeping "
                             "(0..5; sub-0.1 ms lateness where wake-ups from idle take ms, as in "
                             "a VM, at the cost of CPU even when idle; default 0)")
    parser.add_argument("--engine", choices=ENGINES,
                        default=os.environ.get(ENGINE_ENV) or ENGINES[0],
                        help="split: a socket and thread per queue (direction); single: one "
                             "thread for all queues, as before issue 13 (default: $"
                             f"{ENGINE_ENV} or %(default)s)")
    parser.add_argument("--sched", choices=SCHEDS,
                        default=os.environ.get(SCHED_ENV) or SCHEDS[0],
                        help="normal: an ordinary process; fifo: real-time priority 1 "
                             "(SCHED_FIFO): packets released on time on busy CPUs, but it "
                             "takes CPU from the end hosts at many flows; not with --spin-ms "
                             "(default: $" f"{SCHED_ENV} or %(default)s)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ValueError as exc:
        print(f"nfqdelay: error: bad config: {exc}", file=sys.stderr)
        return 2
    if args.queue_maxlen < 1 or args.rcvbuf < 4096 or not 0 <= args.spin_ms <= 5:
        print("nfqdelay: error: --queue-maxlen must be >= 1, --rcvbuf >= 4096 and "
              "--spin-ms 0..5", file=sys.stderr)
        return 2

    sched = "normal"
    if args.sched == "fifo" and not args.spin_ms:
        try:  # threads started later (the lanes, the stats writer) inherit it
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
            sched = f"fifo {FIFO_PRIORITY}"
        except OSError as exc:
            sched = f"normal (SCHED_FIFO refused: {exc.strerror})"
    kind = SplitEngine if args.engine == "split" else Engine
    engine = kind(config, args.config, args.stats, queue_maxlen=args.queue_maxlen,
                  rcvbuf=args.rcvbuf, count_bytes=args.count_bytes, spin=args.spin_ms / 1000)
    engine.sched = sched
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)

    def on_stop(signum: int, frame: object) -> None:
        engine.stop = True

    def on_hup(signum: int, frame: object) -> None:
        engine.reload = True

    old_wakeup = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    old = {s: signal.signal(s, h) for s, h in ((signal.SIGTERM, on_stop),
                                               (signal.SIGINT, on_stop),
                                               (signal.SIGHUP, on_hup))}
    status = 0
    ready = False  # a stats file appears only once every queue is bound
    try:
        if args.stats is not None:
            with contextlib.suppress(FileNotFoundError):
                args.stats.unlink()  # a stale file must not look like "bound"
        engine.open()
        engine.write_stats()
        ready = True
        if engine.writer is not None:
            engine.writer.start()
        engine.run(wake_r.fileno())
    except OSError as exc:
        print(f"nfqdelay: error: {exc.strerror or exc}", file=sys.stderr)
        status = 1
    finally:
        engine.shutdown()
        if engine.writer is not None:
            engine.writer.close()
        if ready:
            with contextlib.suppress(OSError):
                engine.write_stats(running=False)
        engine.close()
        for s, h in old.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(old_wakeup)
        wake_r.close()
        wake_w.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
