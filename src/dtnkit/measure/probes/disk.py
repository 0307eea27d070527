"""The storage probe: sequential write, then sequential read, of one file (or device).

Every storage tool's summary holds :data:`SUMMARY_KEYS`.  Every rate is in bit/s, as every
``_bps`` in dtnkit: ``write_bps``, ``read_bps``, and ``throughput_bps``, the read rate again,
since reading is what feeds a transfer.  Summaries stored before the rates were bits held
``read_bps``/``write_bps`` in bytes/s; :func:`upgrade_summary` reads them as bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

KIND = "disk"
TITLE = "storage"
SUMMARY_KEYS = (
    "throughput_bps",
    "write_bps",
    "read_bps",
    "write_lat_ms_mean",
    "read_lat_ms_mean",
    "size_bytes",
)
#: a bound on --size for typing mistakes only: the real limit is the room where the file goes
#: (free space, and RAM for a file system in memory), which the storage tool checks
MAX_SIZE_BYTES = 2**50


@dataclass
class DiskSpec:
    kind: ClassVar[str] = KIND

    path: str
    size_bytes: int = 256 * 2**20
    direct: bool = True
    jobs: int = 1
    interval_s: float = 5.0

    def validate(self) -> None:
        """The storage tool checks its target and sizes itself (it knows its limits)."""


def upgrade_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """A stored storage summary with its rates in bit/s: one written when ``read_bps`` and
    ``write_bps`` held bytes/s (its ``throughput_bps``, always in bit/s, is then exactly
    ``read_bps`` x 8) gets both multiplied by 8; any other summary is returned as it is."""
    tput, read = summary.get("throughput_bps"), summary.get("read_bps")
    if not (
        isinstance(tput, int | float)
        and isinstance(read, int | float)
        and _finite(tput)
        and _finite(read)
        and read
        and math.isclose(tput, read * 8, rel_tol=1e-9)
    ):
        return summary
    out = dict(summary)
    for key in ("read_bps", "write_bps"):
        value = out.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = float(value) * 8
    return out


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
