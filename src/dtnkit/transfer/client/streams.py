"""The stream engine (:func:`run_streams`: N keep-alive connections working through a queue
of blocks, with retries and a clean stop) and what the streams share: the buffer pool, the
helper thread that hashes combinable blocks, block writes and read-backs."""

from __future__ import annotations

import collections
import contextlib
import http.client
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client.errors import Abort, ChecksumMismatch, Refused, Retryable
from dtnkit.transfer.client.options import FileResult, Options
from dtnkit.transfer.client.session import Session, fatal_transport

_S = TypeVar("_S")

#: Blocks a pipelined stream has sent without their answer at most: two, so that the next
#: block is on its way while the answer to the one before comes back.
PIPELINE = 2


def settle_streams(options: Options, session: Session) -> int:
    """The streams of this run: with ``--streams auto`` decided once, from the round-trip
    time of the first connection to *session*'s server (one is made if none answered yet)."""
    if options.auto is not None:
        options.streams = options.auto.decide(session.measure_path,
                                              lambda: session.peer).streams
    return options.streams


def run_streams(session: Session, blocks: list[pl.Block], options: Options, *,
                work: Callable[[http.client.HTTPConnection, pl.Block, _S], None],
                prepare: Callable[[pl.Block], _S],
                finish: Callable[[pl.Block, _S], None],
                give_up: Callable[[pl.Block, int, BaseException], BaseException],
                stop: threading.Event | None = None, name: str = "dtnkit-stream",
                first: http.client.HTTPConnection | None = None,
                ack: Callable[[http.client.HTTPConnection, pl.Block, _S], None] | None = None,
                keep: list[http.client.HTTPConnection] | None = None) -> int:
    """Run ``work(conn, block, state)`` for every block on up to ``options.streams`` keep-alive
    connections (one thread each); returns the number of retries.

    ``prepare(block)`` makes the block's state once (a buffer, the bytes to send) and
    ``finish(block, state)`` hands it on after success.  A connection error, a stall (the
    sockets' ``stall_timeout``) or :class:`Retryable` closes the connection and retries the
    block on a new one after ``backoff * 2**attempt`` seconds, ``options.retries`` times, then
    ``give_up(block, attempts, exc)`` is raised.  The first error stops every stream and is
    raised; ``work`` may raise :class:`Abort` when *stop* is set.  On the way out (Ctrl-C
    included) the streams' sockets are cut so that no thread is left receiving or writing.
    *first* is a connection already open (the download's first request asked on it): the
    first stream uses it instead of making its own.

    With *ack*, ``work`` only sends a block's request and ``ack(conn, block, state)`` reads its
    answer: each stream sends the next block before it reads the answer to the one before
    (HTTP/1.1 pipelining, :data:`PIPELINE` blocks unanswered at most), so no stream waits a
    round trip per block.  A failure (of a send or of an answer) is charged to the oldest
    unanswered block, and every unanswered block is sent again on a new connection.  *keep*:
    the connections of the streams that ended well (still open, nothing unread on them) are
    put there instead of being closed (the caller's next request, e.g. an upload's commit or
    a download stream's next span, needs no new handshake and no new slow start).
    """
    settle_streams(options, session)
    queue_: queue.SimpleQueue[pl.Block] = queue.SimpleQueue()
    for b in blocks:
        queue_.put(b)
    stop = stop if stop is not None else threading.Event()
    errors: list[BaseException] = []
    retries = [0]
    lock = threading.Lock()
    live: dict[int, http.client.HTTPConnection] = {}

    @contextlib.contextmanager
    def ending(index: int) -> Iterator[None]:
        """Around a stream's work: its first error stops every stream (an :class:`Abort` ends
        only this one), and at the end its connection is closed (the one in ``live``: one
        that ended well and went to *keep* is no longer there; closing one the stream closed
        after an error again does nothing)."""
        try:
            yield
        except Abort:
            return
        except BaseException as exc:
            with lock:
                errors.append(exc)
            stop.set()
        finally:
            conn = live.pop(index, None)
            if conn is not None:
                conn.close()

    def pipelined(index: int) -> None:
        assert ack is not None
        conn: http.client.HTTPConnection | None = first if index == 0 else None
        if conn is not None:
            live[index] = conn
        # [block, state, tries, sent on this connection], oldest first; the sent ones are
        # always the first ones
        items: collections.deque[list[Any]] = collections.deque()
        recovering = False  # after a failure: one block at a time until the oldest is answered
        with ending(index):
            while not stop.is_set():
                depth = 1 if recovering else PIPELINE
                sent = sum(1 for it in items if it[3])
                if sent < depth and sent == len(items):
                    try:
                        b = queue_.get_nowait()
                    except queue.Empty:
                        pass
                    else:
                        items.append([b, prepare(b), 0, False])
                try:
                    if conn is None:
                        conn = session.connect()
                        live[index] = conn
                    if sent < depth and sent < len(items):
                        item = items[sent]
                        work(conn, item[0], item[1])
                        item[3] = True
                        continue
                    if not items:
                        if keep is not None:
                            with lock:
                                keep.append(conn)
                            live.pop(index, None)
                            conn = None
                        return
                    b, state = items[0][0], items[0][1]
                    ack(conn, b, state)
                    items.popleft()
                    recovering = False
                    finish(b, state)
                except (Retryable, OSError, http.client.HTTPException) as exc:
                    refused = isinstance(exc, Refused) and conn is not None \
                        and conn.sock is not None
                    if conn is not None and not refused:
                        conn.close()
                        conn = None
                    fatal = fatal_transport(exc, f"{name} to {session.url}")
                    if fatal is not None or not items:
                        raise fatal or exc from None
                    oldest = items[0]
                    if refused:  # the others' answers are still coming: send it again last
                        items.rotate(-1)
                    for it in items if not refused else [oldest]:
                        it[3] = False
                    if oldest[2] >= options.retries:
                        raise give_up(oldest[0], oldest[2] + 1, exc) from None
                    with lock:
                        retries[0] += 1
                    time.sleep(options.backoff * 2**oldest[2])
                    oldest[2] += 1
                    recovering = not refused

    def stream(index: int) -> None:
        conn: http.client.HTTPConnection | None = first if index == 0 else None
        if conn is not None:
            live[index] = conn
        with ending(index):
            while not stop.is_set():
                try:
                    b = queue_.get_nowait()
                except queue.Empty:
                    if keep is not None and conn is not None and conn.sock is not None:
                        with lock:
                            keep.append(conn)
                        live.pop(index, None)
                        conn = None
                    return
                state = prepare(b)
                attempt = 0
                while True:
                    if stop.is_set():
                        return
                    try:
                        if conn is None:
                            conn = session.connect()
                            live[index] = conn
                        work(conn, b, state)
                        break
                    except (Retryable, OSError, http.client.HTTPException) as exc:
                        if conn is not None:
                            conn.close()
                            conn = None
                        fatal = fatal_transport(exc, f"{name} to {session.url}")
                        if fatal is not None:
                            raise fatal from None
                        if attempt >= options.retries:
                            raise give_up(b, attempt + 1, exc) from None
                        with lock:
                            retries[0] += 1
                        time.sleep(options.backoff * 2**attempt)
                        attempt += 1
                finish(b, state)

    threads = [threading.Thread(target=stream if ack is None else pipelined, args=(i,),
                                name=f"{name}-{i}", daemon=True)
               for i in range(min(options.streams, len(blocks)))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    finally:
        stop.set()
        for c in list(live.values()):
            with contextlib.suppress(OSError, AttributeError):
                if c.sock is not None:
                    c.sock.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(10.0)
    if errors:
        raise errors[0]
    return retries[0]


#: Receive granularity: each chunk is written and hashed while still in the CPU cache; large
#: enough for zlib/crc32c to release the GIL and for few syscalls.
CHUNK = 2**20


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


class CombineHasher:
    """Hashes received blocks (adler32, crc32c) in a helper thread, on whole blocks (zlib and
    crc32c release the GIL on large buffers), so that with few streams the hashing runs on
    another core while the stream receives its next block. When the helper already has
    ``depth`` blocks, the stream hashes the block itself (a direct call, no hand-off): memory
    stays bounded and with many streams the hashing spreads over them.
    """

    def __init__(self, combiner: pl.BlockCombiner, pool: BufferPool, depth: int = 2) -> None:
        self._combiner = combiner
        self._pool = pool
        self._depth = depth
        self._pending = 0
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[pl.Block, bytearray] | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.inline = 0
        self._thread = threading.Thread(target=self._run, name="dtnkit-block-hash",
                                        daemon=True)
        self._thread.start()

    def submit(self, block: pl.Block, buf: bytearray) -> None:
        with self._lock:
            busy = self._pending >= self._depth
            if not busy:
                self._pending += 1
        if not busy:
            self._queue.put((block, buf))
            return
        self.inline += 1
        try:
            self._combiner.accept(block, memoryview(buf)[:block.length])
        finally:
            self._pool.put(buf)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            block, buf = item
            try:
                self._combiner.accept(block, memoryview(buf)[:block.length])
            except BaseException as exc:  # reported by the move loop
                self.error = self.error or exc
            finally:
                self._pool.put(buf)
                with self._lock:
                    self._pending -= 1

    def close(self) -> None:
        """Wait for the queued blocks to be hashed and stop the thread."""
        self._queue.put(None)
        self._thread.join()


def read_back(fd: int, block: pl.Block, pool: BufferPool | None = None) -> pl.Buffer:
    """Block *block* of the part file (into a pooled buffer when *pool* is given)."""
    if pool is None:
        return os.pread(fd, block.length, block.offset)
    view = memoryview(pool.get())[:block.length]
    return view[:pl.pread_into(fd, view, block.offset)]


class BufferPool:
    """Block-sized receive buffers, reused: no allocation, zero-filling or page faults per block.

    One per stream in use, plus those the ordered hasher holds until it has hashed them.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def get(self) -> bytearray:
        with self._lock:
            if self._free:
                return self._free.pop()
        return bytearray(self.size)

    def put(self, buf: pl.Buffer) -> None:
        obj = buf.obj if isinstance(buf, memoryview) else buf
        if isinstance(obj, bytearray) and len(obj) == self.size:
            with self._lock:
                self._free.append(obj)


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


def retry_on_mismatch(once: Callable[[], FileResult], options: Options) -> FileResult:
    """Run a whole-file copy again after a checksum mismatch, up to ``options.retries``."""
    total_retries = 0
    last: ChecksumMismatch | None = None
    for _attempt in range(options.retries + 1):
        try:
            result = once()
        except ChecksumMismatch as exc:
            last = exc
            total_retries += 1
            continue
        result.retries += total_retries
        return result
    assert last is not None
    last.why += f" (after {options.retries + 1} attempts)"
    raise last
