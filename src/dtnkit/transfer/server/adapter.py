"""The one module that knows the HTTP stack: threads, sockets, TLS, keep-alive, the access log.

Threading model: :class:`http.server.ThreadingHTTPServer` with one thread per connection and
persistent (keep-alive) connections.  Request bodies and files are moved with blocking calls
that release the GIL (``sendfile``, ``recv_into``, ``write``, hashing of large buffers), so
threads scale across connections without an event loop; the TLS handshake runs in the
connection's thread, never in the accept loop.  Plain-HTTP GET bodies go out with
:meth:`socket.socket.sendfile` (``sendfile(2)``, no copy through Python); TLS bodies are
read and sent in 1 MiB pieces.

:class:`RequestHandler` implements :class:`~dtnkit.transfer.server.exchange.Exchange` and
dispatches each method through the route table (:mod:`dtnkit.transfer.server.routes`).
"""

from __future__ import annotations

import contextlib
import io
import select
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from dtnkit import __version__
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.transfer import files, paths
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer import tokens as tokmod
from dtnkit.transfer.server import access, routes
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
from dtnkit.transfer.server.registry import Registry
from dtnkit.transfer.server.tpc_allow import AllowList

BLOCK = 8 * 2**20  # chunked-body buffer
RECV_BLOCK = 2**20  # PUT receive buffer (Content-Length bodies)
TLS_BLOCK = 2**20  # GET body piece over TLS
IDLE_TIMEOUT = 300.0  # seconds a connection may sit without sending anything we wait for
HANDSHAKE_TIMEOUT = 30.0
SMALL_BODY = 2**16  # an unexpected body up to this size is read and dropped


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily,
                 config: ServerConfig, tls: ssl.SSLContext | None) -> None:
        self.address_family = family
        self.config = config
        self.tls = tls
        self.uploads: Registry | None = (
            Registry(config.root, config.upload_expiry) if config.upload_sessions else None)
        self.services = Services(config, files.ChecksumCache(), Counters(), self.uploads)
        self.janitor = Janitor(config.root, config.upload_expiry)  # part files left behind
        self.log_lock = threading.Lock()
        self._live_lock = threading.Lock()
        self._live: dict[int, socket.socket] = {}
        self._conn_threads: set[threading.Thread] = set()
        self.stopping = False
        super().__init__(address, RequestHandler)

    @property
    def counters(self) -> Counters:
        return self.services.counters

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), a DNS lookup that can hang; skip it.
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
            RequestHandler(sock, client_address, self)
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
            lingering_close(sock)
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


class RequestHandler(BaseHTTPRequestHandler):
    """One connection; each request on it is an :class:`Exchange` for the route's handler."""

    protocol_version = "HTTP/1.1"
    server_version = f"dtnkit/{__version__}"
    sys_version = ""
    timeout = IDLE_TIMEOUT
    server: HttpServer

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
        method = printable(self.command or "-")
        self.server.counters.add("requests", 1)
        self.server.write_log(f'{self.client_address[0]} "{method} {self.log_target}" '
                              f"{self._status} {self._bytes} {seconds:.3f}s")

    # --- dispatch -----------------------------------------------------------------------

    def handle_expect_100(self) -> bool:
        # Check the token and the path before inviting the client to send a body.
        try:
            routes.before_continue(self)
        except (HttpError, BadInput) as exc:
            self._fail(exc)
            return False
        ok = super().handle_expect_100()
        self._headers_sent = False  # "100 Continue" is not the response
        return ok

    def run(self, route: routes.Route) -> None:
        try:
            te = self.headers.get("Transfer-Encoding")
            if te is not None and te.strip().lower() != "chunked":
                self.close_connection = True
                raise HttpError(501, f"Transfer-Encoding {te!r}", "only chunked is supported")
            if route.drops_body and self.body_pending():
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
            self.server.write_log(f"internal error on {self.command} {self.log_target}:\n"
                                  + traceback.format_exc(), force=True)
            self.close_connection = True
            self._fail(HttpError(500, f"{self.command} {self.log_target}",
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
        what = printable(self.command) if getattr(self, "command", None) else "request"
        why = "method not supported by dtnkit serve" if code == 501 else message or reason
        self.close_connection = True
        self._send_text(code, f"{what}: {why}\n", ())

    def _send_text(self, status: int, text: str, headers: HeaderList) -> None:
        body = text.encode("utf-8", "replace")
        if self.body_pending():
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

    # --- Exchange: the request ------------------------------------------------------------

    @property
    def method(self) -> str:
        return self.command

    @property
    def services(self) -> Services:
        return self.server.services

    @property
    def log_target(self) -> str:
        """The request path without its query (which may carry a token), printable."""
        return printable(getattr(self, "path", "-").split("?", 1)[0])

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
        access.authorize(self.server.config, self.headers.get("Authorization"), need,
                         f"{self.command} {self.log_target}")

    def content_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        if value is None:
            return None
        if not value.strip().isdigit():
            self.close_connection = True
            raise HttpError(400, "Content-Length", f"{value!r} is not a byte count")
        return int(value)

    def is_chunked(self) -> bool:
        return "chunked" in self.headers.get("Transfer-Encoding", "").lower()

    def body_pending(self) -> bool:
        if self._body_done or getattr(self, "headers", None) is None:
            return False
        if self.is_chunked():
            return True
        try:
            return int(self.headers.get("Content-Length", "0")) > 0
        except ValueError:
            return True

    def read_small_body(self, limit: int) -> bytes:
        if self.is_chunked():
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
        length = self.content_length() or 0
        if length > limit:
            raise HttpError(413, f"{self.command} body", f"is larger than {limit} bytes")
        data = self.rfile.read(length)
        if len(data) != length:
            raise BodyError(f"the body broke off after {len(data)} of {length} bytes")
        self._body_done = True
        return data

    def discard_body(self) -> None:
        length = self.headers.get("Content-Length", "")
        if (length.isdigit() and int(length) <= SMALL_BODY
                and "Transfer-Encoding" not in self.headers):
            self.read_small_body(SMALL_BODY)

    def read_body(self, sink: Sink) -> int:
        if self.is_chunked():
            return self._read_chunked(sink)
        length = self.content_length()
        if length is None:
            raise HttpError(411, f"{self.command} {self.log_target}",
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
                raise BodyError(broke.format(0, length))
            sink(memoryview(first))
            remaining -= len(first)
        buf = bytearray(min(RECV_BLOCK, max(remaining, 1)))
        view = memoryview(buf)
        while remaining:
            n = self.connection.recv_into(view, min(remaining, len(buf)))
            if not n:
                raise BodyError(broke.format(length - remaining, length))
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
                raise BodyError("a chunk-size line is missing or too long")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BodyError(f"bad chunk-size line {line[:40]!r}") from None
            if size < 0:
                raise BodyError("negative chunk size")
            if size == 0:
                break
            while size:
                n = self.rfile.readinto(view[:min(size, len(buf))])
                if not n:
                    raise BodyError(f"the body broke off after {total} bytes")
                sink(view[:n])
                size -= n
                total += n
            if self.rfile.read(2) != b"\r\n":
                raise BodyError("a chunk does not end with CRLF")
        while True:  # trailer section
            line = self.rfile.readline(8192)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise BodyError("the chunked body broke off in its trailers")
        self._body_done = True
        return total

    # --- Exchange: the answer --------------------------------------------------------------

    def send_head(self, status: int, headers: HeaderList = ()) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def send_empty(self, status: int, headers: HeaderList = ()) -> None:
        self.send_head(status, [*headers, ("Content-Length", "0")])

    def send_bytes(self, status: int, headers: HeaderList, body: bytes, *,
                   head: bool = False) -> None:
        self.send_head(status, [*headers, ("Content-Length", str(len(body)))])
        if not head:
            self.wfile.write(body)
            self._bytes += len(body)

    def send_file(self, f: FileLike, start: int, count: int) -> int:
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
        return sent

    def _send_tls(self, fd: int, start: int, count: int) -> int:
        sent = 0
        for view in pl.read_chunks(fd, start, count, TLS_BLOCK):
            self.connection.sendall(view)
            sent += len(view)
        return sent

    def start_chunked(self, status: int, headers: HeaderList = ()) -> None:
        self.send_head(status, [*headers, ("Transfer-Encoding", "chunked")])

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

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


def _dispatcher(route: routes.Route) -> Callable[[RequestHandler], None]:
    def do(self: RequestHandler) -> None:
        self.run(route)

    do.__name__ = f"do_{route.method}"
    return do


for _route in routes.ROUTES:  # BaseHTTPRequestHandler looks up do_<METHOD>
    setattr(RequestHandler, f"do_{_route.method}", _dispatcher(_route))


def lingering_close(sock: socket.socket, *, seconds: float = 2.0,
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


# --- public API ---------------------------------------------------------------------------


class ServerHandle:
    """A running server: ``.url``, ``.port``, ``.stop()``; a context manager."""

    def __init__(self, server: HttpServer, thread: threading.Thread, url: str) -> None:
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
        self._server.janitor.close()
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
                 upload_expiry: float = DEFAULT_EXPIRY,
                 tpc_allow: Iterable[str] = (), limits: Limits | None = None) -> ServerHandle:
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
                          upload_sessions=upload_sessions, upload_expiry=upload_expiry,
                          tpc_allow=AllowList.parse(tpc_allow), limits=limits or Limits())
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        server = HttpServer((host, port), family, config, context)
    except OSError as exc:
        raise DtnkitError(f"cannot listen on {host} port {port}", exc.strerror or str(exc),
                          "choose another --port or --host") from None
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True, name="dtnkit-serve")
    thread.start()
    scheme = "https" if context is not None else "http"
    shown = f"[{host}]" if ":" in host else host
    return ServerHandle(server, thread, f"{scheme}://{shown}:{server.server_port}/")
