"""Benchmark `dtnkit cp` verification modes on loopback (download, in-process server).

For each size, stream count and checksum: total time of ``--verify none|sequential|file|block``,
the ratio block/none (target <= 1.11, i.e. >= 90 % of the unverified throughput) and
block / max(transfer-only, checksum-only). A fresh server per run, so the server's digest cache
never hides the source checksum.

    .venv/bin/python bench/bench_cp.py                      # /dev/shm, 256 MiB and 1 GiB
    .venv/bin/python bench/bench_cp.py --dir /var/tmp --sizes 256
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
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


def run_copy(root: Path, name: str, dst: Path, options: client.Options) -> float:
    with start_server(root, host="127.0.0.1", port=0, anonymous_read=True, quiet=True) as h:
        start = time.perf_counter()
        client.copy(h.url + name, str(dst), options)
        elapsed = time.perf_counter() - start
    dst.unlink()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/dev/shm", help="where the files live")
    ap.add_argument("--sizes", default="256,1024", help="MiB, comma-separated")
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--checksums", default="adler32,md5")
    ap.add_argument("--block-size", type=int, default=8, help="MiB")
    ap.add_argument("--repeat", type=int, default=1, help="best of N")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="dtnkit-bench-", dir=args.dir))
    try:
        src_root = base / "src"
        src_root.mkdir()
        out = base / "dst"
        out.mkdir()
        print(f"dir {args.dir}, block {args.block_size} MiB, best of {args.repeat}, "
              f"{os.cpu_count()} CPUs")
        print(f"{'size':>6} {'str':>3} {'cksum':>7} | {'none':>6} {'seq':>6} {'file':>6} "
              f"{'block':>6} | {'cks-only':>8} | {'blk/none':>8} {'blk/max':>7} "
              f"{'blk MB/s':>8}")
        for size_mib in (int(s) for s in args.sizes.split(",")):
            name = f"f{size_mib}"
            src = src_root / name
            make_file(src, size_mib * MiB)
            for streams in (int(s) for s in args.streams.split(",")):
                for algo in args.checksums.split(","):
                    times: dict[str, float] = {}
                    for mode in MODES:
                        opts = client.Options(streams=streams, block_size=args.block_size * MiB,
                                              checksum=algo, verify=mode, retries=0)
                        times[mode] = min(run_copy(src_root, name, out / name, opts)
                                          for _ in range(args.repeat))
                    cs = min(_timed_checksum(src, algo) for _ in range(args.repeat))
                    ratio = times["block"] / times["none"]
                    vs_max = times["block"] / max(times["none"], cs)
                    rate = size_mib * MiB / times["block"] / 1e6
                    print(f"{size_mib:>5}M {streams:>3} {algo:>7} | {times['none']:6.2f} "
                          f"{times['sequential']:6.2f} {times['file']:6.2f} "
                          f"{times['block']:6.2f} | {cs:8.2f} | {ratio:8.2f} {vs_max:7.2f} "
                          f"{rate:8.0f}", flush=True)
            src.unlink()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _timed_checksum(path: Path, algo: str) -> float:
    start = time.perf_counter()
    cks.file_checksum(path, algo)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
