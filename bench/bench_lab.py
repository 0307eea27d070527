#!/usr/bin/env python3
"""Accuracy and capacity of `dtnkit lab` paths, through the public Python API (root only).

    .venv/bin/python bench/bench_lab.py [--seconds 10] [--quick]

Tables:
  1. idle RTT (ping -c 50 -i 0.01) for configured RTTs 5..200 ms: mean, mdev, error
  2. rate cap: one iperf3 stream with large buffers at 50 ms for caps up to 2 Gbit/s, goodput
     as a ratio of the cap after header overhead (1448 payload bytes per 1514 on the wire)
  3. delay-stage capacity: uncapped 50 ms path, 1 and 4 streams, goodput and the stage's own
     CPU use, against the same namespaces with no delay stage (baseline, same run)
  4. loss: configured vs measured drop rate and the 4-sigma binomial bound
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support.lab import goodput_bps, set_tcp_buffers

from dtnkit.environment import Environment
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath

# where `dtnkit lab` keeps its state, as the CLI has it
STATE = Environment.from_os().lab_state_root

BIG = "4096 131072 268435456"
WIRE = 1448 / 1514


def ping(p: LabPath, count: int = 50) -> tuple[float, float]:
    out = p.src.run(["ping", "-q", "-n", "-c", str(count), "-i", "0.01", p.dst.address]).stdout
    stats = out.rsplit("=", 1)[1].split()[0].split("/")
    return float(stats[1]), float(stats[3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="fewer points")
    args = parser.parse_args()
    secs = args.seconds
    if os.geteuid() != 0:
        sys.exit("bench_lab.py needs root")

    print("1. idle RTT")
    print(f"{'configured ms':>13} {'mean ms':>8} {'mdev ms':>8} {'error ms':>9}")
    rtts = (10, 100) if args.quick else (5, 10, 50, 100, 200)
    with lab.path("dkbench", state_root=STATE, rtt_ms=rtts[0]) as p:
        print(f"backend: {p.state.backend} ({p.state.backend_reason})")
        for rtt in rtts:
            p.set(rtt_ms=rtt)
            mean, mdev = ping(p)
            print(f"{rtt:>13} {mean:>8.2f} {mdev:>8.3f} {mean - rtt:>+9.2f}")

    print("\n2. rate cap, one stream, large buffers, 50 ms")
    print(f"{'cap Mbit/s':>10} {'goodput Mbit/s':>15} {'ratio to cap':>13}")
    caps = (500, 2000) if args.quick else (100, 500, 1000, 2000)
    with lab.path("dkbench", state_root=STATE, rtt_ms=50, rate_bps=caps[0] * 10**6) as p:
        set_tcp_buffers(p, BIG)
        for cap in caps:
            p.set(rate_bps=cap * 10**6)
            got = goodput_bps(p, seconds=secs)
            print(f"{cap:>10} {got / 1e6:>15.0f} {got / (cap * 1e6 * WIRE):>13.3f}")

    print("\n3. delay-stage capacity, uncapped, large buffers")
    print(f"{'case':<30} {'Gbit/s':>7} {'stage CPU % (run mean)':>23}")
    with lab.path("dkbench", state_root=STATE, rtt_ms=0) as p:
        set_tcp_buffers(p, BIG)
        # baseline: the same namespaces and devices, no delay stage in the way
        subprocess.run(["ip", "netns", "exec", p.mid, "iptables", "-w", "-F", "FORWARD"],
                       check=True)
        base = goodput_bps(p, seconds=secs)
        print(f"{'no delay stage (baseline)':<30} {base / 1e9:>7.2f} {'-':>23}")
    for streams in (1, 4):
        with lab.path("dkbench", state_root=STATE, rtt_ms=50) as p:
            set_tcp_buffers(p, BIG)
            before = p.emulator_stats(fresh=True) or {}
            start = time.monotonic()
            got = goodput_bps(p, seconds=secs, streams=streams)
            after = p.emulator_stats(fresh=True) or {}
            cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / (time.monotonic() - start)
            print(f"{f'50 ms, {streams} stream(s)':<30} {got / 1e9:>7.2f} {cpu * 100:>23.1f}"
                  f"  ({got / base:.2f} x baseline)")

    print("\n4. loss (ping -c 2000 -i 0.002, forward queue)")
    print(f"{'configured':>10} {'packets':>8} {'dropped':>8} {'measured':>9} {'4-sigma bound':>14}")
    for loss in (0.001, 0.01) if args.quick else (0.0001, 0.001, 0.01, 0.05):
        with lab.path("dkbench", state_root=STATE, rtt_ms=1, loss=loss, seed=11) as p:
            p.src.run(["ping", "-q", "-c", "2000", "-i", "0.002", "-W", "1", p.dst.address],
                      check=False, timeout=120)
            q = (p.emulator_stats(fresh=True) or {})["queues"]["0"]
        n, d = q["packets"], q["dropped_loss"]
        bound = 4 * (n * loss * (1 - loss)) ** 0.5
        print(f"{loss:>10g} {n:>8} {d:>8} {d / n:>9.5f} {f'{n * loss:.1f} +- {bound:.1f}':>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
