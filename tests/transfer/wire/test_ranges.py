"""Byte ranges, Content-Range, entity tags and conditional requests (sans-I/O)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtnkit.transfer.wire import ranges


@given(size=st.integers(1, 2**40), data=st.data())
def test_range_format_parse_round_trip(size: int, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, size - 1))
    end = data.draw(st.integers(start, size - 1))
    assert ranges.parse_range(f"bytes={start}-{end}", size) == (start, end)
    header = ranges.format_content_range(start, end, size)
    assert ranges.parse_content_range(header) == (start, end, size)


@given(size=st.integers(1, 2**40), n=st.integers(1, 2**41))
def test_suffix_range_selects_the_tail(size: int, n: int) -> None:
    first, last = ranges.parse_range(f"bytes=-{n}", size)
    assert last == size - 1 and last - first + 1 == min(n, size)


@pytest.mark.parametrize(("value", "size", "want"), [
    ("bytes=0-", 10, (0, 9)), ("bytes=5-100", 10, (5, 9)), (" BYTES = 2 - 3 ", 10, (2, 3)),
    ("bytes=-3", 10, (7, 9)),
])  # fmt: skip
def test_parse_range(value: str, size: int, want: tuple[int, int]) -> None:
    assert ranges.parse_range(value, size) == want


@pytest.mark.parametrize(
    "value", ["bytes=1-2,4-5", "items=0-1", "bytes=a-b", "bytes=-", "bytes=5-2", "bytes=\u0661-2"]
)
def test_parse_range_malformed(value: str) -> None:
    with pytest.raises(ValueError) as info:
        ranges.parse_range(value, 10)
    assert not isinstance(info.value, ranges.RangeNotSatisfiable)


@pytest.mark.parametrize(("value", "size"), [("bytes=10-", 10), ("bytes=-0", 10), ("bytes=-5", 0)])
def test_parse_range_not_satisfiable(value: str, size: int) -> None:
    with pytest.raises(ranges.RangeNotSatisfiable):
        ranges.parse_range(value, size)


@pytest.mark.parametrize(
    "value", ["bytes 5-2/10", "bytes 1-2", "bytes */10", "bits 0-1/2", "bytes 1-2/" + "9" * 20]
)
def test_parse_content_range_malformed(value: str) -> None:
    with pytest.raises(ValueError):
        ranges.parse_content_range(value)


def test_unsatisfied_range() -> None:
    assert ranges.unsatisfied_range(42) == "bytes */42"


def test_etag_and_conditions() -> None:
    st_ = SimpleNamespace(st_ino=0xAB, st_size=16, st_mtime_ns=1_700_000_000_123_456_789)
    tag = ranges.etag(st_)
    assert tag == f'"ab-10-{1_700_000_000_123_456_789:x}"'
    mtime = 1_700_000_000.5
    date = ranges.http_date(mtime)
    assert date.endswith(" GMT") and ranges.parse_http_date(date) == 1_700_000_000
    assert ranges.parse_http_date("yesterday") is None
    # If-None-Match wins over If-Modified-Since; weak tags match for 304
    assert ranges.not_modified(f"W/{tag}", None, tag, mtime)
    assert ranges.not_modified("*", None, tag, mtime)
    assert not ranges.not_modified('"other"', date, tag, mtime)
    assert ranges.not_modified(None, date, tag, mtime)
    assert not ranges.not_modified(None, ranges.http_date(mtime - 10), tag, mtime)
    assert not ranges.not_modified(None, "garbage", tag, mtime)
    assert not ranges.not_modified(None, None, tag, mtime)
    # If-Range: strong comparison only, or the exact second
    assert ranges.if_range_holds(None, tag, mtime)
    assert ranges.if_range_holds(tag, tag, mtime)
    assert not ranges.if_range_holds(f"W/{tag}", tag, mtime)
    assert ranges.if_range_holds(date, tag, mtime)
    assert not ranges.if_range_holds(ranges.http_date(mtime + 5), tag, mtime)


def test_etag_of_a_real_stat(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "f")
    with open(path, "wb") as f:
        f.write(b"abc")
    st_ = os.stat(path)
    assert ranges.etag(st_) == f'"{st_.st_ino:x}-3-{st_.st_mtime_ns:x}"'
