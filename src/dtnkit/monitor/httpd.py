"""The HTTP(S) server of ``dtnkit exporter``: the connection layer of ``dtnkit serve``
(:mod:`dtnkit.transfer.server.conn`) in front of one WSGI application (prometheus_client's
``make_wsgi_app``, behind basic auth when the web config asks for it).

Why not prometheus_client's ``start_http_server``: it gives every connection a thread that
waits for the request head without a timeout, and with TLS it runs the handshake in its
accepting thread, so one silent TCP connection stops every HTTPS scrape.  Here one selector
thread accepts, runs TLS handshakes without blocking, reads request heads under a deadline
and parks idle keep-alive connections; a few workers answer complete requests.  The limits
are those of ``dtnkit serve``: a connection cap derived from the descriptor limit, a share
of it per client address, a deadline for the handshake and head, an idle timeout.
"""

from __future__ import annotations

import contextlib
import io
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from dtnkit.errors import BadInput
from dtnkit.transfer.server import conn, http11

WORKERS = 4  # scrapes answered at once (a collection is CPU work: more would only queue)
IO_TIMEOUT = 30.0  # seconds one send of an answer may take
SERVER = "dtnkit-exporter"

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class Settings:
    """The exporter's connection limits (``dtnkit exporter`` flags); None: derived."""

    max_connections: int | None = None
    max_per_client: int | None = None
    head_timeout: float = conn.HEAD_TIMEOUT
    idle_timeout: float = conn.IDLE_TIMEOUT
    log: TextIO | None = None  # where the limits' log lines go (default stderr)


class ExporterServer:
    """A running server: ``server_address``, ``shutdown()``, ``server_close()`` (the shape
    of the ``socketserver`` object ``start_http_server`` returns)."""

    def __init__(
        self,
        app: App,
        addr: str,
        port: int,
        tls: ssl.SSLContext | None,
        settings: Settings | None = None,
    ) -> None:
        settings = settings or Settings()
        max_connections, max_per_client = settings.max_connections, settings.max_per_client
        head_timeout, idle_timeout = settings.head_timeout, settings.idle_timeout
        self.app = app
        self.log_to = settings.log if settings.log is not None else sys.stderr
        self.url_scheme = "https" if tls is not None else "http"
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((addr, port))
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        self.server_address = listener.getsockname()[:2]
        cap = conn.derive_cap(conn.raise_fd_limit(), conn.open_fds(), WORKERS)
        if max_connections is not None:
            cap = max(1, min(cap, max_connections))
        self.limits = conn.ConnLimits(
            max_connections=cap,
            max_per_client=max_per_client,
            head_timeout=head_timeout,
            idle_timeout=idle_timeout,
            io_timeout=IO_TIMEOUT,
            workers=WORKERS,
        )
        self.hub = conn.Hub(listener, tls, self.limits, self._serve, self._log, _close)
        self._log_lock = threading.Lock()
        self.hub.start()

    def connections(self) -> int:
        return self.hub.count()

    def shutdown(self) -> None:
        self.hub.stop_accepting()
        self.hub.wait_idle(5.0)
        self.hub.cut(5.0)

    def server_close(self) -> None:
        pass  # the listening socket is closed by shutdown()

    def _log(self, line: str, force: bool = False) -> None:
        if not force:  # per-connection lines (a failed handshake): not for an exporter's log
            return
        with self._log_lock, contextlib.suppress(OSError, ValueError):
            self.log_to.write(line.replace("dtnkit serve:", "dtnkit exporter:").rstrip("\n") + "\n")
            self.log_to.flush()

    def _serve(self, c: conn.Conn) -> bool:
        """Answer the request whose head is in ``c.buf``; True to keep the connection."""
        c.sock.settimeout(IO_TIMEOUT)
        rest = c.buf[c.head_len :]
        keep = False
        try:
            if c.error is not None:
                raise c.error
            request = http11.parse_head(c.buf[: c.head_len])
            if request.chunked or request.content_length:
                raise http11.BadRequest(400, "a scrape has no request body")
            status, headers, body = self._call(request, c.peer)
            keep = request.keep_alive and not self.hub.stopping
            if not keep:
                headers.append(("Connection", "close"))
            if request.method == "HEAD":
                body = b""
            c.sock.sendall(http11.response_head(status, headers) + body)
        except http11.BadRequest as exc:
            text = f"request: {exc.why}\n".encode()
            with contextlib.suppress(OSError):
                c.sock.sendall(
                    http11.response_head(
                        exc.status,
                        [
                            ("Server", SERVER),
                            ("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(text))),
                            ("Connection", "close"),
                        ],
                    )
                    + text
                )
            keep = False
        except (OSError, ValueError):
            keep = False
        c.buf = rest
        return keep

    def _call(self, request: http11.Request, peer: str) -> tuple[int, list[tuple[str, str]], bytes]:
        """Run the WSGI application for *request*; its status, headers and body."""
        path, _, query = request.target.partition("?")
        if path.startswith(("http://", "https://")):
            path = "/" + path.split("/", 3)[-1] if path.count("/") >= 3 else "/"
        environ: dict[str, Any] = {
            "REQUEST_METHOD": "GET" if request.method == "HEAD" else request.method,
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": str(self.server_address[0]),
            "SERVER_PORT": str(self.server_address[1]),
            "REMOTE_ADDR": peer,
            "SERVER_PROTOCOL": f"HTTP/{request.version[0]}.{request.version[1]}",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": self.url_scheme,
            "wsgi.input": io.BytesIO(),
            "wsgi.errors": self.log_to,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in request.headers.items():
            key = name.upper().replace("-", "_")
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = "HTTP_" + key
            environ[key] = value
        answer: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], None]:
            answer[:] = [status, headers]
            return lambda data: None

        body = b"".join(self.app(environ, start_response))
        status_text, headers = answer
        out = [(k, v) for k, v in headers if k.lower() not in ("content-length", "connection")]
        out += [("Server", SERVER), ("Content-Length", str(len(body)))]
        return int(status_text.split(" ", 1)[0]), out, body


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    sock.close()


def tls_context(cert: str, key: str, client_ca: str | None) -> ssl.SSLContext:
    """A server TLS context (TLS 1.2 or later); client certificates required with
    *client_ca*.  BadInput (one line) when a file cannot be used."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise BadInput(
            "TLS",
            f"Cannot load server certificate file {cert} or its private "
            f"key file {key} ({exc.__class__.__name__}: {exc})",
            "check --cert and --key",
        ) from None
    if client_ca is not None:
        try:
            ctx.load_verify_locations(client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise BadInput(
                "TLS",
                f"Cannot load client CA file {client_ca} ({exc.__class__.__name__}: {exc})",
                "check --client-ca",
            ) from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
