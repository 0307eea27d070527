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

The code: this module is the program (arguments, signals, start and stop); the NFQUEUE
messages are :mod:`dtnkit.lab.nfqueue`; the config, the stats document and the engines are
:mod:`dtnkit.lab.delay` (``config``, ``stats``, ``engine``: one socket and its loop,
``split``: a lane per direction).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from dtnkit.host.signals import handling
from dtnkit.lab.delay.config import load_config
from dtnkit.lab.delay.engine import DEFAULT_QUEUE_MAXLEN, DEFAULT_RCVBUF, Engine
from dtnkit.lab.delay.split import SplitEngine

ENGINES = ("split", "single")
ENGINE_ENV = "DTNKIT_NFQDELAY_ENGINE"  # the default --engine (A/B benchmarks)
SCHEDS = ("normal", "fifo")
SCHED_ENV = "DTNKIT_NFQDELAY_SCHED"  # the default --sched (A/B benchmarks)
FIFO_PRIORITY = 1  # the lowest real-time priority: above every normal process, below the rest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dtnkit.lab.nfqdelay",
        description="One-way delay and loss for forwarded packets, via NFQUEUE "
        "(run inside the router namespace).",
    )
    parser.add_argument("--config", required=True, type=Path, help="JSON config, re-read on SIGHUP")
    parser.add_argument("--stats", type=Path, help="JSON stats file, replaced every 0.5 s")
    parser.add_argument(
        "--queue-maxlen",
        type=int,
        default=DEFAULT_QUEUE_MAXLEN,
        help="packets the kernel may hold per queue (default %(default)s)",
    )
    parser.add_argument(
        "--rcvbuf",
        type=int,
        default=DEFAULT_RCVBUF,
        help="netlink receive buffer in bytes (default %(default)s)",
    )
    parser.add_argument(
        "--count-bytes",
        action="store_true",
        help="count bytes (copy-packet mode with a 1-byte copy range)",
    )
    parser.add_argument(
        "--spin-ms",
        type=float,
        default=0.0,
        help="busy-poll the last MS before a packet is due instead of sleeping "
        "(0..5; sub-0.1 ms lateness where wake-ups from idle take ms, as in "
        "a VM, at the cost of CPU even when idle; default 0)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=os.environ.get(ENGINE_ENV) or ENGINES[0],
        help="split: a socket and thread per queue (direction); single: one "
        "thread for all queues, as before issue 13 (default: $"
        f"{ENGINE_ENV} or %(default)s)",
    )
    parser.add_argument(
        "--sched",
        choices=SCHEDS,
        default=os.environ.get(SCHED_ENV) or SCHEDS[0],
        help="normal: an ordinary process; fifo: real-time priority 1 "
        "(SCHED_FIFO): packets released on time on busy CPUs, but it "
        "takes CPU from the end hosts at many flows; not with --spin-ms "
        "(default: $"
        f"{SCHED_ENV} or %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ValueError as exc:
        print(f"nfqdelay: error: bad config: {exc}", file=sys.stderr)
        return 2
    if args.queue_maxlen < 1 or args.rcvbuf < 4096 or not 0 <= args.spin_ms <= 5:
        print(
            "nfqdelay: error: --queue-maxlen must be >= 1, --rcvbuf >= 4096 and --spin-ms 0..5",
            file=sys.stderr,
        )
        return 2

    sched = "normal"
    if args.sched == "fifo" and not args.spin_ms:
        try:  # threads started later (the lanes, the stats writer) inherit it
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
            sched = f"fifo {FIFO_PRIORITY}"
        except OSError as exc:
            sched = f"normal (SCHED_FIFO refused: {exc.strerror})"
    kind = SplitEngine if args.engine == "split" else Engine
    engine = kind(
        config,
        args.config,
        args.stats,
        queue_maxlen=args.queue_maxlen,
        rcvbuf=args.rcvbuf,
        count_bytes=args.count_bytes,
        spin=args.spin_ms / 1000,
    )
    engine.sched = sched
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)

    def on_stop(signum: int, frame: object) -> None:
        engine.stop = True

    def on_hup(signum: int, frame: object) -> None:
        engine.reload = True

    old_wakeup = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    handlers = contextlib.ExitStack()  # put back when the engine has stopped
    handlers.enter_context(handling((signal.SIGTERM, signal.SIGINT), on_stop))
    handlers.enter_context(handling((signal.SIGHUP,), on_hup))
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
        handlers.close()
        signal.set_wakeup_fd(old_wakeup)
        wake_r.close()
        wake_w.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
