"""Downloads on one stream: one ``GET`` per contiguous run of blocks, read by one thread while
another writes and verifies.

With several streams each block is its own ranged ``GET`` (:func:`~dtnkit.transfer.client.ends
.move_blocks`): the streams overlap each other's request round trips.  A single stream cannot:
a request per 8 MiB block leaves the path idle one round trip per block (on a 50 ms path at
1 Gbit/s, 30 % of the time), and a receiving thread that also writes and hashes leaves the
socket unread meanwhile, so the kernel's receive buffer fills and the advertised window
shrinks.  Here one ``GET`` asks for the whole run (the whole file, or what a resume still
needs), and the blocks are cut from its body: the stream's thread only receives, into pooled
block buffers, and hands each 1 MiB chunk to a writer stage (:class:`~dtnkit.transfer.pipeline
.Stage`, a bounded queue) that writes it and, at the end of each block, marks it done and
gives it to the verifier, exactly as the multi-stream loop does.  Blocks stay the unit of
retries, resume journals and bad-block re-fetch: a broken connection resumes with a new
``GET`` from the first block not yet received.

Several streams do the same on spans (:func:`fetch_spans`): the blocks are cut into one
contiguous span per stream, and each stream asks one ``GET`` for its span, so no stream
waits a round trip per block.  An ordered digest (md5, sha256) is the exception: it must see
the bytes in file order, so its streams keep asking a ``GET`` per block, in order
(:func:`~dtnkit.transfer.client.ends.move_blocks`), rather than have the hasher read most of
the file back from disk.
"""

from __future__ import annotations

import fcntl
import functools
import http.client
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator

from dtnkit.records import mutable_record, replace
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client.answers import check_content_range
from dtnkit.transfer.client.ends import FileSink, HttpRangeSource, move_blocks
from dtnkit.transfer.client.errors import Abort, FatalHttp, Retryable, TransferError
from dtnkit.transfer.client.first import Opened, Spare
from dtnkit.transfer.client.options import Options
from dtnkit.transfer.client.session import check_status
from dtnkit.transfer.client.streams import (
    CHUNK,
    BufferPool,
    CombineHasher,
    run_streams,
    settle_streams,
)
from dtnkit.units import counted

#: Chunks waiting for the writer: 64 MiB at most between the socket and the disk.
STAGE_DEPTH = 64
#: A stream takes blocks from another's span only when that stream would need at least this
#: long for them (and :data:`STEAL_MIN_RTTS` round trips): below it the taker's request round
#: trip and the bytes thrown away at the cut cost about what the split saves.
STEAL_MIN_S = 0.25
STEAL_MIN_RTTS = 4


def fetch_blocks(source: HttpRangeSource, sink: FileSink, blocks: list[pl.Block],
                 options: Options, *, size: int, verifier: pl.BlockVerifier | None = None,
                 done: set[int] | None = None, first: Opened | None = None) -> int:
    """Fetch *blocks* of *source* into *sink* (see :func:`~dtnkit.transfer.client.ends
    .move_blocks` for *verifier* and *done*); returns the number of retries.  One stream:
    one ``GET`` per contiguous run of blocks (:class:`OneGet`); more: one ``GET`` per span
    (:func:`fetch_spans`), or per block for an ordered digest.  *first*: the download's
    first request (:func:`~dtnkit.transfer.client.first.open_source`), whose connection the
    first stream uses, and whose open ``GET`` body it reads as its first run."""
    n = settle_streams(options, source.session)
    conn = first.conn if first is not None else None
    opened = None
    if first is not None and first.response is not None and blocks and blocks[0].offset == 0:
        opened = _Open(first.conn, first.response, 0, size - 1)
    spares = first.spares if first is not None else []
    if n > 1 and isinstance(verifier, pl.OrderedHasher):
        if opened is not None:  # a whole-file GET (--streams auto starting alone): drop it
            opened.conn.close()
            conn = None
        return move_blocks(source, sink, blocks, options, size=size, verifier=verifier,
                           done=done, first=conn)
    if n > 1:
        return fetch_spans(source, sink, blocks, options, size=size, verifier=verifier,
                           done=done, first=conn, opened=opened, spares=spares)
    return OneGet(source, sink, blocks, options, size, verifier, done, conn=conn,
                  opened=opened).run()


def spans(blocks: list[pl.Block], n: int) -> list[list[pl.Block]]:
    """*blocks* cut into at most *n* groups of consecutive blocks of about equal bytes (a
    group is one ``GET`` when its blocks are contiguous)."""
    total = sum(b.length for b in blocks)
    out: list[list[pl.Block]] = []
    group: list[pl.Block] = []
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


class Share:
    """The blocks one stream receives: ``blocks[taken:stop]`` are still to come.  Another
    stream that ran out of work may take the tail (:meth:`Shares.steal` lowers *stop*)."""

    def __init__(self, blocks: list[pl.Block]) -> None:
        self.blocks = blocks
        self.position = {b.index: i for i, b in enumerate(blocks)}
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

    def __init__(self, groups: list[list[pl.Block]], rtt_s: float | None = None) -> None:
        self.lock = threading.Lock()
        self.all = [Share(g) for g in groups]
        self.rtt_s = rtt_s or 0.0
        self.steals = 0

    def claim(self, share: Share, b: pl.Block) -> bool:
        """Whether *share*'s stream is still to receive *b* (False: it was taken away)."""
        with self.lock:
            pos = share.position[b.index]
            if pos >= share.stop:
                return False
            if pos + 1 > share.taken:
                # the bytes of blocks[:pos], added on from what was counted (blocks[:taken-1])
                # rather than summed again for every block of a long span
                start = max(share.taken - 1, 0)
                share.received += sum(x.length for x in share.blocks[start:pos])
                share.taken = pos + 1
            return True

    def worth(self, share: Share, k: int, now: float) -> bool:
        """Whether taking *share*'s last *k* blocks saves time: its stream would need at
        least :data:`STEAL_MIN_S` and :data:`STEAL_MIN_RTTS` round trips for them at the
        rate it has had (a taker pays a round trip for its request, and the bytes in flight
        past the cut are thrown away).  A share with no block received yet has no rate."""
        elapsed = now - share.started
        if share.received <= 0 or elapsed <= 0:
            return False
        need = sum(b.length for b in share.blocks[share.stop - k:share.stop]) * elapsed \
            / share.received
        return need >= max(STEAL_MIN_S, STEAL_MIN_RTTS * self.rtt_s)

    def end(self, share: Share) -> int:
        """The last byte *share*'s stream is still to receive."""
        with self.lock:
            return share.blocks[share.stop - 1].end

    def _take(self, victim: Share, k: int) -> Share:
        """A new share of *victim*'s last *k* blocks left, which it no longer receives
        (under :attr:`lock`)."""
        share = Share(victim.blocks[victim.stop - k:victim.stop])
        victim.stop -= k
        self.all.append(share)
        return share

    def halve(self) -> Share | None:
        """A new share for a stream that joins: the second half of the blocks left of the
        share with most left (None when no share has two blocks left)."""
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
            victim = next((s for s in sorted(self.all, key=lambda s: -s.left)
                           if s.left >= 2 and self.worth(s, s.left // 2, now)), None)
            if victim is None:
                return None
            self.steals += 1
            return self._take(victim, victim.left // 2)


def fetch_spans(source: HttpRangeSource, sink: FileSink, blocks: list[pl.Block],
                options: Options, *, size: int, verifier: pl.BlockVerifier | None = None,
                done: set[int] | None = None,
                first: http.client.HTTPConnection | None = None,
                opened: _Open | None = None, spares: list[Spare] | None = None) -> int:
    """``options.streams`` streams, each a :class:`OneGet` on its own span of *blocks*; a
    stream that ends its span takes half of what another still has (:class:`Shares`); the
    first error stops them all and is raised.  Returns the number of retries.

    With ``--streams auto`` deciding to grow (:attr:`~dtnkit.transfer.client.autostreams
    .Decision.grow`), one stream starts on all the blocks; once it looks bound by its window
    (:func:`window_bound`) a second joins on half of what it has left, and only if the two
    carry more (:func:`second_helps`) do the others join, each on half of the largest share
    left; a stream that is not stays alone.  When it decided to start fewer streams than it
    may use (:attr:`~dtnkit.transfer.client.autostreams.Decision.start`), those start on
    equal spans and more join, doubling, while they are all bound by their windows
    (:func:`all_bound`), each taking half of what the stream with most left still has.

    *spares*: connections opened beside the first request (:class:`~dtnkit.transfer.client
    .first.Spare`), taken by the streams that start with the first one; the list is emptied
    (those not taken are closed)."""
    decision = options.auto.decision if options.auto is not None else None
    known = (decision is not None and decision.rtt_s is not None
             and decision.window_bytes is not None and options.streams > 1)
    grow = known and decision is not None and decision.grow
    start = decision.start if known and decision is not None and not grow \
        and 1 < decision.start < options.streams else 0
    groups = [blocks] if grow else spans(blocks, start or options.streams)
    one = replace(options, streams=1, auto=None)
    depth = max(8, STAGE_DEPTH // max(1, options.streams))  # memory as one stream's
    starting = max(8, STAGE_DEPTH // max(1, len(groups)))
    shares = Shares(groups, source.session.rtt)
    # a stream starting alone has one stream's stage (the others' come with them)
    getters = [OneGet(source, sink, g, one, size, verifier, done,
                      conn=first if i == 0 else None, depth=starting,
                      shares=shares, share=shares.all[i], opened=opened if i == 0 else None)
               for i, g in enumerate(groups)]
    if first is not None and not getters:
        first.close()
    spare = list(spares or [])
    if spares:
        spares.clear()
    for extra in spare[max(0, len(getters) - 1):]:
        extra.close()
    spare = spare[:max(0, len(getters) - 1)]
    errors: list[BaseException] = []
    retries = [0]
    lock = threading.Lock()

    def joining(share: Share, conn: http.client.HTTPConnection | None = None) -> OneGet:
        """A stream that joins on *share* (taken from another), on *conn* if it has one."""
        getter = OneGet(source, sink, share.blocks, one, size, verifier, done, conn=conn,
                        depth=depth, shares=shares, share=share)
        getters.append(getter)
        return getter

    def run(getter: OneGet, ready: Spare | None = None) -> None:
        try:
            if ready is not None:
                getter.conn = ready.take()  # its handshakes began beside the first request
            while True:
                n = getter.run()
                with lock:
                    retries[0] += n
                conn = getter.kept.pop() if getter.kept else None
                if conn is None:
                    return  # its connection is gone (cut where its span was taken)
                with lock:
                    share = None if errors else shares.steal()
                    if share is not None:
                        getter = joining(share, conn)
                if share is None:
                    conn.close()
                    return
        except BaseException as exc:
            with lock:
                errors.append(exc)
                for other in getters:
                    other.stop.set()

    threads = [threading.Thread(target=run, args=(g, spare[i - 1] if 0 < i <= len(spare)
                                                  else None),
                                name=f"dtnkit-span-{i}", daemon=True)
               for i, g in enumerate(getters)]
    for t in threads:
        t.start()

    def add(k: int) -> int:
        """Start up to *k* streams that join, each on half of the largest share left."""
        added = 0
        with lock:
            for _ in range(k):
                share = None if errors else shares.halve()
                if share is None:
                    break
                t = threading.Thread(target=run, args=(joining(share),), daemon=True,
                                     name=f"dtnkit-span-{len(threads)}")
                threads.append(t)
                t.start()
                added += 1
        return added

    try:
        if start and getters:
            assert decision is not None and decision.rtt_s is not None \
                and decision.window_bytes is not None and options.auto is not None
            active, why = len(getters), ""
            while True:
                bound, why = all_bound(lambda: sum(g.received + g.queued()
                                                   for g in list(getters)),
                                       threads, decision.rtt_s, decision.window_bytes, active)
                if not bound or errors:
                    break
                added = add(min(active, options.streams - active))
                active += added
                why += f", so {added} more joined"
                if not added or active >= options.streams:
                    break
            if not errors:
                options.auto.note_used(active, f"{counted(active, 'stream')}: {why}")
        if grow and getters:
            assert decision is not None and decision.rtt_s is not None \
                and decision.window_bytes is not None and options.auto is not None
            solo = getters[0]
            bound, why, alone = window_bound(lambda: solo.received, threads[0],
                                             decision.rtt_s, decision.window_bytes)
            added = 0
            if bound:
                # one joins first: only if the two carry more do the others (the first's
                # rate cannot tell its window from the path's rate)
                added = add(1)
                if added and not errors:
                    second = getters[-1]
                    helps, how = second_helps(lambda: sum(g.received + g.queued()
                                                          for g in list(getters)),
                                              lambda: second.received + second.queued(),
                                              threads, decision.rtt_s, alone)
                    why += f"; {how}"
                    if helps and not errors:
                        added += add(options.streams - 2)
            if not errors:
                options.auto.note_used(1 + added, f"{counted(1 + added, 'stream')}: {why}")
        for t in threads:
            t.join()
    finally:
        with lock:
            for g in getters:
                g.stop.set()
        for t in threads:
            t.join(10.0)
    if errors:
        raise next((e for e in errors if not isinstance(e, Abort)), errors[0])
    return retries[0]


#: A stream is bound by its window when it moves this share of it per round trip.
BOUND_SHARE = 0.8
#: Round trips without 25 % more per round trip after which a stream's rate has stopped
#: growing (the path or the sender, not its window, holds it): as BBR's full-pipe check.
FLAT_ROUNDS = 3
#: What an untuned Linux sender can have in flight at most (tcp_wmem's default third value,
#: 4 MiB).  The far end's buffers cannot be seen from here: a stream that stops growing at no
#: more than this per round trip may be held by the sender's window, so the others join.
UNTUNED_SEND_BUFFER = 4 * 2**20


class Growth:
    """Whether a rate measured once per round trip (or spell) has stopped growing:
    :data:`FLAT_ROUNDS` measurements running without 25 % more than the best so far."""

    def __init__(self) -> None:
        self.best = 0.0
        self.flat = 0

    def stopped(self, rate: float) -> bool:
        if rate > self.best * 1.25:
            self.best, self.flat = rate, 0
        elif self.best > 0:
            self.flat += 1
        return self.flat >= FLAT_ROUNDS


def round_trips(counters: list[Callable[[], int]], threads: list[threading.Thread],
                rtt_s: float, interval: float) -> Iterator[list[float]]:
    """Every *interval* (waiting on the first of *threads* still alive), what each of
    *counters* (bytes received so far) gained, per round trip of *rtt_s*; until none of
    *threads* is alive (a spell in which the last one ended is not given)."""
    last, then = [c() for c in counters], time.monotonic()
    while True:
        alive = [t for t in threads if t.is_alive()]
        if not alive:
            return
        alive[0].join(interval)
        now, got = time.monotonic(), [c() for c in counters]
        if not any(t.is_alive() for t in threads):
            return
        scale = rtt_s / max(now - then, 1e-6)
        yield [(g - x) * scale for g, x in zip(got, last, strict=True)]
        last, then = got, now


def window_bound(received: Callable[[], int], thread: threading.Thread, rtt_s: float,
                 window: int) -> tuple[bool, str, float]:
    """Watch one stream, a round trip at a time, until its rate stops growing
    (:data:`FLAT_ROUNDS` round trips without 25 % more), then whether it looks bound by its
    window: it moved :data:`BOUND_SHARE` of *window* in a round trip, or no more than
    :data:`UNTUNED_SEND_BUFFER` (the far end's window may hold it); above that and below
    the share, the path holds it and more streams would only compete.  It looks bound, not
    is: *window* is a model and the path may carry as much (:func:`second_helps` tells).
    A stream that ends first was not bound.  *received*: the bytes it has received so far.
    Returns (bound, why in words, the most it moved in a round trip)."""
    from dtnkit.transfer.client.autostreams import show_bytes  # only with --streams auto

    growth = Growth()
    for (per_rtt,) in round_trips([received], [thread], rtt_s, max(rtt_s, 0.01)):
        if not growth.stopped(per_rtt):
            continue
        best = growth.best
        said = f"the first stream's rate stopped growing at {show_bytes(best)} per round trip"
        if best >= BOUND_SHARE * window:
            return True, f"{said}, {best / window:.0%} of its window: bound by it", best
        if best <= UNTUNED_SEND_BUFFER:
            return True, (f"{said}, no more than an untuned sender's window (4 MiB) "
                          "carries: the far end's may hold it"), best
        return False, (f"{said}, {best / window:.0%} of its window and more than an "
                       "untuned sender's (4 MiB): the path, not a window, holds it"), best
    return False, "the file was done before the stream was known to be window-bound", \
        growth.best


#: A second stream helps when, with it, the two move this many times what the first moved
#: alone per round trip, in :data:`HELPS_SPELLS` spells running: the second had about a
#: full window's worth without taking it from the first, so the path has room for more.
#: Less, and the path is about full with two: a first stream that left slow start early (at
#: 1 MiB per round trip on a 10 ms / 1 Gbit/s lab path, whose round trip holds 1.2) showed
#: 132 % with a second, and all seven had joined at 1.25.
HELPS_GAIN = 1.5
HELPS_SPELLS = 2
#: A spell of :func:`second_helps` lasts a round trip, or as long as the first stream took
#: alone to move this many chunks if longer: a stream's bytes show a chunk (1 MiB) at a time,
#: and at 10 ms and 2 Gbit/s a round trip holds 2-3 chunks, so round trips read 2 or 3.
HELPS_SPELL_CHUNKS = 8


def second_helps(together: Callable[[], int], second: Callable[[], int],
                 threads: list[threading.Thread], rtt_s: float,
                 alone: float) -> tuple[bool, str]:
    """Watch two streams, a spell at a time (:data:`HELPS_SPELL_CHUNKS`), after a second
    joined a first that moved *alone* bytes per round trip and looked bound by its window:
    whether together they move :data:`HELPS_GAIN` times that per round trip (the first's
    window held it: more streams carry more), or the second's rate stops growing first
    (:class:`Growth`: the path, not a window, held the first; its rate alone cannot tell an
    untuned sender's window, about 3 MiB, from a path that carries as much per round trip).
    Streams that end first did not show it.  *together*, *second*: bytes received so far.
    Returns (helps, why in words)."""
    from dtnkit.transfer.client.autostreams import show_bytes  # only with --streams auto

    interval = max(rtt_s, 0.01, HELPS_SPELL_CHUNKS * CHUNK * rtt_s / max(alone, 1.0))
    growth = Growth()
    above = 0
    best = 0.0
    for per_rtt, per_rtt2 in round_trips([together, second], threads, rtt_s, interval):
        best = max(best, per_rtt)
        above = above + 1 if per_rtt >= HELPS_GAIN * alone else 0
        shown = f"{show_bytes(per_rtt if above else best)} per round trip, " \
            f"{(per_rtt if above else best) / max(alone, 1.0):.0%} of the first's " \
            f"{show_bytes(alone)} alone"
        if above >= HELPS_SPELLS:
            return True, f"with a second stream they moved {shown}: its window held it"
        if growth.stopped(per_rtt2):
            return False, (f"with a second stream they moved at most {shown}: the path, "
                           "not a window, held it")
    return False, "the file was done before a second stream was known to help"


#: Streams are all bound by their windows when together they move this share of their
#: windows per round trip (the handshake's RTT), in :data:`ALL_BOUND_SPELLS` spells of
#: :data:`ALL_BOUND_RTTS` round trips running: more streams would carry more.  Four 2 MiB
#: windows on a 50 ms / 1 Gbit/s path move 75 % at most (the path holds 6 MiB), 83 % with
#: the RTT measured 10 % long on a loaded host.  Bytes count when the kernel has them (read,
#: or waiting in the socket's receive queue): a receiving thread that was not scheduled for
#: a while reads a backlog at once, which on a loaded host showed 119 % for two round trips.
ALL_BOUND_SHARE = 0.9
#: Round trips per spell of :func:`all_bound`, and the spells running above the share.
ALL_BOUND_RTTS = 2
ALL_BOUND_SPELLS = 3


def all_bound(received: Callable[[], int], threads: list[threading.Thread], rtt_s: float,
              window: int, streams: int) -> tuple[bool, str]:
    """Watch *streams* streams together, :data:`ALL_BOUND_RTTS` round trips at a time, until
    they show whether they are all bound by their windows: per round trip they move
    :data:`ALL_BOUND_SHARE` of *streams* windows in :data:`ALL_BOUND_SPELLS` spells running
    (bound: more streams would carry more), or their rate stops growing below that
    (:data:`FLAT_ROUNDS` spells without 25 % more: the path holds them), or they end.
    *received*: the bytes they have received so far.  Returns (bound, why in words)."""
    from dtnkit.transfer.client.autostreams import show_bytes  # only with --streams auto

    full = streams * window
    growth = Growth()
    above = 0
    for (per_rtt,) in round_trips([received], threads, rtt_s,
                                  ALL_BOUND_RTTS * max(rtt_s, 0.01)):
        above = above + 1 if per_rtt >= ALL_BOUND_SHARE * full else 0
        if above >= ALL_BOUND_SPELLS:
            return True, (f"{counted(streams, 'stream')} moved {show_bytes(per_rtt)} per round "
                          f"trip, {per_rtt / full:.0%} of their windows: bound by them")
        if growth.stopped(per_rtt):
            return False, (f"together their rate stopped growing at {show_bytes(growth.best)} "
                           f"per round trip, {growth.best / full:.0%} of their windows: the "
                           "path, not the windows, holds them")
    return False, (f"the file was done before {counted(streams, 'stream')} were known to be "
                   "window-bound")


def runs(blocks: list[pl.Block]) -> dict[int, int]:
    """For each block's index, the last byte of the contiguous run of *blocks* it is in."""
    last: dict[int, int] = {}
    start = 0
    for i in range(1, len(blocks) + 1):
        if i == len(blocks) or blocks[i].offset != blocks[i - 1].offset + blocks[i - 1].length:
            for b in blocks[start:i]:
                last[b.index] = blocks[i - 1].end
            start = i
    return last


#: What the receiving thread hands the writer: a chunk to write at its offset (buf None), or
#: the end of a block (offset -1; data empty) with the block's buffer.
_Item = tuple[int, pl.Block, memoryview, bytearray | None]


@mutable_record
class _Attempt:
    buf: bytearray
    tries: int = 0


@mutable_record
class _Open:
    """The response being read: on which connection, up to which offset, and the last byte
    its body carries (past the run asked for when it is a whole-file ``200``)."""

    conn: http.client.HTTPConnection
    response: http.client.HTTPResponse
    offset: int
    end: int


class OneGet:
    """One stream, one ``GET`` per contiguous run; receiving apart from writing and hashing."""

    def __init__(self, source: HttpRangeSource, sink: FileSink, blocks: list[pl.Block],
                 options: Options, size: int, verifier: pl.BlockVerifier | None,
                 done: set[int] | None, *, conn: http.client.HTTPConnection | None = None,
                 opened: _Open | None = None, depth: int = STAGE_DEPTH,
                 shares: Shares | None = None, share: Share | None = None) -> None:
        self.source, self.sink, self.blocks, self.options = source, sink, blocks, options
        self.size, self.verifier, self.done = size, verifier, done
        self.last = runs(blocks)
        self.stop = threading.Event()
        self.pool = BufferPool(min(options.block_size, max(1, size)))
        self.combiner = verifier if isinstance(verifier, pl.BlockCombiner) else None
        self.ordered = verifier if isinstance(verifier, pl.OrderedHasher) else None
        self.conn = conn  # already open: the stream's first connection
        self.open: _Open | None = opened  # a GET already answered on it
        self.depth = depth
        self.shares, self.share = shares, share  # several streams: its span, rebalanced
        # with shares: its connection when it ends well (open, nothing unread on it)
        self.kept: list[http.client.HTTPConnection] = []
        self.received = 0  # bytes received (read by window_bound)
        self.current: http.client.HTTPConnection | None = None  # the one being read

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

    # ------------------------------------------------------------------ the receiving thread
    def _response_at(self, conn: http.client.HTTPConnection,
                     b: pl.Block) -> http.client.HTTPResponse:
        """The open response when it continues at block *b* on *conn*, else a new ``GET`` of
        the run from *b* on."""
        if self.open is not None and self.open.conn is conn and self.open.offset == b.offset:
            return self.open.response
        self.open = None
        src = self.source
        first, last = b.offset, self.last[b.index]
        if self.shares is not None and self.share is not None:
            last = min(last, self.shares.end(self.share))  # not what was taken from it
        hdrs = {"Range": f"bytes={first}-{last}"}
        if src.etag:
            hdrs["If-Range"] = src.etag
        what = f"GET {src.url}"
        conn.request("GET", src.url.path, headers=src.session.headers(hdrs))
        r = conn.getresponse()
        if r.status >= 500:
            r.read(4096)
            raise Retryable(f"{what} bytes {first}-{last}: HTTP {r.status}")
        if r.status != 206:
            body = r.read(4096)
            if r.status == 200:
                raise FatalHttp(what, "the server sent the whole file instead of a range "
                                "(the source changed during the copy?)", "retry the copy")
            check_status(r.status, what, body, ok=(206,))
        # exactly the bytes asked for, of the size the HEAD gave (answers.py), whatever the
        # verify mode: under --verify none nothing else would notice other bytes
        check_content_range(r.getheader("Content-Range"), first, last, self.size, what)
        self.open = _Open(conn, r, first, last)
        return r

    def work(self, stage: pl.Stage[_Item],
             conn: http.client.HTTPConnection, b: pl.Block, state: _Attempt) -> None:
        if self.shares is not None and self.share is not None \
                and not self.shares.claim(self.share, b):
            # another stream took the rest of this span: stop here (run_streams closes the
            # connection, and with it the rest of the body, in flight)
            raise Abort()
        if state.tries:
            stage.drain()  # an earlier attempt's chunks are written before buf is refilled
        state.tries += 1
        self.current = conn
        r = self._response_at(conn, b)
        view = memoryview(state.buf)[:b.length]
        got = posted = 0
        while got < b.length:
            if self.stop.is_set():
                raise Abort()
            n = r.readinto(view[got:min(b.length, posted + CHUNK)])
            if not n:
                self.open = None
                raise Retryable(f"GET {self.source.url} block {b.index}: connection closed "
                                f"after {got} of {b.length} bytes")
            got += n
            self.received += n
            if got - posted >= CHUNK or got == b.length:
                stage.put((b.offset + posted, b, view[posted:got], None))
                posted = got
        body_end = self.open.end if self.open is not None else b.end
        if b.end == self.last[b.index] or b.end >= body_end:  # the end of the run or body
            self.open = None
            if body_end > b.end:
                conn.close()  # the rest of a whole-file body is another stream's or kept
            elif r.read(1):
                raise Retryable(f"GET {self.source.url}: longer than asked")
        else:
            self.open = _Open(conn, r, b.offset + b.length, body_end)

    # ------------------------------------------------------------------ the writer stage
    def run(self) -> int:
        hasher = CombineHasher(self.combiner, self.pool) if self.combiner is not None else None
        if self.ordered is not None:
            self.ordered.set_release(self.pool.put)
            self.ordered.set_read_block(functools.partial(self.sink.read_back, pool=self.pool))
        lock = threading.Lock()

        def moved(b: pl.Block, buf: bytearray) -> None:
            if self.done is not None:
                with lock:
                    self.done.add(b.index)  # every byte of it is written
            if hasher is not None:
                hasher.submit(b, buf)  # owns buf now, gives it back to the pool
            elif self.ordered is not None:
                self.ordered.accept(b, memoryview(buf)[:b.length], wait=pl.BACKPRESSURE_WAIT,
                                    stop=self.stop)
            elif self.verifier is not None:
                self.verifier.accept(b, memoryview(buf)[:b.length])
            else:
                self.pool.put(buf)
            if self.options.progress is not None:
                self.options.progress(b.length)

        def consume(item: _Item) -> None:
            offset, b, data, buf = item
            if buf is not None:
                moved(b, buf)
            else:
                self.sink.write(data, offset)

        stage: pl.Stage[_Item] = pl.Stage(
            consume, self.depth, "dtnkit-write")

        def finish(b: pl.Block, state: _Attempt) -> None:
            stage.put((-1, b, memoryview(b""), state.buf))

        def give_up(b: pl.Block, attempts: int, exc: BaseException) -> TransferError:
            return TransferError(f"GET {self.source.url}", f"block {b.index} failed after "
                                 f"{attempts} attempts ({exc})",
                                 "check that the server is up; raise --retries or "
                                 "--stall-timeout")

        try:
            retries = run_streams(self.source.session, self.blocks, self.options,
                                  work=functools.partial(self.work, stage),
                                  prepare=lambda _b: _Attempt(self.pool.get()), finish=finish,
                                  give_up=give_up, stop=self.stop,
                                  name=self.source.thread_name, first=self.conn,
                                  keep=self.kept if self.shares is not None else None)
            stage.drain()
        finally:
            self.stop.set()
            stage.close()
            if hasher is not None:
                hasher.close()
        if hasher is not None and hasher.error is not None:
            raise hasher.error
        return retries
