"""The ends of a move.

Block sources: :class:`HttpRangeSource` (``GET`` with ``Range`` + ``If-Range``) and
:class:`LocalFileSource` (``pread``).  Block sinks: :class:`FileSink` (``pwrite`` into a part
file or a character device) and :class:`SessionSink` (``PUT`` + ``Content-Range`` into an
upload session).  The engine (:mod:`~dtnkit.transfer.client.engine`) pairs any source with
any sink on its streams: a download is HTTP ranges -> file, a multi-stream upload is local
file -> session, a relay is HTTP ranges -> session.  One ``PUT`` of a whole body, without
blocks, is :mod:`~dtnkit.transfer.client.oneput`'s.
"""

from __future__ import annotations

import http.client
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from dtnkit.host.parsers import is_uint
from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.checksum import Buffer
from dtnkit.transfer.client.answers import check_content_range
from dtnkit.transfer.client.blocks import BlockBuffer, BufferPool, pwrite_all, read_back
from dtnkit.transfer.client.errors import (
    FatalHttp,
    Refused,
    Retryable,
    SessionLost,
    TransferError,
    reason,
)
from dtnkit.transfer.client.session import MAX_ANSWER, Session, Url, check_status
from dtnkit.transfer.wire.digests import format_digest
from dtnkit.transfer.wire.upload import ID_HEADER

# =========================================================================== sources


def fetch_range(
    session: Session,
    url: Url,
    etag: str | None,
    b: pipeline.Block,
    buf: BlockBuffer,
    conn: http.client.HTTPConnection,
    *,
    label: str,
    size: int | None = None,
) -> memoryview:
    """``GET`` block *b* of *url* on *conn* into *buf*; the filled view.

    The ``206`` must carry the ``Content-Range`` of exactly *b* (of *size* when known):
    :func:`~dtnkit.transfer.client.answers.check_content_range`.  *label* names the block in
    messages.
    """
    hdrs = {"Range": f"bytes={b.offset}-{b.end}"}
    if etag:
        hdrs["If-Range"] = etag
    conn.request("GET", url.path, headers=session.headers(hdrs))
    r = conn.getresponse()
    if r.status >= 500:
        r.read()
        raise Retryable(f"GET {url} {label}: HTTP {r.status}")
    if r.status != 206:
        body = r.read(4096)
        if r.status == 200:
            raise FatalHttp(
                f"GET {url}",
                "the server sent the whole file instead of a "
                "range (the source changed during the copy?)",
                "retry the copy",
            )
        check_status(r.status, f"GET {url}", body, ok=(206,))
    check_content_range(r.getheader("Content-Range"), b.offset, b.end, size, f"GET {url} {label}")
    view = memoryview(buf)[: b.length]
    got = 0
    while got < b.length:
        n = r.readinto(view[got:])
        if not n:
            raise Retryable(f"GET {url} {label}: connection closed after {got} of {b.length} bytes")
        got += n
    if r.read(1):
        raise Retryable(f"GET {url} {label}: longer than asked")
    return view


class HttpRangeSource:
    """Blocks of a remote file, fetched with ``Range`` (and ``If-Range`` on its ETag).

    Received by the engine's streams on their own connections (a download's
    :class:`~dtnkit.transfer.client.engine.ReceiveLane`), or read block by block
    (:meth:`read`) on keep-alive connections of its own, one per thread, with the run's
    retries, when the streams belong to a networked sink (a relay).
    """

    thread_name = "dtnkit-stream"

    def __init__(
        self, session: Session, url: Url, etag: str | None, size: int | None = None
    ) -> None:
        self.session, self.url, self.etag = session, url, etag
        self.size = size  # the file's size from the HEAD: every 206's total must be it
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.retries = 0  # retries of read(); the streams count their own

    def give_up(self, b: pipeline.Block, attempts: int, exc: BaseException) -> TransferError:
        return TransferError(
            f"GET {self.url}",
            f"block {b.index} failed after {attempts} attempts ({exc})",
            "check that the server is up; raise --retries or --stall-timeout",
        )

    def read(self, b: pipeline.Block, buf: BlockBuffer) -> memoryview:
        def once() -> memoryview:
            conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
            if conn is None:
                conn = self.session.connect()
                self._local.conn = conn
                with self._lock:
                    self._all.append(conn)
            return fetch_range(
                self.session,
                self.url,
                self.etag,
                b,
                buf,
                conn,
                label=f"range {b.offset}-{b.end}",
                size=self.size,
            )

        def drop() -> None:
            conn = getattr(self._local, "conn", None)
            if conn is not None:
                conn.close()
            self._local.conn = None

        def retried() -> None:
            with self._lock:
                self.retries += 1

        return self.session.run.request.retry.call(
            f"GET {self.url}",
            once,
            cleanup=drop,
            retried=retried,
            give_up=lambda attempts, exc: TransferError(
                f"GET {self.url}",
                f"range {b.offset}-{b.end} failed after {attempts} attempts ({exc})",
                "check that the source server is up",
            ),
        )

    def read_back(self, b: pipeline.Block) -> Buffer:
        return self.read(b, bytearray(b.length))

    def close(self) -> None:
        with self._lock:
            for c in self._all:
                c.close()
            self._all.clear()


class LocalFileSource:
    """Blocks of a local file, read with ``pread`` into the given buffer."""

    def __init__(self, fd: int, path: Path | str) -> None:
        self.fd, self.path = fd, path

    def read(self, b: pipeline.Block, buf: BlockBuffer) -> memoryview:
        view = memoryview(buf)[: b.length]
        got = pipeline.pread_into(self.fd, view, b.offset)
        if got < b.length:
            raise TransferError(
                f"source {self.path}",
                f"ended at {b.offset + got} bytes",
                "do not modify files while copying them",
            )
        return view

    def read_back(self, b: pipeline.Block) -> Buffer:
        return read_back(self.fd, b)

    def chunks(self, size: int, chunk: int) -> Iterator[memoryview]:
        """The whole file in order, for one PUT."""
        return pipeline.read_chunks(self.fd, 0, size, chunk)


class ReadBlock(Protocol):
    """A source that fills a block without the move loop's connections."""

    def read(self, b: pipeline.Block, buf: BlockBuffer) -> memoryview: ...


# =========================================================================== sinks

#: The longest answer head a pipelined upload stream reads.
_MAX_HEAD = 65536


class FileSink:
    """A local file written at block offsets: a part file, or a character device."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: memoryview, offset: int) -> None:
        pwrite_all(self.fd, data, offset)

    def read_back(self, b: pipeline.Block, pool: BufferPool | None = None) -> Buffer:
        return read_back(self.fd, b, pool)


class SessionSink:
    """An upload session: each block a ``PUT`` with ``Content-Range`` on a stream's connection,
    with its adler32/crc32c value as a ``Digest`` when *range_digest* (the server checks each
    range, so a corrupted one is re-sent alone).

    The requests are pipelined (HTTP/1.1): :meth:`send` writes a block's request and
    :meth:`answer` reads the answers in order, so a stream sends its next block while the
    answer to the one before is on its way (the engine's
    :class:`~dtnkit.transfer.client.engine.SendLane`)."""

    thread_name = "dtnkit-up"

    def __init__(
        self,
        session: Session,
        url: Url,
        ident: str,
        size: int,
        algorithm: str,
        range_digest: bool,
        resume: bool,
    ) -> None:
        self.session, self.url, self.ident, self.size = session, url, ident, size
        self.algorithm, self.range_digest, self.resume = algorithm, range_digest, resume
        # per connection: its socket, and the bytes received past the last answer
        self._readers: weakref.WeakKeyDictionary[
            http.client.HTTPConnection, tuple[object, bytearray]
        ] = weakref.WeakKeyDictionary()

    def send(
        self,
        conn: http.client.HTTPConnection,
        b: pipeline.Block,
        data: memoryview,
        value: int | None,
    ) -> None:
        """Write block *b*'s request (head and body) without waiting for any answer."""
        name = self.algorithm
        hdrs = {
            ID_HEADER: self.ident,
            "Content-Range": f"bytes {b.offset}-{b.end}/{self.size}",
            "Content-Length": str(b.length),
            "Content-Type": "application/octet-stream",
        }
        if value is not None and self.range_digest:
            hdrs["Digest"] = format_digest(name, checksum.to_bytes(name, value))
        if conn.sock is None:
            conn.connect()
        host = self.url.host if ":" not in self.url.host else f"[{self.url.host}]"
        lines = [
            f"PUT {self.url.path} HTTP/1.1",
            f"Host: {host}:{self.url.port}",
            *(f"{k}: {v}" for k, v in self.session.headers(hdrs).items()),
            "",
            "",
        ]
        head = "\r\n".join(lines).encode("latin-1")
        conn.sock.sendall(head)
        conn.sock.sendall(data)

    def answer(self, conn: http.client.HTTPConnection, b: pipeline.Block) -> None:
        """Read the answer to block *b*'s request, the oldest unanswered on *conn*."""
        status, body = self._read_answer(conn, f"PUT {self.url} range {b.offset}-{b.end}")
        if status in (200, 201, 204):
            return
        # 412: the range's digest did not match (corrupted on the way); 409: it overlaps a
        # range the server still receives on a connection that died
        if status >= 500 or status in (409, 412):
            why = f"PUT {self.url} range {b.offset}-{b.end}: HTTP {status} {reason(body)}"
            raise Retryable(why) if conn.sock is None else Refused(why)
        if status in (404, 410):
            raise SessionLost(f"PUT {self.url}: HTTP {status} {reason(body)}")
        check_status(status, f"PUT {self.url} range {b.offset}-{b.end}", body, ok=(200, 201, 204))

    def _read_answer(self, conn: http.client.HTTPConnection, what: str) -> tuple[int, bytes]:
        """(status, body) of the next answer on *conn*, read with ``recv`` into a buffer of
        this connection's (what arrived past the answer waits there for the next one)."""
        sock = conn.sock
        if sock is None:
            raise Retryable(f"{what}: the connection was closed")
        held = self._readers.get(conn)
        buf = held[1] if held is not None and held[0] is sock else bytearray()
        self._readers[conn] = (sock, buf)

        def more() -> None:
            data = sock.recv(65536)
            if not data:
                raise Retryable(f"{what}: the connection closed before the whole answer")
            buf.extend(data)

        while True:
            while (end := buf.find(b"\r\n\r\n")) < 0:
                if len(buf) > _MAX_HEAD:
                    raise Retryable(f"{what}: an answer head longer than {_MAX_HEAD} bytes")
                more()
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            parts = lines[0].split(None, 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise Retryable(f"{what}: not an HTTP status line: {lines[0][:80]!r}")
            status = int(parts[1])
            if status != 100:
                break
        headers = {
            k.strip().lower(): v.strip()
            for k, _sep, v in (line.partition(":") for line in lines[1:])
        }
        length = headers.get("content-length", "0")
        if not is_uint(length) or int(length) > MAX_ANSWER:
            raise Retryable(f"{what}: an answer with Content-Length {length[:40]!r}")
        while len(buf) < int(length):
            more()
        body = bytes(buf[: int(length)])
        del buf[: int(length)]
        if headers.get("connection", "").lower() == "close":
            conn.close()  # the server ends the connection: later blocks go on a new one
        return status, body

    def give_up(self, b: pipeline.Block, attempts: int, exc: BaseException) -> TransferError:
        return TransferError(
            f"PUT {self.url}",
            f"range {b.offset}-{b.end} failed after {attempts} attempts ({exc})",
            (
                "rerun the same command to resume (the ranges already sent are kept on the "
                "server); "
                if self.resume
                else ""
            )
            + "check that the server is up; raise --retries or --stall-timeout",
        )
