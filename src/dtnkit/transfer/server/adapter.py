"""The one module that knows the HTTP stack: sockets, TLS, keep-alive, the access log.

Connections are held by :mod:`dtnkit.transfer.server.conn` (one selector thread for idle
connections and request heads, a bounded pool of worker threads serving requests); heads are
read by the strict parser of :mod:`dtnkit.transfer.server.http11`.  Request bodies and files
are moved with blocking calls that release the GIL (``sendfile``, ``recv_into``, ``write``,
hashing of large buffers).  Plain-HTTP GET bodies go out with
:meth:`socket.socket.sendfile` (``sendfile(2)``, no copy through Python); TLS bodies are read
and sent in 1 MiB pieces.

:class:`RequestHandler` implements :class:`~dtnkit.transfer.server.exchange.Exchange` for one
request and dispatches its method through the route table
(:mod:`dtnkit.transfer.server.routes`).
"""

from __future__ import annotations

import contextlib
import email.utils
import select
import socket
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from email.message import Message
from pathlib import Path
from types import TracebackType
from typing import TextIO

from dtnkit import __version__
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host.host import Host
from dtnkit.transfer import files, paths, pipeline, sending
from dtnkit.transfer.client import autostreams
from dtnkit.transfer.server import access, accesslog, conn, flows, http11, routes
from dtnkit.transfer.server.config import (
    DEFAULT_EXPIRY,
    Counters,
    ServerConfig,
    TlsSpec,
    tls_context,
)
from dtnkit.transfer.server.errors import BodyError, HttpError, printable
from dtnkit.transfer.server.exchange import FileLike, HeaderList, Services, Sink
from dtnkit.transfer.server.janitor import Janitor
from dtnkit.transfer.server.limits import Limits
from dtnkit.transfer.server.metrics import exposition
from dtnkit.transfer.server.registry import SessionRegistry
from dtnkit.transfer.server.tpc_allow import AllowList
from dtnkit.transfer.tokens import TokenStore, load
from dtnkit.transfer.wire.exposition import CONTENT_TYPE

BLOCK = 8 * 2**20  # chunked-body buffer
RECV_BLOCK = 2**20  # PUT receive buffer (Content-Length bodies)
TLS_BLOCK = 2**20  # GET body piece over TLS
SMALL_BODY = 2**16  # an unexpected body up to this size is read and dropped ...
#: ... if it comes whole within this many seconds (or the rate window, if shorter): a body
#: the method does not use (GET, HEAD, DELETE) is sent with its head by any real client, and
#: one trickled by a reader (a token holder, anyone under --anonymous-read) must not hold a
#: worker for a whole rate window
UNEXPECTED_BODY_WITHIN = 2.0
CHUNK_LINE = 1024  # bytes in a chunk-size line
TRAILERS = 8192  # bytes of the trailer section of a chunked body
LISTEN_BACKLOG = 1024
SERVER = f"dtnkit/{__version__}"


class HttpServer:
    """What the requests of one server share: configuration, services, the log, the hub."""

    def __init__(
        self,
        listener: socket.socket,
        config: ServerConfig,
        tls: ssl.SSLContext | None,
        limits: conn.ConnLimits,
    ) -> None:
        self.config = config
        self.tls = tls
        self.limits = limits
        host, port = listener.getsockname()[:2]
        self.server_name = str(host)
        self.server_port = int(port)
        self.uploads: SessionRegistry | None = (
            SessionRegistry(config.root, config.upload_expiry) if config.upload_sessions else None
        )
        self.services = Services(config, files.ChecksumCache(), Counters(), self.uploads)
        self.janitor = Janitor(config.root, config.upload_expiry)  # part files left behind
        self.flows = flows.Flows(
            config.marking, config.capacity, link_bytes_rate if config.metrics else None
        )
        self.log_lock = threading.Lock()
        self.hub = conn.Hub(listener, tls, limits, self.serve, self.write_log, close_socket)

    @property
    def counters(self) -> Counters:
        return self.services.counters

    @property
    def stopping(self) -> bool:
        return self.hub.stopping

    def write_log(self, line: str, force: bool = False) -> None:
        if self.config.quiet and not force:
            return
        with self.log_lock:
            try:
                self.config.log.write(line.rstrip("\n") + "\n")
                self.config.log.flush()
            except (OSError, ValueError):
                pass

    def serve(self, c: conn.Conn) -> bool:
        """Serve the request whose head is in ``c.buf``; True to keep the connection."""
        c.sock.settimeout(self.limits.io_timeout)
        handler = RequestHandler(self, c)
        handler.handle()
        return not handler.close_connection


def link_bytes_rate(address: str) -> float | None:
    """Bytes/s of the link *address* is reached through (None: unknown)."""
    found = autostreams.link_rate(Host.live(), address)
    return found[0] / 8 if found is not None else None


def close_socket(sock: socket.socket) -> None:
    """Close a connection: TLS close_notify (bounded), then a lingering TCP close."""
    if isinstance(sock, ssl.SSLSocket):
        try:
            sock.settimeout(1.0)
            sock = sock.unwrap()
        except (OSError, ValueError):
            pass
    lingering_close(sock)


class RequestHandler:
    """One request on a connection: the :class:`Exchange` its route's handler works with."""

    server_version = SERVER

    def __init__(self, server: HttpServer, c: conn.Conn) -> None:
        self.server = server
        self.conn = c
        self.connection = c.sock
        self.client_address = (c.peer, 0)
        self.command = ""
        self.path = "-"
        self.request: http11.Request | None = None
        self.close_connection = True
        self._status: int | None = None
        self._bytes = 0
        self._received = time.time()  # the access log's %t: when the request came
        self._body_done = False
        self._headers_sent = False
        self._buf = bytearray(c.buf[c.head_len :])  # bytes read past the head
        self.limits = server.limits
        self._pace: conn.Pace | None = None  # while a body is read
        self.scitag: int | None = None  # the request's SciTags tag (header or default)
        self._stream: flows.ServedStream | None = None  # while a data request runs

    # --- one request ------------------------------------------------------------------------

    def handle(self) -> None:
        c = self.conn
        try:
            if c.error is not None:
                raise c.error
            self.request = http11.parse_head(c.buf[: c.head_len])
            self.command = self.request.method
            self.path = self.request.target
            self.close_connection = not self.request.keep_alive or self.server.stopping
            route = routes.BY_METHOD.get(self.command)
            if route is None:
                raise HttpError(
                    501, printable(self.command), "method not supported by dtnkit serve"
                )
            if self.server.stopping:
                raise HttpError(
                    503, "server", "shutting down; retry on another server", [("Retry-After", "5")]
                )
            if self.server.config.metrics and self._names_metrics():
                if self.command not in ("GET", "HEAD"):
                    raise HttpError(
                        405,
                        printable(f"{self.command} /metrics"),
                        "the metrics are read with GET or HEAD",
                        [("Allow", "GET, HEAD")],
                    )
                self._metrics()
                return
            self.scitag = self.server.flows.tag_for(self.request.headers, self.command)
            if self.request.expect_continue and not self._continue():
                return
            self.run(route)
        except http11.BadRequest as exc:
            self.close_connection = True
            self._fail(HttpError(exc.status, "request", exc.why))
        except HttpError as exc:
            self._fail(exc)
        except (ConnectionError, TimeoutError, ssl.SSLError):
            self.close_connection = True
        except OSError:
            self.close_connection = True
        finally:
            c.buf = self._buf
            if self._status is not None:
                self._access_log()

    def _names_metrics(self) -> bool:
        """Whether the target is ``/metrics`` however it is spelt (``/%6detrics``,
        ``//metrics``, ``/metrics/``, ``/./metrics``, the absolute form): the routing reads
        the path as :func:`paths.resolve` would, so no spelling reaches a root file named
        ``metrics`` while the endpoint is on."""
        try:
            return paths.names(access.target_path(self.path)) == ["metrics"]
        except (BadInput, HttpError):
            return False

    def _continue(self) -> bool:
        # Check the token and the path before inviting the client to send a body.
        try:
            routes.before_continue(self)
        except (HttpError, BadInput) as exc:
            self._fail(exc)
            return False
        self.connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    def _metrics(self) -> None:
        """``GET /metrics``: the mover's series (a read token unless --metrics-anonymous)."""
        if not self.server.config.metrics_anonymous:  # the head decides, before any body
            access.authorize(
                self.server.config,
                self.headers.get("Authorization"),
                "read",
                f"{self.command} /metrics",
            )
        if self.body_pending():
            self.discard_body()
        body = exposition(self.server.flows, self.server.counters).encode()
        self.send_bytes(200, [("Content-Type", CONTENT_TYPE)], body, head=self.command == "HEAD")

    def run(self, route: routes.HttpRoute) -> None:
        if self.command in flows.STREAM_METHODS:
            self._stream = self.server.flows.begin(
                self.connection,
                self.command,
                self.client_address[0],
                self.log_target,
                self.scitag,
                len(self._buf),
            )
        try:
            self._run(route)
        finally:
            if self._stream is not None:
                self.server.flows.end(self._stream)
                self._stream = None

    def _first_byte(self) -> None:
        if self._stream is not None and self._stream.method != "COPY":
            self.server.flows.first_byte(self._stream)

    def _run(self, route: routes.HttpRoute) -> None:
        try:
            if route.drops_body and self.body_pending():
                # the token is checked on the head: a client without one never gets a worker
                # to wait for the body it may trickle
                self.authorize(route.scope)
                self.discard_body()
            route.handler(self)
            if self.body_pending():  # a body the method does not use: cannot keep alive
                self.close_connection = True
        except (HttpError, BadInput) as exc:
            self._fail(exc)
        except BodyError as exc:
            self._body_done = True
            self.close_connection = True
            self._fail(HttpError(400, f"{self.command} {self.log_target}", str(exc)))
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception:
            self.server.write_log(
                f"internal error on {self.command} {self.log_target}:\n" + traceback.format_exc(),
                force=True,
            )
            self.close_connection = True
            self._fail(
                HttpError(
                    500,
                    f"{self.command} {self.log_target}",
                    "internal server error (see the server log)",
                )
            )

    def _access_log(self) -> None:
        """One Combined Log Format line (``accesslog``): no token, no query string."""
        self.server.counters.add("requests", 1)
        request = self.request
        headers = request.headers if request is not None else None
        self.server.write_log(
            accesslog.line(
                host=self.client_address[0],
                epoch=self._received,
                method=request.method if request is not None else None,
                target=request.target if request is not None else None,
                version=request.version if request is not None else None,
                status=self._status or 0,
                sent=self._bytes,
                referer_value=headers.get("Referer") if headers is not None else None,
                agent=headers.get("User-Agent") if headers is not None else None,
            )
        )

    def _fail(self, exc: HttpError | BadInput) -> None:
        if isinstance(exc, BadInput):
            status = 414 if isinstance(exc, paths.PathTooLong) else 400
            exc = HttpError(status, exc.what, exc.why)
        if self._headers_sent:  # too late for a status: cut the connection
            self.close_connection = True
            return
        self._send_text(exc.status, f"{exc.what}: {exc.why}\n", exc.headers)

    def _send_text(self, status: int, text: str, headers: HeaderList) -> None:
        body = text.encode("utf-8", "replace")
        if self.body_pending():
            self.close_connection = True
        head = [
            *headers,
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
        ]
        self._send(status, head, b"" if self.command == "HEAD" else body)

    def _send(self, status: int, headers: HeaderList, body: bytes = b"") -> None:
        """The response head (with Server, Date and, when closing, Connection) and *body*."""
        out = [("Server", SERVER), ("Date", http_date())]
        for name, value in headers:
            if name.lower() == "connection":
                if value.strip().lower() == "close":
                    self.close_connection = True
                continue
            out.append((name, value))
        if self.server.stopping:
            self.close_connection = True
        if self.close_connection:
            out.append(("Connection", "close"))
        if self._status is None:
            self._status = status
        self._headers_sent = True
        self.connection.sendall(http11.response_head(status, out) + body)
        self._bytes += len(body)

    # --- Exchange: the request ------------------------------------------------------------

    @property
    def method(self) -> str:
        return self.command

    @property
    def headers(self) -> Message:
        assert self.request is not None
        return self.request.headers

    @property
    def services(self) -> Services:
        return self.server.services

    @property
    def log_target(self) -> str:
        """The request path without its query (which may carry a token), printable."""
        return printable(self.path.split("?", 1)[0])

    def local_names(self) -> list[str]:
        names = [self.server.server_name]
        with contextlib.suppress(OSError):
            names.append(self.connection.getsockname()[0])
        return names

    @property
    def local_port(self) -> int:
        return self.server.server_port

    def resolve(self) -> Path:
        return access.resolve(self.server.config.root, self.path)

    def authorize(self, need: str | None = None) -> None:
        if need is None:
            need = routes.scope(self.command)
        if need is None:
            return
        access.authorize(
            self.server.config,
            self.headers.get("Authorization"),
            need,
            f"{self.command} {self.log_target}",
        )

    def content_length(self) -> int | None:
        return self.request.content_length if self.request is not None else None

    def is_chunked(self) -> bool:
        return self.request is not None and self.request.chunked

    def body_pending(self) -> bool:
        if self._body_done or self.request is None:
            return False
        return self.request.chunked or bool(self.request.content_length)

    def read_small_body(self, limit: int, *, within: float | None = None) -> bytes:
        if self.is_chunked():
            parts: list[bytes] = []
            size = 0

            def sink(view: memoryview) -> None:
                nonlocal size
                size += len(view)
                if size > limit:
                    raise HttpError(413, f"{self.command} body", f"is larger than {limit} bytes")
                parts.append(bytes(view))

            with self._receiving(whole=True, within=within):
                self._read_chunked(sink)
            return b"".join(parts)
        length = self.content_length() or 0
        if length > limit:
            raise HttpError(413, f"{self.command} body", f"is larger than {limit} bytes")
        parts = []
        with self._receiving(whole=True, within=within):
            self._read_length(length, lambda view: parts.append(bytes(view)))
        return b"".join(parts)

    def discard_body(self) -> None:
        length = self.content_length()
        if length is not None and length <= SMALL_BODY:
            self.read_small_body(SMALL_BODY, within=UNEXPECTED_BODY_WITHIN)

    def read_body(self, sink: Sink) -> int:
        self._first_byte()
        if self.is_chunked():
            read: Callable[[], int] = lambda: self._read_chunked(sink)  # noqa: E731
        else:
            length = self.content_length()
            if length is None:
                raise HttpError(
                    411,
                    f"{self.command} {self.log_target}",
                    "needs Content-Length or Transfer-Encoding: chunked",
                )
            read = lambda: self._read_length(length, sink)  # noqa: E731
        with self._receiving(whole=False):
            return read()

    @contextlib.contextmanager
    def _receiving(self, *, whole: bool, within: float | None = None) -> Iterator[None]:
        """A body must keep coming (conn.Pace): no receive waits longer than one rate window,
        and a small body (*whole*) must arrive whole within one window (or *within* seconds,
        if shorter)."""
        window = self.limits.rate_window if within is None else min(within, self.limits.rate_window)
        self._pace = conn.Pace(self.limits, whole_within=window if whole else None)
        self.connection.settimeout(min(self.limits.io_timeout, window))
        try:
            yield
        finally:
            self._pace = None
            self.connection.settimeout(self.limits.io_timeout)

    def _paced(self, n: int) -> int:
        """Count *n* body bytes received (TimeoutError when the body comes too slowly)."""
        if self._pace is not None:
            self._pace.add(n)
            left = self._pace.left()
            if left is not None:  # the next receive waits only until the body's deadline
                self.connection.settimeout(max(left, 0.001))
        return n

    def _read_length(self, length: int, sink: Sink) -> int:
        remaining = length
        broke = "the body broke off after {} of {} bytes"
        if remaining and self._buf:
            # First what was read with the head, then straight from the socket (recv_into a
            # 1 MiB buffer, never past the body: keep-alive stays exact).
            first = bytes(self._buf[:remaining])
            del self._buf[: len(first)]
            sink(memoryview(first))
            remaining -= len(first)
        if remaining:
            buf = bytearray(min(RECV_BLOCK, remaining))
            view = memoryview(buf)
            while remaining:
                # the whole buffer before the sink sees it: over TLS a receive gives one
                # record (16 KiB), and a hash update and a write per record held the socket
                # unread for 16,384 of each per 256 MiB (the upload's pace on a long path)
                want, got = min(remaining, len(buf)), 0
                while got < want:
                    n = self._paced(self.connection.recv_into(view[got:want], want - got))
                    if not n:
                        if got:
                            sink(view[:got])
                        raise BodyError(broke.format(length - remaining + got, length))
                    got += n
                sink(view[:got])
                remaining -= got
        self._body_done = True
        return length

    def _fill(self, want: int) -> bool:
        """Receive into the read-ahead buffer (up to *want* bytes); False at end of stream."""
        data = self.connection.recv(max(want, 4096))
        if not data:
            return False
        self._paced(len(data))
        self._buf += data
        return True

    def _readline(self, limit: int) -> bytes:
        """One CRLF-ended line (without CRLF); BodyError when longer than *limit* or cut."""
        while True:
            end = self._buf.find(b"\r\n", 0, limit + 2)
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 2]
                if b"\n" in line or b"\r" in line:
                    raise BodyError("a bare CR or LF in a chunked body")
                return line
            if len(self._buf) > limit + 1:
                raise BodyError(f"a line of the chunked body is longer than {limit} bytes")
            if not self._fill(4096):
                raise BodyError("the chunked body broke off")

    def _read_chunked(self, sink: Callable[[memoryview], None]) -> int:
        total = 0
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        while True:
            try:
                size = http11.parse_chunk_size(self._readline(CHUNK_LINE))
            except ValueError as exc:
                raise BodyError(str(exc)) from None
            if size == 0:
                break
            while size:
                if self._buf:
                    piece = bytes(self._buf[:size])
                    del self._buf[: len(piece)]
                    sink(memoryview(piece))
                    n = len(piece)
                else:
                    n = self._paced(self.connection.recv_into(view, min(size, len(buf))))
                    if not n:
                        raise BodyError(f"the body broke off after {total} bytes")
                    sink(view[:n])
                size -= n
                total += n
            if self._readline(0) != b"":
                raise BodyError("a chunk does not end with CRLF")
        seen = 0
        while True:  # trailer section
            line = self._readline(TRAILERS)
            if not line:
                break
            seen += len(line) + 2
            if seen > TRAILERS:
                raise BodyError(f"the trailers are longer than {TRAILERS} bytes")
        self._body_done = True
        return total

    # --- Exchange: the answer --------------------------------------------------------------

    def send_head(self, status: int, headers: HeaderList = ()) -> None:
        self._send(status, headers)

    def send_empty(self, status: int, headers: HeaderList = ()) -> None:
        self._send(status, [*headers, ("Content-Length", "0")])

    def send_bytes(
        self, status: int, headers: HeaderList, body: bytes, *, head: bool = False
    ) -> None:
        self._send(status, [*headers, ("Content-Length", str(len(body)))], b"" if head else body)

    def send_file(self, f: FileLike, start: int, count: int) -> int:
        self._first_byte()
        if isinstance(self.connection, ssl.SSLSocket):
            sent = self._send_tls(f.fileno(), start, count)
            self.server.counters.add("tls_body_bytes", sent)
        else:
            sent = self.connection.sendfile(f, start, count)  # type: ignore[arg-type]
            self.server.counters.add("sendfile_bytes", sent)
        self._bytes += sent
        if sent != count:  # the file shrank under us; the framing is broken
            self.close_connection = True
        return sent

    def _send_tls(self, fd: int, start: int, count: int) -> int:
        sent = 0
        sock = self.connection
        timeout = sock.gettimeout()  # each wait for room in the send buffer, at most
        for view in pipeline.read_chunks(fd, start, count, TLS_BLOCK):
            sending.send_all(sock, view, wait=lambda: timeout)
            sent += len(view)
        return sent

    def start_chunked(self, status: int, headers: HeaderList = ()) -> None:
        self._send(status, [*headers, ("Transfer-Encoding", "chunked")])

    def write_chunk(self, data: bytes) -> None:
        self.connection.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        self.connection.sendall(b"0\r\n\r\n")

    def client_gone(self) -> bool:
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    def count_bytes(self, n: int) -> None:
        self._bytes += n

    def close_after(self) -> None:
        self.close_connection = True


def _dispatcher(route: routes.HttpRoute) -> Callable[[RequestHandler], None]:
    def do(self: RequestHandler) -> None:
        self.run(route)

    do.__name__ = f"do_{route.method}"
    return do


for _route in routes.ROUTES:  # one do_<METHOD> per row of the route table
    setattr(RequestHandler, f"do_{_route.method}", _dispatcher(_route))

_date_cache: tuple[int, str] = (0, "")


def http_date() -> str:
    """The ``Date`` header value, formatted once a second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]


def lingering_close(sock: socket.socket, *, seconds: float = 2.0, limit: int = 64 * 2**20) -> None:
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


# --- public API ---------------------------------------------------------------------------


class ServerHandle:
    """A running server: ``.url``, ``.port``, ``.stop()``; a context manager."""

    def __init__(self, server: HttpServer, url: str) -> None:
        self._server = server
        self.url = url
        self.host = server.server_name
        self.port = server.server_port
        self.root = server.config.root
        self.limits = server.limits
        self._stopped = False

    @property
    def counters(self) -> dict[str, int]:
        return self._server.counters.snapshot()

    @property
    def flows(self) -> flows.Flows:
        """The server's streams and SciTags marking (fireflies sent, tags ignored)."""
        return self._server.flows

    @property
    def connections(self) -> int:
        """Connections open now (idle and served)."""
        return self._server.hub.count()

    def stop(self, timeout: float = 5.0, *, drain: float = 0.0) -> bool:
        """Stop accepting and close idle connections; let requests in progress finish for up
        to *drain* seconds, then cut the rest and wait (up to *timeout*) for the threads.
        Idempotent; True when nothing had to be cut."""
        if self._stopped:
            return True
        self._stopped = True
        hub = self._server.hub
        hub.stop_accepting()
        drained = hub.wait_idle(drain)
        self._server.janitor.close()
        if self._server.uploads is not None:
            self._server.uploads.close()
        hub.cut(timeout)
        self._server.flows.close()
        return drained

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_server(
    root: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: TlsSpec | None = None,
    tokens: TokenStore | str | Path | None = None,
    anonymous_read: bool = False,
    quiet: bool = False,
    log: TextIO | None = None,
    marker_interval: float = 5.0,
    ca_file: str | Path | None = None,
    ca_dir: str | Path | None = None,
    upload_sessions: bool = True,
    upload_expiry: float = DEFAULT_EXPIRY,
    tpc_allow: Iterable[str] = (),
    limits: Limits | None = None,
    max_connections: int | None = None,
    max_connections_per_client: int | None = None,
    head_timeout: float = conn.HEAD_TIMEOUT,
    idle_timeout: float = conn.IDLE_TIMEOUT,
    body_min_rate: int = conn.MIN_BODY_RATE,
    rate_window: float = conn.RATE_WINDOW,
    marking: flows.Marking | None = None,
    metrics: bool = False,
    metrics_anonymous: bool = False,
    capacity: float | None = None,
) -> ServerHandle:
    """Serve ``root`` in background threads; port 0 picks a free port (see ``.port``).

    ``ca_file``: PEM CA bundle that third-party copies (this server as the active party)
    use to verify the remote server (default: the system's trust store); ``ca_dir``: a
    hashed CA directory trusted too when it exists ($X509_CERT_DIR).
    ``max_connections``: default (None) derived from the descriptor limit, whose soft value
    is first raised to the hard one; a larger value is lowered to it.
    ``max_connections_per_client``: connections one client address (an IPv6 /64) may hold;
    default (None) an eighth of the cap, at least 64 but at most half of it.
    ``marking``: SciTags (default tag, firefly destinations); ``metrics``: answer
    ``GET /metrics`` (``metrics_anonymous``: without a token); ``capacity``: bytes/s the
    streams share, for the utilisation series (None: the link's speed).
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise BadInput(f"root {root_path}", "is not a directory", "pass an existing directory")
    store = load(Path(tokens)) if isinstance(tokens, (str, Path)) else tokens
    if store is None and not anonymous_read:
        raise BadInput(
            "no access",
            "without a token file and without anonymous read, every request would be refused",
            "pass --tokens FILE, --anonymous-read, or both",
        )
    context = tls_context(*tls) if isinstance(tls, tuple) else tls
    config = ServerConfig(
        root=root_path.resolve(),
        tokens=store,
        anonymous_read=anonymous_read,
        quiet=quiet,
        log=log if log is not None else sys.stderr,
        marker_interval=marker_interval,
        ca_file=str(ca_file) if ca_file is not None else None,
        ca_dir=str(ca_dir) if ca_dir is not None else None,
        upload_sessions=upload_sessions,
        upload_expiry=upload_expiry,
        tpc_allow=AllowList.parse(tpc_allow),
        limits=limits or Limits(),
        marking=marking or flows.Marking(),
        metrics=metrics,
        metrics_anonymous=metrics_anonymous,
        capacity=capacity,
    )
    cap = conn.derive_cap(conn.raise_fd_limit(), conn.open_fds())
    if max_connections is not None:
        cap = max(1, min(cap, max_connections))
    conn_limits = conn.ConnLimits(
        max_connections=cap,
        max_per_client=max_connections_per_client,
        head_timeout=head_timeout,
        idle_timeout=idle_timeout,
        body_min_rate=body_min_rate,
        rate_window=rate_window,
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
            listener.listen(LISTEN_BACKLOG)
        except OSError:
            listener.close()
            raise
    except OSError as exc:
        raise DtnkitError(
            f"cannot listen on {host} port {port}",
            exc.strerror or str(exc),
            "choose another --port or --host",
        ) from None
    server = HttpServer(listener, config, context, conn_limits)
    server.hub.start()
    scheme = "https" if context is not None else "http"
    shown = f"[{host}]" if ":" in host else host
    return ServerHandle(server, f"{scheme}://{shown}:{server.server_port}/")
