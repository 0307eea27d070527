"""Does what block verification costs depend on the file's size (64 MiB to 8 GiB)?

Each --sizes file in --dir (tmpfs) under this tree's ``dtnkit serve`` (adler32 cached first),
downloaded in-process with ``--verify none`` and ``block`` (adler32) at each --streams,
interleaved, best of --rounds (2 from 4 GiB); a size with no room for two copies is skipped.
"""

from __future__ import annotations

import argparse
import functools
import shutil

from bench.lib import Bench, Case
from bench.lib import loopback as lb
from bench.lib.procs import fmt_size, make_file


def options(p: argparse.ArgumentParser) -> None:
    lb.options(p)
    p.add_argument(
        "--sizes",
        type=lb.ints,
        default=[64, 256, 1024, 4096, 8192],
        help="MiB, comma-separated (default 64,256,1024,4096,8192)",
    )


def quick(args: argparse.Namespace) -> None:
    args.sizes = [64, 256]


def run(b: Bench) -> None:
    a = b.args
    with lb.served_file(b, lb.MiB, ["adler32"], where=a.dir) as f:
        rows = []
        for size_mib in a.sizes:
            size = size_mib * lb.MiB
            free = shutil.disk_usage(f.root).free
            if free < 2 * size + lb.GiB:
                rows.append(
                    [fmt_size(size), "-", f"skipped: {free / lb.GiB:.1f} GiB free", "", "", "", ""]
                )
                continue
            src = f.root / f"s{size_mib}"
            make_file(src, size)
            try:
                lb.warm_digests(f.url + src.name, ["adler32"])
                for streams in a.streams:
                    t = lb.best(
                        b,
                        {
                            m: functools.partial(
                                lb.cp,
                                f.url + src.name,
                                f.out / src.name,
                                streams=streams,
                                algo="adler32",
                                mode=m,
                                block=a.block_size * lb.MiB,
                            )
                            for m in ("none", "block")
                        },
                        label=f"{size_mib} MiB {streams} streams",
                        rounds=min(b.rounds, 2) if size >= 4 * lb.GiB else b.rounds,
                    )
                    rows.append(
                        [
                            fmt_size(size),
                            str(streams),
                            f"{t['none']:.2f}",
                            f"{t['block']:.2f}",
                            f"{t['block'] / t['none']:.2f}",
                            lb.mb_s(size, t["none"]),
                            lb.mb_s(size, t["block"]),
                        ]
                    )
            finally:
                src.unlink()
        b.table(
            ["size", "streams", "none", "block", "block / none", "none MB/s", "block MB/s"],
            rows,
            title=f"Sizes: adler32, {a.dir}, {a.block_size} MiB blocks, best of "
            f"{b.rounds} (2 from 4 GiB); seconds",
        )


CASE = Case(
    run=run, options=options, quick=quick, rounds=3, quick_help="64 and 256 MiB, one run each"
)
