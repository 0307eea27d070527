"""Does this tree's dtnkit serve GET, PUT and hold idle connections as cheaply as --base's?

Each tree runs its own ``dtnkit serve`` on 127.0.0.1 (root in /dev/shm, ``--quiet``, a token).

get    GET of the whole --size MiB file (plain HTTP: ``sendfile``), the client reading into a
       reused buffer; MiB/s and the server's CPU seconds per GiB (the steadier figure on a
       shared machine; summed over all rounds: one transfer is only a few clock ticks).
put    PUT of the same size with ``Want-Digest: adler32`` (the server hashes while receiving,
       fsyncs, renames); the same figures.  Both interleaved (--order), this tree's twice per
       round for the A/A noise; this / base of the same round with its min-max, and best /
       best (load only adds time).
idle   --idle idle connections opened to each server in turn (the descriptor limit raised to
       the hard one): the server's RSS before and while they are held, its threads and
       descriptors, and a real GET (1 MiB, a new connection) while they are held: median,
       p95 and max of 40, and the median of 40 with none held.  Each server is stopped after
       its turn (10,000 threads ending would load the machine while the next is measured).
"""

from __future__ import annotations

import argparse
import functools
import http.client
import os
import resource
import signal
import socket
import statistics
import subprocess
import time
from pathlib import Path

from bench.lib import Bench, Case
from bench.lib.machine import proc_cpu
from bench.lib.procs import listening_url
from bench.lib.stats import Spread, aa
from bench.lib.trees import Tree

MiB = 2**20
TOKEN = "bench-stack-token"


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=int, default=256, help="MiB (default 256)")
    p.add_argument("--idle", type=int, default=10000, help="idle connections (default 10000)")
    p.add_argument("--only", choices=["throughput", "idle"])


def quick(args: argparse.Namespace) -> None:
    args.rounds, args.size, args.idle = 2, 64, 200


class Server:
    def __init__(self, b: Bench, tree: Tree, root: Path, tokens: Path) -> None:
        self.b = b
        # every idle connection comes from this one address: no per-client share
        share = (
            ["--max-connections-per-client", str(2**24)]
            if tree.serve_takes("--max-connections-per-client")
            else []
        )
        self.proc = b.tracked.add(
            subprocess.Popen(
                tree.dtnkit(
                    "serve",
                    "--root",
                    str(root),
                    "--port",
                    "0",
                    "--tokens",
                    str(tokens),
                    "--quiet",
                    *share,
                ),
                env=tree.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
        assert self.proc.stdout is not None
        self.port = int(listening_url(self.proc.stdout.readline()).rstrip("/").rsplit(":")[-1])

    def status(self, key: str) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) / 1024
        return 0.0

    def count(self, what: str) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/{what}"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.b.tracked.forget(self.proc)


def get_seconds(port: int, path: str, size: int) -> float:
    buf = bytearray(4 * MiB)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.monotonic()
    c.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    r = c.getresponse()
    got = 0
    while n := r.readinto(buf):
        got += n
    seconds = time.monotonic() - t0
    c.close()
    if r.status != 200 or got != size:
        raise RuntimeError(f"GET {path}: {r.status}, {got} of {size} bytes")
    return seconds


def put_seconds(port: int, data: bytes) -> float:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.monotonic()
    c.request(
        "PUT",
        "/up.bin",
        body=data,
        headers={"Authorization": f"Bearer {TOKEN}", "Want-Digest": "adler32"},
    )
    r = c.getresponse()
    r.read()
    seconds = time.monotonic() - t0
    c.close()
    if r.status not in (201, 204) or "adler32" not in (r.headers.get("Digest") or ""):
        raise RuntimeError(f"PUT: {r.status} {r.headers.get('Digest')}")
    return seconds


def throughput(b: Bench, servers: dict[str, Server], size: int, data: bytes) -> None:
    for section in ("get", "put"):
        cpus: dict[str, float] = dict.fromkeys(servers, 0.0)

        def one(name: str, section: str = section, cpus: dict[str, float] = cpus) -> float:
            server = servers[name.removesuffix(" (A/A)")]
            cpu0 = proc_cpu(server.proc.pid)
            sec = (
                get_seconds(server.port, "/big.bin", size)
                if section == "get"
                else put_seconds(server.port, data)
            )
            cpus[name] = cpus.get(name, 0.0) + proc_cpu(server.proc.pid) - cpu0
            return size / MiB / sec

        got = b.rounds_of(
            {n: functools.partial(one, n) for n in [*servers, aa("this")]}, label=section
        )
        rows = []
        for name in [*servers, aa("this")]:
            rate = got.get(name)
            ratio = Spread.of(got.paired(name, "base"))
            cpu = cpus[name] / b.rounds / (size / 2**30)
            base_cpu = cpus["base"] / b.rounds / (size / 2**30)
            rows.append(
                [
                    name,
                    f"{statistics.median(rate):.0f}",
                    ratio.fmt(3) if ratio else "-",
                    b.compare(got, name, "base", noise_of="this").fmt() if name == "this" else "",
                    f"{max(rate) / max(got.get('base')):.3f}",
                    f"{cpu:.3f}",
                    f"{cpu / max(base_cpu, 1e-9):.3f}",
                ]
            )
        b.table(
            [
                "server",
                "MiB/s (median)",
                "/ base [min-max]",
                "/ base (A/A noise)",
                "best / best base",
                "server CPU s/GiB",
                "/ base",
            ],
            rows,
            title=f"{section.upper()} {size // MiB} MiB over loopback ({b.rounds} rounds)",
        )


def idle(b: Bench, servers: dict[str, Server], count: int) -> None:
    rows = []
    for name, server in servers.items():
        alone = statistics.median(
            get_seconds(server.port, "/small.bin", MiB) * 1000 for _ in range(40)
        )
        rss0 = server.status("VmRSS:")
        socks: list[socket.socket] = []
        t0 = time.monotonic()
        failed = 0
        for _ in range(count):
            s = socket.socket()
            s.settimeout(10)
            try:
                s.connect(("127.0.0.1", server.port))
            except OSError:
                failed += 1
                s.close()
                continue
            socks.append(s)
        connect = time.monotonic() - t0
        time.sleep(2.0)  # let the server take them all in (RSS is sampled after)
        times = []
        for _ in range(40):
            try:
                times.append(get_seconds(server.port, "/small.bin", MiB) * 1000)
            except (OSError, RuntimeError, http.client.HTTPException):
                times.append(float("inf"))
        rss1, threads, fds = server.status("VmRSS:"), server.count("task"), server.count("fd")
        for s in socks:
            s.close()
        server.stop()  # its teardown must not load the machine while the next is measured
        p95 = sorted(times)[int(0.95 * len(times)) - 1]
        rows.append(
            [
                name,
                f"{alone:.1f}",
                f"{rss0:.0f}",
                f"{rss1:.0f}",
                str(fds),
                str(threads),
                f"{connect:.1f}",
                f"{statistics.median(times):.1f}",
                f"{p95:.1f}",
                f"{max(times):.1f}",
                str(failed),
            ]
        )
    b.table(
        [
            "tree",
            "GET 1 MiB, none held: median ms",
            "RSS before MiB",
            "RSS held MiB",
            "descriptors open",
            "threads",
            "connect s",
            "GET 1 MiB while held: median ms",
            "p95 ms",
            "max ms",
            "failed",
        ],
        rows,
        title=f"{count} idle connections held",
    )


def run(b: Bench) -> None:
    assert b.base is not None
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    size = b.args.size * MiB
    tmp = b.workdir()
    data = os.urandom(size)
    tokens = tmp / "tokens"
    tokens.write_text(f"{TOKEN} read,write\n")
    servers: dict[str, Server] = {}
    for name, tree in (("base", b.base), ("this", b.this)):
        root = tmp / name
        root.mkdir()
        (root / "big.bin").write_bytes(data)
        (root / "small.bin").write_bytes(data[:MiB])
        servers[name] = Server(b, tree, root, tokens)
    b.note(f"Descriptor limit {hard}.")
    if b.args.only in (None, "throughput"):
        throughput(b, servers, size, data)
    if b.args.only in (None, "idle"):
        idle(b, servers, b.args.idle)


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=5,
    base="required",
    quick_help="64 MiB, two rounds, 200 idle connections",
)
