"""How fast does each checksum hash 1, 8 and 64 MiB blocks, against a plain memory copy?

Hashes an in-memory buffer (random bytes, --size-mib) fed in blocks of 1, 8 and 64 MiB, the way
the mover hands blocks to a checksum, single-threaded:

  memcpy (bytes)    bytes(view of a bytearray) per block: the floor any pass over the data pays;
                    the ratios are against it (a fresh 64 MiB object is mmap'd and page-faulted
                    on every copy, which is why it is slower at 64 MiB than at 1 and 8 MiB)
  memcpy (reused)   the same copy into one preallocated buffer: bandwidth without allocation
  adler32           the registry's adler32 (ISA-L when present) and zlib.adler32
  crc32c            the crc32c package (hardware CRC32 instructions when the CPU has them)
  crc32c (python)   the pure-Python fallback, on a --fallback-mib slice only (it is that slow)
  md5, sha256       hashlib

Each figure is the best of --rounds runs, in MB/s (10**6 bytes per second), with its ratio to
memcpy at the same block size.  The second table is the cost of combining per-block values into
the whole-file value, per block: crc32c's shift operator is cached per block length, so
"crc32c, new length" shows the uncached cost (a short last block, once per file).
"""

from __future__ import annotations

import argparse
import functools
import random
import time
import zlib
from collections.abc import Callable

from bench.lib import Bench, Case
from dtnkit.transfer import checksum

MIB = 2**20
BLOCKS_MIB = (1, 8, 64)


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size-mib", type=int, default=256, help="buffer size (default 256)")
    p.add_argument(
        "--fallback-mib", type=int, default=4, help="what the pure-Python crc32c hashes (default 4)"
    )


def quick(args: argparse.Namespace) -> None:
    args.size_mib, args.fallback_mib = 64, 1


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
        feed(view, block, make().update)

    return len(view) / best_of(repeat, run) / 1e6


class _ZlibAdler32(checksum.Adler32):
    """adler32 through zlib whatever the backend: the baseline ISA-L is compared with."""

    __slots__ = ()

    def update(self, data: checksum.Buffer, /) -> None:
        self.value = zlib.adler32(data, self.value)


def memcpy(view: memoryview, block: int, repeat: int) -> float:
    return len(view) / best_of(repeat, lambda: feed(view, block, bytes)) / 1e6


def memcpy_reused(view: memoryview, block: int, repeat: int) -> float:
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


def run(b: Bench) -> None:
    size, repeat = b.args.size_mib, b.rounds
    rng = random.Random(0)
    view = memoryview(bytearray().join(rng.randbytes(MIB) for _ in range(size)))
    b.note(
        f"Buffer {size} MiB in memory, best of {repeat}; crc32c backend: "
        f"{checksum.CRC32C_BACKEND}; adler32 backend: {checksum.ADLER32_BACKEND}."
    )
    watch = b.watch()
    base = {m: memcpy(view, m * MIB, repeat) for m in BLOCKS_MIB}
    rows: list[tuple[str, dict[int, float]]] = [
        ("memcpy (bytes)", base),
        ("memcpy (reused)", {m: memcpy_reused(view, m * MIB, repeat) for m in BLOCKS_MIB}),
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
        rows.append((label, {m: throughput(view, m * MIB, repeat, make) for m in BLOCKS_MIB}))
        b.log(f"{label} done")
    rows.append(
        ("adler32 (zlib)", {m: throughput(view, m * MIB, repeat, _ZlibAdler32) for m in BLOCKS_MIB})
    )
    sample = view[: b.args.fallback_mib * MIB]
    fallback = len(sample) / best_of(1, lambda: checksum.crc32c_python(sample)) / 1e6
    table = [
        [label, *(f"{f[m]:,.0f} ({f[m] / base[m]:.2f}x)" for m in BLOCKS_MIB)] for label, f in rows
    ]
    table.append(
        [
            "crc32c (python)",
            f"{fallback:,.1f} ({fallback / base[1]:.4f}x)",
            f"one {b.args.fallback_mib} MiB block",
            "",
        ]
    )
    b.table(
        ["MB/s (x memcpy)", *(f"{m} MiB blocks" for m in BLOCKS_MIB)],
        table,
        title="Checksum throughput, one thread",
    )
    rate = {label.split()[0]: f for label, f in rows}
    combine = []
    for label, name, vary in (
        ("adler32", "adler32", False),
        ("crc32c, same length", "crc32c", False),
        ("crc32c, new length", "crc32c", True),
    ):
        cells = []
        for mib in BLOCKS_MIB:
            us = combine_cost_us(name, mib * MIB, max(size // mib, 64), repeat, vary)
            r = rate.get(name, {}).get(mib)
            share = f" ({us * 1e-6 / (mib * MIB / (r * 1e6)):.4%})" if r else ""
            cells.append(f"{us:,.1f} us{share}")
        combine.append([label, *cells])
    b.table(
        ["combine, per block", *(f"{m} MiB blocks" for m in BLOCKS_MIB)],
        combine,
        title="Combining block values (share of hashing that block)",
    )
    b.load_line(watch)


CASE = Case(run=run, options=options, quick=quick, rounds=3, quick_help="64 MiB buffer, one run")
