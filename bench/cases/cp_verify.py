"""What does verifying a copy cost: none, sequential, file or block, per checksum and streams?

A --size file in --dir (tmpfs) under this tree's ``dtnkit serve`` (its digests cached first: a
server with stored checksums), downloaded in-process (``dtnkit.transfer.client.copy``) with
each --streams x --checksums x ``--verify none|sequential|file|block``, interleaved, best of
--rounds; the checksum alone; block / none and block / max(copy alone, checksum alone) (the
pipelining optimum).  The second table compares block-level pipelining with sequential and
file-level verification (the seed paper: up to 70 % and 60 % less time); ``--cold`` adds the
same with the server's digest cache cold (mtime changed before each run, so the source
checksum is computed during the copy, as in the paper's setting).
"""

from __future__ import annotations

import argparse
import functools
import os

from bench.lib import Bench, Case
from bench.lib import loopback as lb
from bench.lib.procs import fmt_size

SEED_HEAD = [
    "streams",
    "checksum",
    "sequential",
    "file",
    "block",
    "block vs sequential",
    "block vs file",
]
Times = dict[tuple[int, str], dict[str, float]]


def options(p: argparse.ArgumentParser) -> None:
    lb.options(p, streams="1,2,4,8")
    p.add_argument(
        "--checksums",
        type=lb.checksums,
        default=["adler32", "crc32c", "md5"],
        help="comma-separated (default adler32,crc32c,md5)",
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help="also with the server's digest cache cold (at 1 and 4 streams)",
    )


def quick(args: argparse.Namespace) -> None:
    args.size, args.streams, args.checksums = 256, [1, 4], ["adler32", "md5"]


def seed_rows(data: Times, algos: list[str], none: bool = False) -> list[list[str]]:
    rows = []
    for (streams, algo), t in sorted(
        data.items(), key=lambda kv: (algos.index(kv[0][1]), kv[0][0])
    ):
        rows.append(
            [
                str(streams),
                algo,
                *([f"{t['none']:.2f}"] if none else []),
                f"{t['sequential']:.2f}",
                f"{t['file']:.2f}",
                f"{t['block']:.2f}",
                f"{100 * (1 - t['block'] / t['sequential']):.0f} %",
                f"{100 * (1 - t['block'] / t['file']):.0f} %",
            ]
        )
    return rows


def run(b: Bench) -> None:
    a = b.args
    size = a.size * lb.MiB
    with lb.served_file(b, size, a.checksums, where=a.dir) as f:
        dst = f.out / f.src.name
        rows, main = [], {}
        for algo in a.checksums:
            cs = lb.checksum_only(f.src, algo, b.rounds)
            for streams in a.streams:
                t = lb.best(
                    b,
                    {
                        m: functools.partial(
                            lb.cp,
                            f.file_url,
                            dst,
                            streams=streams,
                            algo=algo,
                            mode=m,
                            block=a.block_size * lb.MiB,
                        )
                        for m in lb.MODES
                    },
                    label=f"{streams} streams {algo}",
                )
                main[(streams, algo)] = t
                rows.append(
                    [
                        str(streams),
                        algo,
                        *(f"{t[m]:.2f}" for m in lb.MODES),
                        f"{cs:.2f}",
                        f"{t['block'] / t['none']:.2f}",
                        f"{t['block'] / max(t['none'], cs):.2f}",
                        lb.mb_s(size, t["none"]),
                        lb.mb_s(size, t["block"]),
                    ]
                )
        b.table(
            [
                "streams",
                "checksum",
                *lb.MODES,
                "checksum only",
                "block / none",
                "block / optimum",
                "none MB/s",
                "block MB/s",
            ],
            rows,
            title=f"{fmt_size(size)}, files in {a.dir}, {a.block_size} MiB blocks, warm "
            f"server digests, best of {b.rounds}; seconds",
        )
        b.table(
            SEED_HEAD,
            seed_rows(main, a.checksums),
            title="Block-level pipelining vs sequential and file-level verification, "
            "server with stored checksums (reduction of total time)",
        )
        if not a.cold:
            return
        tick = [0]

        def touch() -> None:  # a new mtime: the server's digest cache misses
            tick[0] += 1
            st = f.src.stat()
            os.utime(f.src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000 * tick[0]))

        algos = [c for c in a.checksums if c in ("adler32", "md5")] or a.checksums
        cold = {
            (s, algo): lb.best(
                b,
                {
                    m: functools.partial(
                        lb.cp,
                        f.file_url,
                        dst,
                        streams=s,
                        algo=algo,
                        mode=m,
                        block=a.block_size * lb.MiB,
                    )
                    for m in lb.MODES
                },
                label=f"cold {s} {algo}",
                before=touch,
            )
            for algo in algos
            for s in [s for s in (1, 4) if s in a.streams] or a.streams[:1]
        }
        b.table(
            [*SEED_HEAD[:2], "none", *SEED_HEAD[2:]],
            seed_rows(cold, algos, none=True),
            title="The same, source checksum computed during the copy (server digest "
            "cache cold: mtime changed before each run); seconds",
        )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=3,
    quick_help="256 MiB, 1 and 4 streams, adler32 and md5, one run each",
)
