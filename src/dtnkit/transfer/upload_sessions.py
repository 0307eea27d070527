"""Multi-stream (partial, resumable) uploads for ``dtnkit serve``.

The protocol (docs/transfer.md, "Partial uploads"); every step needs a token with write scope
and names the same path:

* ``POST <path>`` with ``Dtnkit-Upload: start`` and ``Upload-Length: N`` (optionally
  ``Dtnkit-Upload-Checksum: adler32|crc32c``: the server then hashes every range with it as it
  is written, so the commit needs no re-read) -> ``201`` with ``Dtnkit-Upload-Id`` (random,
  unguessable, tied to the path and to the token that started it) and
  ``Dtnkit-Upload-Expires`` (seconds of inactivity before the session is dropped).
* ``PUT <path>`` with ``Dtnkit-Upload-Id``, ``Content-Range: bytes a-b/N`` and a body of
  ``b-a+1`` bytes (optionally a ``Digest`` of the range, checked: 412) -> ``204``; the bytes go
  with ``pwrite`` into the hidden ``.<name>.dtnkit-part-u<hash of the id>``.  A range past N is
  416, a malformed one 400, one overlapping another received or in-flight range 409 (sending
  exactly the same range again replaces it).
* ``POST`` with ``Dtnkit-Upload: status`` and the id -> ``200`` with ``Upload-Length`` and
  ``Dtnkit-Upload-Ranges: a-b,c-d`` (the received ranges, merged): a client resumes from that.
* ``POST`` with ``Dtnkit-Upload: commit``, the id and ``Digest`` / ``Repr-Digest`` /
  ``Content-MD5`` of the whole file -> all of ``[0, N)`` must be there (else 409), the digest
  is checked (adler32/crc32c folded from the per-range values, md5/sha-256 by reading the part
  file once), the part is fsynced and renamed over the target (201, or 204 when it replaced a
  file).  A mismatch is 412 and the session and its part file are discarded.
* ``POST`` with ``Dtnkit-Upload: abort`` or ``DELETE <path>`` with the id -> ``204``.

An unknown, expired, other path's or other token's id is 404 (nothing reveals that it exists).
Sessions live in the server's memory: a restarted server forgets them (the client then starts
again), and a janitor removes session part files idle for longer than the expiry, also those
left by an earlier server process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dtnkit.transfer import checksum as cks
from dtnkit.transfer.wire import digests as dg
from dtnkit.transfer import paths
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer import tokens as tokmod

if TYPE_CHECKING:
    from dtnkit.transfer.server import _Handler

HEADER = "Dtnkit-Upload"
ID_HEADER = "Dtnkit-Upload-Id"
RANGES_HEADER = "Dtnkit-Upload-Ranges"
CHECKSUM_HEADER = "Dtnkit-Upload-Checksum"
EXPIRES_HEADER = "Dtnkit-Upload-Expires"
PART_PREFIX = "u"  # session part files: .<name>.dtnkit-part-u<16 hex>
DEFAULT_EXPIRY = 3600.0
#: each open session holds one file descriptor: bounded well below the usual 1024 fd limit
MAX_SESSIONS = 512

_CONTENT_RANGE = re.compile(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19})")


@dataclass
class _Range:
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
    ranges: dict[int, _Range] = field(default_factory=dict)
    inflight: set[tuple[int, int]] = field(default_factory=set)
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def missing(self) -> list[tuple[int, int]]:
        gaps: list[tuple[int, int]] = []
        pos = 0
        for r in sorted(self.ranges.values(), key=lambda r: r.start):
            if r.start > pos:
                gaps.append((pos, r.start - 1))
            pos = max(pos, r.end + 1)
        if pos < self.length:
            gaps.append((pos, self.length - 1))
        return gaps

    def merged(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for r in sorted(self.ranges.values(), key=lambda r: r.start):
            if out and r.start == out[-1][1] + 1:
                out[-1] = (out[-1][0], r.end)
            else:
                out.append((r.start, r.end))
        return out


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
            self._close_fd(s)

    def _janitor(self) -> None:
        with contextlib.suppress(OSError):
            self.remove_orphans()
        while not self._stop.wait(max(0.05, min(self.expiry / 4, 60.0))):
            self.purge()

    def remove_orphans(self) -> int:
        """Remove session part files under the root idle for longer than the expiry."""
        removed = 0
        cutoff = time.time() - self.expiry
        mark = paths.PART_MARK + PART_PREFIX
        for directory, _dirs, files in os.walk(self.root):
            if self._stop.is_set():
                break
            for name in files:
                if not (name.startswith(".") and mark in name):
                    continue
                full = os.path.join(directory, name)
                with self._lock:
                    known = any(str(s.part) == full for s in self._sessions.values())
                try:
                    if not known and os.lstat(full).st_mtime < cutoff:
                        os.unlink(full)
                        removed += 1
                except OSError:
                    continue
        return removed

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
                raise _http(503, "upload session", "too many open sessions; retry later",
                            [("Retry-After", "60")])
        ident = secrets.token_urlsafe(24)
        part = path.with_name(paths.part_name(path.name, PART_PREFIX + _part_token(ident)))
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            os.ftruncate(fd, length)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(part)
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
            raise _http(404, f"{ID_HEADER} for {_where(path, self.root)}",
                        "unknown or expired upload session for this path and token; "
                        "start a new one")
        s.touched = now
        return s

    def forget(self, s: UploadSession) -> None:
        with self._lock:
            self._sessions.pop(s.ident, None)

    def discard(self, s: UploadSession) -> None:
        self.forget(s)
        self._close_fd(s)
        with contextlib.suppress(OSError):
            os.unlink(s.part)

    @staticmethod
    def _close_fd(s: UploadSession) -> None:
        with s.lock:
            if s.closed:
                return
            s.closed = True
        with contextlib.suppress(OSError):
            os.close(s.fd)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


def _part_token(ident: str) -> str:
    """The id does not appear on disk: the part name carries a hash of it."""
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _where(path: Path, root: Path) -> str:
    from dtnkit.transfer.server import _show

    return _show(path, root)


def _http(status: int, what: str, why: str,
          headers: list[tuple[str, str]] | None = None) -> Exception:
    from dtnkit.transfer.server import HttpError

    return HttpError(status, what, why, headers or [])


def _owner(handler: _Handler) -> str:
    token = tokmod.bearer(handler.headers.get("Authorization")) or ""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _registry(handler: _Handler) -> Registry:
    registry = handler.server.uploads
    if registry is None:
        raise _http(501, f"{handler.command} {handler._log_target}",
                    "partial uploads are disabled on this server; upload the whole file")
    return registry


def is_session_request(handler: _Handler) -> bool:
    return handler.headers.get(ID_HEADER) is not None


# --------------------------------------------------------------------------- handlers


def handle_post(handler: _Handler) -> None:
    action = (handler.headers.get(HEADER) or "").strip().lower()
    if not action:
        raise _http(405, f"POST {handler._log_target}",
                    f"POST is only for upload sessions ({HEADER}: start|status|commit|abort)")
    registry = _registry(handler)
    handler._authorize("write")
    if handler._body_pending():
        handler._discard_body()
    path = handler._resolve()
    if action == "start":
        _start(handler, registry, path)
        return
    if action not in ("status", "commit", "abort"):
        raise _http(400, f"{HEADER}: {action}", "expected start, status, commit or abort")
    session = registry.get(handler.headers.get(ID_HEADER), path, _owner(handler))
    if action == "status":
        with session.lock:
            ranges = ",".join(f"{a}-{b}" for a, b in session.merged())
        handler._send_empty(200, [("Upload-Length", str(session.length)),
                                  (RANGES_HEADER, ranges), (ID_HEADER, session.ident)])
    elif action == "abort":
        registry.discard(session)
        handler._send_empty(204)
    else:
        _commit(handler, registry, session)


def handle_delete(handler: _Handler) -> None:
    registry = _registry(handler)
    handler._authorize("write")
    path = handler._resolve()
    session = registry.get(handler.headers.get(ID_HEADER), path, _owner(handler))
    registry.discard(session)
    handler._send_empty(204)


def _start(handler: _Handler, registry: Registry, path: Path) -> None:
    from dtnkit.transfer.server import _check_space, _os_error

    root = handler.server.config.root
    where = _where(path, root)
    value = (handler.headers.get("Upload-Length") or "").strip()
    if not value.isdigit() or not value.isascii():
        raise _http(400, "Upload-Length", f"{value!r} is not a byte count; send the file size")
    length = int(value)
    algorithm: str | None = None
    declared = handler.headers.get(CHECKSUM_HEADER)
    if declared:
        try:
            algorithm = cks.canonical(declared.strip())
        except ValueError as exc:
            raise _http(400, CHECKSUM_HEADER, str(exc)) from None
        if algorithm not in cks.COMBINABLE:
            algorithm = None  # md5/sha-256 are computed at commit, from the part file
    if path == root:
        raise _http(405, where, "the root is a collection; upload a file under it")
    if not path.parent.is_dir():
        raise _http(409, where, "its parent collection does not exist; MKCOL it first")
    if path.is_dir():
        raise _http(405, where, "is a collection")
    _check_space(path.parent, length, where)
    try:
        session = registry.create(path, length, _owner(handler), algorithm)
    except OSError as exc:
        raise _os_error(exc, path, root) from None
    handler._send_empty(201, [(ID_HEADER, session.ident), ("Upload-Length", str(length)),
                              (EXPIRES_HEADER, str(int(registry.expiry)))])


def parse_content_range(value: str) -> tuple[int, int, int]:
    """``bytes a-b/N`` -> (a, b, N); ValueError when malformed."""
    m = _CONTENT_RANGE.fullmatch(value.strip())
    if m is None:
        raise ValueError("expected 'bytes first-last/length'")
    a, b, n = (int(g) for g in m.groups())
    if b < a:
        raise ValueError(f"the last byte {b} is before the first {a}")
    return a, b, n


def handle_put_range(handler: _Handler) -> None:
    from dtnkit.transfer.server import _os_error

    registry = _registry(handler)
    handler._authorize("write")
    path = handler._resolve()
    root = handler.server.config.root
    session = registry.get(handler.headers.get(ID_HEADER), path, _owner(handler))
    value = handler.headers.get("Content-Range")
    if value is None:
        raise _http(400, f"PUT {_where(path, root)} with {ID_HEADER}",
                    "needs Content-Range: bytes first-last/length")
    try:
        a, b, n = parse_content_range(value)
    except ValueError as exc:
        raise _http(400, f"Content-Range {value!r}", str(exc)) from None
    if n != session.length:
        raise _http(400, f"Content-Range {value!r}",
                    f"the length {n} is not the session's Upload-Length {session.length}")
    if b >= n:
        raise _http(416, f"Content-Range {value!r}", f"ends beyond the length {n}",
                    [("Content-Range", f"bytes */{n}")])
    count = b - a + 1
    length = handler._content_length()
    if length is not None and length != count:
        raise _http(400, f"Content-Range {value!r}",
                    f"covers {count} bytes but Content-Length is {length}")
    from dtnkit.transfer.server import sent_digests

    expected = sent_digests(handler.headers.get("Digest"), handler.headers.get("Repr-Digest"),
                            handler.headers.get("Content-MD5"))
    with session.lock:
        if session.closed:
            raise _http(404, ID_HEADER, "the upload session ended; start a new one")
        same = session.ranges.get(a)
        for r in session.ranges.values():
            if r.start <= b and a <= r.end and not (r.start == a and r.end == b):
                raise _http(409, f"Content-Range {value!r}",
                            f"overlaps the received range {r.start}-{r.end}")
        for x, y in session.inflight:
            if x <= b and a <= y:
                raise _http(409, f"Content-Range {value!r}",
                            f"overlaps the range {x}-{y} being received")
        session.inflight.add((a, b))
    names = set(expected)
    if session.algorithm is not None:
        names.add(session.algorithm)
    sums = {name: cks.new(name) for name in names}
    fd = session.fd
    pos = a
    try:
        def sink(view: memoryview) -> None:
            nonlocal pos
            if pos + len(view) > b + 1:
                raise _http(400, f"Content-Range {value!r}", "the body is longer than the range")
            for s in sums.values():
                s.update(view)
            done = 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], pos + done)
            pos += len(view)

        try:
            size = handler._read_body(sink)
        except OSError as exc:
            if isinstance(exc, (ConnectionError, TimeoutError)):
                raise
            raise _os_error(exc, path, root) from None
        handler.server.counters.add("received_bytes", size)
        handler._bytes += size
        if size != count:
            raise _http(400, f"Content-Range {value!r}",
                        f"covers {count} bytes but the body had {size}")
        got = {name: s.digest() for name, s in sums.items()}
        detail = dg.mismatches(expected, got)
        if detail is not None:
            raise _http(412, f"PUT {_where(path, root)} range {a}-{b}",
                        f"checksum mismatch, range not recorded: {detail}")
        rvalue = (cks.from_bytes(session.algorithm, got[session.algorithm])
                  if session.algorithm is not None else None)
        with session.lock:
            if same is not None:
                session.ranges.pop(a, None)
            session.ranges[a] = _Range(a, b, rvalue)
        handler.server.counters.add("range_puts", 1)
        handler.server.counters.add("range_bytes", count)
    finally:
        with session.lock:
            session.inflight.discard((a, b))
        session.touched = time.monotonic()
    handler._send_empty(204)


def _commit(handler: _Handler, registry: Registry, session: UploadSession) -> None:
    from dtnkit.transfer.server import _os_error, commit_part, sent_digests

    root = handler.server.config.root
    path = session.path
    where = _where(path, root)
    expected = sent_digests(handler.headers.get("Digest"), handler.headers.get("Repr-Digest"),
                            handler.headers.get("Content-MD5"))
    with session.lock:
        if session.inflight:
            raise _http(409, f"commit of {where}", "ranges are still being received")
        gaps = session.missing()
        if gaps:
            shown = ",".join(f"{x}-{y}" for x, y in gaps[:10])
            raise _http(409, f"commit of {where}",
                        f"{len(gaps)} range(s) missing ({shown}); send them first",
                        [(RANGES_HEADER, ",".join(f"{x}-{y}" for x, y in session.merged()))])
        ranges = sorted(session.ranges.values(), key=lambda r: r.start)
        registry.forget(session)  # from here on the session is this request's
    committed = False
    try:
        got: dict[str, bytes] = {}
        alg = session.algorithm
        if alg is not None and (alg in expected or not expected):
            values = [(r.value, r.end - r.start + 1) for r in ranges]
            if all(v is not None for v, _n in values):
                got[alg] = cks.to_bytes(alg, cks.combine_blocks(
                    alg, [(v, n) for v, n in values if v is not None]))
        rest = [name for name in expected if name not in got]
        if rest:
            sums = {name: cks.new(name) for name in rest}
            offset = 0
            for view in pl.read_chunks(session.fd, 0, session.length, pl.DEFAULT_BLOCK):
                for s in sums.values():
                    s.update(view)
                offset += len(view)
            if offset < session.length:
                raise _http(500, where, "the part file is shorter than the upload")
            handler.server.counters.add("checksum_bytes", offset)
            got.update({name: s.digest() for name, s in sums.items()})
        detail = dg.mismatches(expected, got)
        if detail is not None:
            raise _http(412, f"commit of {where}",
                        f"checksum mismatch, nothing written, session discarded: {detail}")
        try:
            os.fsync(session.fd)
        except OSError as exc:
            raise _os_error(exc, path, root) from None
        existed = commit_part(handler.server.cache, session.fd, session.part, path, root, got)
        committed = True
    finally:
        registry._close_fd(session)
        if not committed:
            with contextlib.suppress(OSError):
                os.unlink(session.part)
    headers = [("Digest", dg.format_digest(n, v)) for n, v in sorted(got.items())[:1]]
    handler._send_empty(204 if existed else 201, headers)
