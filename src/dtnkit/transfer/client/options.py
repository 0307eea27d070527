"""What a copy is asked to do (:class:`Options`) and what it did (:class:`FileResult`,
:class:`Summary`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dtnkit.errors import BadInput
from dtnkit.records import mutable_record
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client.verify import Level, Verify, VerifyPlan
from dtnkit.transfer.wire import digests as dg

if TYPE_CHECKING:  # cli/cp.py loads it for --streams auto only
    from dtnkit.transfer.client.autostreams import AutoStreams

#: The default minimum rate: 1 KiB/s over 30 s (a connection slower than that for half a
#: minute is dead or hostile; curl has the rule but no default).
DEFAULT_LOW_SPEED_LIMIT = 1024
DEFAULT_LOW_SPEED_TIME = 30.0


@mutable_record
class Options:
    """What a copy is asked to do (the flags of `dtnkit cp`)."""

    streams: int = 1
    block_size: int = pl.DEFAULT_BLOCK
    checksum: str = "adler32"
    verify: Verify = Verify.BLOCK
    level: Level = Level.INFLIGHT
    retries: int = 3
    backoff: float = 0.5
    stall_timeout: float = 60.0
    token: str | None = None
    ca_file: str | None = None
    ca_dir: str | None = None  # a hashed CA directory ($X509_CERT_DIR), trusted when it exists
    insecure: bool = False
    parallel: int = 1
    recursive: bool = False
    max_buffered: int = pl.DEFAULT_MAX_BUFFERED
    progress: Callable[[int], None] | None = None
    # told a remote source's size once its first answer gives it (a progress bar's total)
    on_size: Callable[[int], None] | None = None
    src_token: str | None = None  # remote to remote: the source's token (default: token)
    dst_token: str | None = None  # remote to remote: the destination's token (default: token)
    resume: bool = True  # continue from a kept part file (download) or session (upload)
    # replace an existing destination (cp -f); False: refuse it, atomically at the commit
    # (a local rename that never replaces, If-None-Match: * on a PUT, Overwrite: F on a COPY)
    overwrite: bool = True
    # create the destination's missing parent directories (a local path: mkdir -p) or
    # collections (a URL: MKCOL, one level at a time), as gfal-copy -p and xrdcp -p (cp -p)
    parents: bool = False
    # the minimum rate of every connection (client/pace.py): fewer than low_speed_limit
    # bytes/s over low_speed_time seconds fails it (0: no minimum); server TPC pulls get
    # these defaults too
    low_speed_limit: int = DEFAULT_LOW_SPEED_LIMIT
    low_speed_time: float = DEFAULT_LOW_SPEED_TIME
    deadline: float | None = None  # seconds for the whole copy, from its start (None: none)
    started: float | None = None  # time.monotonic() when the copy started (the deadline's 0)
    # the SciTags tag (expId << 6 | actId): a SciTag header on every request, the IPv6 flow
    # label on every connection (client/flowlabel.py), TransferHeaderSciTag on a COPY
    scitag: int | None = None

    def deadline_at(self) -> float | None:
        """The monotonic time the deadline passes (None without one); the clock starts at
        the first call when :meth:`start` was not called."""
        if self.deadline is None:
            return None
        if self.started is None:
            self.started = time.monotonic()
        return self.started + self.deadline

    def start(self) -> None:
        """Start the deadline's clock: the copy begins now."""
        self.started = time.monotonic()

    def sized(self, size: int) -> None:
        """A remote source's first answer told its size: tell :attr:`on_size`."""
        if self.on_size is not None:
            self.on_size(size)
    auto: AutoStreams | None = None  # --streams auto: decides `streams` on the first connection

    def check(self) -> None:
        if self.streams < 1 or self.parallel < 1:
            raise BadInput("--streams/--parallel", "must be at least 1", "pass 1 or more")
        if self.block_size < 1:
            raise BadInput("--block-size", "must be positive", "pass e.g. 8M")
        try:
            self.verify = Verify(self.verify)
        except ValueError:
            raise BadInput(f"--verify {self.verify}", "unknown mode",
                           f"use one of {', '.join(Verify)}") from None
        try:
            self.level = Level(self.level)
        except ValueError:
            raise BadInput(f"--verify-level {self.level}", "unknown level",
                           f"use one of {', '.join(Level)}") from None
        try:
            self.checksum = cks.canonical(self.checksum)
        except ValueError as exc:
            raise BadInput(f"--checksum {self.checksum}", str(exc),
                           f"use one of {', '.join(cks.ALGORITHMS)}") from None
        if self.retries < 0:
            raise BadInput("--retries", "must be >= 0", "pass 0 or more")
        if self.low_speed_limit < 0:
            raise BadInput("--low-speed-limit", "must be >= 0", "pass e.g. 1KiB, or 0 for none")
        if not (math.isfinite(self.low_speed_time) and self.low_speed_time > 0):
            raise BadInput("--low-speed-time", "must be a positive number of seconds",
                           "pass e.g. 30")
        if self.deadline is not None and not (math.isfinite(self.deadline)
                                              and self.deadline > 0):
            raise BadInput("--deadline", "must be a positive number of seconds",
                           "pass e.g. 3600")

    def plan(self) -> VerifyPlan:
        """The verify plan of these options as they are now (a TPC copy may lower verify)."""
        return VerifyPlan.of(self.verify, self.level, self.checksum)


@mutable_record
class FileResult:
    """What the copy of one file did."""

    source: str
    destination: str
    size: int
    digest: bytes | None  # the verified digest (of Options.checksum); None when not verified
    level: Level
    retries: int = 0
    read_back: int = 0
    upload_streams: int | None = None  # uploads and relays: PUT streams used (1: one PUT)
    refetched_blocks: int = 0  # blocks fetched again after a mismatch (bad-block re-fetch)
    resumed_blocks: int = 0  # blocks kept from an interrupted run
    resumed_bytes: int = 0  # their bytes: not moved by this run
    note: str | None = None  # e.g. why a kept part file was not resumed
    algorithm: str | None = None  # the digest's checksum algorithm

    def shown_digest(self) -> str | None:
        """The digest as people and JSON see it: hex, as md5sum prints it."""
        if self.digest is None or self.algorithm is None:
            return None
        return dg.show(self.digest)


@mutable_record
class Summary:
    """What a whole copy did: its files and its time."""

    files: list[FileResult]
    seconds: float = 0.0

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def resumed_bytes(self) -> int:
        """Bytes kept from an interrupted run: in ``bytes``, not moved by this run."""
        return sum(f.resumed_bytes for f in self.files)

    def as_dict(self, options: Options) -> dict[str, object]:
        levels = {f.level for f in self.files}
        order = [lvl for lvl in Level if lvl in levels]
        return {
            "files": len(self.files),
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            # the rate of the bytes this run moved: kept blocks took no time here
            "rate_bps": (round((self.bytes - self.resumed_bytes) * 8 / self.seconds, 1)
                         if self.seconds > 0 else None),
            "checksum": options.checksum if options.verify != Verify.NONE else None,
            "digest": self.files[0].shown_digest() if len(self.files) == 1 else None,
            "verify": str(options.verify),
            "level": str(order[0] if order else options.level),  # the weakest level achieved
            "streams": (options.auto.used if options.auto is not None
                        and options.auto.used is not None else options.streams),
            **({"streams_auto": options.auto.decision.as_dict()}
               if options.auto is not None and options.auto.decision is not None else {}),
            "retries": sum(f.retries for f in self.files),
            **({"upload_streams": max(f.upload_streams or 1 for f in self.files)}
               if any(f.upload_streams is not None for f in self.files) else {}),
            "refetched_blocks": sum(f.refetched_blocks for f in self.files),
            "resumed_blocks": sum(f.resumed_blocks for f in self.files),
            "resumed_bytes": self.resumed_bytes,
            "notes": [f"{f.destination}: {f.note}" for f in self.files if f.note],
        }
