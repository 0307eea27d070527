"""What do SciTags marking and the mover's metrics cost dtnkit serve?

Two ``dtnkit serve`` processes of this tree on the same files: one with ``--scitag 143
--firefly-dest ... --metrics --capacity 10g``, one with none of them.  Per round, interleaved:
requests per second of --requests small GETs (4 KiB, one keep-alive connection, a ``SciTag``
header on every request) and the seconds of one --big-mib GET.  Fireflies go to a local UDP
socket nobody reads (the kernel drops them when its buffer is full: a send never waits);
``/metrics`` is scraped between rounds only (its own cost is printed too).
"""

from __future__ import annotations

import argparse
import functools
import http.client
import re
import socket
import statistics
import time

from bench.lib import Bench, Case
from bench.lib.loopback import dtnkit_server
from bench.lib.machine import proc_cpu
from bench.lib.procs import make_file


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=2000, help="small GETs a round (default 2000)")
    p.add_argument("--big-mib", type=int, default=512, help="the large GET (default 512)")


def quick(args: argparse.Namespace) -> None:
    args.requests, args.big_mib = 200, 64


def small_gets(port: int, n: int) -> float:
    """Requests per second of *n* GETs of a 4 KiB file on one connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    t0 = time.perf_counter()
    for _ in range(n):
        conn.request("GET", "/small", headers={"SciTag": "143"})
        conn.getresponse().read()
    conn.close()
    return n / (time.perf_counter() - t0)


def big_get(port: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    t0 = time.perf_counter()
    conn.request("GET", "/big", headers={"SciTag": "143"})
    r = conn.getresponse()
    while r.read(4 * 2**20):
        pass
    conn.close()
    return time.perf_counter() - t0


def scrape(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def run(b: Bench) -> None:
    a = b.args
    root = b.workdir()
    (root / "small").write_bytes(b"s" * 4096)
    make_file(root / "big", a.big_mib * 2**20)
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink,
        dtnkit_server(b, root) as (plain_url, plain),
        dtnkit_server(
            b,
            root,
            "--scitag",
            "143",
            "--firefly-dest",
            f"127.0.0.1:{_bound(sink)}",
            "--metrics",
            "--metrics-anonymous",
            "--capacity",
            "10g",
        ) as (marked_url, marked),
    ):
        ports = {"plain": _port(plain_url), "marked": _port(marked_url)}
        procs = {"plain": plain, "marked": marked}
        cpu0 = {k: proc_cpu(p.pid) for k, p in procs.items()}
        secs: dict[str, list[float]] = {"plain": [], "marked": []}
        scrapes: list[float] = []

        def one(name: str) -> float:
            rps = small_gets(ports[name], a.requests)
            secs[name].append(big_get(ports[name]))
            if name == "marked":
                t0 = time.perf_counter()
                scrape(ports["marked"])
                scrapes.append(time.perf_counter() - t0)
            return rps

        got = b.rounds_of(
            {n: functools.partial(one, n) for n in ("plain", "marked")}, label="scitags"
        )
        cpu = {k: proc_cpu(p.pid) - cpu0[k] for k, p in procs.items()}
        found = re.search(
            r"^dtnkit_transfer_fireflies_sent_total (\d+)", scrape(ports["marked"]), re.M
        )
    med = {k: got.median(k) or float("nan") for k in ("plain", "marked")}
    big = {k: statistics.median(v) for k, v in secs.items()}
    b.table(
        ["what", "without marking", "with marking + metrics", "ratio"],
        [
            [
                f"4 KiB GETs, req/s (median of {b.rounds})",
                f"{med['plain']:.0f}",
                f"{med['marked']:.0f}",
                f"{med['marked'] / med['plain']:.2f}",
            ],
            [
                f"{a.big_mib} MiB GET, s (median)",
                f"{big['plain']:.3f}",
                f"{big['marked']:.3f}",
                f"{big['marked'] / big['plain']:.2f}",
            ],
            [
                "server CPU seconds, whole run",
                f"{cpu['plain']:.2f}",
                f"{cpu['marked']:.2f}",
                f"{cpu['marked'] / max(cpu['plain'], 1e-9):.2f}",
            ],
        ],
    )
    b.note(
        f"Fireflies sent: {found.group(1) if found else '?'}; one /metrics scrape: "
        f"{1000 * statistics.median(scrapes):.2f} ms (median)."
    )


def _bound(sink: socket.socket) -> int:
    sink.bind(("127.0.0.1", 0))
    return int(sink.getsockname()[1])


def _port(url: str) -> int:
    return int(url.rstrip("/").rsplit(":")[-1])


CASE = Case(
    run=run, options=options, quick=quick, rounds=5, quick_help="200 requests, 64 MiB, one round"
)
