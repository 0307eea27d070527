"""Which block size should a verified copy use (1 to 64 MiB)?

A --size file in --dir (tmpfs) under this tree's ``dtnkit serve`` (digests cached), downloaded
in-process at each --block-sizes: adler32 ``--verify none`` and ``block`` at each --streams,
and md5 ``block`` at the most streams; interleaved, best of --rounds; block / none and
block / max(copy alone, checksum alone) (the pipelining optimum).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from bench.lib import Bench, Case
from bench.lib import loopback as lb
from bench.lib.procs import fmt_size


def options(p: argparse.ArgumentParser) -> None:
    lb.options(p)
    p.add_argument(
        "--block-sizes",
        type=lb.ints,
        default=[1, 2, 4, 8, 16, 32, 64],
        help="MiB, comma-separated (default 1,2,4,8,16,32,64)",
    )


def quick(args: argparse.Namespace) -> None:
    args.size, args.block_sizes = 256, [4, 16]


def run(b: Bench) -> None:
    a = b.args
    size = a.size * lb.MiB
    with lb.served_file(b, size, ["adler32", "md5"], where=a.dir) as f:
        dst = f.out / f.src.name
        cs = {algo: lb.checksum_only(f.src, algo, b.rounds) for algo in ("adler32", "md5")}
        most = max(a.streams)
        rows = []
        for bs in a.block_sizes:
            cp = functools.partial(lb.cp, f.file_url, dst, block=bs * lb.MiB)
            runs: dict[str, Callable[[], float]] = {
                f"{s}-{m}": functools.partial(cp, streams=s, algo="adler32", mode=m)
                for s in a.streams
                for m in ("none", "block")
            }
            runs["md5"] = functools.partial(cp, streams=most, algo="md5", mode="block")
            t = lb.best(b, runs, label=f"{bs} MiB blocks")
            row = [f"{bs} MiB"]
            for s in a.streams:
                n, blk = t[f"{s}-none"], t[f"{s}-block"]
                row += [
                    f"{n:.2f}",
                    f"{blk:.2f}",
                    f"{blk / n:.2f}",
                    f"{blk / max(n, cs['adler32']):.2f}",
                ]
            row += [f"{t['md5']:.2f}", f"{t['md5'] / max(t[f'{most}-none'], cs['md5']):.2f}"]
            rows.append(row)
        head = ["block size"]
        for s in a.streams:
            head += [f"{s} str none", f"{s} str block", "block / none", "block / optimum"]
        head += [f"md5 block {most} str", "md5 block / optimum"]
        b.table(
            head,
            rows,
            title=f"Block size: adler32 (checksum only {cs['adler32']:.2f} s) "
            f"and md5 (checksum only {cs['md5']:.2f} s), "
            f"{fmt_size(size)}, {a.dir}, best of {b.rounds}; seconds",
        )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=3,
    quick_help="256 MiB, 4 and 16 MiB blocks, one run each",
)
