"""``--streams auto`` starting one stream (StreamsDecision.grow) and the spans' rebalancing
(engine.Shares), without a network: the rules themselves.  The lab-path tests are in
test_autostreams_grow.py."""

from __future__ import annotations

import time

from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client import autostreams as au
from dtnkit.transfer.client import policy
from dtnkit.transfer.client.engine import STEAL_MIN_S, Shares, spans
from dtnkit.transfer.client.policy import StreamPolicy

MiB = 2**20
UNTUNED = au.BufferLimits(
    tcp_rmem_max=32 * MiB, tcp_wmem_max=4 * MiB, rmem_max=4 * MiB, wmem_max=4 * MiB
)
TUNED = au.BufferLimits(
    tcp_rmem_max=64 * MiB, tcp_wmem_max=64 * MiB, rmem_max=4 * MiB, wmem_max=4 * MiB
)  # `dtnkit tune apply` in a lab namespace (rmem_max is
# the host's)


def test_one_stream_starts_when_the_rate_is_a_bound_and_one_window_carries_1_gbit() -> None:
    link = au.decide(0.05, 10e9, "link speed of dklink0", TUNED)
    assert link.streams == 2 and link.grow  # 60 MiB over 32 MiB windows; 5.4 Gbit/s each
    assert "one stream starts: its window carries 5.37 Gbit/s" in link.reason
    assert link.as_dict()["grow"] is True
    assumed = au.decide(0.05, au.ASSUMED_RATE, "assumed; pass --rate", TUNED)
    assert assumed.grow
    # the user's rate is the path's: the formula's streams from the start
    assert not au.decide(0.05, 10e9, "--rate", TUNED).grow
    # untuned: 3 MiB windows carry 503 Mbit/s at 50 ms, bound on any DTN's path: not one first
    untuned = au.decide(0.05, 10e9, "link speed of dklink0", UNTUNED)
    assert untuned.streams == 8 and not untuned.grow
    assert "one stream starts" not in untuned.reason
    # one stream is enough by the formula: nothing to grow to
    assert not au.decide(0.01, 10e9, "link speed of dklink0", TUNED).grow


def test_the_streams_used_are_said_once_per_run() -> None:
    auto = StreamPolicy.auto(None, lambda: TUNED, lambda _a: None)
    said: list[str] = []
    auto.on_grow = said.append
    auto.note_used(1, "first file: 1")
    auto.note_used(1, "second file: 1")  # cp -r: not once per file
    auto.note_used(2, "third file: 2")
    auto.note_used(2, "fourth file: 2")
    assert said == ["first file: 1", "third file: 2"] and auto.used == 2


def shares_of(n_blocks: int, groups: int) -> tuple[Shares, list[pl.Block]]:
    blocks = pl.plan_blocks(n_blocks * MiB, MiB)
    return Shares(spans(blocks, groups), rtt_s=0.05), blocks


def test_a_stream_takes_the_second_half_of_what_the_slowest_span_has_left() -> None:
    shares, blocks = shares_of(16, 2)
    a, b = shares.all
    assert shares.steal() is None  # no block received anywhere yet: no rate, no steal
    for blk in blocks[8:16]:  # the second stream received all of its span
        assert shares.claim(b, blk)
    assert shares.claim(a, blocks[0]) and shares.claim(a, blocks[1])  # the first: 1 done
    a.received, a.started = MiB, time.monotonic() - 1.0  # 1 MiB/s: 3 MiB take 3 s
    got = shares.steal()
    assert got is not None and [x.index for x in got.blocks] == [5, 6, 7]
    assert a.stop == 5 and a.left == 3  # blocks 2, 3, 4 stay with it
    assert not shares.claim(a, blocks[5])  # where the first stream stops
    assert shares.claim(a, blocks[4])
    assert shares.end(a) == blocks[4].end
    assert shares.steals == 1


def test_no_steal_when_the_slow_stream_would_be_done_sooner_than_a_round_trip_pays() -> None:
    shares, blocks = shares_of(16, 2)
    a = shares.all[0]
    assert shares.claim(a, blocks[0]) and shares.claim(a, blocks[1])
    a.received = MiB
    a.started = time.monotonic() - 0.01  # 100 MiB/s: its half (3 MiB) takes 0.03 s
    assert shares.steal() is None and a.stop == 8
    a.started = time.monotonic() - STEAL_MIN_S  # 4 MiB/s: 3 MiB take 0.75 s
    got = shares.steal()  # from the first: the second has the most left but no rate yet
    assert got is not None and [x.index for x in got.blocks] == [5, 6, 7]


def test_split_gives_equal_parts_of_the_first_stream_tail() -> None:
    shares, blocks = shares_of(12, 1)
    first = shares.all[0]
    assert shares.claim(first, blocks[0])  # one block being received: 11 left
    parts = [shares.split(first, 4 - k) for k in range(3)]
    assert [len(p.blocks) for p in parts if p is not None] == [2, 3, 3]
    assert first.stop == 4 and first.left == 3
    assert shares.split(shares_of(1, 1)[0].all[0], 2) is None


def test_a_stream_joins_only_while_enough_is_left_for_its_window_to_grow() -> None:
    """A joiner's window doubles from 10 segments each round trip: with fewer round trips
    left than that takes, the share it would take becomes the copy's tail."""
    # the jumbo lab cell: the first stream at 22 MiB per 50 ms round trip, 106 MiB left
    pays, why = policy.join_pays(106 * MiB, 22 * MiB, 1)
    assert not pays
    assert why == (
        "106 MiB left take 4.8 round trips, fewer than the 10.6 a new stream needs to grow "
        "to that rate: none joined"
    )
    # 50 ms / 1 Gbit/s, an untuned sender (4 MiB per round trip) early in a 256 MiB copy
    assert policy.join_pays(236 * MiB, 4 * MiB, 1) == (True, "")
    # the others after a second that helped: the two running move twice as fast
    assert policy.join_pays(60 * MiB, 4 * MiB, 1)[0]
    pays, why = policy.join_pays(60 * MiB, 4 * MiB, 2)
    assert not pays and why.endswith("to that rate: no more joined")
    assert policy.join_pays(None, 22 * MiB, 1) == (True, "")  # not known: they join


def test_a_late_joiner_with_no_block_yet_gives_up_its_tail() -> None:
    """A stream that joined late has received no block of its share: it has had less than
    a block in its time, so the blocks it has left need at least that long each."""
    shares, blocks = shares_of(16, 1)
    first = shares.all[0]
    for blk in blocks[:10]:
        assert shares.claim(first, blk)
    late = shares.halve()  # joins with 6 blocks left: takes the last 3
    assert late is not None and [x.index for x in late.blocks] == [13, 14, 15]
    assert shares.claim(late, blocks[13])  # its first block is on its way
    assert shares.steal() is None  # just joined: nothing known of its rate yet
    late.started = time.monotonic() - 0.3  # 0.3 s and not one block: under 3.3 MiB/s
    got = shares.steal()  # a stream out of work takes the joiner's last block
    assert got is not None and [x.index for x in got.blocks] == [15]
    assert late.stop == 2 and late.left == 1


def joined_after(first_done: int) -> list[int] | None:
    """The blocks a stream that joins takes of one 32 MiB span (1 MiB blocks) whose stream
    has started *first_done* of them."""
    shares, blocks = shares_of(32, 1)
    for blk in blocks[:first_done]:
        assert shares.claim(shares.all[0], blk)
    got = shares.halve()
    return None if got is None else [x.index for x in got.blocks]


def test_a_joiner_takes_the_second_half_of_what_is_left() -> None:
    """A stream that joins takes the second half of the blocks the share with most left
    has not started, the half rounding down; none when that is not one block."""
    assert joined_after(8) == list(range(20, 32))  # 24 left: the last 12
    assert joined_after(9) == list(range(21, 32))  # 23 left: the last 11
    assert joined_after(30) == [31]  # 2 left: one each
    assert joined_after(31) is None  # the block being received and nothing after it
