#!/usr/bin/env python3
"""The NFQUEUE delay stage's envelope at many flows (issue 13, "lab fidelity"), root only.

    .venv/bin/python bench/bench_lab_stage.py [--quick] [--seconds 8] [--streams 1,4,16,32,64]
                                             [--rtts 5,100] [--engines split,single]
    .venv/bin/python bench/bench_lab_stage.py --engines split@9000,split --streams 1,16,32,64,128

Builds one lab path per engine (`dtnkit lab`, 1 Gbit/s cap, RTT set in place; names
`s18tb<hex>-<engine>`, namespaces `dkl-s18tb*`), 64 MiB TCP buffers in both ends, and runs
iperf3 `-P N` through each, the engines interleaved (the order alternating per point), so
load from other jobs hits both alike.  Per point: goodput, its ratio against `-P 1` of the
same engine in this run, the stage's CPU (cpu_seconds over the run, % of one core), release
lateness as `lab status` reports it (medians of the 0.5 s intervals' p50 and p99, worst p99),
packets/s through the stage, the kernel queue's drops (queue full + netlink undeliverable),
the bottleneck's drops (htb/bfifo, TCP's own) and iperf3's retransmits, and the
emulator-bound verdict of `dtnkit.lab.fidelity.emulator_bound`, and the machine's idle share
over the run (all CPUs, from /proc/stat: under 10 % the lab as a whole binds, the rule of
`dtnkit.lab.fidelity.MACHINE_IDLE_FLOOR_PERCENT`).

Engines: `split` (default since issue 13: one netlink socket and thread per direction) and
`single` (the one-thread engine before it), chosen through DTNKIT_NFQDELAY_ENGINE; `:fifo`
after either runs it at real-time priority (DTNKIT_NFQDELAY_SCHED, nfqdelay's --sched);
`@MTU` at the end builds that variant's path with that MTU (`split@9000`: jumbo frames).
Everything it creates is removed at the end, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import CpuWatch, log, out, table
from dtnkit.lab import fidelity
from dtnkit.lab import path as lab

TCP_MEM = "4096 131072 67108864"
RATE = 1_000_000_000


def drops(stats: dict[str, Any]) -> int:
    return sum((q.get("kernel") or {}).get("queue_dropped", 0)
               + (q.get("kernel") or {}).get("user_dropped", 0)
               for q in stats.get("queues", {}).values())


def packets(stats: dict[str, Any]) -> int:
    return sum(int(q.get("packets", 0)) for q in stats.get("queues", {}).values())


def tc_drops(p: lab.LabPath) -> int:
    return sum(int(q.get("drops") or 0) for side in p.counters().values() for q in side
               if q.get("kind") == "bfifo")


def cpu_times() -> tuple[int, int]:
    """(all jiffies, idle + iowait jiffies) of the machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


def one_run(p: lab.LabPath, streams: int, seconds: int) -> dict[str, Any]:
    server = p.dst.popen(["iperf3", "-s", "-1", "-B", p.dst.address],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while ":5201" not in p.dst.run(["ss", "-ltnH"]).stdout:
            if time.monotonic() > deadline:
                raise SystemExit("iperf3 server did not start")
            time.sleep(0.02)  # waiting for the listener, bounded
        before = p.emulator_stats(fresh=True) or {}
        tc0 = tc_drops(p)
        all0, idle0 = cpu_times()
        # -J of 64 streams is more than a pipe holds: into a file, read at the end
        with tempfile.TemporaryFile("w+") as sink:
            client = p.src.popen(["iperf3", "-c", p.dst.address, "-t", str(seconds), "-P",
                                  str(streams), "-J", "-O", "1"],
                                 stdout=sink, stderr=subprocess.STDOUT)
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
            stdout = stderr = sink.read()
        after = p.emulator_stats(fresh=True) or {}
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(5)
    doc = json.loads(stdout or "{}")
    if "end" not in doc:
        raise SystemExit(f"iperf3 failed: {doc.get('error') or stderr[-300:]}")
    wall = float(after.get("updated", 0)) - float(before.get("updated", 0))
    cpu = (float(after.get("cpu_seconds", 0)) - float(before.get("cpu_seconds", 0))) / wall \
        * 100 if wall > 0 else float("nan")
    window = fidelity.summarize(samples)
    return {
        "gbit": doc["end"]["sum_received"]["bits_per_second"] / 1e9,
        "retr": doc["end"]["sum_sent"].get("retransmits", 0),
        "cpu": cpu,
        "pps": (packets(after) - packets(before)) / wall if wall > 0 else float("nan"),
        "p50": window.lateness_p50_ms, "p99": window.lateness_p99_ms,
        "p99w": window.lateness_p99_worst_ms,
        "drops": drops(after) - drops(before),
        "tc_drops": tc_drops(p) - tc0,
        "window": window,
        "idle": 100 * (idle1 - idle0) / max(1, all1 - all0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="-P 1,16,64 at 5 and 100 ms, 4 s runs, one engine pass")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--streams", default="1,4,16,32,64")
    parser.add_argument("--rtts", default="5,100")
    parser.add_argument("--engines", default="split,single",
                        help="engines to compare (ENGINE[:SCHED], as nfqdelay's --engine and "
                             "--sched; SCHED defaults to normal); the first is the one the "
                             "tables are about, the second its baseline (single is the stage "
                             "before issue 13)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces, iptables)")
    streams = [int(x) for x in ("1,16,64" if args.quick else args.streams).split(",")]
    rtts = [float(x) for x in args.rtts.split(",")]
    seconds = 4 if args.quick else args.seconds
    engines = args.engines.split(",")
    state_root = Path(tempfile.mkdtemp(prefix="s18tb-"))
    tag = secrets.token_hex(2)
    paths: dict[str, lab.LabPath] = {}
    results: dict[tuple[str, float, int], dict[str, Any]] = {}
    watch = CpuWatch()
    out(f"_Start: 1-min load {Path('/proc/loadavg').read_text().split()[0]}, "
        f"{os.cpu_count()} CPUs; {seconds} s iperf3 runs (-O 1), 1 Gbit/s cap, buffers "
        f"`{TCP_MEM}`._\n")
    try:
        for engine in engines:
            spec, _, mtu = engine.partition("@")
            kind, _, sched = spec.partition(":")
            os.environ["DTNKIT_NFQDELAY_ENGINE"] = kind
            os.environ["DTNKIT_NFQDELAY_SCHED"] = sched or "normal"
            p = lab.up(f"s18tb{tag}{len(paths)}", lab.PathSpec(rtt_ms=rtts[0], rate_bps=RATE,
                                                              mtu=int(mtu or 1500)),
                       state_root=state_root)
            paths[engine] = p
            for h in (p.src, p.dst):
                h.run(["sysctl", "-qw", f"net.ipv4.tcp_rmem={TCP_MEM}",
                       f"net.ipv4.tcp_wmem={TCP_MEM}"])
        os.environ.pop("DTNKIT_NFQDELAY_ENGINE", None)
        os.environ.pop("DTNKIT_NFQDELAY_SCHED", None)
        flip = False
        for rtt in rtts:
            for p in paths.values():
                p.set(rtt_ms=rtt)
            for n in streams:
                order = list(reversed(engines)) if flip else engines
                flip = not flip
                for engine in order:
                    r = one_run(paths[engine], n, seconds)
                    results[(engine, rtt, n)] = r
                    log(f"{engine} {rtt:g} ms -P {n}: {r['gbit']:.3f} Gbit/s cpu {r['cpu']:.0f}% "
                        f"p50 {r['p50']} p99 {r['p99']} pps {r['pps']:.0f} drops {r['drops']} "
                        f"idle {r['idle']:.0f}%")
    finally:
        for name, p in paths.items():
            with contextlib.suppress(Exception):
                p.down()
            log(f"removed {name}")
        with contextlib.suppress(OSError):
            for f in state_root.iterdir():
                f.rmdir() if f.is_dir() else f.unlink()
            state_root.rmdir()

    for engine in engines:
        out(f"**engine `{engine}`**\n")
        rows = []
        for rtt in rtts:
            base = results[(engine, rtt, streams[0])]["gbit"]
            for n in streams:
                r = results[(engine, rtt, n)]
                verdict = fidelity.emulator_bound(r["window"], rtt_ms=rtt)
                rows.append([f"{rtt:g}", str(n), f"{r['gbit']:.3f}", f"{r['gbit'] / base:.2f}",
                             f"{r['cpu']:.0f}", f"{r['pps'] / 1000:.1f}",
                             f"{r['p50']}", f"{r['p99']}", f"{r['p99w']}", str(r["drops"]),
                             str(r["tc_drops"]),
                             str(r["retr"]), f"{r['idle']:.0f}",
                             "yes: " + verdict.reason if verdict.bound else "no"])
        table(["RTT ms", "-P", "Gbit/s", f"x -P {streams[0]}", "stage CPU %", "kpkt/s",
               "late p50 ms", "late p99 ms", "worst p99 ms", "queue drops",
               "bottleneck drops", "retr", "machine idle %",
               "emulator-bound"], rows)
    if len(engines) > 1:
        a, b = engines[0], engines[1]
        rows = []
        for rtt in rtts:
            for n in streams:
                ra, rb = results[(a, rtt, n)], results[(b, rtt, n)]
                rows.append([f"{rtt:g}", str(n), f"{rb['gbit']:.3f} -> {ra['gbit']:.3f}",
                             f"{ra['gbit'] / rb['gbit']:.2f}",
                             f"{rb['cpu']:.0f} -> {ra['cpu']:.0f}",
                             f"{rb['p50']} -> {ra['p50']}"])
        out(f"**`{b}` (before) -> `{a}` (after), same run**\n")
        table(["RTT ms", "-P", "Gbit/s", "ratio", "stage CPU %", "late p50 ms"], rows)
        ratios = [results[(a, r, n)]["gbit"] / results[(b, r, n)]["gbit"]
                  for r in rtts for n in streams]
        out(f"median throughput ratio after/before: {statistics.median(ratios):.2f}\n")
    out(watch.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
