#!/usr/bin/env python3
"""The four diagnose cases on lab paths, with the figures behind each verdict (root only).

    .venv/bin/python bench/bench_diagnose.py [--duration 5] [--case nic ...] [--prefix dkcase]

1. small buffers (4 MiB) on a 50 ms, 2 Gbit/s path: verdict, then an experiment on
   buffers and congestion (both ends), then the rate after `tune apply --from-experiment`
2. a 500 Mbit/s cap on a 20 ms path with 64 MiB buffers: verdict and experiment
3. storage throttled to 20 MB/s (loop device + cgroup) under a 10 ms path: verdict with the
   network, fio and end-to-end rates
4. the NIC full: the sender's own interface capped at 1 Gbit/s (lab --src-rate, a tbf on its
   lab interface), path uncapped, 10 ms, default buffers: verdict with the interface's send rate, an
   experiment on buffers and congestion (both ends), and what `--from-experiment` applies
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
    parser.add_argument("--case", action="append", choices=CASES,
                        help="Run only these cases (repeatable; default: all).")
    parser.add_argument("--prefix", default="dkcase", help="Lab path names: PREFIX1 ...")
    args = parser.parse_args()
    cases = args.case or list(CASES)
    pre = args.prefix
    if os.geteuid() != 0:
        sys.exit("bench_diagnose.py needs root")
    tmp = Path(tempfile.mkdtemp(prefix="dkbench-"))
    db, state = str(tmp / "results.sqlite"), str(tmp / "tune")
    common = ["--duration", args.duration, "--interval", "1", "--db", db, "--format", "json"]

    if "buffers" in cases:
        case_buffers(f"{pre}1", common, state, db)
    if "cap" in cases:
        case_cap(f"{pre}2", common, state)
    if "storage" in cases:
        case_storage(f"{pre}3", common, tmp)
    if "nic" in cases:
        case_nic(f"{pre}4", common, state, db)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


CASES = ("buffers", "cap", "storage", "nic")


def case_buffers(name: str, common: list[str], state: str, db: str) -> None:
    with lab.path(name, state_root=STATE, rtt_ms=50, rate_bps=2 * 10**9) as p:
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



def case_cap(name: str, common: list[str], state: str) -> None:
    with lab.path(name, state_root=STATE, rtt_ms=20, rate_bps=500 * 10**6) as p:
        set_tcp_buffers(p, "4096 131072 67108864")
        peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
        _, diag = run("diagnose", *peer, *common)
        verdict_line("2. 500 Mbit/s cap, 20 ms, 64 MiB buffers", diag)
        _, exp = run("experiment", "--groups", "buffers,congestion", *peer, "--both-ends",
                     "--rtt", "20ms", "--state-dir", state, *common)
        experiment_lines(exp)
        print(f"  helped: {exp['helped'] or 'none'}")



def case_storage(name: str, common: list[str], tmp: Path) -> None:
    with slow_disk(48 * 2**20, read_bps=20 * 10**6, write_bps=20 * 10**6,
                   workdir=tmp) as sd, lab.path(name, state_root=STATE, rtt_ms=10) as p:
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


def case_nic(name: str, common: list[str], state: str, db: str) -> None:
    with lab.path(name, state_root=STATE, rtt_ms=10, src_rate_bps=10**9) as p:
        peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
        _, diag = run("diagnose", *peer, *common)
        verdict_line("4. the sender's NIC full (1 Gbit/s tbf on its interface), 10 ms, no path cap",
                     diag)
        ev = diag["verdict"]["evidence"]
        if ev.get("egress_tx_bps_mean"):
            print(f"  {ev['dev']} sends {ev['egress_tx_bps_mean'] / 1e9:.3f} Gbit/s (mean; max "
                  f"{ev['egress_tx_bps_max'] / 1e9:.3f}) against its "
                  f"{ev['line_rate_bps'] / 1e9:.3f} Gbit/s {ev['cap_kind']} cap")
        _, exp = run("experiment", "--groups", "buffers,congestion", *peer, "--both-ends",
                     "--rtt", "10ms", "--state-dir", state, *common)
        experiment_lines(exp)
        applied = []
        for h in (p.src, p.dst):
            _, out = run("tune", "apply", "--from-experiment", exp["id"], "--db", db, "--netns",
                         h.netns, "--state-dir", state, "--format", "json")
            applied += out.get("applied", [])
        print(f"  helped: {exp['helped'] or 'none'}; --from-experiment applied "
              f"{len(applied)} settings")


if __name__ == "__main__":
    raise SystemExit(main())
