#!/usr/bin/env python3
"""The HTTP stack under ``dtnkit serve``, before vs after, interleaved in one run (issue 11).

    .venv/bin/python bench/bench_serve_stack.py                    # 79605bc vs this checkout
    .venv/bin/python bench/bench_serve_stack.py --before REV --size 256 --rounds 5 --idle 10000

Each tree runs its own ``dtnkit serve`` (``python -c 'from dtnkit.cli.serve import serve;
serve()'`` with ``PYTHONPATH=<tree>/src``, same interpreter and packages) on 127.0.0.1, root in
a /dev/shm temporary directory, ``--quiet``.  ``--before`` is a directory holding
``src/dtnkit`` or a git revision (a temporary ``git worktree``, removed at the end).

Sections (markdown tables on stdout, progress on stderr):

get    GET of the whole ``--size`` MiB file (plain HTTP: ``sendfile``), the client reading into
       a reused buffer; MiB/s and the server's CPU seconds (user + system) per GiB, per
       tree, and after/before of the same round.  On a shared machine the CPU figure is the
       steadier one: other processes' load changes wall time much more than CPU per byte
       (CPU is summed over all rounds: one transfer is only a few clock ticks).
put    PUT of the same size with ``Want-Digest: adler32`` (the server hashes while receiving,
       fsyncs, renames); the same figures.  Both: the tree going first alternates by round;
       median ratio with its min-max, and best after / best before (load only adds time).
idle   ``--idle`` idle connections opened to each server in turn (this process's soft
       descriptor limit is raised to the hard one; the servers inherit it): the server's RSS
       before and while they are held, how many it holds, and the time of a real GET (1 MiB,
       a new connection) while they are held: median, p95 and max of 40 (and the median
       of 40 with none held, for comparison), and the server's open descriptors then (the
       connections it still holds: dtnkit's head deadline is 20 s, a turn is shorter).  Each
       server is stopped after its turn (10,000 threads ending would load the machine while
       the next one is measured).

``--aiohttp`` adds a third server, bench/aiohttp_candidate.py (aiohttp's ``FileResponse``
for GET, a hashed PUT in the event loop), to every section: the other candidate stack.

Only loopback; servers are stopped by their PID; temporary directories removed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchlib import CpuWatch, free_port, proc_cpu

REPO = Path(__file__).resolve().parent.parent
MiB = 2**20
TOKEN = "bench-stack-token"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@contextlib.contextmanager
def materialise(spec: str) -> Iterator[Path]:
    path = Path(spec)
    if (path / "src" / "dtnkit").is_dir():
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-stack-"))
    wt = tmp / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(wt),
                    spec], check=True)
    try:
        yield wt
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(wt)],
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


class Server:
    def __init__(self, name: str, tree: Path | None, root: Path, tokens: Path) -> None:
        self.name = name
        self.port = free_port()
        if tree is None:  # the aiohttp candidate
            env = dict(os.environ)
            argv = [sys.executable, str(Path(__file__).with_name("aiohttp_candidate.py"))]
        else:
            env = dict(os.environ, PYTHONPATH=str(tree / "src"))
            argv = [sys.executable, "-c", "from dtnkit.cli.serve import serve; serve()"]
            if "max-connections-per-client" in (tree / "src/dtnkit/cli/serve.py").read_text():
                # every idle connection comes from this one address: no per-client share
                argv += ["--max-connections-per-client", str(2**24)]
        self.proc = subprocess.Popen(
            [*argv, "--root", str(root), "--port", str(self.port), "--tokens", str(tokens),
             "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening" not in line:
            raise SystemExit(f"{name}: the server did not start: {line!r}")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


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
        raise SystemExit(f"GET {path}: {r.status}, {got} of {size} bytes")
    return seconds


def put_seconds(port: int, data: bytes) -> float:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.monotonic()
    c.request("PUT", "/up.bin", body=data, headers={"Authorization": f"Bearer {TOKEN}",
                                                    "Want-Digest": "adler32"})
    r = c.getresponse()
    r.read()
    seconds = time.monotonic() - t0
    c.close()
    if r.status not in (201, 204) or "adler32" not in (r.headers.get("Digest") or ""):
        raise SystemExit(f"PUT: {r.status} {r.headers.get('Digest')}")
    return seconds


def fmt(ratios: list[float]) -> str:
    return (f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
            if ratios else "-")


def throughput(servers: dict[str, Server], size: int, rounds: int, data: bytes) -> None:
    for section in ("get", "put"):
        rates: dict[str, list[float]] = {name: [] for name in servers}
        cpus: dict[str, list[float]] = {name: [] for name in servers}
        watch = CpuWatch(lambda: [s.proc.pid for s in servers.values()])
        for i in range(rounds):
            names = list(servers) if i % 2 == 0 else list(reversed(servers))
            for name in names:
                server = servers[name]
                cpu0 = proc_cpu(server.proc.pid)
                sec = (get_seconds(server.port, "/big.bin", size) if section == "get"
                       else put_seconds(server.port, data))
                cpu = (proc_cpu(server.proc.pid) - cpu0) / (size / 2**30)
                rates[name].append(size / MiB / sec)
                cpus[name].append(cpu)
                log(f"{section} round {i + 1} {name}: {size / MiB / sec:.0f} MiB/s, "
                    f"server {cpu:.3f} CPU s/GiB")
        print(f"\n### {section.upper()} {size // MiB} MiB over loopback ({rounds} rounds)\n")
        print("| server | MiB/s (median) | / before (median, min-max) | best / best before "
              "| server CPU s/GiB (all rounds) | / before |")
        print("|---|---|---|---|---|---|")
        base_cpu = sum(cpus["before"]) / rounds
        for name in servers:
            ratios = [x / y for x, y in zip(rates[name], rates["before"], strict=True)]
            cpu = sum(cpus[name]) / rounds
            print(f"| {name} | {statistics.median(rates[name]):.0f} | {fmt(ratios)} "
                  f"| {max(rates[name]) / max(rates['before']):.3f} | {cpu:.3f} "
                  f"| {cpu / max(base_cpu, 1e-9):.3f} |")
        print("\n" + watch.report())


def idle(servers: dict[str, Server], count: int) -> None:
    print(f"\n### {count} idle connections held\n")
    print("| tree | GET 1 MiB, none held: median ms | RSS before (MiB) | RSS held (MiB) | "
          "descriptors open | threads | connect s | GET 1 MiB while held: median ms | p95 ms | "
          "max ms | failed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, server in servers.items():
        alone = statistics.median(get_seconds(server.port, "/small.bin", MiB) * 1000
                                  for _ in range(40))
        rss0 = server.rss_mib()
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
            except (OSError, SystemExit, http.client.HTTPException):
                times.append(float("inf"))
        rss1 = server.rss_mib()
        threads = server.threads()
        fds = server.fds()
        for s in socks:
            s.close()
        server.stop()  # its teardown must not load the machine while the next one is measured
        log(f"idle {name}: {rss0:.0f} -> {rss1:.0f} MiB, {threads} threads, GET "
            f"{statistics.median(times):.1f} ms")
        p95 = sorted(times)[int(0.95 * len(times)) - 1]
        print(f"| {name} | {alone:.1f} | {rss0:.0f} | {rss1:.0f} | {fds} | {threads} "
              f"| {connect:.1f} | "
              f"{statistics.median(times):.1f} | {p95:.1f} | {max(times):.1f} | {failed} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--before", default="79605bc")
    ap.add_argument("--after", default=str(REPO))
    ap.add_argument("--size", type=int, default=256, help="MiB (default 256)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--only", choices=["throughput", "idle"])
    ap.add_argument("--aiohttp", action="store_true",
                    help="also measure bench/aiohttp_candidate.py (needs aiohttp installed)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up on SIGTERM too
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    size = args.size * MiB
    with contextlib.ExitStack() as stack:
        before = stack.enter_context(materialise(args.before))
        after = Path(args.after)
        tmp = Path(tempfile.mkdtemp(prefix="bench-stack-", dir="/dev/shm"))
        stack.callback(shutil.rmtree, tmp, True)
        data = os.urandom(size)
        tokens = tmp / "tokens"
        tokens.write_text(f"{TOKEN} read,write\n")
        servers: dict[str, Server] = {}
        candidates: list[tuple[str, Path | None]] = [("before", before), ("after", after)]
        if args.aiohttp:
            candidates.append(("aiohttp", None))
        for name, tree in candidates:
            root = tmp / name
            root.mkdir()
            (root / "big.bin").write_bytes(data)
            (root / "small.bin").write_bytes(data[:MiB])
            servers[name] = Server(name, tree, root, tokens)
            stack.callback(servers[name].stop)
        print(f"# bench_serve_stack: before {args.before}, after {after} "
              f"(descriptor limit {hard}, {os.cpu_count()} CPUs)")
        if args.only in (None, "throughput"):
            throughput(servers, size, args.rounds, data)
        if args.only in (None, "idle"):
            idle(servers, args.idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
