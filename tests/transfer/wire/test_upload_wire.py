"""Upload-session range bookkeeping shared by client and server (sans-I/O)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from dtnkit.transfer.wire import upload as wup


@st.composite
def disjoint_ranges(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    """A length and disjoint ranges inside it, in random order."""
    length = draw(st.integers(1, 10_000))
    cuts = sorted(set(draw(st.lists(st.integers(0, length), max_size=12))) | {0, length})
    spans = [(a, b - 1) for a, b in itertools.pairwise(cuts) if b > a]
    kept = [s for s in spans if draw(st.booleans())]
    return length, draw(st.permutations(kept))


@given(disjoint_ranges())
def test_merged_and_missing_partition_the_file(case: tuple[int, list[tuple[int, int]]]) -> None:
    length, spans = case
    merged = wup.merge(spans)
    gaps = wup.missing(spans, length)
    covered = sorted(merged + gaps)
    # merged ranges and gaps tile [0, length) exactly, alternating
    pos = 0
    for a, b in covered:
        assert a == pos and b >= a
        pos = b + 1
    assert pos == length
    for (_a1, b1), (a2, _b2) in itertools.pairwise(merged):
        assert a2 > b1 + 1  # touching ranges were joined
    assert wup.missing(merged, length) == gaps
    for a, b in spans:
        assert wup.covered(a, b, merged)
    for a, b in gaps:
        assert not wup.covered(a, a, merged) and wup.overlapping(a, b, spans) is None


@given(disjoint_ranges())
def test_ranges_header_round_trip(case: tuple[int, list[tuple[int, int]]]) -> None:
    _length, spans = case
    merged = wup.merge(spans)
    assert wup.parse_ranges(wup.format_ranges(merged)) == merged


def test_examples() -> None:
    assert wup.merge([(10, 19), (0, 9), (30, 39)]) == [(0, 19), (30, 39)]
    assert wup.missing([(10, 19)], 30) == [(0, 9), (20, 29)]
    assert wup.missing([], 5) == [(0, 4)]
    assert wup.missing([], 0) == []
    assert wup.covered(2, 5, [(0, 9)]) and not wup.covered(8, 12, [(0, 9), (10, 19)])
    assert wup.overlapping(5, 15, [(0, 4), (10, 19)]) == (10, 19)
    assert wup.format_ranges([]) == ""
    assert wup.parse_ranges(None) == []
    assert wup.parse_ranges(" 0-9, x-1, 5, 20-29 ,") == [(0, 9), (20, 29)]


def test_header_names() -> None:
    assert (
        wup.HEADER,
        wup.ID_HEADER,
        wup.RANGES_HEADER,
        wup.CHECKSUM_HEADER,
        wup.EXPIRES_HEADER,
    ) == (
        "Dtnkit-Upload",
        "Dtnkit-Upload-Id",
        "Dtnkit-Upload-Ranges",
        "Dtnkit-Upload-Checksum",
        "Dtnkit-Upload-Expires",
    )
    assert wup.ACTIONS == ("start", "status", "commit", "abort")
