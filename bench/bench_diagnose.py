#!/usr/bin/env python3
"""The three diagnose cases on lab paths, with the figures behind each verdict (root only).

    .venv/bin/python bench/bench_diagnose.py [--duration 5]

1. small buffers (4 MiB) on a 50 ms, 2 Gbit/s path: verdict, then an experiment on
   buffers and congestion (both ends), then the rate after `tune apply --from-experiment`
2. a 500 Mbit/s cap on a 20 ms path with 64 MiB buffers: verdict and experiment
3. storage throttled to 20 MB/s (loop device + cgroup) under a 10 ms path: verdict with the
   network, fio and end-to-end rates
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support.lab import set_tcp_buffers

from dtnkit.cli.main import main as dtnkit
from dtnkit.environment import Environment
from dtnkit.lab import path as lab
from dtnkit.lab.disk import slow_disk

# where `dtnkit lab` keeps its state: the CLI commands below find the paths there
STATE = Environment.from_os().lab_state_root


def run(*argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = dtnkit(list(argv))
    return code, json.loads(out.getvalue())


def verdict_line(name: str, diag: dict[str, Any]) -> None:
    v = diag["verdict"]
    res = diag["results"]
    rates = {k: res[k]["summary"]["throughput_bps"] / 1e9 for k in res}
    figures = ", ".join(f"{k} {g:.3f} Gbit/s" for k, g in rates.items())
    print(f"{name}: verdict {v['layer']} (groups {v['groups'] or '-'}); {figures}")
    print(f"  {v['summary']}")


def experiment_lines(exp: dict[str, Any]) -> None:
    for g in exp["groups"]:
        ratio = f"x{g['ratio']:.2f} (noise +-{g['margin']:.0%})" if g["ratio"] else "-"
        base = "/".join(f"{b / 1e9:.2f}" for b in g["baseline_bps"])
        got = "/".join(f"{b / 1e9:.2f}" for b in g["applied_bps"]) or "-"
        print(f"  {g['group']:<11} {g['verdict']:<8} {ratio:<24} baseline {base} Gbit/s, "
              f"applied {got}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", default="5")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_diagnose.py needs root")
    tmp = Path(tempfile.mkdtemp(prefix="dkbench-"))
    db, state = str(tmp / "results.sqlite"), str(tmp / "tune")
    common = ["--duration", args.duration, "--interval", "1", "--db", db, "--format", "json"]

    with lab.path("dkcase1", state_root=STATE, rtt_ms=50, rate_bps=2 * 10**9) as p:
        set_tcp_buffers(p, "4096 131072 4194304")
        peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
        _, diag = run("diagnose", *peer, *common)
        verdict_line("1. small buffers, 50 ms, 2 Gbit/s cap", diag)
        _, exp = run("experiment", "--groups", "buffers,congestion", *peer, "--both-ends",
                     "--rtt", "50ms", "--state-dir", state, *common)
        experiment_lines(exp)
        for h in (p.src, p.dst):
            run("tune", "apply", "--from-experiment", exp["id"], "--db", db, "--netns",
                h.netns, "--state-dir", state, "--format", "json")
        _, after = run("probe", "net", *peer, *common)
        print(f"  after apply --from-experiment: "
              f"{after['summary']['throughput_bps'] / 1e9:.3f} Gbit/s")

    with lab.path("dkcase2", state_root=STATE, rtt_ms=20, rate_bps=500 * 10**6) as p:
        set_tcp_buffers(p, "4096 131072 67108864")
        peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
        _, diag = run("diagnose", *peer, *common)
        verdict_line("2. 500 Mbit/s cap, 20 ms, 64 MiB buffers", diag)
        _, exp = run("experiment", "--groups", "buffers,congestion", *peer, "--both-ends",
                     "--rtt", "20ms", "--state-dir", state, *common)
        experiment_lines(exp)
        print(f"  helped: {exp['helped'] or 'none'}")

    with slow_disk(48 * 2**20, read_bps=20 * 10**6, write_bps=20 * 10**6,
                   workdir=tmp) as sd, lab.path("dkcase3", state_root=STATE, rtt_ms=10) as p:
        set_tcp_buffers(p, "4096 131072 67108864")
        sink = p.dst.popen([sys.executable, "-m", "dtnkit.measure.netpipe", "recv", "9100"],
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        try:
            assert sink.stdout is not None
            sink.stdout.readline()
            command = (f"dd if={{src}} bs=1M iflag=direct status=none | {sys.executable} "
                       "-m dtnkit.measure.netpipe send {dst}")
            _, diag = run("diagnose", "--peer", f"{p.name}/dst", "--netns", p.src.netns,
                          "--path", sd.device, "--size", "32MiB", "--cgroup", sd.cgroup,
                          "--e2e", sd.device, f"{p.dst.address}:9100", "--command", command,
                          *common)
            verdict_line("3. storage throttled to 20 MB/s, 10 ms path", diag)
        finally:
            if sink.poll() is None:
                os.killpg(sink.pid, signal.SIGKILL)
            sink.wait()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
