"""Block buffers: a new one costs no page until bytes land in it, and the files of a run
reuse the buffers of those before them (:class:`~dtnkit.transfer.client.blocks.BufferPool`,
:meth:`~dtnkit.transfer.client.request.CopyRun.pool`)."""

from __future__ import annotations

import ctypes
import mmap
import resource

from dtnkit.transfer.client.blocks import BufferPool
from dtnkit.transfer.client.request import CopyRequest, CopyRun

MiB = 2**20
PAGE = resource.getpagesize()
PAGES = 8 * MiB // PAGE


def _resident(buf: bytearray | mmap.mmap) -> int:
    """Pages of *buf* in memory (``mincore``): zero-filled, written or not yet given."""
    libc = ctypes.CDLL(None, use_errno=True)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    start = addr - addr % PAGE
    length = addr + len(buf) - start
    vec = (ctypes.c_ubyte * ((length + PAGE - 1) // PAGE))()
    if libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(length), vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(v & 1 for v in vec)


def test_a_new_buffer_takes_its_pages_as_bytes_land() -> None:
    """``bytearray(8 MiB)`` zero-fills every page up front, holding the GIL, and each
    stream's GET waited for that; a pool's new buffer has no page until bytes land in it."""
    pool = BufferPool(8 * MiB)
    assert _resident(bytearray(8 * MiB)) >= PAGES  # the old way: all of it, at once
    buf = pool.get()
    assert _resident(buf) == 0
    view = memoryview(buf)
    view[: 3 * MiB] = b"x" * (3 * MiB)
    assert 3 * MiB // PAGE <= _resident(buf) < PAGES
    assert len(buf) == 8 * MiB and bytes(view[3 * MiB - 1 : 3 * MiB + 1]) == b"x\0"
    view.release()


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
