"""What does a disk under the files change, against tmpfs, for each verify mode?

The --size file on tmpfs (--dir) and on --disk-dir (/var/tmp), each under this tree's
``dtnkit serve`` (adler32 cached); on disk the source is written back and dropped from the page
cache (fsync + POSIX_FADV_DONTNEED) before every run, so the server reads from disk.  Each
``--verify`` mode with adler32 and ``block`` with ``--verify-level ondisk`` (fsync, drop,
re-read), at each --streams, interleaved, best of --rounds; and the checksum alone.
"""

from __future__ import annotations

import argparse
import functools
import shutil
from collections.abc import Callable

from bench.lib import Bench, Case
from bench.lib import loopback as lb
from bench.lib.procs import fmt_size, make_file


def options(p: argparse.ArgumentParser) -> None:
    lb.options(p)
    p.add_argument("--disk-dir", default="/var/tmp", help="a disk filesystem (default /var/tmp)")


def quick(args: argparse.Namespace) -> None:
    args.size, args.streams = 256, [1]


def run(b: Bench) -> None:
    a = b.args
    size = a.size * lb.MiB
    free = shutil.disk_usage(a.disk_dir).free
    if free < 2 * size + 2 * lb.GiB:
        b.note(f"Disk: skipped, {free / lb.GiB:.1f} GiB free in {a.disk_dir}.")
        return
    with (
        lb.served_file(b, size, ["adler32"], where=a.dir) as tmpfs,
        lb.served_file(b, lb.MiB, ["adler32"], where=a.disk_dir) as disk,
    ):
        src = disk.root / tmpfs.src.name
        make_file(src, size)
        lb.evict(src)
        frac = lb.cached_fraction(src)
        b.log(f"{src} cached after eviction: {'?' if frac is None else f'{100 * frac:.0f} %'}")
        lb.warm_digests(disk.url + src.name, ["adler32"])
        cs = {
            "tmpfs": lb.checksum_only(tmpfs.src, "adler32", b.rounds),
            "disk": lb.checksum_only(src, "adler32", b.rounds, evicted=True),
        }
        rows = []
        for streams in a.streams:
            for where, url, s, d in (
                ("tmpfs", tmpfs.file_url, tmpfs.src, tmpfs.out / tmpfs.src.name),
                ("disk", disk.url + src.name, src, disk.out / src.name),
            ):
                cp = functools.partial(
                    lb.cp, url, d, streams=streams, algo="adler32", block=a.block_size * lb.MiB
                )
                runs: dict[str, Callable[[], float]] = {
                    m: functools.partial(cp, mode=m) for m in lb.MODES
                }
                runs["ondisk"] = functools.partial(cp, mode="block", level="ondisk")
                t = lb.best(
                    b,
                    runs,
                    label=f"{where} {streams} streams",
                    before=functools.partial(lb.evict, s) if where == "disk" else None,
                )
                c = cs[where]
                rows.append(
                    [
                        where if where == "tmpfs" else f"disk ({a.disk_dir})",
                        str(streams),
                        *(f"{t[m]:.2f}" for m in lb.MODES),
                        f"{t['ondisk']:.2f}",
                        f"{c:.2f}",
                        f"{t['block'] / t['none']:.2f}",
                        f"{t['block'] / max(t['none'], c):.2f}",
                        lb.mb_s(size, t["none"]),
                        lb.mb_s(size, t["block"]),
                    ]
                )
        b.table(
            [
                "files",
                "streams",
                *lb.MODES,
                "block ondisk",
                "checksum only",
                "block / none",
                "block / optimum",
                "none MB/s",
                "block MB/s",
            ],
            rows,
            title=f"tmpfs vs disk: adler32, {fmt_size(size)}, {a.block_size} MiB blocks, "
            f"best of {b.rounds}; the disk source dropped from the page cache before "
            "each run; seconds",
        )


CASE = Case(
    run=run, options=options, quick=quick, rounds=3, quick_help="256 MiB, one stream, one run each"
)
