"""What a copy is asked to do (:class:`CopyRequest`, frozen), the copy as it runs
(:class:`CopyRun`: the request, its stream policy, its clock, who is told of its progress)
and what it did (:class:`FileResult`, :class:`Summary`)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dtnkit.errors import BadInput
from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.client.blocks import BufferPool
from dtnkit.transfer.client.policy import StreamPolicy
from dtnkit.transfer.client.retry import RetryPolicy
from dtnkit.transfer.client.verify import Level, Verify, VerifyPlan
from dtnkit.transfer.wire import digests

if TYPE_CHECKING:
    from dtnkit.transfer.client.timeline import Timeline

#: The default minimum rate: 1 KiB/s over 30 s (a connection slower than that for half a
#: minute is dead or hostile; curl has the rule but no default).
DEFAULT_LOW_SPEED_LIMIT = 1024
DEFAULT_LOW_SPEED_TIME = 30.0


@dataclass(frozen=True, slots=True)
class CopyRequest:
    """What a copy is asked to do: the flags of ``dtnkit cp``, checked when made (one
    :class:`~dtnkit.errors.BadInput` naming the flag); ``verify``, ``level`` and
    ``checksum`` are kept in their canonical form (the enums, the registry's name)."""

    #: streams per file with ``--streams N`` (``--streams auto`` is the :class:`CopyRun`'s
    #: stream policy, which then decides)
    streams: int = 1
    block_size: int = pipeline.DEFAULT_BLOCK
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
    max_buffered: int = pipeline.DEFAULT_MAX_BUFFERED
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
    # the SciTags tag (expId << 6 | actId): a SciTag header on every request, the IPv6 flow
    # label on every connection (client/flowlabel.py), TransferHeaderSciTag on a COPY
    scitag: int | None = None

    def __post_init__(self) -> None:
        if self.streams < 1 or self.parallel < 1:
            raise BadInput("--streams/--parallel", "must be at least 1", "pass 1 or more")
        if self.block_size < 1:
            raise BadInput("--block-size", "must be positive", "pass e.g. 8M")
        try:
            object.__setattr__(self, "verify", Verify(self.verify))
        except ValueError:
            raise BadInput(
                f"--verify {self.verify}", "unknown mode", f"use one of {', '.join(Verify)}"
            ) from None
        try:
            object.__setattr__(self, "level", Level(self.level))
        except ValueError:
            raise BadInput(
                f"--verify-level {self.level}", "unknown level", f"use one of {', '.join(Level)}"
            ) from None
        try:
            object.__setattr__(self, "checksum", checksum.canonical(self.checksum))
        except ValueError as exc:
            raise BadInput(
                f"--checksum {self.checksum}",
                str(exc),
                f"use one of {', '.join(checksum.ALGORITHMS)}",
            ) from None
        if self.retries < 0:
            raise BadInput("--retries", "must be >= 0", "pass 0 or more")
        if self.low_speed_limit < 0:
            raise BadInput("--low-speed-limit", "must be >= 0", "pass e.g. 1KiB, or 0 for none")
        if not (math.isfinite(self.low_speed_time) and self.low_speed_time > 0):
            raise BadInput(
                "--low-speed-time", "must be a positive number of seconds", "pass e.g. 30"
            )
        if self.deadline is not None and not (math.isfinite(self.deadline) and self.deadline > 0):
            raise BadInput("--deadline", "must be a positive number of seconds", "pass e.g. 3600")

    def verify_plan(self) -> VerifyPlan:
        """What this request verifies and how durably, decided once."""
        return VerifyPlan(self.verify, self.level, self.checksum)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(self.retries, self.backoff)


@dataclass(slots=True)
class CopyRun:
    """One copy as it runs: its :class:`CopyRequest`, its :class:`StreamPolicy` (fixed or
    auto, decided once for the run), its clock (``--deadline`` counts from :attr:`started`)
    and who is told of its progress."""

    request: CopyRequest
    streams: StreamPolicy
    progress: Callable[[int], None] | None = None  # told the bytes of each block moved
    # told a remote source's size once its first answer gives it (a progress bar's total)
    on_size: Callable[[int], None] | None = None
    started: float = field(default_factory=time.monotonic)  # the deadline's 0
    timeline: Timeline | None = None  # cp --timeline: told the copy's steps and connections
    # block buffers, kept for the run: the files of a tree reuse the pages of the first ones
    _pool: BufferPool | None = field(default=None, init=False, repr=False)
    _pool_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def of(
        cls,
        request: CopyRequest,
        *,
        streams: StreamPolicy | None = None,
        progress: Callable[[int], None] | None = None,
        on_size: Callable[[int], None] | None = None,
        timeline: Timeline | None = None,
    ) -> CopyRun:
        """A run of *request* starting now, its streams *streams*' (default: the request's
        ``--streams N``)."""
        return cls(
            request,
            streams or StreamPolicy.fixed(request.streams),
            progress,
            on_size,
            timeline=timeline,
        )

    def pool(self, size: int) -> BufferPool:
        """A pool of buffers for the blocks of a file of *size* bytes: the run's, of
        ``--block-size`` buffers, for every file of a block or more (a tree's files reuse
        the pages the first ones were given), a pool of its own for a smaller file."""
        block = self.request.block_size
        if size < block:
            return BufferPool(max(1, size))
        with self._pool_lock:
            if self._pool is None:
                self._pool = BufferPool(block)
            return self._pool

    def mark(self, what: str, **where: int | str | None) -> None:
        """A step of the copy, for its timeline (nothing without one)."""
        if self.timeline is not None:
            self.timeline.mark(what, **where)

    def deadline_at(self) -> float | None:
        """The monotonic time the deadline passes (None without one)."""
        return None if self.request.deadline is None else self.started + self.request.deadline

    def sized(self, size: int) -> None:
        """A remote source's first answer told its size: tell :attr:`on_size`."""
        if self.on_size is not None:
            self.on_size(size)

    def progressed(self, n: int) -> None:
        """*n* more bytes of the file are where they go (or were kept by a resume)."""
        if self.progress is not None:
            self.progress(n)


@dataclass(slots=True)
class FileResult:
    """What the copy of one file did."""

    source: str
    destination: str
    size: int
    digest: bytes | None  # the verified digest (of the request's checksum); None: unverified
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
        return digests.show(self.digest)


@dataclass(slots=True)
class Summary:
    """What a whole copy did: its files and its time."""

    run: CopyRun
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def resumed_bytes(self) -> int:
        """Bytes kept from an interrupted run: in ``bytes``, not moved by this run."""
        return sum(f.resumed_bytes for f in self.files)

    def as_dict(self) -> dict[str, object]:
        request, streams = self.run.request, self.run.streams
        levels = {f.level for f in self.files}
        order = [lvl for lvl in Level if lvl in levels]
        decision = streams.decision
        return {
            "files": len(self.files),
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            # the rate of the bytes this run moved: kept blocks took no time here
            "rate_bps": (
                round((self.bytes - self.resumed_bytes) * 8 / self.seconds, 1)
                if self.seconds > 0
                else None
            ),
            "checksum": request.checksum if request.verify != Verify.NONE else None,
            "digest": self.files[0].shown_digest() if len(self.files) == 1 else None,
            "verify": str(request.verify),
            "level": str(order[0] if order else request.level),  # the weakest level achieved
            "streams": streams.shown(),
            **({"streams_auto": decision.as_dict()} if decision is not None else {}),
            "retries": sum(f.retries for f in self.files),
            **(
                {"upload_streams": max(f.upload_streams or 1 for f in self.files)}
                if any(f.upload_streams is not None for f in self.files)
                else {}
            ),
            "refetched_blocks": sum(f.refetched_blocks for f in self.files),
            "resumed_blocks": sum(f.resumed_blocks for f in self.files),
            "resumed_bytes": self.resumed_bytes,
            "notes": [f"{f.destination}: {f.note}" for f in self.files if f.note],
        }
