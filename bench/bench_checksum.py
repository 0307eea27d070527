#!/usr/bin/env python3
"""Checksum throughput for the block-pipelined mover, against a plain memory copy in one run.

    .venv/bin/python bench/bench_checksum.py [--size-mib 256] [--repeat 3] [--fallback-mib 4]

Hashes an in-memory buffer (random bytes, --size-mib) fed in blocks of 1, 8 and 64 MiB, the way
the mover hands blocks to a checksum, single-threaded:

  memcpy (bytes)    bytes(view of a bytearray) per block: the floor any pass over the data pays;
                    the ratios are against it. A fresh 64 MiB object is mmap'd and page-faulted
                    on every copy, which is why it is slower at 64 MiB than at 1 and 8 MiB
  memcpy (reused)   the same copy into one preallocated buffer: bandwidth without allocation
  adler32           zlib.adler32
  crc32c            the crc32c package (hardware CRC32 instructions when the CPU has them)
  crc32c (python)   the pure-Python fallback, on a --fallback-mib slice only (it is that slow)
  md5, sha256       hashlib

Each figure is the best of --repeat runs, in MB/s (10**6 bytes per second); the ratio after it
is against memcpy at the same block size. The second table is the cost of combining per-block
values into the whole-file value (adler32 and crc32c), per block: crc32c's shift operator is
cached per block length, so "crc32c, new length" shows the uncached cost (all blocks differing
in length, as a short last block does once per file).
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import time
import zlib
from collections.abc import Callable

from dtnkit.transfer import checksum

MIB = 2**20
BLOCKS_MIB = (1, 8, 64)


def best_of(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def feed(view: memoryview, block: int, update: Callable[[memoryview], object]) -> None:
    for offset in range(0, len(view), block):
        update(view[offset : offset + block])


def throughput(
    view: memoryview, block: int, repeat: int, make: Callable[[], checksum.Checksum]
) -> float:
    """MB/s of feeding *view* in *block*-sized pieces to a fresh object's update()."""

    def run() -> None:
        running = make()
        feed(view, block, running.update)

    return len(view) / best_of(repeat, run) / 1e6


class _ZlibAdler32(checksum.Adler32):
    """adler32 through zlib whatever the backend: the baseline ISA-L is compared with."""

    __slots__ = ()

    def update(self, data: checksum.Buffer, /) -> None:
        self.value = zlib.adler32(data, self.value)


def zlib_adler32() -> checksum.Checksum:
    return _ZlibAdler32()


def memcpy(view: memoryview, block: int, repeat: int) -> float:
    """bytes() of each block: a fresh object per block, as a reader handing out blocks makes."""
    return len(view) / best_of(repeat, lambda: feed(view, block, bytes)) / 1e6


def memcpy_reused(view: memoryview, block: int, repeat: int) -> float:
    """Copy each block into one preallocated buffer: memory bandwidth without allocation."""
    target = memoryview(bytearray(block))

    def copy(piece: memoryview) -> None:
        target[: len(piece)] = piece

    return len(view) / best_of(repeat, lambda: feed(view, block, copy)) / 1e6


def combine_cost_us(name: str, block: int, count: int, repeat: int, vary: bool) -> float:
    """Microseconds per combine step over *count* blocks of *block* bytes."""
    rng = random.Random(1)
    blocks = [(rng.getrandbits(32), block + (i if vary else 0)) for i in range(count)]

    def run() -> None:
        if vary:
            checksum._x_pow_8n.cache_clear()
            checksum._shift_tables.cache_clear()
        checksum.combine_blocks(name, blocks)

    return best_of(repeat, run) / count * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fallback-mib", type=int, default=4)
    args = parser.parse_args(argv)

    rng = random.Random(0)
    data = bytearray().join(rng.randbytes(MIB) for _ in range(args.size_mib))
    view = memoryview(data)
    print(
        f"buffer {args.size_mib} MiB in memory, best of {args.repeat}; "
        f"crc32c backend: {checksum.CRC32C_BACKEND}; adler32 backend: "
        f"{checksum.ADLER32_BACKEND}; Python {sys.version.split()[0]}"
    )

    base = {mib: memcpy(view, mib * MIB, args.repeat) for mib in BLOCKS_MIB}
    rows: list[tuple[str, dict[int, float]]] = [
        ("memcpy (bytes)", base),
        ("memcpy (reused)", {m: memcpy_reused(view, m * MIB, args.repeat) for m in BLOCKS_MIB}),
    ]
    for label, name in (
        (f"adler32 ({checksum.ADLER32_BACKEND})", "adler32"),
        ("crc32c (package)", "crc32c"),
        ("md5 (hashlib)", "md5"),
        ("sha256 (hashlib)", "sha256"),
    ):
        if name == "crc32c" and checksum.CRC32C_BACKEND == "python":
            continue  # the package is missing: the fallback row below is all there is
        make = functools.partial(checksum.new, name)
        rows.append((label, {m: throughput(view, m * MIB, args.repeat, make) for m in BLOCKS_MIB}))
    rows.append(("adler32 (zlib)", {m: throughput(view, m * MIB, args.repeat, zlib_adler32)
                                    for m in BLOCKS_MIB}))

    sample = view[: args.fallback_mib * MIB]
    seconds = best_of(1, lambda: checksum.crc32c_python(sample))
    fallback = len(sample) / seconds / 1e6

    width = 18
    head = f"{'MB/s (x memcpy)':<{width}}" + "".join(f"{f'{m} MiB blocks':>20}" for m in BLOCKS_MIB)
    print()
    print(head)
    print("-" * len(head))
    for label, figures in rows:
        cells = "".join(
            f"{f'{figures[m]:,.0f} ({figures[m] / base[m]:.2f}x)':>20}" for m in BLOCKS_MIB
        )
        print(f"{label:<{width}}{cells}")
    fb_cell = f"{fallback:,.1f} ({fallback / base[1]:.4f}x)"
    print(f"{'crc32c (python)':<{width}}{fb_cell:>20}   one {args.fallback_mib} MiB block")

    print()
    head = f"{'combine, per block':<{width + 8}}" + "".join(
        f"{f'{m} MiB blocks':>20}" for m in BLOCKS_MIB
    )
    print(head)
    print("-" * len(head))
    hash_rate = {label.split()[0]: figures for label, figures in rows}
    for label, name, vary in (
        ("adler32", "adler32", False),
        ("crc32c, same length", "crc32c", False),
        ("crc32c, new length", "crc32c", True),
    ):
        cells = ""
        for mib in BLOCKS_MIB:
            count = max(args.size_mib // mib, 64)
            us = combine_cost_us(name, mib * MIB, count, args.repeat, vary)
            rate = hash_rate.get(name, {}).get(mib)
            share = f" {us * 1e-6 / (mib * MIB / (rate * 1e6)):.4%}" if rate else ""
            cells += f"{f'{us:,.1f} us{share}':>20}"
        print(f"{label:<{width + 8}}{cells}")
    print("(percent: combine time as a share of hashing that block with the same algorithm)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
