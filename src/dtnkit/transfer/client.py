"""The client half of the mover: ``copy(src, dst, options)`` over HTTP(S) with ``http.client``.

Download: HEAD (size, ETag), the source digest from a HEAD with ``Want-Digest`` (waited for in
``sequential`` mode, asked concurrently with the transfer otherwise), then N streams, each a
keep-alive connection fetching disjoint ``Range`` blocks and writing them with ``os.pwrite`` into
``.<name>.dtnkit-part`` next to the destination, which is renamed only after verification.

Upload: with ``streams > 1`` several PUT streams through a resumable upload session when the
server has them (:mod:`dtnkit.transfer.multi_upload`); else one PUT of the whole body.
Remote to remote without TPC: relayed through the client (same module).  One PUT:
``sequential`` sends a ``Digest`` header computed before (the server verifies before
committing); ``block`` hashes the bytes in the pass that reads them for sending (FIVER);
``block`` and ``file`` then compare with the server's ``Want-Digest`` answer and DELETE the
remote file on a mismatch.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import queue
import select
import socket
import ssl
import stat
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, unquote, urljoin, urlsplit

from dtnkit.errors import BadInput, DtnkitError, ExitStatus
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.wire import digests as dg

PART_SUFFIX = ".dtnkit-part"
_S = TypeVar("_S")
FATAL_STATUSES = frozenset({400, 401, 403, 404, 405, 409, 411, 413, 415, 416, 501})


class TransferError(DtnkitError):
    """A copy failed (after retries when they apply)."""

    status = ExitStatus.TRANSFER_FAILED

    def __str__(self) -> str:
        return f"{self.what}: {self.why}" if self.why else self.what


class FatalHttp(TransferError):
    """An HTTP answer that retrying cannot fix (401, 403, 404, ...)."""

    status = ExitStatus.REFUSED


class Retryable(Exception):
    """A connection error, a stall or a 5xx: worth another try."""


class ChecksumMismatch(TransferError):
    status = ExitStatus.INTEGRITY


class _Redirected(Exception):
    """A 3xx answer to a HEAD; :meth:`Session.resolve` follows it."""

    def __init__(self, location: str | None) -> None:
        super().__init__(location)
        self.location = location


@dataclass
class Options:
    streams: int = 1
    block_size: int = pl.DEFAULT_BLOCK
    checksum: str = "adler32"
    verify: str = "block"
    level: str = "inflight"
    retries: int = 3
    backoff: float = 0.5
    stall_timeout: float = 60.0
    token: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    parallel: int = 1
    recursive: bool = False
    max_buffered: int = pl.DEFAULT_MAX_BUFFERED
    progress: Callable[[int], None] | None = None
    src_token: str | None = None  # remote to remote: the source's token (default: token)
    dst_token: str | None = None  # remote to remote: the destination's token (default: token)
    resume: bool = True  # continue from a kept part file (download) or session (upload)

    def check(self) -> None:
        if self.streams < 1 or self.parallel < 1:
            raise BadInput("--streams/--parallel", "must be at least 1", "pass 1 or more")
        if self.block_size < 1:
            raise BadInput("--block-size", "must be positive", "pass e.g. 8M")
        if self.verify not in pl.VERIFY_MODES:
            raise BadInput(f"--verify {self.verify}", "unknown mode",
                           f"use one of {', '.join(pl.VERIFY_MODES)}")
        if self.level not in pl.LEVELS:
            raise BadInput(f"--verify-level {self.level}", "unknown level",
                           f"use one of {', '.join(pl.LEVELS)}")
        try:
            self.checksum = cks.canonical(self.checksum)
        except ValueError as exc:
            raise BadInput(f"--checksum {self.checksum}", str(exc),
                           f"use one of {', '.join(cks.ALGORITHMS)}") from None
        if self.retries < 0:
            raise BadInput("--retries", "must be >= 0", "pass 0 or more")


@dataclass
class FileResult:
    source: str
    destination: str
    size: int
    digest: str | None
    level: str
    retries: int = 0
    read_back: int = 0
    upload_streams: int | None = None  # uploads and relays: PUT streams used (1: one PUT)
    refetched_blocks: int = 0  # blocks fetched again after a mismatch (bad-block re-fetch)
    resumed_blocks: int = 0  # blocks kept from an interrupted run
    note: str | None = None  # e.g. why a kept part file was not resumed


@dataclass
class Summary:
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def as_dict(self, options: Options) -> dict[str, object]:
        levels = {f.level for f in self.files}
        order = [lvl for lvl in ("none", *pl.LEVELS) if lvl in levels]
        digest = self.files[0].digest if len(self.files) == 1 else None
        return {
            "files": len(self.files),
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            "rate_bps": round(self.bytes * 8 / self.seconds, 1) if self.seconds > 0 else None,
            "checksum": options.checksum if options.verify != "none" else None,
            "digest": digest,
            "verify": options.verify,
            "level": order[0] if order else options.level,  # the weakest level achieved
            "streams": options.streams,
            "retries": sum(f.retries for f in self.files),
            **({"upload_streams": max(f.upload_streams or 1 for f in self.files)}
               if any(f.upload_streams is not None for f in self.files) else {}),
            "refetched_blocks": sum(f.refetched_blocks for f in self.files),
            "resumed_blocks": sum(f.resumed_blocks for f in self.files),
            "notes": [f"{f.destination}: {f.note}" for f in self.files if f.note],
        }


# --------------------------------------------------------------------------- HTTP plumbing


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


@dataclass(frozen=True)
class Url:
    scheme: str
    host: str
    port: int
    path: str  # percent-encoded, starts with "/"

    @classmethod
    def parse(cls, text: str) -> Url:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadInput(f"URL {text!r}", "is not http(s)://host[:port]/path",
                           "pass e.g. http://127.0.0.1:8080/data/file")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise BadInput(f"URL {text!r}", "has a bad port", "fix the port") from None
        # the query stays in the request target: ?authz=..., a pool's session id, ...
        query = f"?{parts.query}" if parts.query else ""
        return cls(parts.scheme, parts.hostname, port, (parts.path or "/") + query)

    def with_path(self, path: str) -> Url:
        return Url(self.scheme, self.host, self.port, path)

    def child(self, name: str) -> Url:
        path, sep, query = self.path.partition("?")
        base = path if path.endswith("/") else path + "/"
        return self.with_path(base + quote(name, safe="") + sep + query)

    @property
    def name(self) -> str:
        return unquote(self.path.partition("?")[0].rstrip("/").rsplit("/", 1)[-1])

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"


#: Statuses followed as redirects; at most MAX_REDIRECTS hops.
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5


def same_origin(a: Url, b: Url) -> bool:
    """Same scheme, host and port (where a bearer token may be sent again)."""
    return (a.scheme, a.host.lower(), a.port) == (b.scheme, b.host.lower(), b.port)


def follow_redirect(base: Url, location: str | None, what: str) -> Url:
    """The URL a redirect points to (relative Locations resolved, query kept, ``davs://`` read
    as ``https://``); never from https down to plain http."""
    if not location or not location.strip():
        raise TransferError(what, "redirect without a Location header", "check the server")
    target = location.strip()
    if target.startswith("davs://"):
        target = "https://" + target[len("davs://"):]
    elif target.startswith("dav://"):
        target = "http://" + target[len("dav://"):]
    target = urljoin(str(base), target)
    try:
        url = Url.parse(target)
    except BadInput:
        raise TransferError(what, f"redirect to {target[:200]!r}, not an http(s) URL",
                            "check the server's redirect configuration") from None
    if base.scheme == "https" and url.scheme != "https":
        raise TransferError(what, f"redirect from https down to {target[:200]!r} refused",
                            "configure the server to redirect to https")
    return url


@dataclass
class RemoteInfo:
    size: int
    etag: str | None
    digests: dict[str, bytes]
    is_dir: bool = False
    last_modified: str | None = None


class Session:
    """Connection factory and request helpers for one server."""

    def __init__(self, url: Url, options: Options) -> None:
        self.url = url
        self.options = options
        self.token = options.token
        self._context: ssl.SSLContext | None = None
        if url.scheme == "https":
            if options.insecure:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            else:
                try:
                    ctx = ssl.create_default_context(cafile=options.ca_file)
                except (OSError, ssl.SSLError) as exc:
                    raise BadInput(f"--ca-file {options.ca_file}", f"cannot be loaded ({exc})",
                                   "pass a PEM CA bundle") from None
            self._context = ctx

    def connect(self) -> http.client.HTTPConnection:
        timeout = self.options.stall_timeout
        if self._context is not None:
            return http.client.HTTPSConnection(self.url.host, self.url.port, timeout=timeout,
                                               context=self._context)
        return http.client.HTTPConnection(self.url.host, self.url.port, timeout=timeout)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        out = {"User-Agent": "dtnkit-cp"}
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        out.update(extra or {})
        return out

    def request(self, method: str, url: Url, headers: dict[str, str] | None = None,
                body: bytes | None = None,
                conn: http.client.HTTPConnection | None = None
                ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One small request; raises Retryable on connection trouble."""
        own = conn is None
        c = conn or self.connect()
        try:
            c.request(method, url.path, body=body, headers=self.headers(headers))
            r = c.getresponse()
            data = r.read()
            return r.status, r.headers, data
        except (OSError, http.client.HTTPException) as exc:
            c.close()
            raise Retryable(f"{method} {url}: {exc.__class__.__name__}: {exc}") from exc
        finally:
            if own:
                c.close()

    def with_retries(self, what: str, call: Callable[[], tuple[int, http.client.HTTPMessage,
                                                              bytes]]
                     ) -> tuple[int, http.client.HTTPMessage, bytes]:
        attempt = 0
        while True:
            try:
                status, headers, body = call()
                if status >= 500:
                    raise Retryable(f"{what}: HTTP {status} {_reason(body)}")
                return status, headers, body
            except Retryable as exc:
                if attempt >= self.options.retries:
                    raise TransferError(what, f"failed after {attempt + 1} attempts ({exc})",
                                        "check that the server is up and reachable") from None
                time.sleep(self.options.backoff * 2**attempt)
                attempt += 1

    def for_url(self, url: Url) -> Session:
        """A session for *url* reached by a redirect: the token goes only to its own origin
        (the redirect target authorizes the request itself, e.g. with a query)."""
        if same_origin(url, self.url):
            return self
        other = Session(url, self.options)
        other.token = None
        return other

    def resolve(self, url: Url, want: str | None = None) -> tuple[Session, Url, RemoteInfo]:
        """HEAD *url* following redirects (a dCache door sends GETs to a pool, an XRootD
        redirector to a data server): the session and URL to fetch from, and what it is."""
        session, hops = self, 0
        while True:
            try:
                return session, url, session.head(url, want, redirects=True)
            except _Redirected as moved:
                hops += 1
                if hops > MAX_REDIRECTS:
                    raise TransferError(f"HEAD {url}", f"more than {MAX_REDIRECTS} redirects",
                                        "check the server's redirect configuration") from None
                url = follow_redirect(url, moved.location, f"HEAD {url}")
                session = self.for_url(url)

    def head(self, url: Url, want: str | None = None, *, redirects: bool = False) -> RemoteInfo:
        """HEAD *url*; with ``redirects`` a 3xx raises :class:`_Redirected` (see resolve)."""
        extra = {"Want-Digest": _want(want)} if want else {}
        status, headers, body = self.with_retries(
            f"HEAD {url}", lambda: self.request("HEAD", url, extra))
        if redirects and status in REDIRECTS:
            raise _Redirected(headers.get("Location"))
        check_status(status, f"HEAD {url}", body)
        digests: dict[str, bytes] = {}
        if headers.get("Digest"):
            try:
                digests = dg.parse_digest(headers["Digest"])
            except ValueError as exc:
                raise TransferError(f"Digest from {url}", f"cannot be parsed ({exc})",
                                    "check the server") from None
        ctype = headers.get("Content-Type", "")
        return RemoteInfo(int(headers.get("Content-Length", "0")), headers.get("ETag"), digests,
                          is_dir=ctype.startswith("text/plain")
                          and headers.get("Accept-Ranges") is None,
                          last_modified=headers.get("Last-Modified"))

    def propfind(self, url: Url) -> list[tuple[Url, bool, int]]:
        """Children of a collection (Depth: 1): ``(url, is_dir, size)`` each."""
        status, _headers, body = self.with_retries(
            f"PROPFIND {url}", lambda: self.request("PROPFIND", url, {"Depth": "1"}))
        check_status(status, f"PROPFIND {url}", body, ok=(207,))
        ns = "{DAV:}"
        out: list[tuple[Url, bool, int]] = []
        own = url.path.rstrip("/")
        for resp in ET.fromstring(body).iter(f"{ns}response"):
            href = resp.findtext(f"{ns}href") or ""
            path = urlsplit(href).path
            if path.rstrip("/") == own:
                continue
            is_dir = resp.find(f".//{ns}collection") is not None
            size = int(resp.findtext(f".//{ns}getcontentlength") or 0)
            out.append((url.with_path(path), is_dir, size))
        return out


def _want(name: str) -> str:
    return {"sha256": "sha-256"}.get(name, name)


def _reason(body: bytes) -> str:
    return body.decode("utf-8", "replace").strip().splitlines()[0][:200] if body.strip() else ""


def check_status(status: int, what: str, body: bytes, ok: tuple[int, ...] = (200, 206)) -> None:
    if status in ok:
        return
    why = f"HTTP {status}" + (f" ({_reason(body)})" if _reason(body) else "")
    if status == 401:
        raise FatalHttp(what, f"{why}: not authenticated",
                        "pass a valid --token or set DTNKIT_TOKEN / BEARER_TOKEN")
    if status == 403:
        raise FatalHttp(what, f"{why}: forbidden", "check the token's scope and the path")
    if status == 404:
        raise FatalHttp(what, f"{why}: not found", "check the URL")
    if status in REDIRECTS:
        raise FatalHttp(what, f"{why}: a redirect",
                        "dtnkit cp follows redirects on the HEAD before a download, not on "
                        "each request; copy from the URL the server redirects to")
    raise FatalHttp(what, why, "check the request and the server log")


# --------------------------------------------------------------------------- download


def part_path(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}{PART_SUFFIX}")


class _Abort(Exception):
    """Raised inside a stream's block work when the run is stopping: leave quietly."""


def run_streams(session: Session, blocks: list[pl.Block], options: Options, *,
                work: Callable[[http.client.HTTPConnection, pl.Block, _S], None],
                prepare: Callable[[pl.Block], _S],
                finish: Callable[[pl.Block, _S], None],
                give_up: Callable[[pl.Block, int, BaseException], BaseException],
                stop: threading.Event | None = None, name: str = "dtnkit-stream") -> int:
    """Run ``work(conn, block, state)`` for every block on up to ``options.streams`` keep-alive
    connections (one thread each); returns the number of retries.

    ``prepare(block)`` makes the block's state once (a buffer, the bytes to send) and
    ``finish(block, state)`` hands it on after success.  A connection error, a stall (the
    sockets' ``stall_timeout``) or :class:`Retryable` closes the connection and retries the
    block on a new one after ``backoff * 2**attempt`` seconds, ``options.retries`` times, then
    ``give_up(block, attempts, exc)`` is raised.  The first error stops every stream and is
    raised; ``work`` may raise :class:`_Abort` when *stop* is set.  On the way out (Ctrl-C
    included) the streams' sockets are cut so that no thread is left receiving or writing.
    """
    queue_: queue.SimpleQueue[pl.Block] = queue.SimpleQueue()
    for b in blocks:
        queue_.put(b)
    stop = stop if stop is not None else threading.Event()
    errors: list[BaseException] = []
    retries = [0]
    lock = threading.Lock()
    live: dict[int, http.client.HTTPConnection] = {}

    def stream(index: int) -> None:
        conn: http.client.HTTPConnection | None = None
        try:
            while not stop.is_set():
                try:
                    b = queue_.get_nowait()
                except queue.Empty:
                    return
                state = prepare(b)
                attempt = 0
                while True:
                    if stop.is_set():
                        return
                    try:
                        if conn is None:
                            conn = session.connect()
                            live[index] = conn
                        work(conn, b, state)
                        break
                    except (Retryable, OSError, http.client.HTTPException) as exc:
                        if conn is not None:
                            conn.close()
                            conn = None
                        if attempt >= options.retries:
                            raise give_up(b, attempt + 1, exc) from None
                        with lock:
                            retries[0] += 1
                        time.sleep(options.backoff * 2**attempt)
                        attempt += 1
                finish(b, state)
        except _Abort:
            return
        except BaseException as exc:
            with lock:
                errors.append(exc)
            stop.set()
        finally:
            live.pop(index, None)
            if conn is not None:
                conn.close()

    threads = [threading.Thread(target=stream, args=(i,), name=f"{name}-{i}", daemon=True)
               for i in range(min(options.streams, len(blocks)))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    finally:
        stop.set()
        for c in list(live.values()):
            with contextlib.suppress(OSError, AttributeError):
                if c.sock is not None:
                    c.sock.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(10.0)
    if errors:
        raise errors[0]
    return retries[0]


def _fetch_blocks(session: Session, url: Url, info: RemoteInfo, fd: int,
                  blocks: list[pl.Block], verifier: pl.BlockVerifier | None,
                  options: Options, done: set[int] | None = None) -> int:
    """Fetch every block on up to ``streams`` connections; returns the number of retries.

    The index of each block completely written is added to *done* (the resume journal).  A
    stall (no byte for ``stall_timeout`` seconds, the sockets' timeout) or a cut connection
    fails the request; the block is retried on a new connection.
    """
    stop = threading.Event()
    lock = threading.Lock()
    combiner = verifier if isinstance(verifier, pl.BlockCombiner) else None
    pool = _BufferPool(min(options.block_size, max(1, info.size)))
    hasher = _CombineHasher(combiner, pool) if combiner is not None else None
    if isinstance(verifier, pl.OrderedHasher):
        verifier.set_release(pool.put)
        verifier.set_read_block(functools.partial(_read_back, fd, pool=pool))

    def fetch_one(conn: http.client.HTTPConnection, b: pl.Block, buf: bytearray) -> None:
        """Receive block *b* into *buf*; write (and hash, when combinable) while cache-hot."""
        hdrs = {"Range": f"bytes={b.offset}-{b.end}"}
        if info.etag:
            hdrs["If-Range"] = info.etag
        conn.request("GET", url.path, headers=session.headers(hdrs))
        r = conn.getresponse()
        if r.status >= 500:
            r.read()
            raise Retryable(f"GET {url} block {b.index}: HTTP {r.status}")
        if r.status != 206:
            body = r.read(4096)
            if r.status == 200:
                raise FatalHttp(f"GET {url}", "the server sent the whole file instead of a "
                                "range (the source changed during the copy?)", "retry the copy")
            check_status(r.status, f"GET {url}", body, ok=(206,))
        view = memoryview(buf)[:b.length]
        got = written = 0
        while got < b.length:
            if stop.is_set():
                raise _Abort()
            n = r.readinto(view[got:min(b.length, written + _CHUNK)])
            if not n:
                raise Retryable(f"GET {url} block {b.index}: connection closed after "
                                f"{got} of {b.length} bytes")
            got += n
            if got - written >= _CHUNK or got == b.length:
                # write each chunk right after it arrived, while in the CPU cache
                _pwrite_all(fd, view[written:got], b.offset + written)
                written = got
        if r.read(1):
            raise Retryable(f"GET {url} block {b.index}: longer than asked")

    def received(b: pl.Block, buf: bytearray) -> None:
        if done is not None:
            with lock:
                done.add(b.index)  # every byte of it is written
        if hasher is not None:
            hasher.submit(b, buf)  # owns buf now, gives it back to the pool
        elif isinstance(verifier, pl.OrderedHasher):
            # the ordered hasher owns buf now and gives it back to the pool when done; wait
            # for it rather than have it read the block back
            verifier.accept(b, memoryview(buf)[:b.length], wait=pl.BACKPRESSURE_WAIT, stop=stop)
        elif verifier is not None:
            verifier.accept(b, memoryview(buf)[:b.length])
        else:
            pool.put(buf)
        if options.progress is not None:
            options.progress(b.length)

    def give_up(b: pl.Block, attempts: int, exc: BaseException) -> TransferError:
        return TransferError(f"GET {url}", f"block {b.index} failed after {attempts} "
                             f"attempts ({exc})",
                             "check that the server is up; raise --retries or --stall-timeout")

    try:
        retries = run_streams(session, blocks, options, work=fetch_one,
                              prepare=lambda _b: pool.get(), finish=received, give_up=give_up,
                              stop=stop)
    finally:
        if hasher is not None:
            hasher.close()
    if hasher is not None and hasher.error is not None:
        raise hasher.error
    return retries


#: Receive granularity: each chunk is written and hashed while still in the CPU cache; large
#: enough for zlib/crc32c to release the GIL and for few syscalls.
_CHUNK = 2**20


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


class _CombineHasher:
    """Hashes received blocks (adler32, crc32c) in a helper thread, on whole blocks (zlib and
    crc32c release the GIL on large buffers), so that with few streams the hashing runs on
    another core while the stream receives its next block. When the helper already has
    ``depth`` blocks, the stream hashes the block itself (a direct call, no hand-off): memory
    stays bounded and with many streams the hashing spreads over them.
    """

    def __init__(self, combiner: pl.BlockCombiner, pool: _BufferPool, depth: int = 2) -> None:
        self._combiner = combiner
        self._pool = pool
        self._depth = depth
        self._pending = 0
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[pl.Block, bytearray] | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.inline = 0
        self._thread = threading.Thread(target=self._run, name="dtnkit-block-hash",
                                        daemon=True)
        self._thread.start()

    def submit(self, block: pl.Block, buf: bytearray) -> None:
        with self._lock:
            busy = self._pending >= self._depth
            if not busy:
                self._pending += 1
        if not busy:
            self._queue.put((block, buf))
            return
        self.inline += 1
        try:
            self._combiner.accept(block, memoryview(buf)[:block.length])
        finally:
            self._pool.put(buf)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            block, buf = item
            try:
                self._combiner.accept(block, memoryview(buf)[:block.length])
            except BaseException as exc:  # reported by _fetch_blocks
                self.error = self.error or exc
            finally:
                self._pool.put(buf)
                with self._lock:
                    self._pending -= 1

    def close(self) -> None:
        """Wait for the queued blocks to be hashed and stop the thread."""
        self._queue.put(None)
        self._thread.join()


def _read_back(fd: int, block: pl.Block, pool: _BufferPool | None = None) -> pl.Buffer:
    """Block *block* of the part file (into a pooled buffer when *pool* is given)."""
    if pool is None:
        return os.pread(fd, block.length, block.offset)
    view = memoryview(pool.get())[:block.length]
    return view[:pl.pread_into(fd, view, block.offset)]


class _BufferPool:
    """Block-sized receive buffers, reused: no allocation, zero-filling or page faults per block.

    One per stream in use, plus those the ordered hasher holds until it has hashed them.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def get(self) -> bytearray:
        with self._lock:
            if self._free:
                return self._free.pop()
        return bytearray(self.size)

    def put(self, buf: pl.Buffer) -> None:
        obj = buf.obj if isinstance(buf, memoryview) else buf
        if isinstance(obj, bytearray) and len(obj) == self.size:
            with self._lock:
                self._free.append(obj)


def _source_digest(session: Session, url: Url, name: str) -> bytes:
    _session, _url, info = session.resolve(url, want=name)
    if name not in info.digests:
        offered = ", ".join(info.digests) or "none"
        raise TransferError(f"source digest of {url}", f"the server did not offer {name} "
                            f"(offered: {offered})", "pick another --checksum or --verify none")
    return info.digests[name]


class _Background:
    """Run a call in a thread; ``result()`` re-raises its exception."""

    def __init__(self, call: Callable[[], bytes]) -> None:
        self._value: bytes | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = call()
            except BaseException as exc:
                self._error = exc

        self._thread = threading.Thread(target=run, daemon=True, name="dtnkit-source-digest")
        self._thread.start()

    def result(self) -> bytes:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


def _retry_on_mismatch(once: Callable[[], FileResult], options: Options) -> FileResult:
    """Run a whole-file copy again after a checksum mismatch, up to ``options.retries``."""
    total_retries = 0
    last: ChecksumMismatch | None = None
    for _attempt in range(options.retries + 1):
        try:
            result = once()
        except ChecksumMismatch as exc:
            last = exc
            total_retries += 1
            continue
        result.retries += total_retries
        return result
    assert last is not None
    last.why += f" (after {options.retries + 1} attempts)"
    raise last


@dataclass
class _Attempts:
    """Mismatch attempts of one download, shared by bad-block rounds and whole-file fetches."""

    left: int  # mismatch retries still allowed
    used: int = 1  # attempts made (the first fetch is attempt 1)
    retries: int = 0
    refetched_blocks: int = 0


def download(session: Session, url: Url, dst: Path, options: Options) -> FileResult:
    """Download with verification: a mismatch fetches again only the blocks whose source
    ``Content-Digest`` differs (or the whole file when the server gives none), up to
    ``options.retries`` times in all; transport failures keep the part file for a rerun."""
    state = _Attempts(options.retries)
    while True:
        try:
            result = _download_once(session, url, dst, options, state)
        except ChecksumMismatch as exc:
            if state.left <= 0:
                exc.why += f" (after {state.used} attempts)"
                raise
            state.left -= 1
            state.used += 1
            state.retries += 1
            continue
        result.retries += state.retries
        result.refetched_blocks = state.refetched_blocks
        return result


def _is_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(path.stat().st_mode)
    except OSError:
        return False


def download_to_device(session: Session, url: Url, dst: Path, options: Options) -> FileResult:
    """Fetch into a character device, e.g. ``dtnkit cp URL /dev/null`` (the network path
    alone, as ``xrdcp URL /dev/null``): no part file, rename or resume; ``--verify block``
    still checks every byte received against the source's digest, in memory."""
    name = options.checksum
    if options.verify in ("sequential", "file") or options.level != "inflight":
        raise BadInput(f"destination {dst}", "is a device: it cannot be read back",
                       "use --verify block or none with --verify-level inflight")
    session, url, info = session.resolve(url)
    if info.is_dir:
        raise BadInput(f"{url}", "is a collection", "copy a file to a device")
    source = (_Background(lambda: _source_digest(session, url, name))
              if options.verify == "block" else None)
    blocks = pl.plan_blocks(info.size, options.block_size)

    def no_read_back(block: pl.Block) -> pl.Buffer:
        raise OSError(f"block {block.index} would have to be read back from {dst} (the "
                      "ordered hash fell behind); use fewer --streams or copy to a file")

    verifier = (pl.make_verifier(name, blocks, no_read_back, options.max_buffered)
                if options.verify == "block" else None)
    fd = os.open(dst, os.O_WRONLY | os.O_CLOEXEC)
    try:
        retries = _fetch_blocks(session, url, info, fd, blocks, verifier, options)
        got = verifier.digest() if verifier is not None else None
        expected = source.result() if source is not None else None
        if expected is not None and got != expected:
            raise ChecksumMismatch(f"checksum mismatch for {url}",
                                   f"{name} expected {_show(name, expected)} (source), got "
                                   f"{_show(name, got or b'')} from the network",
                                   "retry; if it persists, check the source and the path")
        return FileResult(str(url), str(dst), info.size,
                          _show(name, expected) if expected is not None else None,
                          "inflight", retries)
    finally:
        if verifier is not None:
            verifier.close()
        os.close(fd)
        if source is not None:
            with contextlib.suppress(BaseException):
                source.result()


def journal_path(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}{PART_SUFFIX}.json")


JOURNAL_VERSION = 1
_JOURNAL_KEYS = frozenset({"version", "source", "size", "etag", "last_modified", "block_size",
                           "checksum", "done", "values"})
_MAX_JOURNAL = 64 * 2**20


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _journal_problem(doc: object, url: Url, info: RemoteInfo, options: Options,
                     nblocks: int) -> str | None:
    """Why the journal *doc* cannot be used for this run (None: it can).  Strict: anything
    unexpected is a reason to start over, never something to trust."""
    if not isinstance(doc, dict) or set(doc) != _JOURNAL_KEYS:
        return "the resume journal is malformed"
    if doc["version"] != JOURNAL_VERSION:
        return "the resume journal has another version"
    if doc["source"] != str(url):
        return "the resume journal is for another source URL"
    if not _is_int(doc["size"]) or doc["size"] != info.size:
        return "the source's size changed"
    if not isinstance(doc["etag"], (str, type(None))) or not isinstance(
            doc["last_modified"], (str, type(None))):
        return "the resume journal is malformed"
    if doc["etag"] is None and doc["last_modified"] is None:
        return "the source has no ETag or Last-Modified to check it against"
    if doc["etag"] != info.etag or doc["last_modified"] != info.last_modified:
        return "the source changed (ETag or Last-Modified)"
    if not _is_int(doc["block_size"]) or doc["block_size"] != options.block_size:
        return "the block size differs"
    done, values, name = doc["done"], doc["values"], doc["checksum"]
    if not isinstance(done, list) or not all(_is_int(i) and 0 <= i < nblocks for i in done) \
            or len(set(done)) != len(done):
        return "the resume journal is malformed"
    if name is not None and name not in cks.COMBINABLE:
        return "the resume journal is malformed"
    if not isinstance(values, dict) or (values and name is None):
        return "the resume journal is malformed"
    for key, value in values.items():
        if not key.isdigit() or int(key) not in done or not _is_int(value) \
                or not 0 <= value <= 0xFFFFFFFF:
            return "the resume journal is malformed"
    return None


def _load_journal(dst: Path, url: Url, info: RemoteInfo, options: Options,
                  nblocks: int) -> tuple[dict[int, int | None], str | None, str | None]:
    """Blocks kept from an interrupted run (index -> recorded value or None), the algorithm
    of the values, and a note for the summary.  A journal that cannot be used is removed; a
    usable one stays until the run ends (removed on success or discard, rewritten when the
    run fails again), so a rerun killed outright still leaves the next one something to
    resume: every kept block is checked again from the part file anyway."""
    journal, part = journal_path(dst), part_path(dst)
    if not journal.exists():
        return {}, None, None
    usable = False
    try:
        if not options.resume:
            return {}, None, "started over (--no-resume); the kept part file was discarded"
        if journal.stat().st_size > _MAX_JOURNAL:
            return {}, None, "started over: the resume journal is too large"
        try:
            doc = json.loads(journal.read_bytes())
        except (OSError, ValueError) as exc:
            return {}, None, f"started over: the resume journal cannot be read ({exc})"
        problem = _journal_problem(doc, url, info, options, nblocks)
        if problem is None:
            try:
                st = os.stat(part, follow_symlinks=False)
            except OSError:
                problem = "the part file is missing"
            else:
                if not (os.path.isfile(part) and not part.is_symlink()) or \
                        st.st_size != info.size:
                    problem = "the part file is not the expected size"
        if problem is not None:
            return {}, None, f"started over: {problem}"
        values = {int(k): int(v) for k, v in doc["values"].items()}
        usable = True
        return {i: values.get(i) for i in doc["done"]}, doc["checksum"], None
    finally:
        if not usable:
            with contextlib.suppress(OSError):
                journal.unlink()


def _save_journal(dst: Path, url: Url, info: RemoteInfo, options: Options, fd: int,
                  done: set[int], verifier: pl.BlockVerifier | None,
                  stale: set[int]) -> bool:
    """Keep the part file for a rerun: fsync it, then write the journal atomically (temporary
    file, fsync, rename).  False when there is nothing worth keeping or it cannot be written."""
    if not done or (info.etag is None and info.last_modified is None):
        return False
    name: str | None = None
    values: dict[str, int] = {}
    if isinstance(verifier, pl.BlockCombiner):
        name = verifier.name
        for i, v in enumerate(verifier.block_values()):
            if v is not None and i in done and i not in stale:
                values[str(i)] = v
    doc = {"version": JOURNAL_VERSION, "source": str(url), "size": info.size,
           "etag": info.etag, "last_modified": info.last_modified,
           "block_size": options.block_size, "checksum": name if values else None,
           "done": sorted(done), "values": values}
    journal = journal_path(dst)
    tmp = journal.with_name(f"{journal.name}.{os.getpid()}.tmp")
    try:
        os.fsync(fd)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, journal)
        _fsync_dir(dst.parent)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def _resume_blocks(fd: int, blocks: list[pl.Block], kept: dict[int, int | None],
                   kept_name: str | None, verifier: pl.BlockVerifier | None) -> set[int]:
    """Blocks of the kept part file to use: each is read back from the part file and hashed
    (the verifier gets the bytes on disk, never a recorded value); a recorded per-block value
    that disagrees with the bytes on disk marks the block as damaged: it is fetched again."""
    good: set[int] = set()
    for b in blocks:
        if b.index not in kept:
            continue
        data = _read_back(fd, b)
        if len(data) != b.length:
            continue
        recorded = kept[b.index]
        if recorded is not None and kept_name is not None \
                and cks.block_value(kept_name, data) != recorded:
            continue
        if verifier is not None:
            verifier.accept(b, data)
        good.add(b.index)
    return good


_RFC9530_KEY = {"adler32": "adler", "crc32c": "crc32c", "md5": "md5", "sha256": "sha-256"}


def _block_digests(session: Session, url: Url, info: RemoteInfo, blocks: list[pl.Block],
                   name: str, options: Options) -> dict[int, bytes] | None:
    """The source's ``Content-Digest`` (RFC 9530) of each block's range, asked with ``HEAD``
    on up to ``streams`` keep-alive connections; None when the server gives none."""
    out: dict[int, bytes] = {}
    stop = threading.Event()
    unsupported = threading.Event()
    want = f"{_RFC9530_KEY[name]}=10"

    def probe(conn: http.client.HTTPConnection, b: pl.Block, _state: None) -> None:
        hdrs = {"Range": f"bytes={b.offset}-{b.end}", "Want-Content-Digest": want}
        if info.etag:
            hdrs["If-Range"] = info.etag
        what = f"HEAD {url} (block {b.index} digest)"
        conn.request("HEAD", url.path, headers=session.headers(hdrs))
        r = conn.getresponse()
        body = r.read()
        if r.status >= 500:
            raise Retryable(f"{what}: HTTP {r.status}")
        if r.status == 200 or (r.status == 206 and not r.getheader("Content-Digest")):
            unsupported.set()  # no ranges (or the source changed) or no digests
            stop.set()
            raise _Abort()
        check_status(r.status, what, body, ok=(206,))
        crange = r.getheader("Content-Range")
        if crange != f"bytes {b.offset}-{b.end}/{info.size}":
            raise TransferError(what, f"Content-Range {crange!r} is not the block asked "
                                f"for (bytes {b.offset}-{b.end}/{info.size})", "check the server")
        try:
            values = dg.parse_repr_digest(r.getheader("Content-Digest") or "")
        except ValueError as exc:
            raise TransferError(f"Content-Digest from {url} (block {b.index})",
                                f"cannot be parsed ({exc})",
                                "check the server; rerun with --verify file to fetch the "
                                "whole file again instead") from None
        if name not in values:
            unsupported.set()
            stop.set()
            raise _Abort()
        out[b.index] = values[name]

    def give_up(b: pl.Block, attempts: int, exc: BaseException) -> TransferError:
        return TransferError(f"HEAD {url} (block {b.index} digest)",
                             f"failed after {attempts} attempts ({exc})",
                             "check that the server is up and reachable")

    run_streams(session, blocks, options, work=probe, prepare=lambda _b: None,
                finish=lambda _b, _s: None, give_up=give_up, stop=stop,
                name="dtnkit-block-digest")
    return None if unsupported.is_set() else out


def _bad_blocks(session: Session, url: Url, info: RemoteInfo, fd: int,
                blocks: list[pl.Block], name: str, values: list[int | None] | None,
                options: Options) -> list[pl.Block] | None:
    """Blocks of the part file whose *name* digest differs from the source's for the same
    range; local digests come from *values* (per-block values computed as the bytes arrived)
    when given, else from the part file.  None when the server gives no per-block digests."""
    remote = _block_digests(session, url, info, blocks, name, options)
    if remote is None:
        return None
    bad: list[pl.Block] = []
    for b in blocks:
        value = values[b.index] if values is not None else None
        if value is not None:
            local = cks.to_bytes(name, value)
        else:
            h = cks.new(name)
            h.update(_read_back(fd, b))
            local = h.digest()
        if local != remote[b.index]:
            bad.append(b)
    return bad


def _download_once(session: Session, url: Url, dst: Path, options: Options,
                   state: _Attempts | None = None) -> FileResult:
    state = state if state is not None else _Attempts(0)
    name = options.checksum
    verify = options.verify
    origin = url  # what the user asked for: the resume journal is keyed by it
    session, url, info = session.resolve(url)
    if info.is_dir:
        raise BadInput(f"{url}", "is a collection", "pass -r to copy a directory")
    source: _Background | None = None
    expected: bytes | None = None
    if verify == "sequential":
        expected = _source_digest(session, url, name)
    elif verify != "none":
        source = _Background(lambda: _source_digest(session, url, name))
    blocks = pl.plan_blocks(info.size, options.block_size)
    part = part_path(dst)
    kept, kept_name, note = _load_journal(dst, origin, info, options, len(blocks))
    if kept:
        fd = os.open(part, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    else:
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    committed = keep_part = False
    verifier: pl.BlockVerifier | None = None
    done: set[int] = set()
    stale: set[int] = set()  # blocks re-fetched: the verifier's values are not theirs
    try:
        if os.fstat(fd).st_size != info.size:
            if kept:
                kept, note = {}, "started over: the part file is not the expected size"
            os.ftruncate(fd, info.size)
        if verify == "block":
            verifier = pl.make_verifier(name, blocks, functools.partial(_read_back, fd),
                                        options.max_buffered)
        if kept:
            done = _resume_blocks(fd, blocks, kept, kept_name, verifier)
            damaged = len(kept) - len(done)
            note = f"resumed: {len(done)} of {len(blocks)} blocks kept from the interrupted run"
            if damaged:
                note += f"; {damaged} kept block(s) did not match the journal, fetched again"
        resumed = len(done)
        if done and options.progress is not None:
            # the bar counts what the file needs, kept blocks included, so it ends at 100 %
            options.progress(sum(b.length for b in blocks if b.index in done))
        todo = [b for b in blocks if b.index not in done]
        try:
            retries = _fetch_blocks(session, url, info, fd, todo, verifier, options, done)
        except TransferError as exc:
            if type(exc) is TransferError and _save_journal(dst, origin, info, options, fd, done,
                                                            verifier, stale):
                keep_part = True
                exc.next_step = (f"rerun the same command to resume ({len(done)} of "
                                 f"{len(blocks)} blocks are kept in {part}); check that the "
                                 "server is up; --no-resume starts over")
            raise
        got: bytes | None = None
        level = options.level
        if verify == "block" and verifier is not None:
            got = verifier.digest()
        if options.level in ("durable", "ondisk"):
            os.fsync(fd)
        if verify in ("sequential", "file") and options.level != "ondisk":
            got = pl.checksum_fd(fd, name, info.size)
        ondisk: bytes | None = None
        if options.level == "ondisk" and verify != "none":
            pl.evict(fd)
            ondisk = pl.checksum_fd(fd, name, info.size)
            level = pl.achieved_level("ondisk", part)
            if got is None:
                got = ondisk
        if verify == "none":
            level = "durable" if options.level != "inflight" else "inflight"
        if source is not None:
            expected = source.result()
        first_round = True
        while expected is not None:
            bad_value = next((v for v in (got, ondisk) if v is not None and v != expected), None)
            if bad_value is None:
                break
            why = (f"{name} expected {_show(name, expected)} (source), got "
                   f"{_show(name, bad_value)}; {dst} was not written")
            step = ("retry later; if it persists, check the source storage (its stored "
                    "checksum and its disk), the network path and the destination disk")
            if state.left <= 0:
                raise ChecksumMismatch(f"checksum mismatch for {url}", why, step)
            # Which blocks differ?  Compare per-block digests with the source's Content-Digest;
            # the values computed as the bytes arrived serve when they are what was checked.
            values: list[int | None] | None = None
            probe = "crc32c"
            if isinstance(verifier, pl.BlockCombiner) and first_round and ondisk is None:
                values, probe = verifier.block_values(), verifier.name
            bad = _bad_blocks(session, url, info, fd, blocks, probe, values, options)
            if bad is None:
                raise ChecksumMismatch(f"checksum mismatch for {url}", why + "; the server "
                                       "gives no per-block Content-Digest, so the whole file "
                                       "is fetched again", step)
            if not bad:
                raise ChecksumMismatch(f"checksum mismatch for {url}", why + "; every block "
                                       "matches the source's per-block digest: the source's "
                                       "whole-file checksum disagrees with its content", step)
            state.left -= 1
            state.used += 1
            state.retries += 1
            state.refetched_blocks += len(bad)
            first_round = False
            for b in bad:
                done.discard(b.index)
                stale.add(b.index)
            try:
                retries += _fetch_blocks(session, url, info, fd, bad, None, options, done)
            except TransferError as exc:
                if type(exc) is TransferError and _save_journal(
                        dst, origin, info, options, fd, done, verifier, stale):
                    keep_part = True
                    exc.next_step = "rerun the same command to resume; --no-resume starts over"
                raise
            # the whole file once more, from disk for ondisk
            if options.level == "ondisk":
                pl.evict(fd)
                got = ondisk = pl.checksum_fd(fd, name, info.size)
            else:
                if options.level == "durable":
                    os.fsync(fd)
                got = pl.checksum_fd(fd, name, info.size)
        os.replace(part, dst)
        committed = True
        if options.level != "inflight":
            _fsync_dir(dst.parent)
        return FileResult(str(url), str(dst), info.size,
                          _show(name, expected) if expected is not None else None,
                          level, retries,
                          getattr(verifier, "read_back", 0), resumed_blocks=resumed, note=note)
    except KeyboardInterrupt:
        if _save_journal(dst, origin, info, options, fd, done, verifier, stale):
            keep_part = True
        raise
    finally:
        if verifier is not None:
            verifier.close()
        os.close(fd)
        if not committed and not keep_part:
            with contextlib.suppress(OSError):
                os.unlink(part)
        if not keep_part:  # committed or discarded: an older run's journal is done with
            with contextlib.suppress(OSError):
                os.unlink(journal_path(dst))
        if source is not None:
            with contextlib.suppress(BaseException):
                source.result()


def _show(name: str, value: bytes) -> str:
    return dg.format_digest(name, value).split("=", 1)[1]


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- upload


def upload(session: Session, src: Path, url: Url, options: Options) -> FileResult:
    """Several streams through an upload session when ``streams > 1``, the file has more
    than one block and the server has sessions (:mod:`dtnkit.transfer.multi_upload`); else one
    PUT stream."""
    note: str | None = None
    if options.streams > 1:
        from dtnkit.transfer import multi_upload as mu

        try:
            return mu.upload_file(session, src, url, options)
        except mu.UseSinglePut as exc:
            if "HTTP" in str(exc) or "no upload sessions" in str(exc):
                note = f"one PUT stream: {exc}"
    result = _retry_on_mismatch(lambda: _upload_once(session, src, url, options), options)
    result.note = result.note or note
    return result


def _upload_once(session: Session, src: Path, url: Url, options: Options) -> FileResult:
    name, verify = options.checksum, options.verify
    try:
        fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"source {src}", exc.strerror or str(exc), "check the path") from None
    try:
        size = os.fstat(fd).st_size
        extra = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
        if verify != "none":
            # ask the server to hash while it receives and answer with the Digest (RFC 3230),
            # instead of reading the new file back for a HEAD afterwards
            extra["Want-Digest"] = _want(name)
        local: bytes | None = None
        if verify == "sequential":
            local = pl.checksum_fd(fd, name, size, options.block_size)
            extra["Digest"] = dg.format_digest(name, local)
        hasher = cks.new(name) if verify == "block" else None
        retries = 0
        attempt = hops = 0
        target, target_session = url, session  # where the body goes (after redirects)
        while True:
            try:
                status, headers, body = _put_body(target_session, target, fd, size, extra,
                                                  hasher, options)
            except Retryable as exc:
                if attempt >= options.retries:
                    raise TransferError(f"PUT {url}", f"failed after {attempt + 1} attempts "
                                        f"({exc})", "check that the server is up") from None
                time.sleep(options.backoff * 2**attempt)
                attempt += 1
                retries += 1
                hasher = cks.new(name) if verify == "block" else None
                continue
            if status >= 500:
                if attempt >= options.retries:
                    raise TransferError(f"PUT {url}", f"HTTP {status} {_reason(body)}",
                                        "check the server log")
                time.sleep(options.backoff * 2**attempt)
                attempt += 1
                retries += 1
                hasher = cks.new(name) if verify == "block" else None
                continue
            if status in REDIRECTS:  # a door sending the body to a pool (dCache)
                hops += 1
                if hops > MAX_REDIRECTS:
                    raise TransferError(f"PUT {url}", f"more than {MAX_REDIRECTS} redirects",
                                        "check the server's redirect configuration")
                target = follow_redirect(target, headers.get("location"), f"PUT {target}")
                target_session = session.for_url(target)
                hasher = cks.new(name) if verify == "block" else None
                continue
            break
        if status == 412 and verify == "sequential":
            raise ChecksumMismatch(f"checksum mismatch for {src} -> {url}",
                                   f"the server refused the body: {_reason(body)}",
                                   "retry; if it persists, check the source storage")
        check_status(status, f"PUT {url}", body, ok=(200, 201, 204))
        if hasher is not None:
            local = hasher.digest()
        elif verify == "file":
            local = pl.checksum_fd(fd, name, size, options.block_size)
        remote: bytes | None = None
        if verify in ("file", "block", "sequential"):
            remote = _answered_digest(headers, name)
            if remote is None:  # not every server answers Want-Digest on a PUT
                remote = _source_digest(session, url, name)
            if local is not None and remote != local:
                raise discard_remote(session, url, f"checksum mismatch for {src} -> {url}",
                                     f"{name} local {_show(name, local)}, remote "
                                     f"{_show(name, remote)}")
        # the server fsyncs before its rename: an upload is at least durable
        level = "durable" if verify != "none" else "inflight"
        return FileResult(str(src), str(url), size,
                          _show(name, local) if local is not None else None, level, retries,
                          upload_streams=1)
    finally:
        os.close(fd)


#: How long a PUT waits for ``100 Continue`` (or an early final answer: a redirect, 401, 403)
#: before sending the body anyway, as RFC 9110 asks of clients (a server may ignore Expect).
EXPECT_WAIT = 1.0
_MAX_LINE = 8192


def _early_answer(conn: http.client.HTTPConnection, wait: float = EXPECT_WAIT
                  ) -> tuple[int, dict[str, str], bytes] | None:
    """After request headers with ``Expect: 100-continue``: None when the body may go (``100
    Continue``, or no answer within *wait*); otherwise the server's final answer (status,
    lower-cased headers, body up to 64 KiB), and the body must not be sent."""
    sock = conn.sock
    if not select.select([sock], [], [], wait)[0]:
        return None
    # unbuffered: reads nothing past the interim answer (the server sends nothing more until
    # it has the body), so http.client can still read the final response afterwards
    fp = sock.makefile("rb", buffering=0)
    try:
        def line() -> bytes:
            out = bytearray()
            while not out.endswith(b"\n"):
                c = fp.read(1)
                if not c or len(out) > _MAX_LINE:
                    raise Retryable("PUT: malformed or truncated interim answer")
                out += c
            return bytes(out)

        parts = line().split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise Retryable(f"PUT: not an HTTP status line: {b' '.join(parts[:2])!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for _ in range(100):
            raw = line()
            if raw in (b"\r\n", b"\n"):
                break
            key, _sep, value = raw.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        if status == 100:
            return None
        length = headers.get("content-length", "0")
        want = min(int(length) if length.isdigit() else 0, 65536)
        body = bytearray()
        while len(body) < want:
            chunk = fp.read(want - len(body))
            if not chunk:
                break
            body += chunk
        return status, headers, bytes(body)
    finally:
        fp.close()


def _answered_digest(headers: dict[str, str], name: str) -> bytes | None:
    """The *name* digest in a response's ``Digest`` header, if it has one that parses."""
    try:
        return dg.parse_digest(headers.get("digest", "")).get(name)
    except ValueError:
        return None


def discard_remote(session: Session, url: Url, what: str, why: str) -> ChecksumMismatch:
    """DELETE a remote file that failed verification (best effort); the error to raise."""
    with contextlib.suppress(DtnkitError, Retryable):
        session.request("DELETE", url)
    return ChecksumMismatch(what, f"{why}; the remote copy was deleted",
                            "retry; if it persists, check both storages")


def _put_body(session: Session, url: Url, fd: int, size: int, extra: dict[str, str],
              hasher: cks.Checksum | None, options: Options
              ) -> tuple[int, dict[str, str], bytes]:
    """One PUT of the file.  With a body it asks ``Expect: 100-continue`` first, so a refusal
    (401, 403) or a redirect costs no bytes."""
    conn = session.connect()
    try:
        conn.putrequest("PUT", url.path, skip_accept_encoding=True)
        for key, value in session.headers(
                {**extra, "Expect": "100-continue"} if size else extra).items():
            conn.putheader(key, value)
        conn.endheaders()
        if size:
            early = _early_answer(conn)
            if early is not None:
                return early
        offset = 0
        for view in pl.read_chunks(fd, 0, size, options.block_size):
            if hasher is not None:
                hasher.update(view)  # FIVER: hash the bytes read for sending
            conn.sock.sendall(view)
            offset += len(view)
            if options.progress is not None:
                options.progress(len(view))
        if offset < size:
            raise TransferError(f"source {size}", f"ended at {offset} bytes",
                                "do not modify files while copying them")
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise Retryable(f"PUT {url}: {exc.__class__.__name__}: {exc}") from exc
    finally:
        conn.close()


def mkcol(session: Session, url: Url) -> None:
    status, _h, body = session.with_retries(f"MKCOL {url}",
                                            lambda: session.request("MKCOL", url))
    if status not in (201, 405):  # 405: exists already
        check_status(status, f"MKCOL {url}", body, ok=(201,))


# --------------------------------------------------------------------------- planning, copy


def _remote_walk(session: Session, url: Url, dst: Path) -> Iterator[tuple[Url, Path]]:
    dst.mkdir(parents=True, exist_ok=True)
    for child, is_dir, _size in session.propfind(url):
        target = dst / child.name
        if is_dir:
            yield from _remote_walk(session, child, target)
        else:
            yield child, target


def _local_walk(session: Session, src: Path, url: Url) -> Iterator[tuple[Path, Url]]:
    mkcol(session, url)
    for entry in sorted(src.iterdir()):
        if entry.is_symlink():
            continue
        if entry.is_dir():
            yield from _local_walk(session, entry, url.child(entry.name))
        elif entry.is_file():
            yield entry, url.child(entry.name)


def _relay_jobs(src: str, dst: str, options: Options) -> list[Callable[[], FileResult]]:
    """Remote to remote through this client (not third-party copy): GET ranges from the
    source, PUT them to the destination; separate tokens with ``src_token``/``dst_token``."""
    from dtnkit.transfer import multi_upload as mu

    src_url, dst_url = Url.parse(src), Url.parse(dst)
    src_session, dst_session = Session(src_url, options), Session(dst_url, options)
    src_session.token = options.src_token or options.token
    dst_session.token = options.dst_token or options.token
    jobs: list[Callable[[], FileResult]] = []
    if options.recursive:
        top = dst_url.child(src_url.name) if dst.endswith("/") and src_url.name else dst_url
        for child, target in mu.relay_walk(src_session, src_url, dst_session, top):
            jobs.append(functools.partial(mu.relay, src_session, child, dst_session, target,
                                          options))
        return jobs
    if dst.endswith("/"):
        dst_url = dst_url.child(src_url.name)
    jobs.append(functools.partial(mu.relay, src_session, src_url, dst_session, dst_url,
                                  options))
    return jobs


def copy(src: str, dst: str, options: Options) -> Summary:
    """Copy *src* to *dst* (one of them a URL); returns the summary."""
    options.check()
    start = time.monotonic()
    summary = Summary()
    jobs: list[Callable[[], FileResult]] = []
    if is_url(src) and is_url(dst):
        jobs = _relay_jobs(src, dst, options)
    if not is_url(src) and not is_url(dst):
        raise BadInput("local to local", "is not what cp is for", "use cp(1)")
    if is_url(src) and is_url(dst):
        pass  # the relay jobs above
    elif is_url(src):
        url = Url.parse(src)
        session = Session(url, options)
        target = Path(dst)
        if options.recursive:
            base = target / url.name if target.is_dir() and url.name else target
            for child, path in _remote_walk(session, url, base):
                jobs.append(functools.partial(download, session, child, path, options))
        elif _is_device(target):
            jobs.append(functools.partial(download_to_device, session, url, target, options))
        else:
            if target.is_dir() or dst.endswith("/"):
                target = target / url.name
            if not target.parent.is_dir():
                raise BadInput(f"destination {dst}", "its directory does not exist",
                               "create it first")
            jobs.append(functools.partial(download, session, url, target, options))
    else:
        url = Url.parse(dst)
        session = Session(url, options)
        local = Path(src)
        if local.is_dir():
            if not options.recursive:
                raise BadInput(f"source {src}", "is a directory", "pass -r to copy it")
            top = url.child(local.name) if dst.endswith("/") else url
            for file, remote in _local_walk(session, local, top):
                jobs.append(functools.partial(upload, session, file, remote, options))
        else:
            if not local.is_file():
                raise BadInput(f"source {src}", "is not a file", "check the path")
            if dst.endswith("/"):
                url = url.child(local.name)
            jobs.append(functools.partial(upload, session, local, url, options))
    if options.parallel == 1 or len(jobs) <= 1:
        for job in jobs:
            summary.files.append(job())
    else:
        with ThreadPoolExecutor(options.parallel, thread_name_prefix="dtnkit-file") as pool:
            futures = [pool.submit(job) for job in jobs]
            for fut in futures:
                summary.files.append(fut.result())
    summary.seconds = time.monotonic() - start
    return summary


def total_size(src: str, options: Options) -> int | None:
    """Bytes to move for a progress bar, when cheap to know (a single file)."""
    try:
        if is_url(src):
            if options.recursive:
                return None
            url = Url.parse(src)
            return Session(url, options).head(url).size
        p = Path(src)
        if p.is_file():
            return p.stat().st_size
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())
    except (DtnkitError, OSError):
        return None
