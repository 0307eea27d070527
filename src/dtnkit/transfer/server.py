"""``dtnkit serve``: the server half of the HTTP data mover.

One directory tree over HTTP/1.1 (optionally TLS): GET/HEAD with a single byte range, PUT
(temporary name, fsync, checksum check, rename), DELETE, MKCOL, PROPFIND (depth 0 and 1),
``Want-Digest`` / ``Want-Repr-Digest`` answered from a per-file checksum cache, and bearer
tokens with read/write scopes.

Threading model: :class:`http.server.ThreadingHTTPServer` with one thread per connection and
persistent (keep-alive) connections.  Request bodies and files are moved with blocking calls
that release the GIL (``sendfile``, ``recv_into``, ``write``, hashing of large buffers), so
threads scale across connections without an event loop; the TLS handshake runs in the
connection's thread, never in the accept loop.  Plain-HTTP GET bodies go out with
:meth:`socket.socket.sendfile` (``sendfile(2)``, no copy through Python); TLS bodies are
read and sent in 1 MiB pieces.

Use :func:`start_server` in-process (tests, the client's own tests) or the ``serve`` command.
"""

from __future__ import annotations

import collections
import contextlib
import email.utils
import errno
import io
import os
import secrets
import socket
import ssl
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO
from urllib.parse import urlsplit
from xml.sax.saxutils import escape as xml_escape

from dtnkit import __version__
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.transfer import checksum as cks
from dtnkit.transfer.wire import digests as dg
from dtnkit.transfer import paths
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer import tokens as tokmod
from dtnkit.transfer import upload_sessions as ups

BLOCK = 8 * 2**20  # hashing block (GET digests) and chunked-body buffer
RECV_BLOCK = 2**20  # PUT receive buffer (Content-Length bodies)
TLS_BLOCK = 2**20  # GET body piece over TLS
IDLE_TIMEOUT = 300.0  # seconds a connection may sit without sending anything we wait for
HANDSHAKE_TIMEOUT = 30.0
MAX_PROPFIND_BODY = 1 << 20
CACHE_ENTRIES = 10_000

READ_METHODS = frozenset({"GET", "HEAD", "PROPFIND"})
WRITE_METHODS = frozenset({"PUT", "DELETE", "MKCOL"})
ALLOW = "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND, COPY, POST"

TlsSpec = ssl.SSLContext | tuple[str | Path, str | Path]
FileKey = tuple[int, int, int, int]  # size, mtime_ns, inode, device


class HttpError(Exception):
    """A response with a plain-text ``what: why`` body."""

    def __init__(self, status: int, what: str, why: str,
                 headers: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(f"{status} {what}: {why}")
        self.status = status
        self.what = what
        self.why = why
        self.headers = list(headers)


def _file_key(st: os.stat_result) -> FileKey:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


class ChecksumCache:
    """Digests per file, valid while (path, size, mtime_ns, inode, device) stay the same."""

    def __init__(self, max_entries: int = CACHE_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._max = max_entries
        self._items: collections.OrderedDict[str, tuple[FileKey, dict[str, bytes]]] = (
            collections.OrderedDict())
        self.hits = 0
        self.misses = 0

    def lookup(self, path: Path, key: FileKey) -> dict[str, bytes]:
        with self._lock:
            item = self._items.get(str(path))
            if item is None or item[0] != key:
                return {}
            self._items.move_to_end(str(path))
            return dict(item[1])

    def store(self, path: Path, key: FileKey, digests: Mapping[str, bytes]) -> None:
        with self._lock:
            item = self._items.get(str(path))
            merged = dict(item[1]) if item is not None and item[0] == key else {}
            merged.update(digests)
            self._items[str(path)] = (key, merged)
            self._items.move_to_end(str(path))
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    def forget(self, path: Path) -> None:
        with self._lock:
            self._items.pop(str(path), None)


@dataclass
class Counters:
    """What the server did; read by tests and benchmarks."""

    requests: int = 0
    sendfile_bytes: int = 0
    tls_body_bytes: int = 0
    received_bytes: int = 0
    checksum_bytes: int = 0
    range_puts: int = 0  # partial-upload ranges recorded (upload_sessions)
    range_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, value: int) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {k: getattr(self, k) for k in
                    ("requests", "sendfile_bytes", "tls_body_bytes", "received_bytes",
                     "checksum_bytes", "range_puts", "range_bytes")}


@dataclass(frozen=True)
class ServerConfig:
    root: Path  # resolved
    tokens: tokmod.TokenStore | None
    anonymous_read: bool
    quiet: bool
    log: TextIO
    marker_interval: float = 5.0  # seconds between HTTP-TPC performance markers
    upload_sessions: bool = True  # multi-stream partial uploads (POST Dtnkit-Upload)
    upload_expiry: float = ups.DEFAULT_EXPIRY  # seconds an idle upload session lives
    ca_file: str | None = None  # PEM CAs trusted by this server's own TPC requests


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily,
                 config: ServerConfig, tls: ssl.SSLContext | None) -> None:
        self.address_family = family
        self.config = config
        self.tls = tls
        self.cache = ChecksumCache()
        self.counters = Counters()
        self.uploads: ups.Registry | None = (
            ups.Registry(config.root, config.upload_expiry) if config.upload_sessions else None)
        self.log_lock = threading.Lock()
        self._live_lock = threading.Lock()
        self._live: dict[int, socket.socket] = {}
        self._conn_threads: set[threading.Thread] = set()
        self.stopping = False
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a DNS lookup that can hang; skip it.
        import socketserver

        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._connection, args=(request, client_address),
                                  daemon=True, name="dtnkit-serve-conn")
        with self._live_lock:
            self._conn_threads.add(thread)
        thread.start()

    def _connection(self, request: socket.socket, client_address: Any) -> None:
        ident = threading.get_ident()
        sock: socket.socket = request
        with self._live_lock:
            self._live[ident] = sock
        try:
            if self.stopping:
                return
            with contextlib.suppress(OSError):  # small responses must not wait for an ACK
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock.settimeout(HANDSHAKE_TIMEOUT)
                try:
                    sock = self.tls.wrap_socket(sock, server_side=True)
                except (OSError, ssl.SSLError) as exc:
                    self.write_log(f"{client_address[0]} TLS handshake failed: "
                                   f"{exc.__class__.__name__}: {exc}")
                    return
                with self._live_lock:
                    self._live[ident] = sock
            _Handler(sock, client_address, self)
        except Exception:  # a bug: report it here, never to the client
            self.write_log("internal error:\n" + traceback.format_exc(), force=True)
        finally:
            if isinstance(sock, ssl.SSLSocket) and not self.stopping:
                try:  # send close_notify (bounded), then close the TCP connection
                    sock.settimeout(1.0)
                    sock = sock.unwrap()
                except (OSError, ValueError):
                    pass
            with self._live_lock:
                self._live.pop(ident, None)
                self._conn_threads.discard(threading.current_thread())
            _lingering_close(sock)
            request.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        self.write_log(f"{client_address[0]} connection failed: {exc.__class__.__name__}: {exc}",
                       force=True)

    def write_log(self, line: str, *, force: bool = False) -> None:
        if self.config.quiet and not force:
            return
        with self.log_lock:
            try:
                self.config.log.write(line.rstrip("\n") + "\n")
                self.config.log.flush()
            except (OSError, ValueError):
                pass

    def close_connections(self, timeout: float) -> None:
        """Cut every open connection and wait (up to ``timeout``) for its thread to end."""
        self.stopping = True
        with self._live_lock:
            live = list(self._live.values())
            threads = list(self._conn_threads)
        for sock in live:
            # The base-class method: SSLSocket.shutdown would tear down its state under the
            # feet of the thread reading from it.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class _BodyError(Exception):
    """The request body broke off or was malformed: answer, then close the connection."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"dtnkit/{__version__}"
    sys_version = ""
    timeout = IDLE_TIMEOUT
    server: _Server

    # --- per-request state ------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self._reset()

    def _reset(self) -> None:
        self._status: int | None = None
        self._bytes = 0
        self._t0 = time.monotonic()
        self._body_done = False
        self._headers_sent = False

    def handle_one_request(self) -> None:
        self._reset()
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        finally:
            if self._status is not None:
                self._access_log()

    def parse_request(self) -> bool:
        self._t0 = time.monotonic()
        self.path = "-"
        return super().parse_request()

    @property
    def _log_target(self) -> str:
        """The request path without its query (which may carry a token), printable."""
        return _printable(getattr(self, "path", "-").split("?", 1)[0])

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self._status = int(code) if isinstance(code, int) else None

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        self.server.write_log(f"{self.client_address[0]} {format % args}")

    def end_headers(self) -> None:
        super().end_headers()
        self._headers_sent = True

    def _access_log(self) -> None:
        seconds = time.monotonic() - self._t0
        method = _printable(self.command or "-")
        self.server.counters.add("requests", 1)
        self.server.write_log(f'{self.client_address[0]} "{method} {self._log_target}" '
                              f"{self._status} {self._bytes} {seconds:.3f}s")

    # --- dispatch -----------------------------------------------------------------------

    def do_GET(self) -> None:
        self._run(lambda: self._get(head=False))

    def do_HEAD(self) -> None:
        self._run(lambda: self._get(head=True))

    def do_PUT(self) -> None:
        self._run(lambda: ups.handle_put_range(self) if ups.is_session_request(self)
                  else self._put())

    def do_DELETE(self) -> None:
        self._run(lambda: ups.handle_delete(self) if ups.is_session_request(self)
                  else self._delete())

    def do_POST(self) -> None:
        self._run(lambda: ups.handle_post(self))

    def do_MKCOL(self) -> None:
        self._run(self._mkcol)

    def do_PROPFIND(self) -> None:
        self._run(self._propfind)

    def do_OPTIONS(self) -> None:
        self._run(self._options)

    def do_COPY(self) -> None:
        from dtnkit.transfer import tpc  # HTTP third-party copy; imports this module

        self._run(lambda: tpc.handle_copy(self))

    def do_MOVE(self) -> None:
        self._run(lambda: self._fail(HttpError(
            501, "MOVE", "not implemented by dtnkit serve")))

    def handle_expect_100(self) -> bool:
        # Check the token and the path before inviting the client to send a body.
        try:
            self._authorize()
            if self.command == "PUT" and not ups.is_session_request(self):
                self._put_checks(self._resolve())
        except (HttpError, BadInput) as exc:
            self._fail(exc)
            return False
        ok = super().handle_expect_100()
        self._headers_sent = False  # "100 Continue" is not the response
        return ok

    def _run(self, work: Callable[[], None]) -> None:
        try:
            te = self.headers.get("Transfer-Encoding")
            if te is not None and te.strip().lower() != "chunked":
                self.close_connection = True
                raise HttpError(501, f"Transfer-Encoding {te!r}", "only chunked is supported")
            if self.command in ("GET", "HEAD", "DELETE") and self._body_pending():
                self._discard_body()
            work()
            if self._body_pending():  # a body the method does not use: cannot keep alive
                self.close_connection = True
        except (HttpError, BadInput) as exc:
            self._fail(exc)
        except _BodyError as exc:
            self._body_done = True
            self.close_connection = True
            self._fail(HttpError(400, f"{self.command} {self._log_target}", str(exc)))
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception:
            self.server.write_log(f"internal error on {self.command} {self._log_target}:\n"
                                  + traceback.format_exc(), force=True)
            self.close_connection = True
            self._fail(HttpError(500, f"{self.command} {self._log_target}",
                                 "internal server error (see the server log)"))

    def _fail(self, exc: HttpError | BadInput) -> None:
        if isinstance(exc, BadInput):
            status = 414 if isinstance(exc, paths.PathTooLong) else 400
            exc = HttpError(status, exc.what, exc.why)
        if self._headers_sent:  # too late for a status: cut the connection
            self.close_connection = True
            return
        self._send_text(exc.status, f"{exc.what}: {exc.why}\n", exc.headers)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        # Used by the base class for malformed requests and unknown methods: plain text.
        try:
            reason = HTTPStatus(code).phrase
        except ValueError:
            reason = "error"
        what = _printable(self.command) if getattr(self, "command", None) else "request"
        why = "method not supported by dtnkit serve" if code == 501 else message or reason
        self.close_connection = True
        self._send_text(code, f"{what}: {why}\n", ())

    def _send_text(self, status: int, text: str, headers: Iterable[tuple[str, str]]) -> None:
        body = text.encode("utf-8", "replace")
        if self._body_pending():
            self.close_connection = True
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
            self._bytes += len(body)

    def _body_pending(self) -> bool:
        """True while a request body may still be unread on the connection."""
        if self._body_done or getattr(self, "headers", None) is None:
            return False
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return True
        try:
            return int(self.headers.get("Content-Length", "0")) > 0
        except ValueError:
            return True

    # --- common pieces ------------------------------------------------------------------

    def _target(self) -> str:
        raw = self.path
        if not raw.isascii():
            raise HttpError(400, "request target", "has non-ASCII bytes; percent-encode them")
        if raw.startswith(("http://", "https://")):
            raw = urlsplit(raw).path or "/"
        return raw.split("?", 1)[0].split("#", 1)[0]

    def _resolve(self) -> Path:
        path = paths.resolve(self.server.config.root, self._target())
        rel = path.relative_to(self.server.config.root)
        if any(paths.is_part_name(part) for part in rel.parts):
            raise HttpError(403, _show(path, self.server.config.root),
                            "is the temporary name of an upload")
        return path

    def _authorize(self, need: str | None = None) -> None:
        method = self.command
        if need is None:
            need = ("read" if method in READ_METHODS else
                    "write" if method in WRITE_METHODS else None)
        if need is None:
            return
        config = self.server.config
        token = tokmod.bearer(self.headers.get("Authorization"))
        if token is None:
            if need == "read" and config.anonymous_read:
                return
            raise HttpError(401, f"{method} {self._log_target}",
                            f"needs a bearer token with {need} scope",
                            [("WWW-Authenticate", 'Bearer realm="dtnkit"')])
        scopes = config.tokens.scopes(token) if config.tokens is not None else None
        if scopes is None:
            raise HttpError(401, f"{method} {self._log_target}", "the bearer token is not valid",
                            [("WWW-Authenticate", 'Bearer realm="dtnkit", error="invalid_token"')])
        if need not in scopes:
            raise HttpError(403, f"{method} {self._log_target}",
                            f"the bearer token does not have {need} scope")

    def _content_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        if value is None:
            return None
        if not value.strip().isdigit():
            self.close_connection = True
            raise HttpError(400, "Content-Length", f"{value!r} is not a byte count")
        return int(value)

    def _read_small_body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            size = 0

            def sink(view: memoryview) -> None:
                nonlocal size
                size += len(view)
                if size > limit:
                    raise HttpError(413, f"{self.command} body", f"is larger than {limit} bytes")
                parts.append(bytes(view))

            self._read_chunked(sink)
            return b"".join(parts)
        length = self._content_length() or 0
        if length > limit:
            raise HttpError(413, f"{self.command} body", f"is larger than {limit} bytes")
        data = self.rfile.read(length)
        if len(data) != length:
            raise _BodyError(f"the body broke off after {len(data)} of {length} bytes")
        self._body_done = True
        return data

    def _discard_body(self) -> None:
        """Read and drop a small unexpected body so the connection stays usable."""
        length = self.headers.get("Content-Length", "")
        if length.isdigit() and int(length) <= 2**16 and "Transfer-Encoding" not in self.headers:
            self._read_small_body(2**16)

    def _read_body(self, sink: Callable[[memoryview], None]) -> int:
        """Feed the request body to ``sink`` in pieces of up to BLOCK bytes; return its size."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked(sink)
        length = self._content_length()
        if length is None:
            raise HttpError(411, f"{self.command} {self._log_target}",
                            "needs Content-Length or Transfer-Encoding: chunked")
        remaining = length
        broke = "the body broke off after {} of {} bytes"
        if remaining and isinstance(self.rfile, io.BufferedReader):
            # First what the header parser already buffered (one raw read at most), then
            # straight from the socket: recv_into a 1 MiB buffer is about twice as fast as
            # BufferedReader.readinto, and never reads past the body (keep-alive stays exact).
            ahead = self.rfile.peek(1)
            first = self.rfile.read(min(len(ahead), remaining))
            if not first:
                raise _BodyError(broke.format(0, length))
            sink(memoryview(first))
            remaining -= len(first)
        buf = bytearray(min(RECV_BLOCK, max(remaining, 1)))
        view = memoryview(buf)
        while remaining:
            n = self.connection.recv_into(view, min(remaining, len(buf)))
            if not n:
                raise _BodyError(broke.format(length - remaining, length))
            sink(view[:n])
            remaining -= n
        self._body_done = True
        return length

    def _read_chunked(self, sink: Callable[[memoryview], None]) -> int:
        total = 0
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        while True:
            line = self.rfile.readline(1024)
            if not line.endswith(b"\n"):
                raise _BodyError("a chunk-size line is missing or too long")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BodyError(f"bad chunk-size line {line[:40]!r}") from None
            if size < 0:
                raise _BodyError("negative chunk size")
            if size == 0:
                break
            while size:
                n = self.rfile.readinto(view[:min(size, len(buf))])
                if not n:
                    raise _BodyError(f"the body broke off after {total} bytes")
                sink(view[:n])
                size -= n
                total += n
            if self.rfile.read(2) != b"\r\n":
                raise _BodyError("a chunk does not end with CRLF")
        while True:  # trailer section
            line = self.rfile.readline(8192)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise _BodyError("the chunked body broke off in its trailers")
        self._body_done = True
        return total

    # --- GET / HEAD ---------------------------------------------------------------------

    def _get(self, *, head: bool) -> None:
        self._authorize()
        path = self._resolve()
        root = self.server.config.root
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise _os_error(exc, path, root) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                if not stat.S_ISDIR(st.st_mode):
                    raise HttpError(403, _show(path, root), "is not a regular file")
                self._send_listing(path, head=head)
                return
            os.set_blocking(fd, True)
            f = open(fd, "rb", buffering=0)  # noqa: SIM115 (closed by the with below)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        with f:
            self._send_file(f, st, path, head=head)

    def _send_file(self, f: Any, st: os.stat_result, path: Path, *, head: bool) -> None:
        size = st.st_size
        etag = _etag(st)
        last_modified = email.utils.formatdate(st.st_mtime, usegmt=True)
        if _not_modified(self.headers, etag, st.st_mtime):
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", last_modified)
            self.end_headers()
            return
        span: tuple[int, int] | None = None
        range_value = self.headers.get("Range")
        if range_value is not None and _if_range_holds(self.headers.get("If-Range"), etag,
                                                       st.st_mtime):
            try:
                span = parse_range(range_value, size)
            except RangeNotSatisfiable as exc:
                raise HttpError(416, f"Range {range_value!r}", str(exc),
                                [("Content-Range", f"bytes */{size}")]) from None
            except ValueError as exc:
                raise HttpError(400, f"Range {range_value!r}", str(exc)) from None
        digest_headers = self._digest_headers(f.fileno(), st, path)
        digest_headers += self._content_digest(f.fileno(), st, path, span)
        start, end = span if span is not None else (0, size - 1)
        count = end - start + 1 if size else 0
        self.send_response(206 if span is not None else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(count))
        if span is not None:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", last_modified)
        for name, value in digest_headers:
            self.send_header(name, value)
        self.end_headers()
        if head or not count:
            return
        self.wfile.flush()
        if isinstance(self.connection, ssl.SSLSocket):
            sent = self._send_tls(f.fileno(), start, count)
            self.server.counters.add("tls_body_bytes", sent)
        else:
            sent = self.connection.sendfile(f, start, count)
            self.server.counters.add("sendfile_bytes", sent)
        self._bytes += sent
        if sent != count:  # the file shrank under us; the framing is broken
            self.close_connection = True

    def _send_tls(self, fd: int, start: int, count: int) -> int:
        sent = 0
        for view in pl.read_chunks(fd, start, count, TLS_BLOCK):
            self.connection.sendall(view)
            sent += len(view)
        return sent

    def _send_listing(self, path: Path, *, head: bool) -> None:
        names = []
        for entry in _entries(path, self.server.config.root):
            names.append(entry.name + ("/" if entry.is_dir else ""))
        body = "".join(f"{name}\n" for name in sorted(names)).encode("utf-8", "surrogateescape")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
            self._bytes += len(body)

    def _digest_headers(self, fd: int, st: os.stat_result, path: Path) -> list[tuple[str, str]]:
        want = self.headers.get("Want-Digest")
        want_repr = self.headers.get("Want-Repr-Digest")
        if want is None and want_repr is None:
            return []
        try:
            old = dg.choose(dg.parse_want_digest(want), cks.ALGORITHMS) if want else None
        except ValueError as exc:
            raise HttpError(400, "Want-Digest", str(exc)) from None
        try:
            new = (dg.choose(dg.parse_want_repr_digest(want_repr), cks.ALGORITHMS)
                   if want_repr else None)
        except ValueError as exc:
            raise HttpError(400, "Want-Repr-Digest", str(exc)) from None
        names = [n for n in (old, new) if n is not None]
        if not names:
            return []
        digests = self._checksums(fd, st, path, names)
        headers = []
        if old is not None:
            headers.append(("Digest", dg.format_digest(old, digests[old])))
        if new is not None:
            headers.append(("Repr-Digest", dg.format_repr_digest({new: digests[new]})))
        return headers

    def _content_digest(self, fd: int, st: os.stat_result, path: Path,
                        span: tuple[int, int] | None) -> list[tuple[str, str]]:
        """``Want-Content-Digest`` (RFC 9530) -> ``Content-Digest`` of the bytes a GET sends.

        For a range, the digest of that range (also on HEAD: of what a GET would send), read
        and hashed per request (the cost of reading the range, nothing cached); without a range
        the content is the whole representation, answered from the checksum cache.  Only an
        algorithm that was asked for; a malformed field is 400.
        """
        want = self.headers.get("Want-Content-Digest")
        if want is None:
            return []
        try:
            name = dg.choose(dg.parse_want_repr_digest(want), cks.ALGORITHMS)
        except ValueError as exc:
            why = str(exc).replace("Want-Repr-Digest", "Want-Content-Digest")
            raise HttpError(400, "Want-Content-Digest", why) from None
        if name is None:
            return []
        if span is None:
            value = self._checksums(fd, st, path, [name])[name]
            return [("Content-Digest", dg.format_repr_digest({name: value}))]
        start, end = span
        count = end - start + 1
        h = cks.new(name)
        done = 0
        for view in pl.read_chunks(fd, start, count, BLOCK):
            h.update(view)
            done += len(view)
        self.server.counters.add("checksum_bytes", done)
        if done != count or _file_key(os.fstat(fd)) != _file_key(st):
            raise HttpError(503, _show(path, self.server.config.root),
                            "changed while its range digest was computed; retry",
                            [("Retry-After", "1")])
        return [("Content-Digest", dg.format_repr_digest({name: h.digest()}))]

    def _checksums(self, fd: int, st: os.stat_result, path: Path,
                   names: Iterable[str]) -> dict[str, bytes]:
        cache = self.server.cache
        key = _file_key(st)
        have = cache.lookup(path, key)
        missing = sorted({n for n in names if n not in have})
        if not missing:
            cache.hits += 1
            return have
        cache.misses += 1
        sums = {n: cks.new(n) for n in missing}
        offset = 0
        for view in pl.read_chunks(fd, 0, None, BLOCK):
            for s in sums.values():
                s.update(view)
            offset += len(view)
        self.server.counters.add("checksum_bytes", offset)
        after = os.fstat(fd)
        if _file_key(after) != key or offset != st.st_size:
            raise HttpError(503, _show(path, self.server.config.root),
                            "changed while its checksum was computed; retry",
                            [("Retry-After", "1")])
        fresh = {n: s.digest() for n, s in sums.items()}
        cache.store(path, key, fresh)
        have.update(fresh)
        return have

    # --- PUT ----------------------------------------------------------------------------

    def _put_checks(self, path: Path) -> None:
        root = self.server.config.root
        where = _show(path, root)
        if path == root:
            raise HttpError(405, where, "the root is a collection; PUT a file under it")
        if self.headers.get("Content-Range") is not None:
            raise HttpError(501, f"PUT {where} with Content-Range",
                            "a partial upload needs an upload session (POST with "
                            "Dtnkit-Upload: start, then Dtnkit-Upload-Id on each range); "
                            "or upload the whole file")
        encoding = self.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise HttpError(415, f"Content-Encoding {encoding!r}",
                            "is not supported; send the bytes as they are")
        if not path.parent.is_dir():
            raise HttpError(409, where, "its parent collection does not exist; MKCOL it first")
        if path.is_dir():
            raise HttpError(405, where, "is a collection")
        if self.headers.get("If-None-Match", "").strip() == "*" and os.path.lexists(path):
            raise HttpError(412, where, "exists and If-None-Match: * was sent")

    def _put(self) -> None:
        self._authorize()
        path = self._resolve()
        self._put_checks(path)
        root = self.server.config.root
        where = _show(path, root)
        expected = sent_digests(self.headers.get("Digest"), self.headers.get("Repr-Digest"),
                                self.headers.get("Content-MD5"))
        length = self._content_length()
        if length is None and "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            raise HttpError(411, f"PUT {where}",
                            "needs Content-Length or Transfer-Encoding: chunked")
        if length is not None:
            _check_space(path.parent, length, where)
        # Want-Digest on a PUT (RFC 3230: any request may ask for the resulting instance's
        # digest): hashed while receiving, answered in the response and cached, so a client
        # that verifies needs no HEAD that would read the new file back
        try:
            wanted = self.headers.get("Want-Digest")
            answer = dg.choose(dg.parse_want_digest(wanted), cks.ALGORITHMS) if wanted else None
        except ValueError as exc:
            raise HttpError(400, "Want-Digest", str(exc)) from None
        sums = {name: cks.new(name) for name in {*expected, *([answer] if answer else [])}}
        part = path.with_name(paths.part_name(path.name, secrets.token_hex(8)))
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise _os_error(exc, path, root) from None
        committed = False
        try:
            def sink(view: memoryview) -> None:
                for s in sums.values():
                    s.update(view)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]

            try:
                size = self._read_body(sink)
                self.server.counters.add("received_bytes", size)
                self._bytes += size
                os.fsync(fd)
            except OSError as exc:
                if isinstance(exc, (ConnectionError, TimeoutError)):
                    raise
                raise _os_error(exc, path, root) from None
            got = {name: s.digest() for name, s in sums.items()}
            detail = dg.mismatches(expected, got)
            if detail is not None:
                raise HttpError(412, f"PUT {where}",
                                f"checksum mismatch, nothing written: {detail}")
            existed = commit_part(self.server.cache, fd, part, path, root, got)
            committed = True
        finally:
            os.close(fd)
            if not committed:
                with contextlib.suppress(OSError):
                    os.unlink(part)
        self._send_empty(204 if existed else 201, [("Digest", dg.format_digest(
            answer, got[answer]))] if answer else [])

    def _send_empty(self, status: int, headers: Iterable[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    # --- DELETE, MKCOL, OPTIONS ---------------------------------------------------------

    def _delete(self) -> None:
        self._authorize()
        path = self._resolve()
        root = self.server.config.root
        if path == root:
            raise HttpError(403, "/", "the served root cannot be deleted")
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.rmdir(path)
            else:
                os.unlink(path)
                self.server.cache.forget(path)
        except OSError as exc:
            raise _os_error(exc, path, root) from None
        self._send_empty(204)

    def _mkcol(self) -> None:
        self._authorize()
        if self._body_pending():
            raise HttpError(415, "MKCOL with a body", "is not supported (RFC 4918 9.3)")
        path = self._resolve()
        root = self.server.config.root
        where = _show(path, root)
        if os.path.lexists(path):
            raise HttpError(405, where, "already exists")
        if not path.parent.is_dir():
            raise HttpError(409, where, "its parent collection does not exist")
        try:
            os.mkdir(path)
        except FileExistsError:
            raise HttpError(405, where, "already exists") from None
        except OSError as exc:
            raise _os_error(exc, path, root) from None
        self._send_empty(201)

    def _options(self) -> None:
        if self._body_pending():
            self._read_small_body(MAX_PROPFIND_BODY)
        self._send_empty(200, [("Allow", ALLOW), ("DAV", "1"), ("Accept-Ranges", "bytes")])

    # --- PROPFIND -----------------------------------------------------------------------

    def _propfind(self) -> None:
        self._authorize()
        path = self._resolve()
        root = self.server.config.root
        depth = self.headers.get("Depth", "1").strip().lower()
        if depth == "infinity":
            raise HttpError(403, "PROPFIND with Depth: infinity", "is not supported; use 0 or 1")
        if depth not in ("0", "1"):
            raise HttpError(400, f"Depth {depth!r}", "must be 0 or 1")
        self._read_small_body(MAX_PROPFIND_BODY)  # the requested properties are ignored
        try:
            st = os.stat(path)
        except OSError as exc:
            raise _os_error(exc, path, root) from None
        items = [_Entry(path.name, path, st)]
        if depth == "1" and stat.S_ISDIR(st.st_mode):
            items.extend(_entries(path, root))
        body = _multistatus(items, root).encode("utf-8")
        self.send_response(207)
        self.send_header("Content-Type", 'application/xml; charset="utf-8"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._bytes += len(body)


# --- helpers ------------------------------------------------------------------------------


class RangeNotSatisfiable(ValueError):
    """A well-formed range that selects no byte of the file (HTTP 416)."""


def parse_range(value: str, size: int) -> tuple[int, int]:
    """First and last byte (inclusive) of a single ``bytes=`` range over ``size`` bytes.

    ValueError for a malformed value or several ranges; :class:`RangeNotSatisfiable` when
    the range selects nothing.
    """
    unit, sep, spec = value.strip().partition("=")
    if not sep or unit.strip().lower() != "bytes":
        raise ValueError("expected 'bytes=first-last', 'bytes=first-' or 'bytes=-suffix'")
    spec = spec.strip()
    if "," in spec:
        raise ValueError("only a single byte range is supported")
    first, dash, last = spec.partition("-")
    first, last = first.strip(), last.strip()
    if not dash or (first and not first.isdigit()) or (last and not last.isdigit()) or not (
            first or last) or not (first + last).isascii():
        raise ValueError("expected 'bytes=first-last', 'bytes=first-' or 'bytes=-suffix'")
    if not first:  # suffix: the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable(f"the suffix of {n} bytes selects nothing of {size} bytes")
        return max(0, size - n), size - 1
    start = int(first)
    if last and int(last) < start:
        raise ValueError(f"the last byte {last} is before the first {first}")
    if start >= size:
        raise RangeNotSatisfiable(f"the first byte {start} is beyond the size {size}")
    end = min(int(last), size - 1) if last else size - 1
    return start, end


def sent_digests(digest: str | None, repr_digest: str | None,
                 content_md5: str | None) -> dict[str, bytes]:
    """Digests a client sent with its body, by dtnkit algorithm name; unknown ones are skipped.

    ``Digest`` (RFC 3230), ``Repr-Digest`` (RFC 9530), ``Content-MD5`` (base64).  HttpError 400
    when a value is malformed or two headers disagree.
    """
    found: list[tuple[str, dict[str, bytes]]] = []
    for header, value, parse in (("Digest", digest, dg.parse_digest),
                                 ("Repr-Digest", repr_digest, dg.parse_repr_digest),
                                 ("Content-MD5", content_md5,
                                  lambda v: dg.parse_digest(f"md5={v.strip()}"))):
        if value is None:
            continue
        try:
            found.append((header, parse(value)))
        except ValueError as exc:
            raise HttpError(400, header, str(exc)) from None
    result: dict[str, bytes] = {}
    for header, values in found:
        for name, raw in values.items():
            if result.setdefault(name, raw) != raw:
                raise HttpError(400, header, f"its {name} value disagrees with another header")
    return result


def _etag(st: os.stat_result) -> str:
    return f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"'


def _http_date(value: str) -> float | None:
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _not_modified(headers: Any, etag: str, mtime: float) -> bool:
    inm = headers.get("If-None-Match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or etag in tags
    ims = headers.get("If-Modified-Since")
    if ims is not None:
        when = _http_date(ims)
        return when is not None and int(mtime) <= when
    return False


def _if_range_holds(value: str | None, etag: str, mtime: float) -> bool:
    if value is None:
        return True
    value = value.strip()
    if value.startswith(('"', "W/")):
        return value == etag  # strong comparison: a weak tag never matches
    when = _http_date(value)
    return when is not None and int(mtime) == int(when)


def _check_space(directory: Path, length: int, where: str) -> None:
    try:
        vfs = os.statvfs(directory)
    except OSError:
        return
    free = vfs.f_bavail * vfs.f_frsize
    if length > free:
        raise HttpError(507, f"PUT {where}", f"needs {length} bytes, {free} are free")


def _lingering_close(sock: socket.socket, *, seconds: float = 2.0,
                     limit: int = 64 * 2**20) -> None:
    """Close after reading what the client still sends, so a response sent before its request
    body was read is not destroyed by a TCP reset; bounded in time and bytes."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_WR)  # not SSLSocket.shutdown: no TLS state
        deadline = time.monotonic() + seconds
        drained = 0
        while drained < limit:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            data = socket.socket.recv(sock, 2**20)
            if not data:
                break
            drained += len(data)
    except OSError:
        pass
    finally:
        sock.close()


def commit_part(cache: ChecksumCache, fd: int, part: Path, path: Path, root: Path,
                digests: Mapping[str, bytes]) -> bool:
    """Rename a verified, fsynced part file over *path* (keeping the mode a file there had),
    fsync the directory and remember the digests; True when a file was replaced."""
    existed = os.path.lexists(path)
    try:
        old = _stat_or_none(path) if existed else None
        if old is not None and stat.S_ISREG(old.st_mode):
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
        st = os.fstat(fd)
        os.replace(part, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise _os_error(exc, path, root) from None
    if digests:
        cache.store(path, _file_key(st), digests)
    else:
        cache.forget(path)
    return existed


def _stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _os_error(exc: OSError, path: Path, root: Path) -> HttpError:
    where = _show(path, root)
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return HttpError(404, where, "not found")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return HttpError(403, where, f"permission denied ({os.strerror(code)})")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return HttpError(507, where, f"no space left ({os.strerror(code)})")
    if code == errno.ENOTEMPTY:
        return HttpError(409, where, "the collection is not empty")
    if code == errno.EISDIR:
        return HttpError(405, where, "is a collection")
    if code == errno.ENAMETOOLONG:
        return HttpError(414, where, "the name is too long for the filesystem")
    if code == errno.ELOOP:
        return HttpError(400, where, "too many levels of symbolic links")
    reason = os.strerror(code) if code else exc.__class__.__name__
    return HttpError(500, where, reason)


def _show(path: Path, root: Path) -> str:
    try:
        return paths.relative_url(root, path)
    except ValueError:
        return "(outside the root)"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() and c != '"' else f"\\x{ord(c):02x}" for c in text)


@dataclass(frozen=True)
class _Entry:
    name: str
    path: Path
    st: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)


def _entries(directory: Path, root: Path) -> list[_Entry]:
    """Children worth listing: no upload temporaries, no symlinks out of the root."""
    items = []
    try:
        scan = list(os.scandir(directory))
    except OSError as exc:
        raise _os_error(exc, directory, root) from None
    for entry in scan:
        if paths.is_part_name(entry.name):
            continue
        child = directory / entry.name
        try:
            if entry.is_symlink() and not child.resolve().is_relative_to(root):
                continue
            st = entry.stat()
        except (OSError, RuntimeError):
            continue
        items.append(_Entry(entry.name, child, st))
    items.sort(key=lambda e: e.name)
    return items


def _multistatus(items: Iterable[_Entry], root: Path) -> str:
    out = ['<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">\n']
    for item in items:
        href = paths.relative_url(root, item.path)
        if item.is_dir and not href.endswith("/"):
            href += "/"
        props = [f"<D:getlastmodified>"
                 f"{email.utils.formatdate(item.st.st_mtime, usegmt=True)}</D:getlastmodified>"]
        if item.is_dir:
            props.append("<D:resourcetype><D:collection/></D:resourcetype>")
        else:
            props.append("<D:resourcetype/>")
            props.append(f"<D:getcontentlength>{item.st.st_size}</D:getcontentlength>")
            props.append(f"<D:getetag>{xml_escape(_etag(item.st))}</D:getetag>")
        out.append(f"<D:response><D:href>{xml_escape(href)}</D:href><D:propstat><D:prop>"
                   f"{''.join(props)}</D:prop><D:status>HTTP/1.1 200 OK</D:status>"
                   f"</D:propstat></D:response>\n")
    out.append("</D:multistatus>\n")
    return "".join(out)


# --- public API ---------------------------------------------------------------------------


def tls_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or later) from a PEM certificate and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise BadInput(f"TLS certificate {cert} / key {key}", f"cannot be loaded ({exc})",
                       "pass a PEM certificate with --cert and its private key with --key"
                       ) from None
    return context


class ServerHandle:
    """A running server: ``.url``, ``.port``, ``.stop()``; a context manager."""

    def __init__(self, server: _Server, thread: threading.Thread, url: str) -> None:
        self._server = server
        self._thread = thread
        self.url = url
        self.host = server.server_name
        self.port = server.server_port
        self.root = server.config.root
        self._stopped = False

    @property
    def counters(self) -> dict[str, int]:
        return self._server.counters.snapshot()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, cut open connections, wait for their threads; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        if self._server.uploads is not None:
            self._server.uploads.close()
        self._server.close_connections(timeout)
        self._thread.join(timeout)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def start_server(root: str | Path, *, host: str = "127.0.0.1", port: int = 0,
                 tls: TlsSpec | None = None,
                 tokens: tokmod.TokenStore | str | Path | None = None,
                 anonymous_read: bool = False, quiet: bool = False,
                 log: TextIO | None = None, marker_interval: float = 5.0,
                 ca_file: str | Path | None = None, upload_sessions: bool = True,
                 upload_expiry: float = ups.DEFAULT_EXPIRY) -> ServerHandle:
    """Serve ``root`` in background threads; port 0 picks a free port (see ``.port``).

    ``ca_file``: PEM CA bundle that third-party copies (this server as the active party)
    use to verify the remote server (default: the system's trust store).
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise BadInput(f"root {root_path}", "is not a directory", "pass an existing directory")
    store = tokmod.load(Path(tokens)) if isinstance(tokens, (str, Path)) else tokens
    if store is None and not anonymous_read:
        raise BadInput("no access", "without a token file and without anonymous read, every "
                       "request would be refused", "pass --tokens FILE, --anonymous-read, or both")
    context = tls_context(*tls) if isinstance(tls, tuple) else tls
    config = ServerConfig(root=root_path.resolve(), tokens=store, anonymous_read=anonymous_read,
                          quiet=quiet, log=log if log is not None else sys.stderr,
                          marker_interval=marker_interval,
                          ca_file=str(ca_file) if ca_file is not None else None,
                          upload_sessions=upload_sessions, upload_expiry=upload_expiry)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        server = _Server((host, port), family, config, context)
    except OSError as exc:
        raise DtnkitError(f"cannot listen on {host} port {port}", exc.strerror or str(exc),
                          "choose another --port or --host") from None
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True, name="dtnkit-serve")
    thread.start()
    scheme = "https" if context is not None else "http"
    shown = f"[{host}]" if ":" in host else host
    return ServerHandle(server, thread, f"{scheme}://{shown}:{server.server_port}/")
