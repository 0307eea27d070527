"""A malicious HTTP server for client tests: real sockets on 127.0.0.1, port 0, raw bytes out.

Each test gives a *script*: a function from the parsed :class:`Request` to a :class:`Reply`
(any status line, any headers, repeated or contradictory ones included, any body, sent at a
chosen rate).  Nothing is checked or fixed up on the way out: a negative ``Content-Length``,
a ``Content-Range`` for other bytes or an XML bomb go to the client exactly as written.
Keep-alive follows the reply's ``close`` flag.  The server records every request it got, and
:meth:`HostileServer.stop` ends the connection threads (no daemon thread outlives a test).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass
class Request:
    method: str
    target: str  # the request target as sent, query included
    headers: dict[str, str]  # lower-cased names; the last of a repeated header
    body: bytes


@dataclass
class Reply:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    #: body bytes per second (None: at once); sent one byte at a time at that pace
    trickle: float | None = None
    #: add Content-Length of the body unless the headers already name one
    trickle_head: bool = False  # the status line and headers at the trickle's pace too
    length: bool = True
    close: bool = False  # close the connection after this reply

    def head(self) -> bytes:
        lines = [f"HTTP/1.1 {self.status} Hostile"]
        names = {k.lower() for k, _v in self.headers}
        lines += [f"{k}: {v}" for k, v in self.headers]
        if self.length and "content-length" not in names:
            lines.append(f"Content-Length: {len(self.body)}")
        if self.close:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")  # raw, whatever it is


Script = Callable[[Request], Reply]


class HostileServer:
    """A raw HTTP/1.1 server whose answers are the test's *script*."""

    def __init__(self, script: Script, context: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.context = context
        self.requests: list[Request] = []
        self.accepted = 0  # connections accepted (TLS handshakes tried, for a TLS server)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._accept = threading.Thread(target=self._serve, name="hostile-accept")
        self._accept.start()

    @property
    def base(self) -> str:
        return f"{'https' if self.context else 'http'}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def methods(self) -> list[str]:
        with self._lock:
            return [r.method for r in self.requests]

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _addr = self._listener.accept()
            except OSError:
                return
            t = threading.Thread(target=self._connection, args=(conn,), name="hostile-conn")
            with self._lock:
                self.accepted += 1
                self._conns.append(conn)
                self._threads.append(t)
            t.start()

    def _connection(self, raw: socket.socket) -> None:
        conn = raw
        try:
            if self.context is not None:
                conn = self.context.wrap_socket(raw, server_side=True)
                with self._lock:
                    self._conns.append(conn)
            reader = conn.makefile("rb")
            while not self.stopping.is_set():
                request = self._read(reader)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                reply = self.script(request)
                if reply.trickle_head and reply.trickle is not None:
                    self._trickle(conn, reply.head(), reply.trickle)
                else:
                    conn.sendall(reply.head())
                if request.method != "HEAD":
                    self._send_body(conn, reply)
                if reply.close:
                    return
        except (OSError, ValueError):
            return
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _send_body(self, conn: socket.socket, reply: Reply) -> None:
        if reply.trickle is None:
            conn.sendall(reply.body)
            return
        self._trickle(conn, reply.body, reply.trickle)

    def _trickle(self, conn: socket.socket, data: bytes, rate: float) -> None:
        pause = 1.0 / rate
        for i in range(len(data)):
            if self.stopping.wait(pause):  # the pace of a trickling server, not a sync
                return
            conn.sendall(data[i : i + 1])

    @staticmethod
    def _read(reader: object) -> Request | None:
        readline = reader.readline  # type: ignore[attr-defined]
        line = readline(65537)
        if not line:
            return None
        method, target, _version = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = readline(65537)
            if raw in (b"\r\n", b"\n", b""):
                break
            key, _sep, value = raw.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        body = reader.read(length) if length > 0 else b""  # type: ignore[attr-defined]
        return Request(method, target, headers, body)

    def stop(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
        with contextlib.suppress(OSError):
            self._listener.close()
        self._accept.join(5)
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                c.close()
        for t in threads:
            t.join(5)


@contextlib.contextmanager
def hostile(script: Script, context: ssl.SSLContext | None = None) -> Iterator[HostileServer]:
    server = HostileServer(script, context)
    try:
        yield server
    finally:
        server.stop()


def multistatus(own: str, members: list[tuple[str, bool, int]]) -> bytes:
    """A 207 body listing *own* (a collection) and *members* ``(href, is_dir, size)`` with
    hrefs exactly as given (not encoded or checked)."""
    parts = ['<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">']
    for href, is_dir, size in [(own, True, 0), *members]:
        kind = (
            "<D:resourcetype><D:collection/></D:resourcetype>"
            if is_dir
            else f"<D:resourcetype/><D:getcontentlength>{size}</D:getcontentlength>"
        )
        parts.append(
            f"<D:response><D:href>{href}</D:href><D:propstat><D:prop>{kind}"
            "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
        )
    parts.append("</D:multistatus>")
    return "\n".join(parts).encode()


def ranged(data: bytes, etag: str = '"e1"') -> Script:
    """An honest file server for *data* at any path (HEAD, GET with one Range): the base the
    tests make hostile in one place."""

    def script(req: Request) -> Reply:
        base = [
            ("ETag", etag),
            ("Accept-Ranges", "bytes"),
            ("Last-Modified", "Tue, 01 Dec 2026 00:00:00 GMT"),
            ("Content-Type", "application/octet-stream"),
        ]
        if req.method == "HEAD":
            digest = (
                [("Digest", f"adler32={zlib.adler32(data):08x}")]
                if "want-digest" in req.headers
                else []
            )
            return Reply(200, [*base, *digest, ("Content-Length", str(len(data)))])
        rng = req.headers.get("range")
        if req.method == "GET" and rng:
            first, _sep, last = rng.removeprefix("bytes=").partition("-")
            a, b = int(first), min(int(last), len(data) - 1)
            return Reply(
                206, [*base, ("Content-Range", f"bytes {a}-{b}/{len(data)}")], data[a : b + 1]
            )
        if req.method == "GET":
            return Reply(200, base, data)
        return Reply(405, [], b"no")

    return script
