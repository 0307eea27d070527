"""What can a read token make dtnkit serve do: hashing and listing amplification, vs --base?

Each tree's own ``dtnkit serve`` (a fresh one per round, anonymous read), the rounds
interleaved: the server's CPU seconds (``/proc/PID/stat``) and the wall time of --requests
concurrent ``HEAD`` + ``Range`` over the whole file + ``Want-Content-Digest: sha-256``, and the
server's peak RSS growth (VmHWM) for 10 concurrent depth-1 PROPFINDs of a directory of
--entries names; the best round of each.
"""

from __future__ import annotations

import argparse
import http.client
import os
import threading
import time
from pathlib import Path

from bench.lib import Bench, Case
from bench.lib.loopback import dtnkit_server
from bench.lib.machine import proc_cpu
from bench.lib.procs import make_file


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=int, default=1024, help="MiB, the file (default 1024)")
    p.add_argument("--requests", type=int, default=20, help="concurrent HEADs (default 20)")
    p.add_argument("--entries", type=int, default=50_000, help="directory size (default 50000)")


def quick(args: argparse.Namespace) -> None:
    args.size, args.requests, args.entries = 64, 4, 2000


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def at_once(port: int, n: int, method: str, path: str, headers: dict[str, str]) -> None:
    go = threading.Barrier(n)

    def one() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        go.wait()
        conn.request(method, path, headers=headers)
        conn.getresponse().read()
        conn.close()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run(b: Bench) -> None:
    assert b.base is not None
    a = b.args
    size = a.size * 2**20
    root = b.workdir()
    make_file(root / "big.bin", size)
    (root / "dir").mkdir()
    for i in range(a.entries):
        os.close(
            os.open(
                root / "dir" / f"entry-with-a-fairly-long-name-{i:07d}.dat",
                os.O_CREAT | os.O_WRONLY,
            )
        )
    rss: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    trees = {"base": b.base, "this": b.this}

    def one(label: str) -> float:
        # ten streamed listings at once: a tree with per-token listing slots gets ten (its
        # default, 2, would serve them in turn)
        slots = ["--listing-slots", "10"] if trees[label].serve_takes("--listing-slots") else []
        with dtnkit_server(b, root, *slots, tree=trees[label]) as (url, proc):
            port = int(url.rstrip("/").rsplit(":")[-1])
            at_once(port, 1, "PROPFIND", "/", {"Depth": "1"})  # warm up
            cpu, t0 = proc_cpu(proc.pid), time.monotonic()
            at_once(
                port,
                a.requests,
                "HEAD",
                "/big.bin",
                {"Range": f"bytes=0-{size - 1}", "Want-Content-Digest": "sha-256=10"},
            )
            cpu, wall = proc_cpu(proc.pid) - cpu, time.monotonic() - t0
            base = peak_rss(proc.pid)
            at_once(port, 10, "PROPFIND", "/dir/", {"Depth": "1"})
            rss.setdefault(label, []).append((peak_rss(proc.pid) - base) / 2**20)
            cpus.setdefault(label, []).append(cpu)
            return wall

    got = b.rounds_of({"base": lambda: one("base"), "this": lambda: one("this")}, label="limits")
    b.table(
        ["tree", "digest HEADs: server CPU s", "wall s", "PROPFINDs: peak RSS growth MiB"],
        [
            [
                label,
                f"{min(cpus[label]):.2f}",
                f"{min(got.get(label)):.2f}",
                f"{min(rss[label]):.0f}",
            ]
            for label in trees
        ],
        title=f"{a.requests} x HEAD Range 0-{a.size} MiB Want-Content-Digest sha-256; 10 x "
        f"PROPFIND depth 1 of {a.entries} entries; {b.rounds} rounds, interleaved, "
        "best round",
    )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=2,
    base="required",
    quick_help="64 MiB, 4 HEADs, 2000 entries, one round",
)
