"""What do diagnose and experiment conclude in four known cases, and on which figures?

On lab paths named PREFIX1..4 (root only):
1. buffers: small buffers (4 MiB) on a 50 ms, 2 Gbit/s path: verdict, then an experiment on
   buffers and congestion (both ends), then the rate after ``tune apply --from-experiment``
2. cap: a 500 Mbit/s cap on a 20 ms path with 64 MiB buffers: verdict and experiment
3. storage: storage throttled to 20 MB/s (loop device + cgroup) under a 10 ms path: verdict
   with the network, fio and end-to-end rates
4. nic: the sender's own interface capped at 1 Gbit/s (lab --src-rate), path uncapped, 10 ms,
   default buffers: verdict with the interface's send rate, an experiment on buffers and
   congestion, and what ``--from-experiment`` applies
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
from typing import Any

from tests.support.lab import set_tcp_buffers

from bench.lib import Bench, Case
from dtnkit.cli.main import main as dtnkit
from dtnkit.environment import Environment
from dtnkit.lab import path as lab
from dtnkit.lab.disk import slow_disk

CASES = ("buffers", "cap", "storage", "nic")


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", default="5", help="seconds of each probe (default 5)")
    p.add_argument(
        "--case",
        action="append",
        choices=CASES,
        help="run only these cases (repeatable; default: all)",
    )


def quick(args: argparse.Namespace) -> None:
    args.duration, args.case = "2", args.case or ["nic"]


def call(*argv: str) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dtnkit(list(argv))
    return json.loads(out.getvalue())


class Diag:
    def __init__(self, b: Bench) -> None:
        self.b = b
        self.state = Environment.from_os().lab_state_root  # the CLI finds the paths there
        tmp = b.workdir(where="/tmp")
        self.tmp, self.db, self.tune = tmp, str(tmp / "results.sqlite"), str(tmp / "tune")
        self.common = [
            "--duration",
            b.args.duration,
            "--interval",
            "1",
            "--db",
            self.db,
            "--format",
            "json",
        ]
        self.rows: list[list[str]] = []

    def verdict(self, name: str, diag: dict[str, Any], extra: str = "") -> None:
        v, res = diag["verdict"], diag["results"]
        figures = ", ".join(
            f"{k} {res[k]['summary']['throughput_bps'] / 1e9:.3f} Gbit/s" for k in res
        )
        self.rows.append(
            [name, f"{v['layer']} (groups {v['groups'] or '-'})", f"{figures}{extra}", v["summary"]]
        )

    def experiment(self, name: str, exp: dict[str, Any]) -> None:
        for g in exp["groups"]:
            ratio = f"x{g['ratio']:.2f} (noise ±{g['margin']:.0%})" if g["ratio"] else "-"
            base = "/".join(f"{x / 1e9:.2f}" for x in g["baseline_bps"])
            got = "/".join(f"{x / 1e9:.2f}" for x in g["applied_bps"]) or "-"
            self.rows.append(
                [
                    f"{name}: experiment {g['group']}",
                    g["verdict"],
                    ratio,
                    f"baseline {base} Gbit/s, applied {got}",
                ]
            )

    def apply(self, p: lab.LabPath, exp: dict[str, Any]) -> int:
        applied = 0
        for h in (p.src, p.dst):
            out = call(
                "tune",
                "apply",
                "--from-experiment",
                exp["id"],
                "--db",
                self.db,
                "--netns",
                h.netns,
                "--state-dir",
                self.tune,
                "--format",
                "json",
            )
            applied += len(out.get("applied", []))
        return applied

    def buffers(self, name: str) -> None:
        with lab.path(name, state_root=self.state, rtt_ms=50, rate_bps=2 * 10**9) as p:
            set_tcp_buffers(p, "4096 131072 4194304")
            peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
            self.verdict(
                "1. small buffers, 50 ms, 2 Gbit/s cap", call("diagnose", *peer, *self.common)
            )
            exp = call(
                "experiment",
                "--groups",
                "buffers,congestion",
                *peer,
                "--both-ends",
                "--rtt",
                "50ms",
                "--state-dir",
                self.tune,
                *self.common,
            )
            self.experiment("1", exp)
            self.apply(p, exp)
            after = call("probe", "net", *peer, *self.common)
            self.rows.append(
                [
                    "1: after apply --from-experiment",
                    "",
                    f"{after['summary']['throughput_bps'] / 1e9:.3f} Gbit/s",
                    "",
                ]
            )

    def cap(self, name: str) -> None:
        with lab.path(name, state_root=self.state, rtt_ms=20, rate_bps=500 * 10**6) as p:
            set_tcp_buffers(p, "4096 131072 67108864")
            peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
            self.verdict(
                "2. 500 Mbit/s cap, 20 ms, 64 MiB buffers", call("diagnose", *peer, *self.common)
            )
            exp = call(
                "experiment",
                "--groups",
                "buffers,congestion",
                *peer,
                "--both-ends",
                "--rtt",
                "20ms",
                "--state-dir",
                self.tune,
                *self.common,
            )
            self.experiment("2", exp)
            self.rows.append(["2: helped", "", exp["helped"] or "none", ""])

    def storage(self, name: str) -> None:
        with (
            slow_disk(
                48 * 2**20, read_bps=20 * 10**6, write_bps=20 * 10**6, workdir=self.tmp
            ) as sd,
            lab.path(name, state_root=self.state, rtt_ms=10) as p,
        ):
            set_tcp_buffers(p, "4096 131072 67108864")
            sink = p.dst.popen(
                [sys.executable, "-m", "dtnkit.measure.netpipe", "recv", "9100"],
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
            try:
                assert sink.stdout is not None
                sink.stdout.readline()
                command = (
                    f"dd if={{src}} bs=1M iflag=direct status=none | {sys.executable} "
                    "-m dtnkit.measure.netpipe send {dst}"
                )
                self.verdict(
                    "3. storage throttled to 20 MB/s, 10 ms path",
                    call(
                        "diagnose",
                        "--peer",
                        f"{p.name}/dst",
                        "--netns",
                        p.src.netns,
                        "--path",
                        sd.device,
                        "--size",
                        "32MiB",
                        "--cgroup",
                        sd.cgroup,
                        "--e2e",
                        sd.device,
                        f"{p.dst.address}:9100",
                        "--command",
                        command,
                        *self.common,
                    ),
                )
            finally:
                if sink.poll() is None:
                    os.killpg(sink.pid, signal.SIGKILL)
                sink.wait()

    def nic(self, name: str) -> None:
        with lab.path(name, state_root=self.state, rtt_ms=10, src_rate_bps=10**9) as p:
            peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
            diag = call("diagnose", *peer, *self.common)
            ev = diag["verdict"]["evidence"]
            sends = (
                f"; {ev['dev']} sends {ev['egress_tx_bps_mean'] / 1e9:.3f} Gbit/s (max "
                f"{ev['egress_tx_bps_max'] / 1e9:.3f}) against its "
                f"{ev['line_rate_bps'] / 1e9:.3f} Gbit/s {ev['cap_kind']} cap"
                if ev.get("egress_tx_bps_mean")
                else ""
            )
            self.verdict("4. the sender's NIC full (1 Gbit/s tbf), 10 ms, no path cap", diag, sends)
            exp = call(
                "experiment",
                "--groups",
                "buffers,congestion",
                *peer,
                "--both-ends",
                "--rtt",
                "10ms",
                "--state-dir",
                self.tune,
                *self.common,
            )
            self.experiment("4", exp)
            self.rows.append(
                [
                    "4: helped",
                    "",
                    exp["helped"] or "none",
                    f"--from-experiment applied {self.apply(p, exp)} settings",
                ]
            )


def run(b: Bench) -> None:
    d = Diag(b)
    for i, case in enumerate(CASES, 1):
        if case in (b.args.case or CASES):
            b.log(f"case {case}")
            getattr(d, case)(f"{b.prefix}{i}")
    b.table(
        ["case", "verdict", "figures", "why"], d.rows, title=f"Diagnose, {b.args.duration} s probes"
    )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=1,
    needs_root=True,
    tools=("iperf3",),
    quick_help="the nic case alone, 2 s probes",
)
