"""The recommended-streams table (``dtnkit sweep analyze --save-streams FILE``) as ``dtnkit cp
--streams auto`` reads it: per measured RTT, the streams a sweep found best (the knee of its
throughput curve).  The schema is in docs/sweep.md.

Kept here, below the sweep package, so that ``cp`` reads a table without the sweep's
modules (the sweep package re-exports it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput

STREAMS_TABLE_SCHEMA = "dtnkit.sweep.streams/1"
#: the table ``cp --streams auto`` reads when no --streams-table is given (in the state dir)
DEFAULT_NAME = "streams.json"
#: the largest table file read (a real one is a few hundred bytes)
MAX_BYTES = 1 << 20


def read_streams_table(doc: Any, source: str = "streams table") -> list[tuple[float, int]]:
    """Validate a streams table (as parsed from JSON) -> [(rtt_ms, streams)] by RTT."""

    def bad(why: str) -> BadInput:
        return BadInput(
            f"{source}: not a streams table", why, "write it again with dtnkit sweep analyze"
        )

    if not isinstance(doc, dict) or doc.get("schema") != STREAMS_TABLE_SCHEMA:
        raise bad(f"its schema is not {STREAMS_TABLE_SCHEMA}")
    rows = doc.get("rtts")
    if not isinstance(rows, list) or not rows:
        raise bad("rtts is not a non-empty list")
    out = []
    for row in rows:
        rtt = row.get("rtt_ms") if isinstance(row, dict) else None
        streams = row.get("streams") if isinstance(row, dict) else None
        if (
            isinstance(rtt, bool)
            or not isinstance(rtt, int | float)
            or not math.isfinite(rtt)
            or rtt < 0
            or isinstance(streams, bool)
            or not isinstance(streams, int)
            or not 1 <= streams <= 1024
        ):
            raise bad(f"bad row {str(row)[:60]}: rtt_ms >= 0 and streams 1-1024")
        out.append((float(rtt), streams))
    return sorted(out)


def nearest_row(table: Sequence[tuple[float, int]], rtt_ms: float) -> tuple[float, int]:
    """The row of the table's RTT nearest to rtt_ms on a log scale (at a tie the longer
    RTT's, which is the one with more streams in flight)."""

    def distance(row: tuple[float, int]) -> tuple[float, float]:
        return (abs(math.log((row[0] + 0.1) / (rtt_ms + 0.1))), -row[0])

    return min(table, key=distance)


def streams_for_rtt(table: Sequence[tuple[float, int]], rtt_ms: float) -> int:
    """The streams of :func:`nearest_row`."""
    return nearest_row(table, rtt_ms)[1]


def load(path: Path) -> list[tuple[float, int]]:
    """Read and validate a table file; BadInput (one line) when it cannot be used."""
    shown = str(path)
    try:
        with open(path, "rb") as fh:
            blob = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise BadInput(
            f"cannot read the streams table {shown}",
            exc.strerror or str(exc),
            "give a file written by `dtnkit sweep analyze --save-streams`",
        ) from None
    if len(blob) > MAX_BYTES:
        raise BadInput(
            f"the streams table {shown} is too large",
            f"more than {MAX_BYTES} bytes",
            "write it again with dtnkit sweep analyze --save-streams",
        )
    try:
        doc = json.loads(blob)
    except ValueError as exc:
        raise BadInput(
            f"the streams table {shown} is not JSON",
            str(exc)[:80],
            "write it again with dtnkit sweep analyze --save-streams",
        ) from None
    return read_streams_table(doc, f"the streams table {shown}")
