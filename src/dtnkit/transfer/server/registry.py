"""The open upload sessions of one server: their part files, ranges, expiry and janitor.

Sessions live in the server's memory: a restarted server forgets them (the client then starts
again); a thread drops sessions idle for longer than the expiry, and the server's part-file
janitor (:mod:`~dtnkit.transfer.server.janitor`) removes part files left by an earlier
process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from dtnkit.transfer import files
from dtnkit.transfer.server.config import DEFAULT_EXPIRY
from dtnkit.transfer.server.errors import HttpError, show
from dtnkit.transfer.wire import upload as wup

PART_PREFIX = "u"  # session part files: .<name>.dtnkit-part-u<16 hex>
#: each open session holds one file descriptor: bounded well below the usual 1024 fd limit
MAX_SESSIONS = 512


@dataclass
class ReceivedRange:
    start: int
    end: int  # inclusive
    value: int | None  # the session's combinable checksum of the range


@dataclass
class UploadSession:
    ident: str
    path: Path
    part: Path
    length: int
    owner: str  # sha-256 of the token that started it
    algorithm: str | None
    fd: int
    touched: float
    ranges: dict[int, ReceivedRange] = field(default_factory=dict)
    inflight: set[tuple[int, int]] = field(default_factory=set)
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def spans(self) -> list[tuple[int, int]]:
        return [(r.start, r.end) for r in self.ranges.values()]

    def missing(self) -> list[tuple[int, int]]:
        return wup.missing(self.spans(), self.length)

    def merged(self) -> list[tuple[int, int]]:
        return wup.merge(self.spans())


def part_token(ident: str) -> str:
    """The id does not appear on disk: the part name carries a hash of it."""
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


class Registry:
    """Open upload sessions of one server, with expiry and a janitor thread."""

    def __init__(self, root: Path, expiry: float = DEFAULT_EXPIRY) -> None:
        self.root = root
        self.expiry = expiry
        self._lock = threading.Lock()
        self._sessions: dict[str, UploadSession] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._janitor, name="dtnkit-upload-janitor",
                                        daemon=True)
        self._thread.start()

    # --- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for s in sessions:  # the part files stay: a restarted server's janitor removes them
            self.close_fd(s)

    def _janitor(self) -> None:
        while not self._stop.wait(max(0.05, min(self.expiry / 4, 60.0))):
            self.purge()

    def purge(self) -> int:
        now = time.monotonic()
        with self._lock:
            stale = [s for s in self._sessions.values()
                     if now - s.touched > self.expiry and not s.inflight]
            for s in stale:
                del self._sessions[s.ident]
        for s in stale:
            self.discard(s)
        return len(stale)

    # --- sessions ----------------------------------------------------------------------

    def create(self, path: Path, length: int, owner: str,
               algorithm: str | None) -> UploadSession:
        self.purge()
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                raise HttpError(503, "upload session", "too many open sessions; retry later",
                                [("Retry-After", "60")])
        ident = secrets.token_urlsafe(24)
        part = files.part_for(path, PART_PREFIX + part_token(ident))
        fd = files.create_part(part, self.root, readable=True)
        try:
            os.ftruncate(fd, length)
        except OSError:
            files.release(fd)
            os.close(fd)
            files.remove_part(part, self.root)
            raise
        session = UploadSession(ident, path, part, length, owner, algorithm, fd,
                                time.monotonic())
        with self._lock:
            self._sessions[ident] = session
        return session

    def get(self, ident: str | None, path: Path, owner: str) -> UploadSession:
        with self._lock:
            s = self._sessions.get(ident or "")
        now = time.monotonic()
        if (s is None or s.closed or s.path != path
                or not secrets.compare_digest(s.owner, owner)
                or (now - s.touched > self.expiry and not s.inflight)):
            raise HttpError(404, f"{wup.ID_HEADER} for {show(path, self.root)}",
                            "unknown or expired upload session for this path and token; "
                            "start a new one")
        s.touched = now
        return s

    def forget(self, s: UploadSession) -> None:
        with self._lock:
            self._sessions.pop(s.ident, None)

    def discard(self, s: UploadSession) -> None:
        self.forget(s)
        self.close_fd(s)
        files.remove_part(s.part, self.root)

    @staticmethod
    def close_fd(s: UploadSession) -> None:
        with s.lock:
            if s.closed:
                return
            s.closed = True
        files.release(s.fd)
        with contextlib.suppress(OSError):
            os.close(s.fd)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
