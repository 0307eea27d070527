"""How many streams a copy uses and when one is added: the :class:`StreamPolicy`, fixed
(``--streams N``) or auto (``--streams auto``, :mod:`~dtnkit.transfer.client.autostreams`'s
formula), decided once per run, on the first connection, and said with its reason (as
rclone's multi-thread copy logs its choice).

A decision becomes a :class:`StreamPlan` for each file: how many streams at most, and
whether one starts alone (else all start together).  While the streams run,
:meth:`StreamPolicy.watch` decides when more join (the engine adds them: :class:`Crew`): an
auto plan that starts one stream adds a second once the first looks bound by its window
(:func:`window_bound`), and the others only if the two carry more (:func:`second_helps`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from dtnkit.host.host import Host
from dtnkit.transfer.client.autostreams import (
    ASSUMED_RATE,
    CAP,
    BufferLimits,
    StreamsDecision,
    decide,
    from_table,
    host_limits,
    link_rate,
    show_bytes,
)
from dtnkit.transfer.client.blocks import CHUNK
from dtnkit.units import counted


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """The streams of one file: at most :attr:`most`, :attr:`start` of them together (all,
    or one); with :attr:`grow` one starts alone and the others join once it is bound by its
    window (:meth:`StreamPolicy.watch`).  :attr:`rtt_s` and :attr:`window` are what the
    watching measures against (None: nothing is watched)."""

    most: int
    start: int
    grow: bool = False
    rtt_s: float | None = None
    window: int | None = None

    @property
    def alone(self) -> bool:
        """Whether the copy starts with one stream (its first request can be the ``GET`` of
        the whole file)."""
        return self.start == 1

    @property
    def watched(self) -> bool:
        """Whether streams join while the copy runs (one started alone, others may)."""
        return self.grow and self.most > 1 and self.rtt_s is not None and self.window is not None


class Measured(Protocol):
    """What the policy decides from: the server a copy talks to (a client session)."""

    peer: str | None  # the first connection's remote address

    def measure_path(self) -> float | None:
        """The round-trip time of the first connection (one is made if none answered)."""
        ...


class Crew(Protocol):
    """The running streams of one file, as :meth:`StreamPolicy.watch` sees them."""

    threads: list[threading.Thread]  # one per stream, the first one's first

    def received(self, stream: int | None = None, *, queued: bool = True) -> int:
        """Bytes received so far by *stream* (None: by all), those the kernel holds for it
        (the receive queue) included when *queued*."""
        ...

    def add(self, k: int) -> int:
        """Start up to *k* more streams; how many started."""
        ...

    def failed(self) -> bool:
        """Whether a stream failed (the copy is stopping)."""
        ...

    def left(self) -> int | None:
        """Bytes of the file not received yet (None: not known)."""
        ...


class StreamPolicy:
    """How many streams a copy uses: :meth:`fixed`, or :meth:`auto` deciding once for the run
    (parallel files wait for that one decision), on the first connection that asks, from its
    round-trip time, this host's buffer limits and the rate (``--rate``, the link's, or a
    sweep's streams table).  The decision is told to :attr:`on_decision` with its reason;
    the streams a download used, when it grew them, to :attr:`on_grow`."""

    def __init__(
        self,
        fixed: int | None,
        rate_bps: int | None = None,
        limits: Callable[[], BufferLimits | None] | None = None,
        link: Callable[[str], tuple[float, str] | None] | None = None,
        cap: int = CAP,
        table: Sequence[tuple[float, int]] | None = None,
        table_source: str = "",
    ) -> None:
        self.fixed_streams = fixed
        self.rate_bps = rate_bps
        self.table = table  # a sweep's streams table: it chooses when the RTT is known
        self.table_source = table_source
        self._limits = limits or (lambda: None)
        self._link_rate = link or (lambda _address: None)
        self.cap = cap
        self.decision: StreamsDecision | None = None
        self.on_decision: Callable[[StreamsDecision], None] | None = None  # e.g. say it on stderr
        # a download that started one stream (StreamsDecision.grow) says how many it used here
        self.on_grow: Callable[[str], None] | None = None
        self.used: int | None = None  # the most streams a download of the run used
        # reentrant: deciding may open the first connection, which asks rcvbuf()
        self._lock = threading.RLock()
        self._known: BufferLimits | None = None
        self._read = False

    @classmethod
    def fixed(cls, streams: int) -> StreamPolicy:
        """``--streams N``: *streams* for every file, from the start."""
        return cls(streams)

    @classmethod
    def auto(
        cls,
        rate_bps: int | None,
        limits: Callable[[], BufferLimits | None],
        link: Callable[[str], tuple[float, str] | None],
        cap: int = CAP,
        table: Sequence[tuple[float, int]] | None = None,
        table_source: str = "",
    ) -> StreamPolicy:
        """``--streams auto`` reading the buffer limits with *limits*, the link speed towards
        an address with *link*, and a sweep's streams *table* when given."""
        return cls(None, rate_bps, limits, link, cap, table, table_source)

    @classmethod
    def for_this_host(
        cls,
        rate_bps: int | None,
        cap: int = CAP,
        table: Sequence[tuple[float, int]] | None = None,
        table_source: str = "",
    ) -> StreamPolicy:
        """``--streams auto`` reading this process's host (and network namespace)."""
        host = Host.live()
        return cls.auto(
            rate_bps,
            lambda: host_limits(host),
            lambda address: link_rate(host, address),
            cap,
            table,
            table_source,
        )

    @property
    def is_auto(self) -> bool:
        return self.fixed_streams is None

    # ------------------------------------------------------------------ deciding
    def plan(self, server: Measured) -> StreamPlan:
        """The streams of a file copied to or from *server*: the decision, made on the
        first call of the run (on *server*'s first connection)."""
        if self.fixed_streams is not None:
            return StreamPlan(self.fixed_streams, self.fixed_streams)
        d = self.decide(server.measure_path, lambda: server.peer)
        return StreamPlan(d.streams, 1 if d.grow else d.streams, d.grow, d.rtt_s, d.window_bytes)

    def decide(
        self, rtt_s: Callable[[], float | None], peer: Callable[[], str | None]
    ) -> StreamsDecision:
        """The auto decision, made on the first call from ``rtt_s()`` (the first connection's
        TCP_INFO round-trip time) and ``peer()`` (its remote address, for the link rate)."""
        with self._lock:
            if self.decision is None:
                rtt = rtt_s()
                rate: float
                if self.rate_bps is not None:
                    rate, source = self.rate_bps, "--rate"
                else:
                    address = peer()
                    link = self._link_rate(address) if address else None
                    rate, source = link if link else (ASSUMED_RATE, "assumed; pass --rate")
                self.decision = (
                    from_table(self.table, self.table_source, rtt, rate, source)
                    if self.table
                    else None
                ) or decide(rtt, rate, source, self._limits_locked(), self.cap)
                if self.on_decision is not None:
                    self.on_decision(self.decision)
            return self.decision

    def limits(self) -> BufferLimits | None:
        """This host's buffer limits, read once (None with fixed streams)."""
        with self._lock:
            return self._limits_locked()

    def _limits_locked(self) -> BufferLimits | None:
        if not self._read:
            self._known, self._read = self._limits(), True
        return self._known

    def rcvbuf(self) -> int | None:
        """SO_RCVBUF for new connections, or None (autotuning; always with fixed streams):
        see :meth:`~dtnkit.transfer.client.autostreams.BufferLimits.rcvbuf_to_set`."""
        if self.fixed_streams is not None:
            return None
        limits = self.limits()
        return limits.rcvbuf_to_set() if limits is not None else None

    # ------------------------------------------------------------------ what was used
    def note_used(self, streams: int, why: str) -> None:
        """A copy that started fewer streams than it may use used *streams*; said
        (``on_grow``) by the first that used more than any before it (``cp -r`` says it
        once, not once per file)."""
        with self._lock:
            more = streams > (self.used or 0)
            self.used = max(self.used or 0, streams)
        if more and self.on_grow is not None:
            self.on_grow(why)

    def shown(self) -> int:
        """The streams a copy shows it used: the most a grown one used, else the
        decision's, else the fixed count (1 for an auto copy that decided nothing)."""
        if self.used is not None:
            return self.used
        if self.decision is not None:
            return self.decision.streams
        return self.fixed_streams or 1

    def one_put(self, plan: StreamPlan) -> bool:
        """Whether an upload sends one PUT although *plan* may use several streams: the
        download's one-stream-first decision (:attr:`StreamPlan.grow`: the rate is only an
        upper bound and one window carries 1 Gbit/s).  A download adds its other streams
        once the first is window-bound; a single PUT cannot, and an upload session of
        several streams from the start took 1.19x the download's time on a 50 ms / 1 Gbit/s
        lab path with tuned ends (two BBR flows leaving startup together into one queue lose
        more, and the session costs its start and commit).  Said once per run."""
        if not plan.grow or plan.most < 2:
            return False
        self.note_used(
            1,
            "1 stream: an upload sends one PUT when one window carries the "
            "path (the rate is only an upper bound); give --streams N or --rate "
            "for an upload session of several",
        )
        return True

    # ------------------------------------------------------------------ when one joins
    def watch(self, plan: StreamPlan, crew: Crew) -> None:
        """While *crew* runs: add streams as *plan* says (nothing unless it is
        :attr:`~StreamPlan.watched`), and say how many were used and why."""
        if not plan.watched or not crew.threads:
            return
        assert plan.rtt_s is not None and plan.window is not None
        bound, why, alone = window_bound(
            lambda: crew.received(0, queued=False), crew.threads[0], plan.rtt_s, plan.window
        )
        added = 0
        if bound:
            pays, late = join_pays(crew.left(), alone, 1)
            if not pays:
                bound, why = False, f"{why}; {late}"
        if bound:
            # one joins first: only if the two carry more do the others (the first's
            # rate cannot tell its window from the path's rate)
            added = crew.add(1)
            if added and not crew.failed():
                helps, how = second_helps(
                    crew.received, lambda: crew.received(1), crew.threads, plan.rtt_s, alone
                )
                why += f"; {how}"
                if helps and not crew.failed():
                    pays, late = join_pays(crew.left(), alone, 2)
                    if pays:
                        added += crew.add(plan.most - 2)
                    else:
                        why += f"; {late}"
        if not crew.failed():
            self.note_used(1 + added, f"{counted(1 + added, 'stream')}: {why}")


#: A stream is bound by its window when it moves this share of it per round trip.
BOUND_SHARE = 0.8
#: Round trips without 25 % more per round trip after which a stream's rate has stopped
#: growing (the path or the sender, not its window, holds it): as BBR's full-pipe check.
FLAT_ROUNDS = 3
#: What an untuned Linux sender can have in flight at most (tcp_wmem's default third value,
#: 4 MiB).  The far end's buffers cannot be seen from here: a stream that stops growing at no
#: more than this per round trip may be held by the sender's window, so the others join.
UNTUNED_SEND_BUFFER = 4 * 2**20


#: Linux's initial congestion window: 10 segments, of 1448 bytes at MTU 1500 (a jumbo path's
#: are larger and grow faster: this is the slower start, so streams join less often).
INITIAL_WINDOW = 10 * 1448


def join_pays(left: int | None, per_rtt: float, running: int) -> tuple[bool, str]:
    """Whether streams that join now can carry a share before the copy ends: the bytes
    *left* take the *running* streams (*per_rtt* each per round trip) at least as many round
    trips as a new stream's window needs to grow from :data:`INITIAL_WINDOW` to *per_rtt*
    (slow start doubles it each round trip).  Fewer, and the share a joiner takes becomes
    the copy's tail: on a 50 ms / 5 Gbit/s lab path (jumbo frames, tuned ends) a second
    stream that joined 0.83 s into a 256 MiB copy ended 0.46 s after the first.  With
    *left* unknown, streams join.  Returns (whether, why not in words)."""
    if left is None or per_rtt <= 0:
        return True, ""
    rounds = math.log2(max(per_rtt / INITIAL_WINDOW, 2.0))
    have = left / (per_rtt * running)
    if have >= rounds:
        return True, ""
    return False, (
        f"{show_bytes(left)} left take {have:.1f} round trips, fewer than the "
        f"{rounds:.1f} a new stream needs to grow to that rate: "
        + ("none joined" if running == 1 else "no more joined")
    )


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


def round_trips(
    counters: list[Callable[[], int]],
    threads: list[threading.Thread],
    rtt_s: float,
    interval: float,
) -> Iterator[list[float]]:
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


def window_bound(
    received: Callable[[], int], thread: threading.Thread, rtt_s: float, window: int
) -> tuple[bool, str, float]:
    """Watch one stream, a round trip at a time, until its rate stops growing
    (:data:`FLAT_ROUNDS` round trips without 25 % more), then whether it looks bound by its
    window: it moved :data:`BOUND_SHARE` of *window* in a round trip, or no more than
    :data:`UNTUNED_SEND_BUFFER` (the far end's window may hold it); above that and below
    the share, the path holds it and more streams would only compete.  It looks bound, not
    is: *window* is a model and the path may carry as much (:func:`second_helps` tells).
    A stream that ends first was not bound.  *received*: the bytes it has received so far.
    Returns (bound, why in words, the most it moved in a round trip)."""
    growth = Growth()
    for (per_rtt,) in round_trips([received], [thread], rtt_s, max(rtt_s, 0.01)):
        if not growth.stopped(per_rtt):
            continue
        best = growth.best
        said = f"the first stream's rate stopped growing at {show_bytes(best)} per round trip"
        if best >= BOUND_SHARE * window:
            return True, f"{said}, {best / window:.0%} of its window: bound by it", best
        if best <= UNTUNED_SEND_BUFFER:
            return (
                True,
                (
                    f"{said}, no more than an untuned sender's window (4 MiB) "
                    "carries: the far end's may hold it"
                ),
                best,
            )
        return (
            False,
            (
                f"{said}, {best / window:.0%} of its window and more than an "
                "untuned sender's (4 MiB): the path, not a window, holds it"
            ),
            best,
        )
    return False, "the file was done before the stream was known to be window-bound", growth.best


#: A second stream helps when, with it, the two move this many times what the first moved
#: alone per round trip, in :data:`HELPS_SPELLS` spells running, or on average over the
#: spells after the first by the time the second's rate stops growing: the second had about
#: a full window's worth without taking it from the first, so the path has room for more.
#: (On a loaded machine spells above and below alternate: with the running rule alone, 3 of
#: 16 runs of a 100 ms lab copy beside a busy test suite kept 2 of 4 streams, though a spell
#: had read 150-186 %.)
#: Less, and the path is about full with two: a first stream that left slow start early (at
#: 1 MiB per round trip on a 10 ms / 1 Gbit/s lab path, whose round trip holds 1.2) showed
#: 132 % with a second, and all seven had joined at 1.25.
HELPS_GAIN = 1.5
HELPS_SPELLS = 2
#: A spell of :func:`second_helps` lasts a round trip, or as long as the first stream took
#: alone to move this many chunks if longer: a stream's bytes show a chunk (1 MiB) at a time,
#: and at 10 ms and 2 Gbit/s a round trip holds 2-3 chunks, so round trips read 2 or 3.
HELPS_SPELL_CHUNKS = 8


def second_helps(
    together: Callable[[], int],
    second: Callable[[], int],
    threads: list[threading.Thread],
    rtt_s: float,
    alone: float,
) -> tuple[bool, str]:
    """Watch two streams, a spell at a time (:data:`HELPS_SPELL_CHUNKS`), after a second
    joined a first that moved *alone* bytes per round trip and looked bound by its window:
    whether together they move :data:`HELPS_GAIN` times that per round trip (in
    :data:`HELPS_SPELLS` spells running, or on average once the second's rate stops growing:
    the first's window held it, more streams carry more), or not by the time the second's
    rate stops growing
    (:class:`Growth`: the path, not a window, held the first; its rate alone cannot tell an
    untuned sender's window, about 3 MiB, from a path that carries as much per round trip).
    Streams that end first did not show it.  *together*, *second*: bytes received so far.
    Returns (helps, why in words)."""
    interval = max(rtt_s, 0.01, HELPS_SPELL_CHUNKS * CHUNK * rtt_s / max(alone, 1.0))
    growth = Growth()
    above = 0
    best = 0.0
    spells: list[float] = []
    for per_rtt, per_rtt2 in round_trips([together, second], threads, rtt_s, interval):
        best = max(best, per_rtt)
        spells.append(per_rtt)
        above = above + 1 if per_rtt >= HELPS_GAIN * alone else 0
        shown = (
            f"{show_bytes(per_rtt if above else best)} per round trip, "
            f"{(per_rtt if above else best) / max(alone, 1.0):.0%} of the first's "
            f"{show_bytes(alone)} alone"
        )
        if above >= HELPS_SPELLS:
            return True, f"with a second stream they moved {shown}: its window held it"
        if growth.stopped(per_rtt2):
            # the spells since the first (the second's slow start), on average: one spell
            # reads high or low when a receiving thread was not scheduled for a while
            later = spells[1:] or spells
            mean = sum(later) / len(later)
            if mean >= HELPS_GAIN * alone:
                return True, (
                    f"with a second stream they moved {show_bytes(mean)} per round trip on "
                    f"average, {mean / max(alone, 1.0):.0%} of the first's {show_bytes(alone)} "
                    "alone: its window held it"
                )
            return False, (
                f"with a second stream they moved at most {show_bytes(best)} per round trip, "
                f"{show_bytes(mean)} on average, {mean / max(alone, 1.0):.0%} of the first's "
                f"{show_bytes(alone)} alone: the path, not a window, held it"
            )
    return False, "the file was done before a second stream was known to help"
