"""Benchmark `dtnkit cp` verification modes on loopback (download).

For each size, stream count and checksum: total time of ``--verify none|sequential|file|block``,
the ratio block/none (target <= 1.11, i.e. >= 90 % of the unverified throughput) and
block / max(transfer-only, checksum-only).

By default the server runs in a separate process (``python -m dtnkit.cli.main serve``), as in a
deployment, and its digest cache is pre-warmed (a HEAD with ``Want-Digest`` before timing), so
the time measured is the client's transfer + verification, as against a server that has the
checksum stored. ``--in-process`` restores the old set-up: a fresh server per run in the
client's process (competing for the GIL), whose source checksum is computed during the copy.

    .venv/bin/python bench/bench_cp.py                      # /dev/shm, 256 MiB and 1 GiB
    .venv/bin/python bench/bench_cp.py --dir /var/tmp --sizes 256
    .venv/bin/python bench/bench_cp.py --in-process         # the old, in-process server
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dtnkit.transfer import checksum as cks
from dtnkit.transfer import client
from dtnkit.transfer.server import start_server

MiB = 2**20
MODES = ("none", "sequential", "file", "block")


def make_file(path: Path, size: int) -> None:
    chunk = os.urandom(16 * MiB)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n


@contextmanager
def server_process(root: Path) -> Iterator[str]:
    """``dtnkit serve`` on 127.0.0.1 in a child process; yields its URL, stops it after."""
    cmd = [sys.executable, "-m", "dtnkit.cli.main", "serve", "--root", str(root),
           "--host", "127.0.0.1", "--port", "0", "--anonymous-read", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening on " not in line:
            raise RuntimeError(f"server did not start: {line!r} (exit {proc.poll()})")
        yield line.split("listening on ", 1)[1].split()[0]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def warm_digests(url: str, algos: list[str]) -> None:
    """Ask the server for each digest once, so its cache holds them before timing."""
    u = client.Url.parse(url)
    session = client.Session(u, client.Options(retries=0))
    for algo in algos:
        session.head(u, want=cks.canonical(algo))


def run_copy(url: str | None, root: Path, name: str, dst: Path,
             options: client.Options) -> float:
    if url is None:  # in-process: a fresh server, cold digest cache
        with start_server(root, host="127.0.0.1", port=0, anonymous_read=True,
                          quiet=True) as h:
            start = time.perf_counter()
            client.copy(h.url + name, str(dst), options)
            elapsed = time.perf_counter() - start
    else:
        start = time.perf_counter()
        client.copy(url + name, str(dst), options)
        elapsed = time.perf_counter() - start
    dst.unlink()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/dev/shm", help="where the files live")
    ap.add_argument("--sizes", default="256,1024", help="MiB, comma-separated")
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--checksums", default="adler32,md5")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="verify modes to time (none and block are always timed)")
    ap.add_argument("--block-size", type=int, default=8, help="MiB")
    ap.add_argument("--repeat", type=int, default=1, help="best of N")
    ap.add_argument("--in-process", action="store_true",
                    help="old set-up: server in this process, cold digest cache per run")
    args = ap.parse_args()
    modes = [m for m in MODES if m in {"none", "block", *args.modes.split(",")}]
    algos = args.checksums.split(",")
    base = Path(tempfile.mkdtemp(prefix="dtnkit-bench-", dir=args.dir))
    try:
        src_root = base / "src"
        src_root.mkdir()
        out = base / "dst"
        out.mkdir()
        where = "in-process server" if args.in_process else "server process, warm digests"
        print(f"dir {args.dir}, block {args.block_size} MiB, best of {args.repeat}, "
              f"{os.cpu_count()} CPUs, {where}")
        print(f"{'size':>6} {'str':>3} {'cksum':>7} | {'none':>6} {'seq':>6} {'file':>6} "
              f"{'block':>6} | {'cks-only':>8} | {'blk/none':>8} {'blk/max':>7} "
              f"{'blk MB/s':>8}")
        with contextmanager(_no_server)() if args.in_process \
                else server_process(src_root) as url:
            for size_mib in (int(s) for s in args.sizes.split(",")):
                name = f"f{size_mib}"
                src = src_root / name
                make_file(src, size_mib * MiB)
                if url is not None:
                    warm_digests(url + name, algos)
                for streams in (int(s) for s in args.streams.split(",")):
                    for algo in algos:
                        times: dict[str, float] = {}
                        for mode in modes:
                            opts = client.Options(streams=streams,
                                                  block_size=args.block_size * MiB,
                                                  checksum=algo, verify=mode, retries=0)
                            times[mode] = min(run_copy(url, src_root, name, out / name, opts)
                                              for _ in range(args.repeat))
                        cs = min(_timed_checksum(src, algo) for _ in range(args.repeat))
                        ratio = times["block"] / times["none"]
                        vs_max = times["block"] / max(times["none"], cs)
                        rate = size_mib * MiB / times["block"] / 1e6
                        shown = {m: f"{times[m]:6.2f}" if m in times else f"{'-':>6}"
                                 for m in MODES}
                        print(f"{size_mib:>5}M {streams:>3} {algo:>7} | {shown['none']} "
                              f"{shown['sequential']} {shown['file']} "
                              f"{shown['block']} | {cs:8.2f} | {ratio:8.2f} {vs_max:7.2f} "
                              f"{rate:8.0f}", flush=True)
                src.unlink()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _no_server() -> Iterator[None]:
    yield None


def _timed_checksum(path: Path, algo: str) -> float:
    start = time.perf_counter()
    cks.file_checksum(path, algo)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
