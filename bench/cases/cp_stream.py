"""How close does one dtnkit cp stream come to iperf3's single stream on loopback?

``iperf3 -c 127.0.0.1 -t --iperf-seconds`` (its own server, a free port; best of two) against
one stream of ``dtnkit cp`` (in-process, ``--verify none`` and ``block`` adler32) from this
tree's ``dtnkit serve``, into the file and into /dev/null (the network path alone, as iperf3
measures memory to memory), and curl from the same server (what the server side allows with a
C client); interleaved, best of --rounds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.ports import free_port

from bench.lib import Bench, Case
from bench.lib import loopback as lb
from bench.lib.procs import fmt_size


def options(p: argparse.ArgumentParser) -> None:
    lb.options(p, streams="1")
    p.add_argument("--iperf-seconds", type=int, default=5, help="iperf3 -t (default 5)")


def quick(args: argparse.Namespace) -> None:
    args.size, args.iperf_seconds = 256, 2


def iperf3(b: Bench, seconds: int, work: Path) -> float:
    """Single-stream loopback iperf3 (own server on a free port); received bits/s."""
    port = free_port()
    logfile = work / f"iperf3-{port}.log"
    server = b.tracked.add(
        subprocess.Popen(
            ["iperf3", "-s", "-p", str(port), "--forceflush", "--logfile", str(logfile)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    try:
        deadline = time.monotonic() + 20
        while "Server listening" not in (logfile.read_text() if logfile.exists() else ""):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"iperf3 -s did not start (exit {server.poll()})")
            time.sleep(0.02)  # it announces itself in its log file; bounded
        r = subprocess.run(
            ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
            check=False,
        )
        doc = json.loads(r.stdout or "{}")
        if r.returncode != 0 or "sum_received" not in doc.get("end", {}):
            raise RuntimeError(f"iperf3 failed: {doc.get('error') or r.stderr[-300:]}")
        return float(doc["end"]["sum_received"]["bits_per_second"])
    finally:
        b.tracked.stop(server)


def curl(url: str, dst: str) -> float:
    start = time.perf_counter()
    subprocess.run(["curl", "-sSf", "-o", dst, url], check=True, timeout=600)
    elapsed = time.perf_counter() - start
    if dst != "/dev/null":
        os.unlink(dst)
    return elapsed


def run(b: Bench) -> None:
    a = b.args
    size = a.size * lb.MiB
    work = b.workdir()
    bps = max(iperf3(b, a.iperf_seconds, work) for _ in range(min(b.rounds, 2)))
    with lb.served_file(b, size, ["adler32"], where=a.dir) as f:
        runs: dict[str, Callable[[], float]] = {}
        for to, dst in (("the file", f.out / f.src.name), ("/dev/null", Path("/dev/null"))):
            for m in ("none", "block"):
                runs[f"dtnkit cp, 1 stream, {m}{' adler32' if m == 'block' else ''}, to {to}"] = (
                    functools.partial(
                        lb.cp,
                        f.file_url,
                        dst,
                        streams=1,
                        algo="adler32",
                        mode=m,
                        block=a.block_size * lb.MiB,
                    )
                )
        runs["curl from dtnkit serve, to the file"] = functools.partial(
            curl, f.file_url, str(f.out / f.src.name)
        )
        runs["curl from dtnkit serve, to /dev/null"] = functools.partial(
            curl, f.file_url, "/dev/null"
        )
        t = lb.best(b, runs, label="one stream")
    ref = bps / 8
    rows = [["iperf3, 1 stream (memory to memory)", f"{bps / 8e6:.0f}", "100 %"]]
    rows += [
        [label, f"{size / s / 1e6:.0f}", f"{100 * size / s / ref:.0f} %"] for label, s in t.items()
    ]
    b.table(
        ["what", "MB/s", "% of iperf3"],
        rows,
        title=f"Single stream vs iperf3 on loopback ({fmt_size(size)} file in {a.dir}, "
        f"best of {b.rounds}; iperf3 {a.iperf_seconds} s, best of "
        f"{min(b.rounds, 2)})",
    )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=3,
    tools=("iperf3", "curl"),
    quick_help="256 MiB, iperf3 2 s, one run each",
)
