"""Byte ranges, ``Content-Range``, entity tags, HTTP dates and conditional requests.

Values in, values out: the server feeds header text and a file's size, inode and times; nothing
here touches a file or a socket.
"""

from __future__ import annotations

import email.utils
import re
from typing import Protocol


class RangeNotSatisfiable(ValueError):
    """A well-formed range that selects no byte of the file (HTTP 416)."""


class StatLike(Protocol):
    """What an entity tag is made of (an :class:`os.stat_result` has it)."""

    @property
    def st_ino(self) -> int: ...

    @property
    def st_size(self) -> int: ...

    @property
    def st_mtime_ns(self) -> int: ...


_RANGE_FORMS = "expected 'bytes=first-last', 'bytes=first-' or 'bytes=-suffix'"
_CONTENT_RANGE = re.compile(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19})")


def parse_range(value: str, size: int) -> tuple[int, int]:
    """First and last byte (inclusive) of a single ``bytes=`` range over ``size`` bytes.

    ValueError for a malformed value or several ranges; :class:`RangeNotSatisfiable` when
    the range selects nothing.
    """
    unit, sep, spec = value.strip().partition("=")
    if not sep or unit.strip().lower() != "bytes":
        raise ValueError(_RANGE_FORMS)
    spec = spec.strip()
    if "," in spec:
        raise ValueError("only a single byte range is supported")
    first, dash, last = spec.partition("-")
    first, last = first.strip(), last.strip()
    if (
        not dash
        or (first and not first.isdigit())
        or (last and not last.isdigit())
        or not (first or last)
        or not (first + last).isascii()
    ):
        raise ValueError(_RANGE_FORMS)
    if not first:  # suffix: the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable(f"the suffix of {n} bytes selects nothing of {size} bytes")
        return max(0, size - n), size - 1
    start = int(first)
    if last and int(last) < start:
        raise ValueError(f"the last byte {last} is before the first {first}")
    if start >= size:
        raise RangeNotSatisfiable(f"the first byte {start} is beyond the size {size}")
    end = min(int(last), size - 1) if last else size - 1
    return start, end


def format_content_range(start: int, end: int, size: int) -> str:
    """``Content-Range`` of bytes ``start``..``end`` (inclusive) of ``size``: ``bytes a-b/N``."""
    return f"bytes {start}-{end}/{size}"


def unsatisfied_range(size: int) -> str:
    """``Content-Range`` of a 416 answer: ``bytes */N``."""
    return f"bytes */{size}"


def parse_content_range(value: str) -> tuple[int, int, int]:
    """``bytes a-b/N`` -> (a, b, N); ValueError when malformed."""
    m = _CONTENT_RANGE.fullmatch(value.strip())
    if m is None:
        raise ValueError("expected 'bytes first-last/length'")
    a, b, n = (int(g) for g in m.groups())
    if b < a:
        raise ValueError(f"the last byte {b} is before the first {a}")
    return a, b, n


def etag(st: StatLike) -> str:
    """A strong entity tag from inode, size and modification time (nanoseconds)."""
    return f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"'


def http_date(timestamp: float) -> str:
    """An IMF-fixdate (``Last-Modified``, ``getlastmodified``)."""
    return email.utils.formatdate(timestamp, usegmt=True)


def parse_http_date(value: str) -> float | None:
    """Seconds since the epoch of an HTTP date, or None when it is not one."""
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def not_modified(
    if_none_match: str | None, if_modified_since: str | None, tag: str, mtime: float
) -> bool:
    """True when a GET/HEAD with these conditions is answered 304 (If-None-Match wins)."""
    if if_none_match is not None:
        tags = [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
        return "*" in tags or tag in tags
    if if_modified_since is not None:
        when = parse_http_date(if_modified_since)
        return when is not None and int(mtime) <= when
    return False


def if_range_holds(value: str | None, tag: str, mtime: float) -> bool:
    """True when a ``Range`` is to be honoured under this ``If-Range`` (None: no condition)."""
    if value is None:
        return True
    value = value.strip()
    if value.startswith(('"', "W/")):
        return value == tag  # strong comparison: a weak tag never matches
    when = parse_http_date(value)
    return when is not None and int(mtime) == int(when)
