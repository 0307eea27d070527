"""What SciTags marking and the mover's metrics cost ``dtnkit serve``: requests per second of
small GETs (one keep-alive connection, ``SciTag`` header on every request), and seconds of a
large GET, against the same server code without marking, in one run, interleaved (rounds
alternate which server goes first).  Fireflies go to a local UDP socket nobody reads (the
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

from benchlib import CpuWatch, log, make_file, out, table
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.server.flows import Destination, Marking


def small_gets(server: ServerHandle, n: int) -> float:
    """Requests per second of *n* GETs of a 4 KiB file on one connection."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port)
    t0 = time.perf_counter()
    for _ in range(n):
        conn.request("GET", "/small", headers={"SciTag": "143"})
        r = conn.getresponse()
        r.read()
    conn.close()
    return n / (time.perf_counter() - t0)


def big_get(server: ServerHandle) -> float:
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
    marking = Marking(143, (Destination.parse(f"127.0.0.1:{sink.getsockname()[1]}"),))
    plain = start_server(root, anonymous_read=True, quiet=True)
    marked = start_server(root, anonymous_read=True, quiet=True, marking=marking,
                          metrics=True, metrics_anonymous=True, capacity=10e9 / 8)
    watch = CpuWatch()
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
        fireflies = marked.flows.fireflies.sent
    finally:
        plain.stop()
        marked.stop()
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
    ])
    out(f"Fireflies sent: {fireflies}; one /metrics scrape: "
        f"{1000 * statistics.median(scrape):.2f} ms (median).")
    out(watch.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
