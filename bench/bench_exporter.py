#!/usr/bin/env python3
"""Scrape time and CPU cost of `dtnkit exporter` against node_exporter's scrape of the same
host, in the same run.

    .venv/bin/python bench/bench_exporter.py [--rounds 40]

Servers (started once, each its own process, on 127.0.0.1 free ports):
  node_exporter        prometheus-node-exporter with its default collectors, as a site runs it
  dtnkit --no-drift    `dtnkit exporter --no-drift`: the kernel-counter collectors only
  dtnkit               `dtnkit exporter`: also tuning drift (an audit at most every 5 min, so
                       a scrape between audits gets the last one) and the last probe results

After one warm-up scrape each (dtnkit's first one runs the audit: its time is printed
apart), each round scrapes every server once, in turn (interleaved, so a burst of load on the
machine hits all alike).  Per scrape: wall time of GET /metrics until the body is read, and
the CPU time (user + system) the server process used for it.  Prints medians and the ratios
to node_exporter's, and the machine's load during the run.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from benchlib import CpuWatch, free_port, log, out, proc_cpu, stop, table

_SCRIPT = Path(sys.executable).parent / "dtnkit"
DTNKIT = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "dtnkit.cli.main"]


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
                raise SystemExit(f"bench_exporter: {url} did not come up") from None
            time.sleep(0.05)  # polling the server's own answer, bounded


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    if shutil.which("prometheus-node-exporter") is None:
        raise SystemExit("bench_exporter: needs prometheus-node-exporter (dev/bootstrap.sh test)")
    tmp = Path(tempfile.mkdtemp(prefix="p19bench-"))
    servers: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
    try:
        port = free_port()
        servers["node_exporter"] = (f"http://127.0.0.1:{port}/metrics", subprocess.Popen(
            ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
             f"--collector.textfile.directory={tmp}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for name, extra in (("dtnkit --no-drift", ["--no-drift"]), ("dtnkit", [])):
            port = free_port()
            servers[name] = (f"http://127.0.0.1:{port}/metrics", subprocess.Popen(
                [*DTNKIT, "exporter", "--listen", f"127.0.0.1:{port}", "--db",
                 str(tmp / "results.sqlite"), *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for url, proc in servers.values():
            wait_up(url, proc)
        first = {}
        for name, (url, _) in servers.items():
            first[name] = scrape(url)[0]
        log(f"warm-up done; {args.rounds} interleaved rounds")
        watch = CpuWatch(lambda: [p.pid for _, p in servers.values()])
        times: dict[str, list[float]] = {n: [] for n in servers}
        cpus: dict[str, list[float]] = {n: [] for n in servers}
        sizes: dict[str, tuple[int, int]] = {}
        for _ in range(args.rounds):
            for name, (url, proc) in servers.items():
                before = proc_cpu(proc.pid)
                took, size, series = scrape(url)
                cpus[name].append(proc_cpu(proc.pid) - before)
                times[name].append(took)
                sizes[name] = (size, series)
        base_t = statistics.median(times["node_exporter"])
        base_c = statistics.mean(cpus["node_exporter"])
        rows = []
        for name in servers:
            t, c = statistics.median(times[name]), statistics.mean(cpus[name])
            rows.append([name, str(sizes[name][1]), f"{sizes[name][0] / 1024:.1f}",
                         f"{t * 1000:.1f}", f"{min(times[name]) * 1000:.1f}",
                         f"{c * 1000:.1f}", f"{t / base_t:.2f}", f"{c / base_c:.2f}"])
        out(f"Scrapes of this host, {args.rounds} interleaved rounds "
            "(CPU: the server process's user+system time per scrape, mean; ticks are 10 ms)")
        out()
        table(["server", "series", "KiB", "median ms", "min ms", "CPU ms/scrape",
               "time ratio", "CPU ratio"], rows)
        out(f"dtnkit's first scrape (runs the audit): {first['dtnkit'] * 1000:.0f} ms; "
            f"with --no-drift: {first['dtnkit --no-drift'] * 1000:.0f} ms.")
        out()
        out(watch.report())
    finally:
        for _, proc in servers.values():
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
