"""What SciTags marking and the mover's metrics cost ``dtnkit serve``: requests per second of
small GETs (one keep-alive connection, ``SciTag`` header on every request), and seconds of a
large GET, against the same server code without marking, in one run, interleaved (rounds
alternate which server goes first).  Each server is a ``dtnkit serve`` process of its own
(``--scitag 143 --firefly-dest ... --metrics --capacity 10g``, or none of them); the client
is this script.  Fireflies go to a local UDP socket nobody reads (the
kernel drops them when its buffer is full: a send never waits).  ``/metrics`` is scraped
between rounds only (a scrape reads ``TCP_INFO`` of the active streams: its own cost is
printed too).

    .venv/bin/python bench/bench_scitags.py [--rounds 5] [--requests 2000]
"""

from __future__ import annotations

import argparse
import http.client
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import re
import subprocess
from dataclasses import dataclass

from benchlib import CpuWatch, log, make_file, out, proc_cpu, stop, table


@dataclass
class Served:
    proc: subprocess.Popen[str]
    port: int


def serve(root: Path, *flags: str) -> Served:
    proc = subprocess.Popen([sys.executable, "-m", "dtnkit", "serve", "--root", str(root),
                             "--port", "0", "--anonymous-read", "--quiet", *flags],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    m = re.search(r":([0-9]+)/", proc.stdout.readline())
    assert m
    return Served(proc, int(m.group(1)))


def small_gets(server: Served, n: int) -> float:
    """Requests per second of *n* GETs of a 4 KiB file on one connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port)
    t0 = time.perf_counter()
    for _ in range(n):
        conn.request("GET", "/small", headers={"SciTag": "143"})
        r = conn.getresponse()
        r.read()
    conn.close()
    return n / (time.perf_counter() - t0)


def big_get(server: Served) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", server.port)
    t0 = time.perf_counter()
    conn.request("GET", "/big", headers={"SciTag": "143"})
    r = conn.getresponse()
    while r.read(4 * 2**20):
        pass
    conn.close()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--big-mib", type=int, default=512)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dtnkit-t19-", dir="/dev/shm"))
    (root / "small").write_bytes(b"s" * 4096)
    make_file(root / "big", args.big_mib * 2**20)
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    plain = serve(root)
    marked = serve(root, "--scitag", "143", "--firefly-dest",
                   f"127.0.0.1:{sink.getsockname()[1]}", "--metrics", "--metrics-anonymous",
                   "--capacity", "10g")
    watch = CpuWatch(lambda: (plain.proc.pid, marked.proc.pid))
    cpu0 = {"plain": proc_cpu(plain.proc.pid), "marked": proc_cpu(marked.proc.pid)}
    rps: dict[str, list[float]] = {"plain": [], "marked": []}
    secs: dict[str, list[float]] = {"plain": [], "marked": []}
    scrape: list[float] = []
    try:
        for i in range(args.rounds):
            order = [("plain", plain), ("marked", marked)]
            if i % 2:
                order.reverse()
            for name, server in order:
                rps[name].append(small_gets(server, args.requests))
                secs[name].append(big_get(server))
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", marked.port)
            conn.request("GET", "/metrics")
            conn.getresponse().read()
            conn.close()
            scrape.append(time.perf_counter() - t0)
            log(f"round {i + 1}: {rps['plain'][-1]:.0f} vs {rps['marked'][-1]:.0f} req/s")
        cpu = {"plain": proc_cpu(plain.proc.pid) - cpu0["plain"],
               "marked": proc_cpu(marked.proc.pid) - cpu0["marked"]}
        conn = http.client.HTTPConnection("127.0.0.1", marked.port)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        found = re.search(r"^dtnkit_transfer_fireflies_sent_total (\d+)", text, re.M)
        fireflies = found.group(1) if found else "?"
    finally:
        stop(plain.proc)
        stop(marked.proc)
        sink.close()
        for p in root.iterdir():
            p.unlink()
        root.rmdir()
    med = {k: statistics.median(v) for k, v in rps.items()}
    big = {k: statistics.median(v) for k, v in secs.items()}
    table(["what", "without marking", "with marking + metrics", "ratio"], [
        [f"4 KiB GETs, req/s (median of {args.rounds})", f"{med['plain']:.0f}",
         f"{med['marked']:.0f}", f"{med['marked'] / med['plain']:.2f}"],
        [f"{args.big_mib} MiB GET, s (median)", f"{big['plain']:.3f}", f"{big['marked']:.3f}",
         f"{big['marked'] / big['plain']:.2f}"],
        ["server CPU seconds, whole run", f"{cpu['plain']:.2f}", f"{cpu['marked']:.2f}",
         f"{cpu['marked'] / max(cpu['plain'], 1e-9):.2f}"],
    ])
    out(f"Fireflies sent: {fireflies}; one /metrics scrape: "
        f"{1000 * statistics.median(scrape):.2f} ms (median).")
    out(watch.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
