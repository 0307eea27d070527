"""How many flows can the NFQUEUE delay stage carry before it, not the path, sets the rate?

One lab path per engine (``dtnkit lab``, 1 Gbit/s cap, RTT set in place; names
``PREFIX<n>``), 64 MiB TCP buffers in both ends, iperf3 ``-P N`` through each, the engines
interleaved (alternating per point).  Per point: goodput, its ratio to the first -P of the same
engine, the stage's CPU (% of one core), release lateness as ``lab status`` reports it (medians
of the 0.5 s intervals' p50 and p99, worst p99), packets/s, the kernel queue's drops, the
bottleneck's drops and iperf3's retransmits, the emulator-bound verdict of
``dtnkit.lab.fidelity.emulator_bound``, and the machine's idle share over the run.

Engines (--engines): ``split`` (one netlink socket and thread per direction, the default) and
``single`` (one thread), through DTNKIT_NFQDELAY_ENGINE; ``:fifo`` after either runs it at
real-time priority (DTNKIT_NFQDELAY_SCHED); ``@MTU`` builds that variant's path with that MTU
(``split@9000``: jumbo frames).  The first engine is the one the tables are about, the second
its baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.lib import Bench, Case
from bench.lib.loopback import ints
from dtnkit.lab import fidelity
from dtnkit.lab import path as lab

TCP_MEM = "4096 131072 67108864"
RATE = 1_000_000_000


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=int, default=8, help="iperf3 seconds (default 8)")
    p.add_argument(
        "--streams",
        type=ints,
        default=[1, 4, 16, 32, 64],
        help="iperf3 -P values (default 1,4,16,32,64)",
    )
    p.add_argument("--rtts", default="5,100", help="ms, comma-separated (default 5,100)")
    p.add_argument(
        "--engines",
        default="split,single",
        help="ENGINE[:SCHED][@MTU], comma-separated (default split,single)",
    )


def quick(args: argparse.Namespace) -> None:
    args.streams, args.rtts, args.seconds, args.engines = [1, 16], "5", 3, "split"


def drops(stats: dict[str, Any]) -> int:
    return sum(
        (q.get("kernel") or {}).get("queue_dropped", 0)
        + (q.get("kernel") or {}).get("user_dropped", 0)
        for q in stats.get("queues", {}).values()
    )


def packets(stats: dict[str, Any]) -> int:
    return sum(int(q.get("packets", 0)) for q in stats.get("queues", {}).values())


def tc_drops(p: lab.LabPath) -> int:
    return sum(
        int(q.get("drops") or 0)
        for side in p.counters().values()
        for q in side
        if q.get("kind") == "bfifo"
    )


def cpu_times() -> tuple[int, int]:
    """(all jiffies, idle + iowait jiffies) of the machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


def one_run(p: lab.LabPath, streams: int, seconds: int) -> dict[str, Any]:
    server = p.dst.popen(
        ["iperf3", "-s", "-1", "-B", p.dst.address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 5
        while ":5201" not in p.dst.run(["ss", "-ltnH"]).stdout:
            if time.monotonic() > deadline:
                raise RuntimeError("iperf3 server did not start")
            time.sleep(0.02)  # waiting for the listener, bounded
        before = p.emulator_stats(fresh=True) or {}
        tc0 = tc_drops(p)
        all0, idle0 = cpu_times()
        # -J of 64 streams is more than a pipe holds: into a file, read at the end
        with tempfile.TemporaryFile("w+") as sink:
            client = p.src.popen(
                [
                    "iperf3",
                    "-c",
                    p.dst.address,
                    "-t",
                    str(seconds),
                    "-P",
                    str(streams),
                    "-J",
                    "-O",
                    "1",
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            samples: list[dict[str, Any]] = []
            seen = before.get("updated")
            while client.poll() is None:
                time.sleep(0.25)  # sampling the stage's twice-a-second report
                s = p.emulator_stats() or {}
                if s.get("updated") != seen and s.get("lateness_ms", {}).get("count"):
                    samples.append(s)
                    seen = s.get("updated")
            client.wait(30)
            all1, idle1 = cpu_times()
            sink.seek(0)
            stdout = sink.read()
        after = p.emulator_stats(fresh=True) or {}
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(5)
    doc = json.loads(stdout or "{}")
    if "end" not in doc:
        raise RuntimeError(f"iperf3 failed: {doc.get('error') or stdout[-300:]}")
    wall = float(after.get("updated", 0)) - float(before.get("updated", 0))
    cpu = (
        (float(after.get("cpu_seconds", 0)) - float(before.get("cpu_seconds", 0))) / wall * 100
        if wall > 0
        else float("nan")
    )
    window = fidelity.summarize(samples)
    return {
        "gbit": doc["end"]["sum_received"]["bits_per_second"] / 1e9,
        "retr": doc["end"]["sum_sent"].get("retransmits", 0),
        "cpu": cpu,
        "pps": (packets(after) - packets(before)) / wall if wall > 0 else float("nan"),
        "p50": window.lateness_p50_ms,
        "p99": window.lateness_p99_ms,
        "p99w": window.lateness_p99_worst_ms,
        "drops": drops(after) - drops(before),
        "tc_drops": tc_drops(p) - tc0,
        "window": window,
        "idle": 100 * (idle1 - idle0) / max(1, all1 - all0),
    }


def down(p: lab.LabPath) -> None:
    with contextlib.suppress(Exception):  # whatever is left of it goes with the next run's
        p.down()


def run(b: Bench) -> None:
    a = b.args
    streams, engines = a.streams, [e for e in a.engines.split(",") if e]
    rtts = [float(x) for x in a.rtts.split(",") if x]
    state_root = b.workdir("lab", where="/tmp")
    paths: dict[str, lab.LabPath] = {}
    for i, engine in enumerate(engines):
        spec, _, mtu = engine.partition("@")
        kind, _, sched = spec.partition(":")
        os.environ["DTNKIT_NFQDELAY_ENGINE"] = kind
        os.environ["DTNKIT_NFQDELAY_SCHED"] = sched or "normal"
        try:
            p = lab.up(
                f"{b.prefix}{i}",
                lab.PathSpec(rtt_ms=rtts[0], rate_bps=RATE, mtu=int(mtu or 1500)),
                state_root=state_root,
            )
        finally:
            os.environ.pop("DTNKIT_NFQDELAY_ENGINE", None)
            os.environ.pop("DTNKIT_NFQDELAY_SCHED", None)
        b.stack.callback(down, p)
        paths[engine] = p
        for h in (p.src, p.dst):
            h.run(["sysctl", "-qw", f"net.ipv4.tcp_rmem={TCP_MEM}", f"net.ipv4.tcp_wmem={TCP_MEM}"])
    b.note(f"{a.seconds} s iperf3 runs (-O 1), 1 Gbit/s cap, buffers `{TCP_MEM}`.")
    results: dict[tuple[str, float, int], dict[str, Any]] = {}
    for rtt in rtts:
        for p in paths.values():
            p.set(rtt_ms=rtt)
        for n in streams:
            got: dict[str, Any] = {}

            def one(engine: str, rtt: float = rtt, n: int = n, got: dict[str, Any] = got) -> float:
                r = one_run(paths[engine], n, a.seconds)
                results[(engine, rtt, n)] = got[engine] = r
                return float(r["gbit"])

            turn = engines if len(results) % 2 == 0 else engines[::-1]  # who goes first
            b.rounds_of(
                {e: functools.partial(one, e) for e in turn}, rounds=1, label=f"{rtt:g} ms -P {n}"
            )
    for engine in engines:
        rows = []
        for rtt in rtts:
            base = results[(engine, rtt, streams[0])]["gbit"]
            for n in streams:
                r = results[(engine, rtt, n)]
                verdict = fidelity.emulator_bound(r["window"], rtt_ms=rtt)
                rows.append(
                    [
                        f"{rtt:g}",
                        str(n),
                        f"{r['gbit']:.3f}",
                        f"{r['gbit'] / base:.2f}",
                        f"{r['cpu']:.0f}",
                        f"{r['pps'] / 1000:.1f}",
                        f"{r['p50']}",
                        f"{r['p99']}",
                        f"{r['p99w']}",
                        str(r["drops"]),
                        str(r["tc_drops"]),
                        str(r["retr"]),
                        f"{r['idle']:.0f}",
                        "yes: " + verdict.reason if verdict.bound else "no",
                    ]
                )
        b.table(
            [
                "RTT ms",
                "-P",
                "Gbit/s",
                f"x -P {streams[0]}",
                "stage CPU %",
                "kpkt/s",
                "late p50 ms",
                "late p99 ms",
                "worst p99 ms",
                "queue drops",
                "bottleneck drops",
                "retr",
                "machine idle %",
                "emulator-bound",
            ],
            rows,
            title=f"Engine `{engine}`",
        )
    if len(engines) > 1:
        x, y = engines[0], engines[1]
        rows = []
        for rtt in rtts:
            for n in streams:
                rx, ry = results[(x, rtt, n)], results[(y, rtt, n)]
                rows.append(
                    [
                        f"{rtt:g}",
                        str(n),
                        f"{ry['gbit']:.3f} -> {rx['gbit']:.3f}",
                        f"{rx['gbit'] / ry['gbit']:.2f}",
                        f"{ry['cpu']:.0f} -> {rx['cpu']:.0f}",
                        f"{ry['p50']} -> {rx['p50']}",
                    ]
                )
        b.table(
            ["RTT ms", "-P", "Gbit/s", "ratio", "stage CPU %", "late p50 ms"],
            rows,
            title=f"`{y}` -> `{x}`, same run",
        )
        ratios = [
            results[(x, r, n)]["gbit"] / results[(y, r, n)]["gbit"] for r in rtts for n in streams
        ]
        b.note(f"Median throughput ratio {x} / {y}: {statistics.median(ratios):.2f}.")


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=1,
    needs_root=True,
    tools=("iperf3", "ss", "iptables"),
    quick_help="-P 1 and 16 at 5 ms, 3 s runs, the split engine alone",
)
