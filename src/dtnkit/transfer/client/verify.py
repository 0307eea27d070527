"""What a copy verifies and how durably: modes and levels as enums, and the plan built once
from (verify, level, algorithm) that the download, upload and relay flows ask instead of
comparing strings.

The enums are ``str``-valued, so the CLI's choices and the JSON summary keep their strings.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from dtnkit.transfer.wire import digests


class Verify(enum.StrEnum):
    """``none``; ``sequential`` (source digest first, transfer, re-read the destination);
    ``file`` (checksum after the transfer); ``block`` (pipelined with the transfer)."""

    NONE = "none"
    SEQUENTIAL = "sequential"
    FILE = "file"
    BLOCK = "block"


class Level(enum.StrEnum):
    """``inflight``; ``durable`` (fsync before the rename); ``ondisk`` (evict pages, re-read)."""

    INFLIGHT = "inflight"
    DURABLE = "durable"
    ONDISK = "ondisk"


@dataclass(frozen=True, slots=True)
class VerifyPlan:
    """Every verification decision of one file copy, derived once."""

    verify: Verify
    level: Level
    algorithm: str

    @classmethod
    def of(cls, verify: Verify | str, level: Level | str, algorithm: str) -> VerifyPlan:
        return cls(Verify(verify), Level(level), algorithm)

    @property
    def checks(self) -> bool:
        """Whether anything is verified at all."""
        return self.verify is not Verify.NONE

    @property
    def block(self) -> bool:
        """Hash the blocks as they move (FIVER): pipelined with the transfer."""
        return self.verify is Verify.BLOCK

    @property
    def sequential(self) -> bool:
        """The source's digest first (a download waits for it; a PUT sends it along)."""
        return self.verify is Verify.SEQUENTIAL

    @property
    def hash_file_after(self) -> bool:
        """Checksum the whole file after the transfer (sequential and file)."""
        return self.verify in (Verify.SEQUENTIAL, Verify.FILE)

    @property
    def source_digest_in_background(self) -> bool:
        """Ask the source's digest concurrently with the transfer (file and block)."""
        return self.verify in (Verify.FILE, Verify.BLOCK)

    @property
    def fsync(self) -> bool:
        """fsync the destination before its rename (durable and ondisk)."""
        return self.level is not Level.INFLIGHT

    @property
    def ondisk(self) -> bool:
        """Evict the destination's cached pages and re-read it from disk (RIVA)."""
        return self.level is Level.ONDISK

    @property
    def reread_from_disk(self) -> bool:
        return self.ondisk and self.checks

    @property
    def device_ok(self) -> bool:
        """Whether a character device (no read-back) can take the download."""
        return self.verify in (Verify.NONE, Verify.BLOCK) and self.level is Level.INFLIGHT

    @property
    def upload_level(self) -> Level:
        """What an upload achieves: the server fsyncs before its rename when it verifies."""
        return Level.DURABLE if self.checks else Level.INFLIGHT

    @property
    def unverified_level(self) -> Level:
        """What a download achieves without verification (fsync, but no re-read)."""
        return Level.DURABLE if self.fsync else Level.INFLIGHT

    @property
    def session_algorithm(self) -> str | None:
        """The checksum an upload session is opened with (None: no verification)."""
        return self.algorithm if self.checks else None

    def show(self, value: bytes) -> str:
        return digests.show(value)
