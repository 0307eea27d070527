"""Block-level verification pipelined with a multi-stream transfer (no network here).

* :func:`plan_blocks` cuts a file into disjoint ``(index, offset, length)`` blocks.
* :class:`BlockCombiner` (adler32, crc32c): each block's value is computed as it arrives, on
  whichever stream, and the whole-file value is folded from the per-block values in file order
  with :func:`dtnkit.transfer.checksum.combine_blocks` -- nothing is read back.
* :class:`OrderedHasher` (md5, sha256): an ordered stage (its own thread) hashes blocks in file
  order as the contiguous prefix grows. It holds at most ``max_buffered`` out-of-order blocks in
  memory; a block arriving when that buffer is full is dropped from memory and read back from
  the partly written file when its turn comes (dCache ``ChecksumChannel`` style), so memory
  stays bounded and the receiving streams never wait for the hasher.
* :func:`checksum_fd` / :func:`evict` / :func:`filesystem_type` support the verification levels
  ``inflight``, ``durable`` (fsync before the rename, FIVER) and ``ondisk`` (fsync, drop the
  cached pages, re-read from disk: RIVA).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from dtnkit.transfer import checksum
from dtnkit.transfer.checksum import Buffer

VERIFY_MODES: tuple[str, ...] = ("none", "sequential", "file", "block")
LEVELS: tuple[str, ...] = ("inflight", "durable", "ondisk")
DEFAULT_BLOCK = 8 * 2**20
DEFAULT_MAX_BUFFERED = 8
#: How long a receiving stream waits for the ordered hasher (md5, sha256) to catch up before
#: it drops its block for a later read-back (a stalled next block must not stop the others).
BACKPRESSURE_WAIT = 30.0

#: Filesystems whose pages cannot be dropped: a re-read comes from memory whatever we do.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})


@dataclass(frozen=True, slots=True)
class Block:
    """One range of a file: its number, first byte and length."""

    index: int
    offset: int
    length: int

    @property
    def end(self) -> int:
        """The last byte of the block (inclusive, as in an HTTP Range)."""
        return self.offset + self.length - 1


def plan_blocks(size: int, block_size: int) -> list[Block]:
    """Disjoint blocks covering ``[0, size)``; the last one may be shorter; none for size 0."""
    if size < 0:
        raise ValueError(f"size {size} is negative")
    if block_size <= 0:
        raise ValueError(f"block size must be positive, not {block_size}")
    return [
        Block(i, off, min(block_size, size - off))
        for i, off in enumerate(range(0, size, block_size))
    ]


class BlockVerifier(Protocol):
    """Receives each block once it is written; gives the whole-file digest at the end."""

    name: str

    def accept(self, block: Block, data: Buffer) -> None: ...

    def digest(self, timeout: float | None = None) -> bytes: ...

    def close(self) -> None: ...


class BlockCombiner:
    """Out-of-order, any-stream verification for combinable checksums (adler32, crc32c)."""

    def __init__(self, name: str, blocks: list[Block]) -> None:
        self.name = checksum.canonical(name)
        if self.name not in checksum.COMBINABLE:
            raise ValueError(f"{self.name} cannot be combined; use OrderedHasher")
        self._blocks = blocks
        self._values: list[int | None] = [None] * len(blocks)
        self._lock = threading.Lock()

    def accept(self, block: Block, data: Buffer) -> None:
        if len(data) != block.length:
            raise ValueError(f"block {block.index} is {len(data)} bytes, expected {block.length}")
        value = checksum.block_value(self.name, data)  # zlib / crc32c release the GIL
        self.add_value(block.index, value)

    def add_value(self, index: int, value: int) -> None:
        with self._lock:
            self._values[index] = value

    def block_values(self) -> list[int | None]:
        with self._lock:
            return list(self._values)

    def digest(self, timeout: float | None = None) -> bytes:
        values = self.block_values()
        missing = [i for i, v in enumerate(values) if v is None]
        if missing:
            raise RuntimeError(f"{len(missing)} block(s) never arrived (first {missing[0]})")
        pairs = [(v, b.length) for v, b in zip(values, self._blocks, strict=True) if v is not None]
        return checksum.to_bytes(self.name, checksum.combine_blocks(self.name, pairs))

    def close(self) -> None:
        return None


class OrderedHasher:
    """Ordered hashing stage for md5/sha256 with at most ``max_buffered`` blocks in memory.

    ``read_block`` reads a block back (from the partly written destination) when it was not
    kept in memory. Call :meth:`accept` after the block's bytes are written, :meth:`digest`
    at the end and :meth:`close` always (stops the thread).
    """

    def __init__(
        self,
        name: str,
        blocks: list[Block],
        read_block: Callable[[Block], Buffer],
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        self.name = checksum.canonical(name)
        if max_buffered < 0:
            raise ValueError("max_buffered must be >= 0")
        self._blocks = blocks
        self._read_block = read_block
        self._max = max_buffered
        self._hash = checksum.new(self.name)
        self._release: Callable[[Buffer], None] | None = None
        self._cond = threading.Condition()
        self._arrived = [False] * len(blocks)
        self._held: dict[int, Buffer] = {}
        self._next = 0
        self._closed = False
        self._error: BaseException | None = None
        self._result: bytes | None = None
        self.peak_buffered = 0
        self.read_back = 0
        self._thread = threading.Thread(target=self._run, name="dtnkit-ordered-hash", daemon=True)
        self._thread.start()

    def set_release(self, release: Callable[[Buffer], None] | None) -> None:
        """Give each accepted buffer to *release* once it is no longer needed (hashed, or
        not kept): the caller may then reuse it. Without it, buffers are just dropped."""
        self._release = release

    def set_read_block(self, read_block: Callable[[Block], Buffer]) -> None:
        """Replace the read-back function (e.g. one reading into a reusable buffer)."""
        self._read_block = read_block

    def _done_with(self, data: Buffer) -> None:
        if self._release is not None:
            self._release(data)

    def accept(
        self, block: Block, data: Buffer, *, wait: float = 0.0, stop: threading.Event | None = None
    ) -> None:
        """Hand *block* over.  With *wait* > 0 (the receiving streams), back-pressure: while
        the block is not the next in order and ``max_buffered`` blocks are held, wait up to
        *wait* seconds (or until *stop*) for the hasher to catch up, so the block is hashed
        from memory instead of being dropped and read back from the destination (a second
        copy on the cores the hash needs).  Without it the block is dropped when full."""
        if len(data) != block.length:
            raise ValueError(f"block {block.index} is {len(data)} bytes, expected {block.length}")
        with self._cond:
            if wait > 0:
                deadline = time.monotonic() + wait
                while (
                    not self._closed
                    and block.index != self._next
                    and len(self._held) >= self._max
                    and not (stop is not None and stop.is_set())
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, 0.1))
            kept = False
            if not self._arrived[block.index] and not self._closed:
                self._arrived[block.index] = True
                # The next block in order is always kept (it is hashed at once); others only
                # while there is room.
                if block.index == self._next or len(self._held) < self._max:
                    self._held[block.index] = data
                    kept = True
                    self.peak_buffered = max(self.peak_buffered, len(self._held))
                self._cond.notify_all()
        if not kept:
            self._done_with(data)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while (
                        not self._closed
                        and self._next < len(self._blocks)
                        and not self._arrived[self._next]
                    ):
                        self._cond.wait()
                    if self._closed or self._next >= len(self._blocks):
                        break
                    index = self._next
                    data = self._held.pop(index, None)
                block = self._blocks[index]
                if data is None:
                    data = self._read_block(block)
                    self.read_back += 1
                    if len(data) != block.length:
                        raise OSError(
                            f"read back {len(data)} of {block.length} bytes of block {index}"
                        )
                try:
                    self._hash.update(data)
                finally:
                    self._done_with(data)
                with self._cond:
                    self._next += 1
                    self._cond.notify_all()
            with self._cond:
                if self._next >= len(self._blocks):
                    self._result = self._hash.digest()
                self._cond.notify_all()
        except BaseException as exc:  # reported by digest()
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def digest(self, timeout: float | None = None) -> bytes:
        self._thread.join(timeout)
        with self._cond:
            if self._error is not None:
                raise RuntimeError(f"ordered hashing failed: {self._error}") from self._error
            if self._result is None:
                raise RuntimeError(
                    f"ordered hashing incomplete: {self._next} of {len(self._blocks)} blocks hashed"
                )
            return self._result

    def close(self) -> None:
        with self._cond:
            self._closed = True
            held = list(self._held.values())
            self._held.clear()
            self._cond.notify_all()
        for data in held:
            self._done_with(data)
        self._thread.join()


_T = TypeVar("_T")


class Stage(Generic[_T]):
    """A consumer thread fed through a bounded queue: the producer (a thread receiving from
    a socket) only hands items over, so it goes back to the socket at once while the consumer
    writes and hashes, and the kernel's receive buffer keeps draining (the window stays open).
    :meth:`put` blocks while *depth* items wait (memory stays bounded: back-pressure reaches
    the sender through TCP) and raises the consumer's first error; after an error the
    consumer skips what is queued.  :meth:`drain` waits until everything queued is consumed;
    :meth:`close` (always) drains and stops the thread."""

    def __init__(self, consume: Callable[[_T], None], depth: int, name: str) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._consume = consume
        self._queue: queue.Queue[tuple[_T] | None] = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self.error is None:
                    self._consume(item[0])
            except BaseException as exc:  # raised to the producer by put / drain
                self.error = exc
            finally:
                self._queue.task_done()

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    def put(self, item: _T) -> None:
        self._check()
        self._queue.put((item,))

    def drain(self) -> None:
        self._queue.join()
        self._check()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()


def ordered(name: str) -> bool:
    """Whether *name*'s digest must see the blocks in file order (md5, sha256, sha512: an
    :class:`OrderedHasher`), not combine per-block values in any order."""
    return checksum.canonical(name) not in checksum.COMBINABLE


def make_verifier(
    name: str,
    blocks: list[Block],
    read_block: Callable[[Block], Buffer],
    max_buffered: int = DEFAULT_MAX_BUFFERED,
) -> BlockVerifier:
    """The right block verifier for *name*: combiner when combinable, ordered hasher else."""
    if not ordered(name):
        return BlockCombiner(name, blocks)
    return OrderedHasher(name, blocks, read_block, max_buffered)


def read_chunks(fd: int, start: int, count: int | None, chunk: int) -> Iterator[memoryview]:
    """Bytes ``[start, start + count)`` of an open file (to its end when *count* is None),
    read with pread into one reused buffer of at most *chunk* bytes; each view is valid until
    the next is asked for.  Stops early at the end of the file: callers compare the bytes
    they got with those they asked for."""
    buf = bytearray(max(1, chunk if count is None else min(chunk, count)))
    view = memoryview(buf)
    done = 0
    while count is None or done < count:
        want = len(buf) if count is None else min(len(buf), count - done)
        n = os.preadv(fd, [view[:want]], start + done)
        if n <= 0:
            return
        yield view[:n]
        done += n


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Fill *view* from *offset* of an open file; the bytes read (fewer only at its end)."""
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n <= 0:
            break
        got += n
    return got


def checksum_fd(fd: int, name: str, size: int, block_size: int = DEFAULT_BLOCK) -> bytes:
    """Digest of the first *size* bytes of an open file, read with pread."""
    h = checksum.new(name)
    offset = 0
    for view in read_chunks(fd, 0, size, block_size):
        h.update(view)
        offset += len(view)
    if offset < size:
        raise OSError(f"file ended at {offset} of {size} bytes")
    return h.digest()


def evict(fd: int) -> None:
    """fsync, then ask the kernel to drop the file's cached pages (RIVA)."""
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding *path* (longest mount point in /proc/self/mounts)."""
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return "unknown"
    target = str(path.resolve())
    best, kind = "", "unknown"
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, fields[2]
    return kind


def achieved_level(requested: str, path: Path) -> str:
    """What *requested* amounts to on the filesystem of *path*: ondisk is durable on tmpfs."""
    if requested == "ondisk" and filesystem_type(path) in MEMORY_FILESYSTEMS:
        return "durable"
    return requested
