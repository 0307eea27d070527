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
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from dtnkit.transfer import files, fsroot
from dtnkit.transfer.server.config import DEFAULT_EXPIRY
from dtnkit.transfer.server.errors import HttpError, show
from dtnkit.transfer.server.limits import Limits
from dtnkit.transfer.wire import upload

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
    fd: int  # -1 while resting (after a failed range or commit): reopened on the next use
    touched: float
    file_id: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of the part file it created
    ranges: dict[int, ReceivedRange] = field(default_factory=dict)
    inflight: set[tuple[int, int]] = field(default_factory=set)
    closed: bool = False
    taken: bool = False  # a commit owns it now: no range may start, nothing may rest it
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def spans(self) -> list[tuple[int, int]]:
        return [(r.start, r.end) for r in self.ranges.values()]

    def missing(self) -> list[tuple[int, int]]:
        return upload.missing(self.spans(), self.length)

    def merged(self) -> list[tuple[int, int]]:
        return upload.merge(self.spans())

    def outstanding(self) -> int:
        """Declared bytes not received yet: what the sparse part file may still take.

        Without the session's lock (the registry's is held, and a commit takes them in the
        other order): ``list()`` copies the values in one step under the GIL.
        """
        received = list(self.ranges.values())
        return self.length - sum(r.end - r.start + 1 for r in received)


def part_token(ident: str) -> str:
    """The id does not appear on disk: the part name carries a hash of it."""
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


class SessionRegistry:
    """Open upload sessions of one server, with expiry and a janitor thread."""

    def __init__(self, root: Path, expiry: float = DEFAULT_EXPIRY) -> None:
        self.root = root
        self.expiry = expiry
        self._lock = threading.Lock()
        self._sessions: dict[str, UploadSession] = {}
        self._pending: list[tuple[str, int]] = []  # (owner, length) of sessions being made
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._janitor, name="dtnkit-upload-janitor", daemon=True
        )
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
            stale = [
                s
                for s in self._sessions.values()
                if now - s.touched > self.expiry and not s.inflight
            ]
            for s in stale:
                del self._sessions[s.ident]
        for s in stale:
            self.discard(s)
        return len(stale)

    # --- sessions ----------------------------------------------------------------------

    def admit(self, path: Path, length: int, owner: str, limits: Limits) -> None:
        """Refuse a new session (call with the lock held): 503 when the server or this
        token has too many open, 507 when the bytes still to come in this token's sessions
        (or in all of them) would not fit (sparse part files count as their declared size).
        """
        mine = [s for s in self._sessions.values() if s.owner == owner]
        mine_pending = [n for o, n in self._pending if o == owner]
        if len(self._sessions) + len(self._pending) >= MAX_SESSIONS:
            raise HttpError(
                503,
                "upload session",
                "too many open sessions on this server; retry later or upload with one PUT",
                [("Retry-After", "60")],
            )
        if len(mine) + len(mine_pending) >= limits.sessions_per_token:
            raise HttpError(
                503,
                "upload session",
                f"this token has {limits.sessions_per_token}"
                " open sessions, its limit; retry later or upload with one PUT",
                [("Retry-After", "60")],
            )
        free = files.free_space(path.parent)
        everyone = sum(s.outstanding() for s in self._sessions.values())
        everyone += sum(n for _o, n in self._pending)
        own = sum(s.outstanding() for s in mine) + sum(mine_pending)
        cap = limits.session_bytes_per_token
        if cap is None and free is not None:
            cap = free // 2
        if cap is not None and own + length > cap:
            raise HttpError(
                507,
                "upload session",
                f"this token's open sessions would hold "
                f"{own + length} bytes, more than its limit of {cap}; upload with "
                "one PUT or finish the other sessions",
            )
        if free is not None and everyone + length > free:
            raise HttpError(
                507,
                "upload session",
                f"the open sessions would hold "
                f"{everyone + length} bytes, more than the {free} free; upload "
                "with one PUT",
            )

    def create(
        self,
        path: Path,
        length: int,
        owner: str,
        algorithm: str | None,
        limits: Limits | None = None,
    ) -> UploadSession:
        self.purge()
        claim = (owner, length)
        with self._lock:
            self.admit(path, length, owner, limits or Limits())
            self._pending.append(claim)
        try:
            return self._create(path, length, owner, algorithm)
        finally:
            with self._lock:
                self._pending.remove(claim)

    def _create(self, path: Path, length: int, owner: str, algorithm: str | None) -> UploadSession:
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
        st = os.fstat(fd)
        session = UploadSession(
            ident,
            path,
            part,
            length,
            owner,
            algorithm,
            fd,
            time.monotonic(),
            file_id=(st.st_dev, st.st_ino),
        )
        with self._lock:
            self._sessions[ident] = session
        return session

    def get(self, ident: str | None, path: Path, owner: str) -> UploadSession:
        with self._lock:
            s = self._sessions.get(ident or "")
        now = time.monotonic()
        if (
            s is None
            or s.closed
            or s.path != path
            or not secrets.compare_digest(s.owner, owner)
            or (now - s.touched > self.expiry and not s.inflight)
        ):
            raise HttpError(
                404,
                f"{upload.ID_HEADER} for {show(path, self.root)}",
                "unknown or expired upload session for this path and token; start a new one",
            )
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
            fd, s.fd = s.fd, -1
        if fd >= 0:
            files.release(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    @staticmethod
    def rest(s: UploadSession) -> None:
        """Close the descriptor of a session that just failed a range or a commit and has no
        range in flight (call with ``s.lock`` held): a client that went away holds nothing
        open; the session (its id, its ranges, its part file) stays until its expiry, and
        its next request reopens the part (:meth:`wake`)."""
        if s.closed or s.taken or s.inflight or s.fd < 0:
            return
        fd, s.fd = s.fd, -1
        files.release(fd)
        with contextlib.suppress(OSError):
            os.close(fd)

    def wake(self, s: UploadSession) -> int:
        """The session's descriptor, its part file reopened if it was resting (call with
        ``s.lock`` held); HttpError 404, and the session dropped, when the part is no longer
        the file it created (removed, or replaced: never through a symlink)."""
        if s.closed or s.taken:
            raise HttpError(404, upload.ID_HEADER, "the upload session ended; start a new one")
        if s.fd >= 0:
            return s.fd
        try:
            with fsroot.Root(self.root) as fs:
                fd = fs.open(files.rel(self.root, s.part), os.O_RDWR)
        except OSError:
            fd = -1
        if fd >= 0:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == s.file_id and stat.S_ISREG(st.st_mode):
                files.LIVE.add(st)
                s.fd = fd
                return fd
            os.close(fd)
        s.closed = True
        with self._lock:
            self._sessions.pop(s.ident, None)
        raise HttpError(
            404,
            f"{upload.ID_HEADER} for {show(s.path, self.root)}",
            "the upload session's part file is gone; start a new one",
        )

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
