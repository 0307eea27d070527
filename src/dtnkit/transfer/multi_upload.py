"""Multi-stream, resumable uploads and remote-to-remote relays (the client half).

Upload (``--streams N`` with N > 1 and a file of more than one block): an upload session on
the server (protocol in :mod:`dtnkit.transfer.upload_sessions`), then N keep-alive
connections each sending disjoint ``--block-size`` ranges with ``PUT`` + ``Content-Range``.
Each block is read into a pooled buffer, hashed (FIVER: the bytes read for sending) and sent;
adler32/crc32c values go with the range as a ``Digest`` (the server checks each range: a
corrupted range is re-sent alone) and are combined out of order into the whole-file value;
md5/sha256 go through :class:`~dtnkit.transfer.pipeline.OrderedHasher`.  A range that fails
(connection error, stall, 5xx, 412) is re-sent on a new connection with backoff.  The commit
carries the whole-file ``Digest``; the server checks it before the rename, and a 412 discards
the session and the file is sent again (up to ``--retries``).

Resume: the session id is kept in a journal (``$XDG_STATE_HOME/dtnkit/uploads``, else
``/var/lib/dtnkit/uploads`` for root, ``~/.local/state/dtnkit/uploads`` otherwise) keyed by
the source's path, size and mtime, the destination URL, the checksum and the block size.  A
run that fails after its retries keeps it; the same command run again asks the server which
ranges it has and sends only the others.

A server that does not answer the session start with 201 and an id (XRootD, plain WebDAV, a
``dtnkit serve --no-upload-sessions``) gets one PUT stream instead (``upload_streams: 1``).

Relay (``cp https://A/x https://B/y``): blocks are fetched from A with ``Range`` and sent to
B, on N streams through an upload session when B has them, else in one streamed PUT carrying
A's digest; the bytes are hashed in flight and compared with A's ``Digest`` before B commits.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.client
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

from dtnkit.errors import DtnkitError
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import client as cl
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.wire import digests as dg

HEADER = "Dtnkit-Upload"
ID_HEADER = "Dtnkit-Upload-Id"
RANGES_HEADER = "Dtnkit-Upload-Ranges"
CHECKSUM_HEADER = "Dtnkit-Upload-Checksum"
#: answers to the session start that mean "no sessions here": fall back to one PUT
UNSUPPORTED = frozenset({400, 404, 405, 409, 411, 413, 415, 501})

_unsupported: weakref.WeakSet[cl.Session] = weakref.WeakSet()  # sessions refused by server
_unsupported_lock = threading.Lock()


class UseSinglePut(Exception):
    """Sessions are not available (or not worth it): send one PUT stream."""


class _SessionLost(Exception):
    """The server no longer knows the session (expired, restarted): start a new one."""


# --------------------------------------------------------------------------- journal


def journal_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME")
    if state:
        return Path(state) / "dtnkit" / "uploads"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/dtnkit/uploads")
    return Path.home() / ".local" / "state" / "dtnkit" / "uploads"


class Journal:
    """The upload id of an unfinished upload, keyed by what makes a rerun identical."""

    def __init__(self, src: Path, st: os.stat_result, url: cl.Url, options: cl.Options) -> None:
        key = "\0".join([str(src.resolve()), str(st.st_size), str(st.st_mtime_ns), str(url),
                         options.checksum, str(options.block_size)])
        self.path = journal_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
        self.record = {"source": str(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                       "url": str(url), "checksum": options.checksum,
                       "block_size": options.block_size}

    def load(self) -> str | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        ident = data.get("id") if isinstance(data, dict) else None
        same = isinstance(data, dict) and all(data.get(k) == v for k, v in self.record.items())
        return ident if same and isinstance(ident, str) else None

    def save(self, ident: str) -> None:
        with contextlib.suppress(OSError):  # no journal: the upload works, it cannot resume
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({**self.record, "id": ident}, f)
            os.replace(tmp, self.path)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


# --------------------------------------------------------------------------- session requests


def start(session: cl.Session, url: cl.Url, size: int, algorithm: str | None) -> str:
    """Open an upload session; UseSinglePut when the server has none."""
    with _unsupported_lock:
        if session in _unsupported:
            raise UseSinglePut("the server has no upload sessions")
    extra = {HEADER: "start", "Upload-Length": str(size)}
    if algorithm in cks.COMBINABLE:
        extra[CHECKSUM_HEADER] = algorithm
    raw = [0]

    def call() -> tuple[int, http.client.HTTPMessage, bytes]:
        st, hdrs, data = session.request("POST", url, extra)
        raw[0] = st
        return (405 if st == 501 else st), hdrs, data  # 501 is an answer, not a failure

    status, headers, body = session.with_retries(f"POST {url} (start upload)", call)
    status = raw[0]
    ident = headers.get(ID_HEADER)
    if status == 201 and ident:
        return ident
    # a redirect too: a door (dCache) sends PUTs to a pool, which the single PUT follows
    if status in UNSUPPORTED or status in cl.REDIRECTS or (200 <= status < 300 and not ident):
        with _unsupported_lock:
            _unsupported.add(session)
        raise UseSinglePut(f"the server answered the session start with HTTP {status}")
    cl.check_status(status, f"POST {url} (start upload)", body, ok=(201,))
    raise AssertionError("unreachable")


def status(session: cl.Session, url: cl.Url, ident: str) -> list[tuple[int, int]] | None:
    """The received ranges of a session, or None when the server does not know it."""
    st, headers, body = session.with_retries(
        f"POST {url} (upload status)",
        lambda: session.request("POST", url, {HEADER: "status", ID_HEADER: ident}))
    if st in (404, 410):
        return None
    cl.check_status(st, f"POST {url} (upload status)", body, ok=(200,))
    out = []
    for item in (headers.get(RANGES_HEADER) or "").split(","):
        a, sep, b = item.strip().partition("-")
        if sep and a.isdigit() and b.isdigit():
            out.append((int(a), int(b)))
    return out


def abort(session: cl.Session, url: cl.Url, ident: str) -> None:
    with contextlib.suppress(DtnkitError, cl.Retryable):
        session.request("DELETE", url, {ID_HEADER: ident})


def _covered(block: pl.Block, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= block.offset and block.end <= b for a, b in ranges)


# --------------------------------------------------------------------------- sending ranges

#: fills the given buffer with block *b* and returns the filled view
ReadBlock = Callable[[pl.Block, bytearray], memoryview]
#: a block read for sending: its buffer, the bytes, their adler32/crc32c value
_Read = tuple[bytearray, memoryview, int | None]


def send_blocks(session: cl.Session, url: cl.Url, ident: str, size: int,
                blocks: list[pl.Block], read: ReadBlock, verifier: pl.BlockVerifier | None,
                options: cl.Options, range_digest: bool) -> int:
    """PUT every block on up to ``streams`` connections; returns the number of retries."""
    stop = threading.Event()
    pool = cl._BufferPool(min(options.block_size, max(1, size)))
    combiner = verifier if isinstance(verifier, pl.BlockCombiner) else None
    if isinstance(verifier, pl.OrderedHasher):
        verifier.set_release(pool.put)
    name = options.checksum

    def put_one(conn: http.client.HTTPConnection, b: pl.Block, state: _Read) -> None:
        _buf, data, value = state
        hdrs = {ID_HEADER: ident, "Content-Range": f"bytes {b.offset}-{b.end}/{size}",
                "Content-Length": str(b.length), "Content-Type": "application/octet-stream"}
        if value is not None and range_digest:
            hdrs["Digest"] = dg.format_digest(name, cks.to_bytes(name, value))
        conn.putrequest("PUT", url.path, skip_accept_encoding=True)
        for key, val in session.headers(hdrs).items():
            conn.putheader(key, val)
        conn.endheaders()
        conn.sock.sendall(data)
        r = conn.getresponse()
        body = r.read()
        if r.status in (200, 201, 204):
            return
        # 412: the range's digest did not match (corrupted on the way); 409: it overlaps a
        # range the server still receives on a connection that died
        if r.status >= 500 or r.status in (409, 412):
            raise cl.Retryable(f"PUT {url} range {b.offset}-{b.end}: HTTP {r.status} "
                               f"{cl._reason(body)}")
        if r.status in (404, 410):
            raise _SessionLost(f"PUT {url}: HTTP {r.status} {cl._reason(body)}")
        cl.check_status(r.status, f"PUT {url} range {b.offset}-{b.end}", body,
                        ok=(200, 201, 204))

    def prepare(b: pl.Block) -> _Read:
        """Read the block once and hash it as read for sending (FIVER)."""
        buf = pool.get()
        data = read(b, buf)
        value = cks.block_value(name, data) if (combiner or range_digest) else None
        if combiner is not None and value is not None:
            combiner.add_value(b.index, value)
        return buf, data, value

    def sent(b: pl.Block, state: _Read) -> None:
        buf, data, _value = state
        if isinstance(verifier, pl.OrderedHasher):
            # owns buf now, gives it back to the pool; wait for it rather than drop the block
            verifier.accept(b, data, wait=pl.BACKPRESSURE_WAIT, stop=stop)
        else:
            pool.put(buf)
        if options.progress is not None:
            options.progress(b.length)

    def give_up(b: pl.Block, attempts: int, exc: BaseException) -> cl.TransferError:
        return cl.TransferError(
            f"PUT {url}", f"range {b.offset}-{b.end} failed after {attempts} attempts ({exc})",
            ("rerun the same command to resume (the ranges already sent are kept on the "
             "server); " if options.resume else "")
            + "check that the server is up; raise --retries or --stall-timeout")

    return cl.run_streams(session, blocks, options, work=put_one, prepare=prepare,
                          finish=sent, give_up=give_up, stop=stop, name="dtnkit-up")


def _already_there(session: cl.Session, url: cl.Url, digest: str) -> bool:
    """Whether *url* now has the whole-file *digest* (``name=value``) the commit carried."""
    try:
        want = dg.parse_digest(digest)
        name = next(iter(want))
        info = session.head(url, want=name)
    except (ValueError, StopIteration, DtnkitError):
        return False
    return info.digests.get(name) == want[name]


def commit(session: cl.Session, url: cl.Url, ident: str, digest: str | None) -> None:
    """Ask the server to verify and rename; ChecksumMismatch on 412, _SessionLost on 404."""
    extra = {HEADER: "commit", ID_HEADER: ident}
    if digest is not None:
        extra["Digest"] = digest
    sent = [0]

    def call() -> tuple[int, http.client.HTTPMessage, bytes]:
        sent[0] += 1
        return session.request("POST", url, extra)

    st, _headers, body = session.with_retries(f"POST {url} (commit upload)", call)
    if st in (404, 410) and sent[0] > 1 and digest is not None \
            and _already_there(session, url, digest):
        return  # an earlier attempt committed it and only the answer was lost
    if st == 412:
        raise cl.ChecksumMismatch(f"checksum mismatch for {url}",
                                  f"the server refused the commit: {cl._reason(body)}",
                                  "retry; if it persists, check the source storage and the path")
    if st in (404, 410):
        raise _SessionLost(f"commit of {url}: HTTP {st} {cl._reason(body)}")
    cl.check_status(st, f"POST {url} (commit upload)", body, ok=(200, 201, 204))


def _with_restarts(once: Callable[[], cl.FileResult], options: cl.Options,
                   what: str) -> cl.FileResult:
    """Run a whole session transfer again after a commit mismatch or a lost session."""
    restarts = 0
    last: BaseException | None = None
    for _attempt in range(options.retries + 1):
        try:
            result = once()
        except (cl.ChecksumMismatch, _SessionLost) as exc:
            last = exc
            restarts += 1
            continue
        result.retries += restarts
        return result
    if isinstance(last, cl.ChecksumMismatch):
        last.why += f" (after {options.retries + 1} attempts)"
        raise last
    raise cl.TransferError(what, f"the upload session was lost {restarts} times ({last})",
                           "check the server (restarts? --upload-expiry?)")


def _verifier(name: str, blocks: list[pl.Block], read_back: Callable[[pl.Block], pl.Buffer],
              options: cl.Options) -> pl.BlockVerifier:
    return pl.make_verifier(name, blocks, read_back, options.max_buffered)


# --------------------------------------------------------------------------- local -> remote


def upload_file(session: cl.Session, src: Path, url: cl.Url,
                options: cl.Options) -> cl.FileResult:
    """A multi-stream session upload; UseSinglePut before anything is sent when not possible."""
    try:
        st = os.stat(src)
    except OSError as exc:
        raise UseSinglePut(str(exc)) from None
    if options.streams < 2 or st.st_size <= options.block_size:
        raise UseSinglePut("one block or one stream")
    journal = Journal(src, st, url, options)
    first = [True]

    def once() -> cl.FileResult:
        resume = first[0]
        first[0] = False
        return _upload_session_once(session, src, url, options, journal, resume)

    return _with_restarts(once, options, f"upload {src} -> {url}")


def _upload_session_once(session: cl.Session, src: Path, url: cl.Url, options: cl.Options,
                         journal: Journal, resume: bool) -> cl.FileResult:
    name, verify = options.checksum, options.verify
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    verifier: pl.BlockVerifier | None = None
    ident: str | None = None
    keep = False
    try:
        size = os.fstat(fd).st_size
        blocks = pl.plan_blocks(size, options.block_size)
        have: list[tuple[int, int]] = []
        old = journal.load() if resume and options.resume else None
        if old is not None:
            got = status(session, url, old)
            if got is not None:
                ident, have = old, got
            else:
                journal.remove()
        if ident is None:
            ident = start(session, url, size, name if verify != "none" else None)
            if options.resume:
                journal.save(ident)
        keep = options.resume  # from here a failure keeps the session for a rerun
        local: bytes | None = None
        if verify == "sequential":
            local = pl.checksum_fd(fd, name, size, options.block_size)
        todo = [b for b in blocks if not _covered(b, have)]
        skipped = [b for b in blocks if _covered(b, have)]
        if verify == "block":
            verifier = _verifier(name, blocks, functools.partial(cl._read_back, fd), options)
            for b in skipped:  # sent by an earlier run: hash them from the source
                verifier.accept(b, cl._read_back(fd, b))
        if skipped and options.progress is not None:
            options.progress(sum(b.length for b in skipped))

        def read(b: pl.Block, buf: bytearray) -> memoryview:
            view = memoryview(buf)[:b.length]
            got = pl.pread_into(fd, view, b.offset)
            if got < b.length:
                raise cl.TransferError(f"source {src}", f"ended at {b.offset + got} bytes",
                                       "do not modify files while copying them")
            return view

        retries = send_blocks(session, url, ident, size, todo, read, verifier, options,
                              range_digest=verify == "block" and name in cks.COMBINABLE)
        if verifier is not None:
            local = verifier.digest()
        elif verify == "file":
            local = pl.checksum_fd(fd, name, size, options.block_size)
        keep = False
        try:
            commit(session, url, ident, dg.format_digest(name, local)
                   if local is not None else None)
        finally:
            journal.remove()
        level = "durable" if verify != "none" else "inflight"
        result = cl.FileResult(str(src), str(url), size,
                               cl._show(name, local) if local is not None else None, level,
                               retries, read_back=len(skipped))
        result.upload_streams = min(options.streams, max(1, len(todo)))
        return result
    except BaseException as exc:
        lost = isinstance(exc, _SessionLost | cl.ChecksumMismatch)
        if ident is not None and (not keep or lost or not isinstance(
                exc, cl.TransferError | KeyboardInterrupt)):
            if not lost:
                abort(session, url, ident)
            journal.remove()
        raise
    finally:
        if verifier is not None:
            verifier.close()
        os.close(fd)


# --------------------------------------------------------------------------- remote -> remote


def _get_range(session: cl.Session, url: cl.Url, etag: str | None, b: pl.Block,
               buf: bytearray, conn: http.client.HTTPConnection) -> memoryview:
    hdrs = {"Range": f"bytes={b.offset}-{b.end}"}
    if etag:
        hdrs["If-Range"] = etag
    conn.request("GET", url.path, headers=session.headers(hdrs))
    r = conn.getresponse()
    if r.status >= 500:
        r.read()
        raise cl.Retryable(f"GET {url} range {b.offset}-{b.end}: HTTP {r.status}")
    if r.status != 206:
        body = r.read(4096)
        if r.status == 200:
            raise cl.FatalHttp(f"GET {url}", "the server sent the whole file instead of a "
                               "range (the source changed during the copy?)", "retry the copy")
        cl.check_status(r.status, f"GET {url}", body, ok=(206,))
    view = memoryview(buf)[:b.length]
    got = 0
    while got < b.length:
        n = r.readinto(view[got:])
        if not n:
            raise cl.Retryable(f"GET {url} range {b.offset}-{b.end}: connection closed after "
                               f"{got} of {b.length} bytes")
        got += n
    if r.read(1):
        raise cl.Retryable(f"GET {url} range {b.offset}-{b.end}: longer than asked")
    return view


class _RangeReader:
    """Fetch blocks from the source server; one keep-alive connection per thread."""

    def __init__(self, session: cl.Session, url: cl.Url, etag: str | None,
                 options: cl.Options) -> None:
        self.session, self.url, self.etag, self.options = session, url, etag, options
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.retries = 0

    def __call__(self, b: pl.Block, buf: bytearray) -> memoryview:
        attempt = 0
        while True:
            conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
            try:
                if conn is None:
                    conn = self.session.connect()
                    self._local.conn = conn
                    with self._lock:
                        self._all.append(conn)
                return _get_range(self.session, self.url, self.etag, b, buf, conn)
            except (cl.Retryable, OSError, http.client.HTTPException) as exc:
                if conn is not None:
                    conn.close()
                self._local.conn = None
                if attempt >= self.options.retries:
                    raise cl.TransferError(f"GET {self.url}", f"range {b.offset}-{b.end} "
                                           f"failed after {attempt + 1} attempts ({exc})",
                                           "check that the source server is up") from None
                with self._lock:
                    self.retries += 1
                time.sleep(self.options.backoff * 2**attempt)
                attempt += 1

    def read_back(self, b: pl.Block) -> pl.Buffer:
        return self(b, bytearray(b.length))

    def close(self) -> None:
        with self._lock:
            for c in self._all:
                c.close()
            self._all.clear()


def relay(src_session: cl.Session, src: cl.Url, dst_session: cl.Session, dst: cl.Url,
          options: cl.Options) -> cl.FileResult:
    """Copy one file from one server to another through this client."""
    src_session, src, info = src_session.resolve(src)
    if info.is_dir:
        from dtnkit.errors import BadInput

        raise BadInput(f"{src}", "is a collection", "pass -r to copy a directory")
    use_session = options.streams > 1 and info.size > options.block_size
    if use_session:
        try:
            return _with_restarts(
                lambda: _relay_session_once(src_session, src, info, dst_session, dst, options),
                options, f"relay {src} -> {dst}")
        except UseSinglePut:
            pass
    return cl._retry_on_mismatch(
        lambda: _relay_put_once(src_session, src, dst_session, dst, options), options)


def _relay_session_once(src_session: cl.Session, src: cl.Url, info: cl.RemoteInfo,
                        dst_session: cl.Session, dst: cl.Url,
                        options: cl.Options) -> cl.FileResult:
    name, verify = options.checksum, options.verify
    expected: cl._Background | None = None
    ident = start(dst_session, dst, info.size, name if verify != "none" else None)
    reader = _RangeReader(src_session, src, info.etag, options)
    verifier: pl.BlockVerifier | None = None
    done = False
    try:
        if verify != "none":
            expected = cl._Background(lambda: cl._source_digest(src_session, src, name))
        blocks = pl.plan_blocks(info.size, options.block_size)
        if verify != "none":
            verifier = _verifier(name, blocks, reader.read_back, options)
        retries = send_blocks(dst_session, dst, ident, info.size, blocks, reader, verifier,
                              options, range_digest=verifier is not None
                              and name in cks.COMBINABLE)
        got = verifier.digest() if verifier is not None else None
        want = expected.result() if expected is not None else None
        if got is not None and want is not None and got != want:
            raise cl.ChecksumMismatch(
                f"checksum mismatch for {src} -> {dst}",
                f"{name} source {cl._show(name, want)}, relayed {cl._show(name, got)}; "
                f"nothing was committed", "retry; if it persists, check the source storage")
        done = True
        commit(dst_session, dst, ident, dg.format_digest(name, got) if got is not None else None)
        result = cl.FileResult(str(src), str(dst), info.size,
                               cl._show(name, got) if got is not None else None,
                               "durable" if verify != "none" else "inflight",
                               retries + reader.retries)
        result.upload_streams = min(options.streams, len(blocks))
        return result
    finally:
        if not done:
            abort(dst_session, dst, ident)
        if verifier is not None:
            verifier.close()
        reader.close()
        if expected is not None:
            with contextlib.suppress(BaseException):
                expected.result()


def _relay_put_once(src_session: cl.Session, src: cl.Url, dst_session: cl.Session,
                    dst: cl.Url, options: cl.Options) -> cl.FileResult:
    """One GET stream from the source piped into one PUT carrying the source's digest."""
    name, verify = options.checksum, options.verify
    want = cl._source_digest(src_session, src, name) if verify != "none" else None
    hasher = cks.new(name) if verify != "none" else None
    sconn = src_session.connect()
    dconn = dst_session.connect()
    try:
        try:
            sconn.request("GET", src.path, headers=src_session.headers())
            r = sconn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            raise cl.ChecksumMismatch(f"GET {src}", f"failed ({exc})", "retry") from None
        if r.status != 200:
            cl.check_status(r.status, f"GET {src}", r.read(4096), ok=(200,))
        size = int(r.headers.get("Content-Length", "0"))
        extra = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
        if want is not None:
            extra["Digest"] = dg.format_digest(name, want)
        buf = bytearray(max(1, min(options.block_size, size, 2**20 * 4)))
        view = memoryview(buf)
        sent = 0
        try:
            dconn.putrequest("PUT", dst.path, skip_accept_encoding=True)
            for key, value in dst_session.headers(extra).items():
                dconn.putheader(key, value)
            dconn.endheaders()
            while sent < size:
                n = r.readinto(view[:min(len(buf), size - sent)])
                if not n:
                    raise cl.Retryable(f"GET {src}: closed after {sent} of {size} bytes")
                if hasher is not None:
                    hasher.update(view[:n])
                dconn.sock.sendall(view[:n])
                sent += n
                if options.progress is not None:
                    options.progress(n)
            resp = dconn.getresponse()
            status, body = resp.status, resp.read()
        except (cl.Retryable, OSError, http.client.HTTPException) as exc:
            raise cl.ChecksumMismatch(f"relay {src} -> {dst}", f"broke off ({exc})",
                                      "retry") from None
        if status == 412:
            raise cl.ChecksumMismatch(f"checksum mismatch for {src} -> {dst}",
                                      f"the destination refused the body: {cl._reason(body)}",
                                      "retry; if it persists, check the source storage")
        cl.check_status(status, f"PUT {dst}", body, ok=(200, 201, 204))
        got = hasher.digest() if hasher is not None else None
        if got is not None and want is not None and got != want:
            raise cl.discard_remote(dst_session, dst, f"checksum mismatch for {src} -> {dst}",
                                    f"{name} source {cl._show(name, want)}, relayed "
                                    f"{cl._show(name, got)}")
        result = cl.FileResult(str(src), str(dst), size,
                               cl._show(name, got) if got is not None else None,
                               "durable" if verify != "none" else "inflight")
        result.upload_streams = 1
        return result
    finally:
        sconn.close()
        dconn.close()


def relay_walk(src_session: cl.Session, src: cl.Url, dst_session: cl.Session,
               dst: cl.Url) -> Iterator[tuple[cl.Url, cl.Url]]:
    """(source file, destination file) pairs of a tree; MKCOLs the destination collections."""
    cl.mkcol(dst_session, dst)
    for child, is_dir, _size in src_session.propfind(src):
        target = dst.child(child.name)
        if is_dir:
            yield from relay_walk(src_session, child, dst_session, target)
        else:
            yield child, target
