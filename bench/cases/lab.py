"""How accurate and how fast are dtnkit lab paths: RTT, rate cap, delay-stage capacity, loss?

Through the public Python API, on lab paths named --prefix (root only):
  1. idle RTT (ping -c 50 -i 0.01) for configured RTTs 5..200 ms: mean, mdev, error
  2. rate cap: one iperf3 stream with large buffers at 50 ms for caps up to 2 Gbit/s, goodput
     as a ratio of the cap after header overhead (1448 payload bytes per 1514 on the wire)
  3. delay-stage capacity: uncapped 50 ms path, 1 and 4 streams, goodput and the stage's own
     CPU use, against the same namespaces with no delay stage (baseline, same run)
  4. loss: configured vs measured drop rate and the 4-sigma binomial bound
"""

from __future__ import annotations

import argparse
import subprocess
import time

from tests.support.lab import goodput_bps, set_tcp_buffers

from bench.lib import Bench, Case
from dtnkit.environment import Environment
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath

BIG = "4096 131072 268435456"
WIRE = 1448 / 1514


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=int, default=10, help="iperf3 seconds (default 10)")


def quick(args: argparse.Namespace) -> None:
    args.seconds = 3


def ping(p: LabPath, count: int = 50) -> tuple[float, float]:
    out = p.src.run(["ping", "-q", "-n", "-c", str(count), "-i", "0.01", p.dst.address]).stdout
    stats = out.rsplit("=", 1)[1].split()[0].split("/")
    return float(stats[1]), float(stats[3])


def run(b: Bench) -> None:
    state, name, secs, quick = (
        Environment.from_os().lab_state_root,
        b.prefix,
        b.args.seconds,
        b.quick,
    )
    rtts = (10, 100) if quick else (5, 10, 50, 100, 200)
    rows = []
    with lab.path(name, state_root=state, rtt_ms=rtts[0]) as p:
        backend = f"{p.state.backend} ({p.state.backend_reason})"
        for rtt in rtts:
            p.set(rtt_ms=rtt)
            mean, mdev = ping(p)
            rows.append([str(rtt), f"{mean:.2f}", f"{mdev:.3f}", f"{mean - rtt:+.2f}"])
    b.note(f"Backend: {backend}.")
    b.table(["configured ms", "mean ms", "mdev ms", "error ms"], rows, title="1. Idle RTT")
    caps = (500, 2000) if quick else (100, 500, 1000, 2000)
    rows = []
    with lab.path(name, state_root=state, rtt_ms=50, rate_bps=caps[0] * 10**6) as p:
        set_tcp_buffers(p, BIG)
        for cap in caps:
            p.set(rate_bps=cap * 10**6)
            got = goodput_bps(p, seconds=secs)
            rows.append([str(cap), f"{got / 1e6:.0f}", f"{got / (cap * 1e6 * WIRE):.3f}"])
    b.table(
        ["cap Mbit/s", "goodput Mbit/s", "ratio to cap"],
        rows,
        title="2. Rate cap, one stream, large buffers, 50 ms",
    )
    with lab.path(name, state_root=state, rtt_ms=0) as p:
        set_tcp_buffers(p, BIG)
        # baseline: the same namespaces and devices, no delay stage in the way
        subprocess.run(
            ["ip", "netns", "exec", p.mid, "iptables", "-w", "-F", "FORWARD"], check=True
        )
        base = goodput_bps(p, seconds=secs)
    rows = [["no delay stage (baseline)", f"{base / 1e9:.2f}", "-", "-"]]
    for streams in (1, 4):
        with lab.path(name, state_root=state, rtt_ms=50) as p:
            set_tcp_buffers(p, BIG)
            before = p.emulator_stats(fresh=True) or {}
            start = time.monotonic()
            got = goodput_bps(p, seconds=secs, streams=streams)
            after = p.emulator_stats(fresh=True) or {}
            cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / (time.monotonic() - start)
            rows.append(
                [
                    f"50 ms, {streams} stream(s)",
                    f"{got / 1e9:.2f}",
                    f"{cpu * 100:.1f}",
                    f"{got / base:.2f}",
                ]
            )
    b.table(
        ["case", "Gbit/s", "stage CPU % (run mean)", "x baseline"],
        rows,
        title="3. Delay-stage capacity, uncapped, large buffers",
    )
    rows = []
    for loss in (0.001, 0.01) if quick else (0.0001, 0.001, 0.01, 0.05):
        with lab.path(name, state_root=state, rtt_ms=1, loss=loss, seed=11) as p:
            p.src.run(
                ["ping", "-q", "-c", "2000", "-i", "0.002", "-W", "1", p.dst.address],
                check=False,
                timeout=120,
            )
            q = (p.emulator_stats(fresh=True) or {})["queues"]["0"]
        n, d = q["packets"], q["dropped_loss"]
        bound = 4 * (n * loss * (1 - loss)) ** 0.5
        rows.append([f"{loss:g}", str(n), str(d), f"{d / n:.5f}", f"{n * loss:.1f} +- {bound:.1f}"])
    b.table(
        ["configured", "packets", "dropped", "measured", "4-sigma bound"],
        rows,
        title="4. Loss (ping -c 2000 -i 0.002, forward queue)",
    )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=1,
    needs_root=True,
    tools=("iperf3", "ping", "iptables"),
    quick_help="fewer points, 3 s iperf3 runs",
)
