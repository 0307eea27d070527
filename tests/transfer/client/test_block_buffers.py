"""Block buffers: a new one costs no page until bytes land in it, and the files of a run
reuse the buffers of those before them (:class:`~dtnkit.transfer.client.blocks.BufferPool`,
:meth:`~dtnkit.transfer.client.request.CopyRun.pool`)."""

from __future__ import annotations

import resource
import threading
from collections.abc import Callable

from dtnkit.transfer.client.blocks import BufferPool
from dtnkit.transfer.client.request import CopyRequest, CopyRun

MiB = 2**20
PAGES = 8 * MiB // resource.getpagesize()


def _faults_in_a_thread(work: Callable[[], object]) -> int:
    """Minor page faults of a thread of its own while it runs *work*."""
    out: list[int] = []

    def run() -> None:
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        keep = work()
        out.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
        del keep

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def test_a_new_buffer_takes_its_pages_as_bytes_land() -> None:
    """Zero-filling 8 MiB up front (``bytearray``) faults every page while holding the GIL,
    and each stream's GET waited for that; a pool's new buffer faults none until written."""
    pool = BufferPool(8 * MiB)
    assert _faults_in_a_thread(lambda: bytearray(8 * MiB)) >= PAGES // 2  # the old way
    assert _faults_in_a_thread(pool.get) < 64
    buf = pool.get()
    view = memoryview(buf)
    view[: 3 * MiB] = b"x" * (3 * MiB)
    assert len(buf) == 8 * MiB and bytes(view[3 * MiB - 1 : 3 * MiB + 1]) == b"x\0"


def test_buffers_go_back_to_the_pool_and_out_again() -> None:
    pool = BufferPool(MiB)
    a, b = pool.get(), pool.get()
    assert a is not b
    pool.put(memoryview(a)[:100])  # a view of one, as the ordered hasher gives it back
    assert pool.get() is a
    pool.put(bytearray(10))  # not one of its size: dropped
    assert pool.get() is not b and len(pool.get()) == MiB


def test_the_files_of_a_run_share_the_block_sized_buffers() -> None:
    """A tree's files of a block or more reuse the first ones' buffers (their pages are
    already there); a smaller file has a pool of its own, of its size, so a tree of many
    small files of different sizes keeps no buffer per size."""
    run = CopyRun.of(CopyRequest(block_size=4 * MiB))
    big = run.pool(4 * MiB)
    assert run.pool(100 * MiB) is big and big.size == 4 * MiB
    buf = big.get()
    big.put(buf)
    assert run.pool(5 * MiB).get() is buf
    small = run.pool(1000)
    assert small is not big and small.size == 1000 and run.pool(1000) is not small
    assert run.pool(0).size == 1
