"""How long does a scrape of dtnkit exporter take, and what CPU, against node_exporter's?

Servers (each its own process, on 127.0.0.1 free ports): prometheus-node-exporter with its
default collectors, as a site runs it; ``dtnkit exporter --no-drift`` (the kernel-counter
collectors only); ``dtnkit exporter`` (also tuning drift: an audit at most every 5 min, and
the last probe results).  After one warm-up scrape each (dtnkit's first one runs the audit:
its time is printed apart), each round scrapes every server once, interleaved.  Per scrape:
wall time of GET /metrics until the body is read, and the CPU time the server process used.
"""

from __future__ import annotations

import argparse
import functools
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.support.ports import free_port

from bench.lib import Bench, Case
from bench.lib.machine import proc_cpu

_SCRIPT = Path(sys.executable).parent / "dtnkit"
DTNKIT = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "dtnkit.cli.main"]


def quick(args: argparse.Namespace) -> None:
    args.rounds = 3


def scrape(url: str) -> tuple[float, int, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = resp.read()
    took = time.perf_counter() - start
    series = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
    return took, len(body), series


def wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the server accepts connections (no scrape: the first one is timed)."""
    host, port = urllib.parse.urlsplit(url).netloc.rsplit(":", 1)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up") from None
            time.sleep(0.05)  # polling the server's own answer, bounded


def run(b: Bench) -> None:
    tmp = b.workdir(where="/tmp")
    servers: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
    port = free_port()
    servers["node_exporter"] = (
        f"http://127.0.0.1:{port}/metrics",
        b.tracked.add(
            subprocess.Popen(
                [
                    "prometheus-node-exporter",
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--collector.textfile.directory={tmp}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ),
    )
    for name, extra in (("dtnkit --no-drift", ["--no-drift"]), ("dtnkit", [])):
        port = free_port()
        servers[name] = (
            f"http://127.0.0.1:{port}/metrics",
            b.tracked.add(
                subprocess.Popen(
                    [
                        *DTNKIT,
                        "exporter",
                        "--listen",
                        f"127.0.0.1:{port}",
                        "--db",
                        str(tmp / "results.sqlite"),
                        *extra,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            ),
        )
    for url, proc in servers.values():
        wait_up(url, proc)
    first = {name: scrape(url)[0] for name, (url, _) in servers.items()}
    cpus: dict[str, list[float]] = {n: [] for n in servers}
    sizes: dict[str, tuple[int, int]] = {}

    def one(name: str) -> float:
        url, proc = servers[name]
        before = proc_cpu(proc.pid)
        took, size, series = scrape(url)
        cpus[name].append(proc_cpu(proc.pid) - before)
        sizes[name] = (size, series)
        return took

    got = b.rounds_of({n: functools.partial(one, n) for n in servers}, label="scrapes")
    base_t = got.median("node_exporter") or float("nan")
    base_c = statistics.mean(cpus["node_exporter"])
    rows = []
    for name in servers:
        t, c = got.median(name) or float("nan"), statistics.mean(cpus[name])
        rows.append(
            [
                name,
                str(sizes[name][1]),
                f"{sizes[name][0] / 1024:.1f}",
                f"{t * 1000:.1f}",
                f"{min(got.get(name)) * 1000:.1f}",
                f"{c * 1000:.1f}",
                f"{t / base_t:.2f}",
                f"{c / base_c:.2f}" if base_c else "-",
            ]
        )
    b.table(
        [
            "server",
            "series",
            "KiB",
            "median ms",
            "min ms",
            "CPU ms/scrape",
            "time ratio",
            "CPU ratio",
        ],
        rows,
        title=f"Scrapes of this host, {b.rounds} interleaved rounds (CPU: the server "
        "process's user+system time per scrape, mean; ticks are 10 ms)",
    )
    b.note(
        f"dtnkit's first scrape (runs the audit): {first['dtnkit'] * 1000:.0f} ms; with "
        f"--no-drift: {first['dtnkit --no-drift'] * 1000:.0f} ms."
    )


CASE = Case(
    run=run, quick=quick, rounds=40, tools=("prometheus-node-exporter",), quick_help="three rounds"
)
