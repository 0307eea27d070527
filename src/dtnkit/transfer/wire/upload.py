"""Upload sessions on the wire: header names, actions and received-range bookkeeping.

Shared by the server (:mod:`dtnkit.transfer.server.sessions`) and the client's multi-stream
upload, so both spell the protocol the same way (docs/transfer.md, "Partial uploads").
Ranges are ``(first, last)`` byte offsets, both inclusive.
"""

from __future__ import annotations

from collections.abc import Iterable

HEADER = "Dtnkit-Upload"  # the action of a POST: start, status, commit, abort
ID_HEADER = "Dtnkit-Upload-Id"
RANGES_HEADER = "Dtnkit-Upload-Ranges"
CHECKSUM_HEADER = "Dtnkit-Upload-Checksum"
EXPIRES_HEADER = "Dtnkit-Upload-Expires"
LENGTH_HEADER = "Upload-Length"

START, STATUS, COMMIT, ABORT = "start", "status", "commit", "abort"
ACTIONS = (START, STATUS, COMMIT, ABORT)

Span = tuple[int, int]


def merge(ranges: Iterable[Span]) -> list[Span]:
    """The ranges sorted, with touching ones (``0-9`` and ``10-19``) joined."""
    out: list[Span] = []
    for a, b in sorted(ranges):
        if out and a == out[-1][1] + 1:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def missing(ranges: Iterable[Span], length: int) -> list[Span]:
    """The gaps of ``[0, length)`` that no range covers, in order."""
    gaps: list[Span] = []
    pos = 0
    for a, b in sorted(ranges):
        if a > pos:
            gaps.append((pos, a - 1))
        pos = max(pos, b + 1)
    if pos < length:
        gaps.append((pos, length - 1))
    return gaps


def covered(first: int, last: int, ranges: Iterable[Span]) -> bool:
    """True when one range holds all of ``first``..``last``."""
    return any(a <= first and last <= b for a, b in ranges)


def overlapping(first: int, last: int, ranges: Iterable[Span]) -> Span | None:
    """The first range sharing a byte with ``first``..``last``, or None."""
    for a, b in ranges:
        if a <= last and first <= b:
            return (a, b)
    return None


def format_ranges(ranges: Iterable[Span]) -> str:
    """``Dtnkit-Upload-Ranges``: ``a-b,c-d`` (empty when nothing was received)."""
    return ",".join(f"{a}-{b}" for a, b in ranges)


def parse_ranges(value: str | None) -> list[Span]:
    """``Dtnkit-Upload-Ranges`` -> ranges; items that are not ``a-b`` are skipped."""
    out: list[Span] = []
    for item in (value or "").split(","):
        a, sep, b = item.strip().partition("-")
        if sep and a.isdigit() and b.isdigit():
            out.append((int(a), int(b)))
    return out
