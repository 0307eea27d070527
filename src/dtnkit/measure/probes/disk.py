"""The storage probe: sequential write, then sequential read, of one file (or device).

Every storage tool's summary holds :data:`SUMMARY_KEYS`; ``throughput_bps`` is the read rate
in bit/s, since reading is what feeds a transfer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

KIND = "disk"
TITLE = "storage"
SUMMARY_KEYS = ("throughput_bps", "write_bps", "read_bps", "write_lat_ms_mean",
                "read_lat_ms_mean", "size_bytes")
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
