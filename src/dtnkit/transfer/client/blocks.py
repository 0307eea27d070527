"""What moving blocks needs beside the network: the pool of block buffers, the helper thread
that hashes combinable blocks, writes and read-backs at file offsets, where a block goes once
all its bytes moved (:class:`Landing`), and a call in the background."""

from __future__ import annotations

import mmap
import os
import queue
import threading
from collections.abc import Callable

from dtnkit.transfer import pipeline
from dtnkit.transfer.checksum import Buffer

#: Receive granularity: each chunk is written and hashed while still in the CPU cache; large
#: enough for zlib/crc32c to release the GIL and for few syscalls.
CHUNK = 2**20


#: A block's buffer: anonymous memory mapped for it (:meth:`BufferPool.get`).
BlockBuffer = bytearray | mmap.mmap


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


class BufferPool:
    """Block-sized receive buffers, reused: no allocation, zero-filling or page faults per block.

    One per stream in use, plus those the ordered hasher holds until it has hashed them.  A
    new one is anonymous memory mapped for it: the kernel gives each page as the first bytes
    land in it (in ``recv``, which runs without the GIL), where ``bytearray(size)`` zero-fills
    all of it at once holding the GIL: four streams' first 8 MiB buffers took 19-35 ms that
    way, and each stream's ``GET`` waited for the buffers of those started before it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[BlockBuffer] = []
        self._lock = threading.Lock()

    def get(self) -> BlockBuffer:
        with self._lock:
            if self._free:
                return self._free.pop()
        return mmap.mmap(-1, self.size)

    def put(self, buf: Buffer | mmap.mmap) -> None:
        obj = buf.obj if isinstance(buf, memoryview) else buf
        if isinstance(obj, bytearray | mmap.mmap) and len(obj) == self.size:
            with self._lock:
                self._free.append(obj)


def read_back(fd: int, block: pipeline.Block, pool: BufferPool | None = None) -> Buffer:
    """Block *block* of the file *fd* (into a pooled buffer when *pool* is given)."""
    if pool is None:
        return os.pread(fd, block.length, block.offset)
    view = memoryview(pool.get())[: block.length]
    return view[: pipeline.pread_into(fd, view, block.offset)]


class CombineHasher:
    """Hashes received blocks (adler32, crc32c) in a helper thread, on whole blocks (zlib and
    crc32c release the GIL on large buffers), so that with few streams the hashing runs on
    another core while the stream receives its next block. When the helper already has
    ``depth`` blocks, the stream hashes the block itself (a direct call, no hand-off): memory
    stays bounded and with many streams the hashing spreads over them.
    """

    def __init__(self, combiner: pipeline.BlockCombiner, pool: BufferPool, depth: int = 2) -> None:
        self._combiner = combiner
        self._pool = pool
        self._depth = depth
        self._pending = 0
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[pipeline.Block, BlockBuffer] | None] = (
            queue.SimpleQueue()
        )
        self.error: BaseException | None = None
        self.inline = 0
        self._thread = threading.Thread(target=self._run, name="dtnkit-block-hash", daemon=True)
        self._thread.start()

    def submit(self, block: pipeline.Block, buf: BlockBuffer) -> None:
        with self._lock:
            busy = self._pending >= self._depth
            if not busy:
                self._pending += 1
        if not busy:
            self._queue.put((block, buf))
            return
        self.inline += 1
        try:
            self._combiner.accept(block, memoryview(buf)[: block.length])
        finally:
            self._pool.put(buf)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            block, buf = item
            try:
                self._combiner.accept(block, memoryview(buf)[: block.length])
            except BaseException as exc:  # reported by the stream that owns it
                self.error = self.error or exc
            finally:
                self._pool.put(buf)
                with self._lock:
                    self._pending -= 1

    def close(self) -> None:
        """Wait for the queued blocks to be hashed and stop the thread."""
        self._queue.put(None)
        self._thread.join()


class Landing:
    """Where a block goes once every byte of it moved: its index into *done* (a download's
    resume journal), its bytes to the verifier, its buffer back to the pool, its length to
    *progress*.

    A combinable verifier (adler32, crc32c) hashes in a :class:`CombineHasher` of the
    stream's (:meth:`hasher`), unless each block's value was computed as it was read
    (*values_read*: an upload that sends the value with the range); an ordered one (md5,
    sha256) owns the buffer until it has hashed it and gives it back to the pool, reading a
    block back with *read_block* (a local file) when it falls behind."""

    def __init__(
        self,
        pool: BufferPool,
        verifier: pipeline.BlockVerifier | None,
        done: set[int] | None,
        progress: Callable[[int], None] | None,
        stop: threading.Event,
        *,
        values_read: bool = False,
        read_block: Callable[[pipeline.Block], Buffer] | None = None,
    ) -> None:
        self.pool, self.verifier, self.done, self.progress = pool, verifier, done, progress
        self.stop = stop
        self.combiner = verifier if isinstance(verifier, pipeline.BlockCombiner) else None
        self.ordered = verifier if isinstance(verifier, pipeline.OrderedHasher) else None
        self.values_read = values_read
        self._lock = threading.Lock()
        if self.ordered is not None:
            self.ordered.set_release(pool.put)
            if read_block is not None:
                self.ordered.set_read_block(read_block)

    def hasher(self) -> CombineHasher | None:
        """A helper thread hashing a stream's blocks (None when none is needed)."""
        if self.combiner is None or self.values_read:
            return None
        return CombineHasher(self.combiner, self.pool)

    def landed(self, b: pipeline.Block, buf: BlockBuffer, hasher: CombineHasher | None) -> None:
        """Block *b*, whose bytes are in *buf*, is where it goes."""
        if self.done is not None:
            with self._lock:
                self.done.add(b.index)  # every byte of it is written
        if hasher is not None:
            hasher.submit(b, buf)  # owns buf now, gives it back to the pool
        elif self.ordered is not None:
            # the ordered hasher owns buf now and gives it back to the pool when done; wait
            # for it rather than have it read the block back
            self.ordered.accept(
                b, memoryview(buf)[: b.length], wait=pipeline.BACKPRESSURE_WAIT, stop=self.stop
            )
        elif self.verifier is not None and self.combiner is None:
            self.verifier.accept(b, memoryview(buf)[: b.length])
        else:
            self.pool.put(buf)
        if self.progress is not None:
            self.progress(b.length)


class Background:
    """Run a call in a thread; ``result()`` re-raises its exception."""

    def __init__(self, call: Callable[[], bytes]) -> None:
        self._value: bytes | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = call()
            except BaseException as exc:
                self._error = exc

        self._thread = threading.Thread(target=run, daemon=True, name="dtnkit-source-digest")
        self._thread.start()

    def result(self) -> bytes:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value
