"""The stream engine: one loop that moves a file's blocks from a block source to a block sink
on several keep-alive connections (:func:`move`), for a download (HTTP ranges -> file), an
upload (local file -> upload session) and a relay (HTTP ranges -> upload session).

Three parts, each replaceable on its own:

* **who gets which block** (a dispatch): :class:`Shares`, a contiguous span of the file per
  stream, rebalanced as they go (a stream that ends its span takes half of what another still
  has), or :class:`BlockQueue`, the next block to whichever stream asks;
* **what a stream does with a block on its connection** (a :class:`Lane`):
  :class:`ReceiveLane` receives ranges into a local file, one ``GET`` per contiguous run of
  the stream's blocks, a writer stage apart from the socket; :class:`SendLane` sends blocks
  into an upload session, pipelined (the next request goes before the answer to the one
  before is read); a caller may bring its own (a ``HEAD`` per block);
* **the streams** (:class:`StreamEngine`): a thread and a connection each, the first stream on a
  connection already open (the first request's), the others on connections opened beside it
  (:class:`~dtnkit.transfer.client.first.Spare`), and the first to join, when the plan
  starts one stream alone, on one opened beside the first request; a failed block is
  retried on a new connection as the run's :class:`~dtnkit.transfer.client.retry.RetryPolicy`
  says; the first error stops every stream; streams join while the copy runs as the
  :class:`~dtnkit.transfer.client.policy.StreamPolicy` decides (:meth:`StreamEngine.add`).

A download's blocks are received as spans, so no stream waits a round trip per block: one
``GET`` per span (the whole file for one stream).  An ordered digest (md5, sha256) must see
the bytes in file order, so with several streams its blocks come from the queue, a ``GET``
each, rather than have the hasher read most of the file back from disk.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import http.client
import queue
import socket
import sys
import termios
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.client.answers import check_content_range
from dtnkit.transfer.client.blocks import CHUNK, BlockBuffer, Landing
from dtnkit.transfer.client.ends import FileSink, HttpRangeSource, ReadBlock, SessionSink
from dtnkit.transfer.client.errors import Abort, FatalHttp, Refused, Retryable
from dtnkit.transfer.client.first import Spare
from dtnkit.transfer.client.pace import PacedSocket
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.request import CopyRun
from dtnkit.transfer.client.retry import RETRYABLE, RetryPolicy
from dtnkit.transfer.client.session import Session, check_status

#: Blocks a pipelined stream has sent without their answer at most: two, so that the next
#: block is on its way while the answer to the one before comes back.
PIPELINE = 2
#: Chunks waiting for a receiving stream's writer: 64 MiB at most between the socket and the
#: disk, shared out among the streams.
STAGE_DEPTH = 64
#: A stream takes blocks from another's span only when that stream would need at least this
#: long for them (and :data:`STEAL_MIN_RTTS` round trips): below it the taker's request round
#: trip and the bytes thrown away at the cut cost about what the split saves.
STEAL_MIN_S = 0.25
STEAL_MIN_RTTS = 4

BlockGiveUp = Callable[[pipeline.Block, int, BaseException], BaseException]


# =========================================================================== who gets which block


def spans(blocks: list[pipeline.Block], n: int) -> list[list[pipeline.Block]]:
    """*blocks* cut into at most *n* groups of consecutive blocks of about equal bytes (a
    group is one ``GET`` when its blocks are contiguous)."""
    total = sum(b.length for b in blocks)
    out: list[list[pipeline.Block]] = []
    group: list[pipeline.Block] = []
    taken = 0
    for b in blocks:
        group.append(b)
        taken += b.length
        # close the group once it holds its share of the bytes
        if len(out) < n - 1 and taken * n >= total * (len(out) + 1):
            out.append(group)
            group = []
    if group:
        out.append(group)
    return out


def runs(blocks: list[pipeline.Block]) -> dict[int, int]:
    """For each block's index, the last byte of the contiguous run of *blocks* it is in."""
    last: dict[int, int] = {}
    start = 0
    for i in range(1, len(blocks) + 1):
        if i == len(blocks) or blocks[i].offset != blocks[i - 1].offset + blocks[i - 1].length:
            for b in blocks[start:i]:
                last[b.index] = blocks[i - 1].end
            start = i
    return last


class Stream:
    """One stream of an :class:`StreamEngine`: its number, its lane, and (with :class:`Shares`)
    the share it is receiving."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.lane: Lane | None = None
        self.share: Share | None = None


class Dispatch(Protocol):
    """Who gets which block."""

    def assign(self, stream: Stream) -> bool:
        """Give a stream that starts its first work (False: there is none for it)."""
        ...

    def take(self, stream: Stream) -> pipeline.Block | None:
        """The stream's next block (None: its work is done, or was taken away)."""
        ...

    def reach(self, stream: Stream, b: pipeline.Block) -> int:
        """The last byte one request from *b* on may ask for: the stream's blocks after *b*
        up to the first gap, none taken away."""
        ...

    def more(self, stream: Stream) -> bool:
        """More work for a stream whose work ended well (its connection still open)."""
        ...

    def join(self, stream: Stream) -> bool:
        """Work for a stream that joins while the others run (False: none worth it)."""
        ...


class BlockQueue:
    """The blocks in file order, each to whichever stream asks next."""

    def __init__(self, blocks: Sequence[pipeline.Block]) -> None:
        self._queue: queue.SimpleQueue[pipeline.Block] = queue.SimpleQueue()
        for b in blocks:
            self._queue.put(b)

    def assign(self, stream: Stream) -> bool:
        return True

    def take(self, stream: Stream) -> pipeline.Block | None:
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def reach(self, stream: Stream, b: pipeline.Block) -> int:
        return b.end

    def more(self, stream: Stream) -> bool:
        return False

    def join(self, stream: Stream) -> bool:
        return False


class Share:
    """The blocks one stream receives: ``blocks[taken:stop]`` are still to come.  Another
    stream that ran out of work may take the tail (:meth:`Shares.steal` lowers *stop*)."""

    def __init__(self, blocks: list[pipeline.Block]) -> None:
        self.blocks = blocks
        self.position = {b.index: i for i, b in enumerate(blocks)}
        self.last = runs(blocks)
        self.taken = 0  # blocks started (the one being received included)
        self.stop = len(blocks)
        self.received = 0  # bytes of the blocks before the one being received
        self.started = time.monotonic()

    @property
    def left(self) -> int:
        return self.stop - self.taken


class Shares:
    """The spans of a download's streams, rebalanced as they go: a stream that has received
    its span takes the second half of what is left of the span with most left, on its own
    connection (open, its window already grown), and the stream that had it stops where
    that half begins.  Equal spans do not end together: streams leaving slow start into one
    queue get unequal shares of the path for seconds (BBR's do), and a fixed span left the
    last stream receiving alone, at its own share's rate, long after the others had ended
    (on a 50 ms / 1 Gbit/s lab path with tuned ends, 3 streams ended 1.4 s apart)."""

    def __init__(self, groups: list[list[pipeline.Block]], rtt_s: float | None = None) -> None:
        self.lock = threading.Lock()
        self.all = [Share(g) for g in groups]
        self._first = list(self.all)  # the spans the starting streams are given, in order
        self.size = sum(b.length for g in groups for b in g)  # the bytes of the download
        self.rtt_s = rtt_s or 0.0
        self.steals = 0

    # ------------------------------------------------------------------ as a dispatch
    def assign(self, stream: Stream) -> bool:
        if stream.index >= len(self._first):
            return False
        stream.share = self._first[stream.index]
        return True

    def take(self, stream: Stream) -> pipeline.Block | None:
        share = stream.share
        assert share is not None
        with self.lock:
            if share.taken >= share.stop:
                return None
            b = share.blocks[share.taken]
            self._claimed(share, share.taken)
            return b

    def reach(self, stream: Stream, b: pipeline.Block) -> int:
        share = stream.share
        assert share is not None
        return min(share.last[b.index], self.end(share))  # not what was taken from it

    def more(self, stream: Stream) -> bool:
        share = self.steal()
        if share is not None:
            stream.share = share
        return share is not None

    def join(self, stream: Stream) -> bool:
        share = self.halve()
        if share is not None:
            stream.share = share
        return share is not None

    # ------------------------------------------------------------------ the rules
    def _claimed(self, share: Share, pos: int) -> None:
        """*share*'s stream starts receiving ``blocks[pos]`` (under :attr:`lock`)."""
        if pos + 1 > share.taken:
            # the bytes of blocks[:pos], added on from what was counted (blocks[:taken-1])
            # rather than summed again for every block of a long span
            start = max(share.taken - 1, 0)
            share.received += sum(x.length for x in share.blocks[start:pos])
            share.taken = pos + 1

    def claim(self, share: Share, b: pipeline.Block) -> bool:
        """Whether *share*'s stream is still to receive *b* (False: it was taken away)."""
        with self.lock:
            pos = share.position[b.index]
            if pos >= share.stop:
                return False
            self._claimed(share, pos)
            return True

    def worth(self, share: Share, k: int, now: float) -> bool:
        """Whether taking *share*'s last *k* blocks saves time: its stream would need at
        least :data:`STEAL_MIN_S` and :data:`STEAL_MIN_RTTS` round trips for them at the
        rate it has had (a taker pays a round trip for its request, and the bytes in flight
        past the cut are thrown away).  A share with no block received yet has had less
        than one block in its time: the blocks need at least that long each (a stream that
        joined late, still in slow start: on a 50 ms / 5 Gbit/s lab path its 48 MiB came
        0.46 s after the first stream had ended, which took none of them)."""
        elapsed = now - share.started
        if elapsed <= 0:
            return False
        moved = share.received or share.blocks[max(share.taken - 1, 0)].length
        need = sum(b.length for b in share.blocks[share.stop - k : share.stop]) * elapsed / moved
        return need >= max(STEAL_MIN_S, STEAL_MIN_RTTS * self.rtt_s)

    def end(self, share: Share) -> int:
        """The last byte *share*'s stream is still to receive."""
        with self.lock:
            return share.blocks[share.stop - 1].end

    def _take(self, victim: Share, k: int) -> Share:
        """A new share of *victim*'s last *k* blocks left, which it no longer receives
        (under :attr:`lock`)."""
        share = Share(victim.blocks[victim.stop - k : victim.stop])
        victim.stop -= k
        self.all.append(share)
        return share

    def halve(self) -> Share | None:
        """A new share for a stream that joins: the second half of the blocks left of the
        share with most left (a half rounding down); None when no share has two blocks
        left."""
        with self.lock:
            victim = max(self.all, key=lambda s: s.left, default=None)
            if victim is None or victim.left < 2:
                return None
            return self._take(victim, victim.left // 2)

    def split(self, victim: Share, parts: int) -> Share | None:
        """A new share: the last 1/*parts* of the blocks *victim* has left (None when that
        is not one block)."""
        with self.lock:
            k = victim.left // max(1, parts)
            return self._take(victim, k) if k >= 1 else None

    def steal(self) -> Share | None:
        """A new share: the second half of the blocks left of the share with most left
        whose half is worth taking (:meth:`worth`; at least one block, and one stays with
        it), or None."""
        with self.lock:
            now = time.monotonic()
            victim = next(
                (
                    s
                    for s in sorted(self.all, key=lambda s: -s.left)
                    if s.left >= 2 and self.worth(s, s.left // 2, now)
                ),
                None,
            )
            if victim is None:
                return None
            self.steals += 1
            return self._take(victim, victim.left // 2)


# =========================================================================== what a stream does


class Lane(Protocol):
    """What a stream does with each of its blocks on its connection.  With :attr:`depth` 1,
    :meth:`send` moves the block and :meth:`answer` has nothing left to do; with more, up to
    that many blocks are sent before the answer to the oldest is read (HTTP/1.1
    pipelining)."""

    depth: int

    def counted(self) -> int:
        """Bytes received so far, as they came (0 for a lane that sends)."""
        ...

    def prepare(self, b: pipeline.Block) -> Any:
        """The block's state, made once (a buffer; the bytes to send)."""
        ...

    def send(self, conn: http.client.HTTPConnection, b: pipeline.Block, state: Any) -> None: ...

    def answer(self, conn: http.client.HTTPConnection, b: pipeline.Block, state: Any) -> None: ...

    def finish(self, b: pipeline.Block, state: Any) -> None:
        """The block moved: hand it on."""
        ...

    def reusable(self, conn: http.client.HTTPConnection) -> bool:
        """After the stream's blocks: whether *conn* can carry another request (nothing
        unread on it); a lane closes what it cannot reuse."""
        ...

    def queued(self) -> int:
        """Bytes that arrived for this lane but are not read yet (the kernel's queue)."""
        ...

    def drain(self) -> None:
        """The stream ended well: wait for what the lane still hands on; raise its error."""
        ...

    def close(self) -> None: ...


@dataclass(slots=True)
class OpenResponse:
    """A ``GET`` answer being read: on which connection, up to which offset, and the last byte
    its body carries (past the run asked for when it is a whole-file ``200``)."""

    conn: http.client.HTTPConnection
    response: http.client.HTTPResponse
    offset: int
    end: int


@dataclass(slots=True)
class _Receiving:
    buf: BlockBuffer
    tries: int = 0


#: What a receiving stream hands its writer: a chunk to write at its offset (buf None), or
#: the end of a block (data empty) with the block's buffer.
_Item = tuple[int, pipeline.Block, memoryview, BlockBuffer | None]


class ReceiveLane:
    """One stream receiving ranges of an HTTP source into a local sink: one ``GET`` per
    contiguous run of its blocks (as far as :meth:`Dispatch.reach` allows), each 1 MiB chunk
    handed to a writer stage (:class:`~dtnkit.transfer.pipeline.Stage`, a bounded queue), so
    the stream's thread only receives while another writes and, at the end of each block,
    lands it (:class:`~dtnkit.transfer.client.blocks.Landing`).  A broken connection resumes
    with a new ``GET`` from the first block not yet received.  Without a *stage_depth* the
    stream writes and lands its blocks itself (a ``GET`` per block from the queue, for an
    ordered digest, whose hashing waits for the blocks before anyway)."""

    depth = 1

    def __init__(
        self,
        source: HttpRangeSource,
        sink: FileSink,
        landing: Landing,
        size: int,
        stage_depth: int | None,
        reach: Callable[[pipeline.Block], int],
        opened: OpenResponse | None = None,
    ) -> None:
        self.source, self.sink, self.landing, self.size = source, sink, landing, size
        self.reach = reach
        self.open = opened  # a GET already answered on the stream's first connection
        # the sockets it has received on, each counting its bytes as they come (counted())
        self._socks: list[PacedSocket] = []
        self.current: http.client.HTTPConnection | None = None  # the one being read
        self.hasher = landing.hasher()
        self.stage: pipeline.Stage[_Item] | None = (
            pipeline.Stage(self._consume, stage_depth, "dtnkit-write")
            if stage_depth is not None
            else None
        )

    def queued(self) -> int:
        """Bytes that arrived on the connection being read but are not read yet (the
        kernel's receive queue, FIONREAD; 0 when it cannot be seen)."""
        conn = self.current
        sock = conn.sock if conn is not None else None
        if sock is None:
            return 0
        try:
            raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4)
        except (OSError, ValueError, TypeError):
            return 0
        return max(0, int.from_bytes(raw[:4], sys.byteorder, signed=True))

    def counted(self) -> int:
        """Bytes received on the stream's sockets, counted as each receive returns them.
        (Counted as each 1 MiB read of a body returned, once full, four streams' bytes per
        round trip read 2.0, 2.5 or 3.5 MiB of their 3 MiB of windows on a 50 ms lab path,
        and a loaded CI run took bound streams for path-bound.)"""
        return sum(s.received for s in self._socks)

    def prepare(self, b: pipeline.Block) -> _Receiving:
        return _Receiving(self.landing.pool.get())

    def _response_at(
        self, conn: http.client.HTTPConnection, b: pipeline.Block
    ) -> http.client.HTTPResponse:
        """The open response when it continues at block *b* on *conn*, else a new ``GET`` of
        the run from *b* on."""
        if self.open is not None and self.open.conn is conn and self.open.offset == b.offset:
            return self.open.response
        self.open = None
        src = self.source
        first, last = b.offset, self.reach(b)
        hdrs = {"Range": f"bytes={first}-{last}"}
        if src.etag:
            hdrs["If-Range"] = src.etag
        what = f"GET {src.url}"
        conn.request("GET", src.url.path, headers=src.session.headers(hdrs))
        src.session.run.mark(
            "GET sent", connection=getattr(conn, "timeline_index", None), range=f"{first}-{last}"
        )
        r = conn.getresponse()
        if r.status >= 500:
            r.read(4096)
            raise Retryable(f"{what} bytes {first}-{last}: HTTP {r.status}")
        if r.status != 206:
            body = r.read(4096)
            if r.status == 200:
                raise FatalHttp(
                    what,
                    "the server sent the whole file instead of a range "
                    "(the source changed during the copy?)",
                    "retry the copy",
                )
            check_status(r.status, what, body, ok=(206,))
        # exactly the bytes asked for, of the size the HEAD gave (answers.py), whatever the
        # verify mode: under --verify none nothing else would notice other bytes
        check_content_range(r.getheader("Content-Range"), first, last, self.size, what)
        self.open = OpenResponse(conn, r, first, last)
        return r

    def send(self, conn: http.client.HTTPConnection, b: pipeline.Block, state: _Receiving) -> None:
        if state.tries and self.stage is not None:
            self.stage.drain()  # an earlier attempt's chunks are written before buf is refilled
        state.tries += 1
        self.current = conn
        r = self._response_at(conn, b)
        sock = conn.sock
        if isinstance(sock, PacedSocket) and (not self._socks or self._socks[-1] is not sock):
            self._socks.append(sock)
        view = memoryview(state.buf)[: b.length]
        got = posted = 0
        stop = self.landing.stop
        while got < b.length:
            if stop.is_set():
                raise Abort()
            n = r.readinto(view[got : min(b.length, posted + CHUNK)])
            if not n:
                self.open = None
                raise Retryable(
                    f"GET {self.source.url} block {b.index}: connection closed "
                    f"after {got} of {b.length} bytes"
                )
            got += n
            if got - posted >= CHUNK or got == b.length:
                self._hand((b.offset + posted, b, view[posted:got], None))
                posted = got
        body_end = self.open.end if self.open is not None else b.end
        if b.end == self.reach(b) or b.end >= body_end:  # the end of the run or the body
            self.open = None
            if body_end > b.end:
                conn.close()  # the rest of a whole-file body is another stream's or kept
            elif r.read(1):
                raise Retryable(f"GET {self.source.url}: longer than asked")
        else:
            self.open = OpenResponse(conn, r, b.offset + b.length, body_end)

    def answer(
        self, conn: http.client.HTTPConnection, b: pipeline.Block, state: _Receiving
    ) -> None:
        return None

    def finish(self, b: pipeline.Block, state: _Receiving) -> None:
        self._hand((-1, b, memoryview(b""), state.buf))

    def _hand(self, item: _Item) -> None:
        if self.stage is not None:
            self.stage.put(item)
        else:
            self._consume(item)

    def _consume(self, item: _Item) -> None:
        offset, b, data, buf = item
        if buf is not None:
            self.landing.landed(b, buf, self.hasher)
        else:
            self.sink.write(data, offset)

    def reusable(self, conn: http.client.HTTPConnection) -> bool:
        if self.open is not None:  # the rest of its body was taken away: cut it
            self.open = None
            conn.close()
        return conn.sock is not None

    def drain(self) -> None:
        if self.stage is not None:
            self.stage.drain()

    def close(self) -> None:
        if self.stage is not None:
            self.stage.close()
        if self.hasher is not None:
            self.hasher.close()
            if self.hasher.error is not None:
                raise self.hasher.error
        if self.stage is not None and self.stage.error is not None:
            raise self.stage.error


#: a block being sent: its buffer, its bytes, their adler32/crc32c value (or None)
_Sending = tuple[BlockBuffer, memoryview, int | None]


class SendLane:
    """Streams sending blocks into an upload session: each block read from the source into
    a pooled buffer (hashed as read for sending, FIVER: its value goes with the range when
    the sink sends values), sent as a ``PUT`` with ``Content-Range``, the requests pipelined
    (:data:`PIPELINE`), then landed.  One lane serves every stream."""

    depth = PIPELINE

    def __init__(
        self,
        source: HttpRangeSource | ReadBlock,
        sink: SessionSink,
        landing: Landing,
        algorithm: str,
    ) -> None:
        self.source, self.sink, self.landing, self.algorithm = source, sink, landing, algorithm
        self.hasher = landing.hasher()

    def counted(self) -> int:
        return 0

    def queued(self) -> int:
        return 0

    def prepare(self, b: pipeline.Block) -> _Sending:
        buf = self.landing.pool.get()
        data = self.source.read(b, buf)  # read once, hashed as read for sending (FIVER)
        value = (
            checksum.block_value(self.algorithm, data)
            if (self.landing.combiner is not None or self.sink.range_digest)
            else None
        )
        if self.landing.combiner is not None and value is not None:
            self.landing.combiner.add_value(b.index, value)
        return buf, data, value

    def send(self, conn: http.client.HTTPConnection, b: pipeline.Block, state: _Sending) -> None:
        self.sink.send(conn, b, state[1], state[2])

    def answer(self, conn: http.client.HTTPConnection, b: pipeline.Block, state: _Sending) -> None:
        self.sink.answer(conn, b)

    def finish(self, b: pipeline.Block, state: _Sending) -> None:
        self.landing.landed(b, state[0], self.hasher)

    def reusable(self, conn: http.client.HTTPConnection) -> bool:
        return conn.sock is not None

    def drain(self) -> None:
        return None

    def close(self) -> None:
        if self.hasher is not None:
            self.hasher.close()
            if self.hasher.error is not None:
                raise self.hasher.error


# =========================================================================== the streams


class StreamEngine:
    """Streams moving blocks: a thread and a keep-alive connection each to *session*'s
    server, their blocks from *dispatch*, their work done by the lane *lane* makes for each;
    a failed block is retried on a new connection as *retry* says, then ``give_up(block,
    attempts, error)`` is raised.  The first error stops every stream and is raised by
    :meth:`wait`; a lane may raise :class:`~dtnkit.transfer.client.errors.Abort` when *stop*
    is set.  On the way out (Ctrl-C included) the streams' sockets are cut so that no thread
    is left receiving or writing.  *keep*: where the streams that ended well leave their
    connections (open, nothing unread on them) for the caller's next request (an upload's
    commit), instead of closing them.

    With a pipelined lane a failure (of a send or of an answer) is charged to the oldest
    unanswered block, and every unanswered block is sent again on a new connection; a
    :class:`~dtnkit.transfer.client.errors.Refused` answer on a connection that stays usable
    sends that block again last."""

    def __init__(
        self,
        session: Session,
        dispatch: Dispatch,
        lane: Callable[[Stream], Lane],
        *,
        retry: RetryPolicy,
        give_up: BlockGiveUp,
        name: str,
        stop: threading.Event | None = None,
        keep: list[http.client.HTTPConnection] | None = None,
    ) -> None:
        self.session, self.dispatch, self._lane = session, dispatch, lane
        self.retry, self.give_up, self.name = retry, give_up, name
        self.stop = stop if stop is not None else threading.Event()
        self.keep = keep
        self.streams: list[Stream] = []
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.retries = 0
        self.lock = threading.Lock()
        self._live: dict[int, http.client.HTTPConnection] = {}
        self._lanes: list[Lane] = []
        self._ready: list[Spare] = []  # connections opened for streams that may join

    # ------------------------------------------------------------------ starting streams
    def start(
        self,
        count: int,
        first: http.client.HTTPConnection | None = None,
        spares: Sequence[Spare] = (),
    ) -> None:
        """Start *count* streams (fewer when the dispatch has no work for more): the first on
        *first* when given, the next ones on *spares* (those left are closed)."""
        with self.lock:
            for i in range(count):
                stream = Stream(i)
                if not self.dispatch.assign(stream):
                    break
                conn = first if i == 0 else None
                ready = spares[i - 1] if 0 < i <= len(spares) else None
                self._launch(stream, conn, ready)
        if first is not None and not self.streams:
            first.close()
        # the others are for streams that join (add), closed at the end when none did
        self._ready.extend(spares[max(0, len(self.streams) - 1) :])

    def add(self, k: int) -> int:
        """Start up to *k* streams that join, each with work the dispatch gives it
        (:meth:`Dispatch.join`), the first on a connection opened for it if there is one."""
        added = 0
        with self.lock:
            for _ in range(k):
                stream = Stream(len(self.streams))
                if self.errors or not self.dispatch.join(stream):
                    break
                self._launch(stream, None, self._ready.pop(0) if self._ready else None)
                added += 1
        return added

    def _launch(
        self, stream: Stream, conn: http.client.HTTPConnection | None, ready: Spare | None
    ) -> None:
        """(under :attr:`lock`)"""
        stream.lane = self._lane(stream)
        if stream.lane not in self._lanes:
            self._lanes.append(stream.lane)
        self.streams.append(stream)
        thread = threading.Thread(
            target=self._run,
            args=(stream, conn, ready),
            name=f"{self.name}-{stream.index}",
            daemon=True,
        )
        self.threads.append(thread)
        thread.start()

    # ------------------------------------------------------------------ what a crew shows
    def received(self, stream: int | None = None, *, queued: bool = True) -> int:
        lanes = [
            s.lane
            for s in (list(self.streams) if stream is None else [self.streams[stream]])
            if s.lane is not None
        ]
        return sum(lane.counted() + (lane.queued() if queued else 0) for lane in lanes)

    def failed(self) -> bool:
        return bool(self.errors)

    def left(self) -> int | None:
        """Bytes of the download not received yet (None: a dispatch that does not know)."""
        size = self.dispatch.size if isinstance(self.dispatch, Shares) else None
        return None if size is None else max(size - self.received(), 0)

    # ------------------------------------------------------------------ a stream
    def _run(
        self, stream: Stream, conn: http.client.HTTPConnection | None, ready: Spare | None
    ) -> None:
        lane = stream.lane
        assert lane is not None
        mark = self.session.run.mark
        mark("stream starts", stream=stream.index)
        try:
            if ready is not None:
                conn = ready.take()  # its handshakes began beside the first request
            while True:
                if conn is not None:
                    self._live[stream.index] = conn
                conn = self._move(stream, lane, conn)
                if conn is None:  # stopped, or its connection is gone (cut where work was
                    if not self.stop.is_set():  # taken): what it received is still written
                        lane.drain()
                    return
                with self.lock:
                    more = not self.errors and self.dispatch.more(stream)
                if not more:
                    break
            lane.drain()
            if self.keep is not None:
                with self.lock:
                    self.keep.append(conn)
                self._live.pop(stream.index, None)
        except Abort:
            return
        except BaseException as exc:
            with self.lock:
                self.errors.append(exc)
            self.stop.set()
        finally:
            mark("stream ends", stream=stream.index)
            left = self._live.pop(stream.index, None)
            if left is not None:
                left.close()

    def _move(
        self, stream: Stream, lane: Lane, conn: http.client.HTTPConnection | None
    ) -> http.client.HTTPConnection | None:
        """The stream's blocks until the dispatch has none for it: its connection then when
        it can carry another request, else None (closed; also when stopping)."""
        # [block, state, its tries, sent on this connection], oldest first; the sent ones
        # are always the first ones
        items: collections.deque[list[Any]] = collections.deque()
        recovering = False  # after a failure: one block at a time until the oldest is answered
        what = f"{self.name} to {self.session.url}"
        while not self.stop.is_set():
            depth = 1 if recovering else lane.depth
            sent = sum(1 for it in items if it[3])
            if sent < depth and sent == len(items):
                b = self.dispatch.take(stream)
                if b is not None:
                    give_up = functools.partial(self.give_up, b)
                    items.append([b, lane.prepare(b), self.retry.attempt(what, give_up), False])
            try:
                if conn is None:
                    conn = self.session.connect()
                    self._live[stream.index] = conn
                if sent < depth and sent < len(items):
                    item = items[sent]
                    lane.send(conn, item[0], item[1])
                    item[3] = True
                    continue
                if not items:
                    return conn if lane.reusable(conn) else None
                b, state = items[0][0], items[0][1]
                lane.answer(conn, b, state)
                items.popleft()
                recovering = False
                lane.finish(b, state)
            except RETRYABLE as exc:
                refused = isinstance(exc, Refused) and conn is not None and conn.sock is not None
                if conn is not None and not refused:
                    conn.close()
                    conn = None
                if not items:
                    raise
                oldest = items[0]
                if refused:  # the others' answers are still coming: send it again last
                    items.rotate(-1)
                for it in items if not refused else [oldest]:
                    it[3] = False
                oldest[2].failed(exc)  # raises when the tries ran out; else waits
                with self.lock:
                    self.retries += 1
                recovering = not refused
        return None

    # ------------------------------------------------------------------ the end
    def wait(self) -> int:
        """Wait for every stream (those that join meanwhile included); the number of
        retries; the first error raised."""
        try:
            i = 0
            while True:
                with self.lock:
                    if i >= len(self.threads):
                        break
                    thread = self.threads[i]
                thread.join()
                i += 1
        finally:
            self.stop.set()
            with self.lock:
                unused, self._ready = self._ready, []
            for spare in unused:
                spare.close()
            for c in list(self._live.values()):
                with contextlib.suppress(OSError, AttributeError):
                    if c.sock is not None:
                        c.sock.shutdown(socket.SHUT_RDWR)
            for t in list(self.threads):
                t.join(10.0)
            closing: BaseException | None = None
            for lane in self._lanes:
                try:
                    lane.close()
                except BaseException as exc:  # a hashing thread's error
                    closing = closing or exc
        if self.errors:
            raise self.errors[0]
        if closing is not None:
            raise closing
        return self.retries


# =========================================================================== pairing the ends


def move(
    source: HttpRangeSource | ReadBlock,
    sink: FileSink | SessionSink,
    blocks: list[pipeline.Block],
    run: CopyRun,
    plan: StreamPlan,
    *,
    size: int,
    verifier: pipeline.BlockVerifier | None = None,
    done: set[int] | None = None,
    first: http.client.HTTPConnection | None = None,
    opened: http.client.HTTPResponse | None = None,
    spares: Sequence[Spare] = (),
    keep: list[http.client.HTTPConnection] | None = None,
) -> int:
    """Move every block of *blocks* from *source* to *sink* on the streams of *plan*,
    feeding *verifier* with the bytes moved (FIVER); returns the number of retries.

    The streams' connections go to the networked end that is driven block by block: the sink
    when it is networked (an upload session: :class:`SendLane` from the block queue), else
    the source (:class:`ReceiveLane`, a span each, or the block queue for an ordered digest
    on several streams).  The index of each block completely moved is added to *done* (a
    download's resume journal).  *first*: a connection already open to that end, the first
    stream's; *opened*: the ``200`` to a ``GET`` of the whole file on it, its body unread
    (the first stream's first run when *blocks* start at 0; else it is dropped); *spares*:
    the next streams' connections (:class:`~dtnkit.transfer.client.first.Spare`); *keep*:
    where the streams that ended well leave their connections (open)."""
    request = run.request
    stop = threading.Event()
    pool = run.pool(size)
    if isinstance(sink, SessionSink):
        landing = Landing(pool, verifier, done, run.progress, stop, values_read=sink.range_digest)
        lane = SendLane(source, sink, landing, request.checksum)
        engine = StreamEngine(
            sink.session,
            BlockQueue(blocks),
            lambda _stream: lane,
            retry=request.retry,
            give_up=sink.give_up,
            name=sink.thread_name,
            stop=stop,
            keep=keep,
        )
        engine.start(min(plan.most, len(blocks)), first, spares)
        return engine.wait()
    assert isinstance(source, HttpRangeSource), "a local sink needs a networked source"
    landing = Landing(
        pool,
        verifier,
        done,
        run.progress,
        stop,
        read_block=functools.partial(sink.read_back, pool=pool),
    )
    whole = (
        OpenResponse(first, opened, 0, size - 1)
        if first is not None and opened is not None and blocks and blocks[0].offset == 0
        else None
    )
    dispatch: Dispatch
    queued = plan.most > 1 and landing.ordered is not None
    if queued:
        if opened is not None and first is not None:  # a whole-file GET: drop it
            first.close()
            first, whole = None, None
        dispatch, count = BlockQueue(blocks), min(plan.most, len(blocks))
    else:
        groups = spans(blocks, plan.start)
        dispatch, count = Shares(groups, source.session.rtt), len(groups)

    def receiving(stream: Stream) -> Lane:
        # memory as one stream's: a stream starting alone has one stream's stage (the
        # others' come with them), those that join share it with the most there may be
        depth = max(8, STAGE_DEPTH // max(1, count if stream.index < count else plan.most))
        return ReceiveLane(
            source,
            sink,
            landing,
            size,
            None if queued else depth,
            functools.partial(dispatch.reach, stream),
            whole if stream.index == 0 else None,
        )

    engine = StreamEngine(
        source.session,
        dispatch,
        receiving,
        retry=request.retry,
        give_up=source.give_up,
        name=source.thread_name,
        stop=stop,
    )
    engine.start(count, first, spares)
    if isinstance(dispatch, Shares):
        try:
            run.streams.watch(plan, engine)
        except BaseException:
            engine.stop.set()
            with contextlib.suppress(BaseException):
                engine.wait()
            raise
    return engine.wait()
