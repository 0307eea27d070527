"""The single-stream receive path over real sockets: one GET per contiguous run of blocks, the
socket read while the writer is held, a broken GET resumed from the first missing block, and
a 206 for another range refused.

A counting TCP relay between the client and a real in-process ``dtnkit serve`` sees every
request line; synchronisation is by events, never by sleeping.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import os
import random
import re
import socket
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.relay import Relay

from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.ends import FileSink, HttpRangeSource
from dtnkit.transfer.client.engine import move, runs
from dtnkit.transfer.client.errors import BadAnswer
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url
from dtnkit.transfer.server import ServerHandle, start_server

BLOCK = 64 * 1024
NBLOCKS = 12
SIZE = NBLOCKS * BLOCK - 1000  # the last block is shorter


def payload(size: int = SIZE, seed: int = 13) -> bytes:
    return random.Random(seed).randbytes(size)


def opts(**kw: object) -> CopyRequest:
    base: dict[str, object] = {
        "block_size": BLOCK,
        "streams": 1,
        "backoff": 0.01,
        "retries": 2,
        "stall_timeout": 10.0,
    }
    base.update(kw)
    return CopyRequest(**base)  # type: ignore[arg-type]


class CountingRelay(Relay):
    """127.0.0.1:port -> the server; keeps every request line the client sent, and cuts the
    first connection whose answer reaches ``cut_after`` bytes (once)."""

    def __init__(self, target: int) -> None:
        self.cut_after: int | None = None
        self.cut = threading.Event()
        self.requests: list[str] = []
        self.connections = 0
        super().__init__(target)

    def connected(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            self.connections += 1
        threading.Thread(target=self._up, args=(client, upstream), daemon=True).start()
        threading.Thread(target=self._down, args=(upstream, client), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket) -> None:
        seen = b""
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                seen += data
                upstream.sendall(data)
                # a download's requests have no bodies: the stream is request heads only
                heads = seen.split(b"\r\n\r\n")
                seen = heads.pop()
                with self._lock:
                    self.requests += [h.decode("latin-1") for h in heads]
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _down(self, upstream: socket.socket, client: socket.socket) -> None:
        sent = 0
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if (
                    self.cut_after is not None
                    and not self.cut.is_set()
                    and sent + len(data) >= self.cut_after
                ):
                    client.sendall(data[: self.cut_after - sent])
                    self.cut.set()
                    client.shutdown(socket.SHUT_RDWR)
                    return
                client.sendall(data)
                sent += len(data)
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_WR)

    def gets(self) -> list[str]:
        """The Range of each GET, in order ("" for a GET without one)."""
        with self._lock:
            heads = [h for h in self.requests if h.startswith("GET ")]
        out = []
        for h in heads:
            m = re.search(r"^Range: *(\S+)", h, re.M | re.I)
            out.append(m.group(1) if m else "")
        return out


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, Path, CountingRelay]]:
    root = tmp_path / "srv"
    root.mkdir()
    handle = start_server(root, host="127.0.0.1", port=0, anonymous_read=True, quiet=True)
    relay = CountingRelay(handle.port)
    try:
        yield handle, root, relay
    finally:
        relay.close()
        handle.stop()


def test_runs_of_contiguous_blocks() -> None:
    blocks = pl.plan_blocks(10 * BLOCK + 5, BLOCK)
    todo = [blocks[i] for i in (0, 1, 3, 4, 5, 8, 10)]
    assert runs(todo) == {
        0: 2 * BLOCK - 1,
        1: 2 * BLOCK - 1,
        3: 6 * BLOCK - 1,
        4: 6 * BLOCK - 1,
        5: 6 * BLOCK - 1,
        8: 9 * BLOCK - 1,
        10: 10 * BLOCK + 4,
    }
    assert runs([]) == {}


@pytest.mark.parametrize(
    ("checksum", "verify"), [("adler32", "block"), ("md5", "block"), ("adler32", "none")]
)
def test_one_stream_fetches_the_file_with_one_get(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path, checksum: str, verify: str
) -> None:
    """Before: one ranged GET per block (12 here), each a round trip with the path idle."""
    _handle, root, relay = served
    data = payload()
    (root / "f.bin").write_bytes(data)
    dst = tmp_path / "f.bin"
    summary = copy(
        f"http://127.0.0.1:{relay.port}/f.bin", str(dst), opts(checksum=checksum, verify=verify)
    )
    assert dst.read_bytes() == data
    assert relay.gets() == [""]  # the whole file, no Range: the first request is the GET
    assert summary.files[0].retries == 0
    # one connection: no HEAD (the GET's answer gives the size) and no digest request (a
    # small file's digest comes with the GET)
    assert relay.connections == 1
    if verify == "block":
        assert summary.files[0].digest is not None


def test_a_cut_get_resumes_from_the_first_missing_block(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path
) -> None:
    _handle, root, relay = served
    data = payload()
    (root / "c.bin").write_bytes(data)
    relay.cut_after = 5 * BLOCK + BLOCK // 2  # the answer's head plus 5.5 blocks, about
    dst = tmp_path / "c.bin"
    summary = copy(f"http://127.0.0.1:{relay.port}/c.bin", str(dst), opts())
    assert relay.cut.is_set()
    assert dst.read_bytes() == data
    assert summary.files[0].retries == 1
    # blocks 0-4 arrived whole before the cut: the second GET asks for the rest only
    assert relay.gets() == ["", f"bytes={5 * BLOCK}-{SIZE - 1}"]


def test_a_resume_asks_one_get_per_run_of_missing_blocks(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path
) -> None:
    _handle, root, relay = served
    data = payload()
    (root / "r.bin").write_bytes(data)
    url = Url.parse(f"http://127.0.0.1:{relay.port}/r.bin")
    run = CopyRun.of(opts())
    session = Session(url, run)
    info = session.head(url)
    blocks = pl.plan_blocks(SIZE, BLOCK)
    todo = [blocks[i] for i in (1, 2, 3, 6, 9, 10, 11)]
    part = tmp_path / "part"
    part.write_bytes(b"\0" * SIZE)
    fd = os.open(part, os.O_RDWR)
    done: set[int] = set()
    try:
        move(
            HttpRangeSource(session, url, info.etag),
            FileSink(fd),
            todo,
            run,
            run.streams.plan(session),
            size=SIZE,
            done=done,
        )
    finally:
        os.close(fd)
    assert done == {1, 2, 3, 6, 9, 10, 11}
    assert relay.gets() == [
        f"bytes={BLOCK}-{4 * BLOCK - 1}",
        f"bytes={6 * BLOCK}-{7 * BLOCK - 1}",
        f"bytes={9 * BLOCK}-{SIZE - 1}",
    ]
    got = part.read_bytes()
    for b in todo:
        assert got[b.offset : b.offset + b.length] == data[b.offset : b.offset + b.length]
    assert got[:BLOCK] == b"\0" * BLOCK  # block 0 was not asked for


class _LogSaysSent(io.StringIO):
    """The server's access log: sets ``sent`` when the GET's line is written (the server
    has handed the whole answer to its socket)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = threading.Event()

    def write(self, s: str) -> int:
        if '"GET ' in s:
            self.sent.set()
        return super().write(s)


class _HeldSink(FileSink):
    """A destination whose first write waits until *release* is set (a slow disk, or a
    hash that cannot keep up); ``released`` tells whether it was, rather than timed out."""

    def __init__(self, fd: int, release: threading.Event) -> None:
        super().__init__(fd)
        self.release = release
        self.released: bool | None = None

    def write(self, data: memoryview, offset: int) -> None:
        if self.released is None:
            self.released = self.release.wait(20.0)
        super().write(data, offset)


def test_the_socket_is_read_while_the_writer_is_held(tmp_path: Path) -> None:
    """Receiving goes on while the writer (and the hashing after it) is busy, so the kernel's
    receive buffer drains and the window stays open.  Before: the receiving thread wrote each
    chunk itself, so a held write stopped the socket: the server could not send the 48 MiB
    (far more than the sockets buffer) until the write was let go, here after 20 s."""
    root = tmp_path / "srv"
    root.mkdir()
    size = 48 * 2**20
    (root / "big").write_bytes(random.Random(3).randbytes(size))
    log = _LogSaysSent()
    handle = start_server(root, host="127.0.0.1", port=0, anonymous_read=True, log=log)
    try:
        url = Url.parse(f"{handle.url}big")
        run = CopyRun.of(opts(block_size=8 * 2**20))
        session = Session(url, run)
        info = session.head(url)
        blocks = pl.plan_blocks(size, run.request.block_size)
        part = tmp_path / "part"
        fd = os.open(part, os.O_RDWR | os.O_CREAT, 0o600)
        sink = _HeldSink(fd, log.sent)
        verifier = pl.make_verifier("adler32", blocks, lambda b: b"")
        try:
            move(
                HttpRangeSource(session, url, info.etag),
                sink,
                blocks,
                run,
                run.streams.plan(session),
                size=size,
                verifier=verifier,
            )
            got = verifier.digest()
        finally:
            os.close(fd)
        assert sink.released is True  # the server finished sending while the write waited
        assert part.read_bytes() == (root / "big").read_bytes()
        assert got == zlib.adler32((root / "big").read_bytes()).to_bytes(4, "big")
    finally:
        handle.stop()


class _WrongRange(http.server.BaseHTTPRequestHandler):
    """A server answering every GET with a 206 for another range than the one asked."""

    def log_message(self, format: str, *args: object) -> None:
        return

    def _head(self, status: int, extra: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in {
            "Content-Length": str(SIZE),
            "ETag": '"e1"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
            **extra,
        }.items():
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self) -> None:
        self._head(200, {})

    def do_GET(self) -> None:
        # as many bytes as asked for, but one byte further on in a longer file
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        # a GET without a Range (one stream's first request) asks for the whole file
        a, b = (int(m.group(1)), int(m.group(2))) if m is not None else (0, SIZE - 1)
        self._head(
            206,
            {
                "Content-Range": f"bytes {a + 1}-{b + 1}/{SIZE + 1}",
                "Content-Length": str(b - a + 1),
            },
        )
        self.wfile.write((payload() + b"x")[a + 1 : b + 2])


def test_a_206_for_another_range_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """Before: with --verify none the shifted bytes were committed (exit 0)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WrongRange)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dst = tmp_path / "w.bin"
        with pytest.raises(BadAnswer, match="Content-Range"):
            copy(
                f"http://127.0.0.1:{server.server_address[1]}/w.bin", str(dst), opts(verify="none")
            )
        assert sorted(p.name for p in tmp_path.iterdir()) == []
    finally:
        server.shutdown()
        server.server_close()


def test_stage_is_bounded_and_reports_the_consumer_error() -> None:
    hold = threading.Event()
    seen: list[int] = []

    def consume(n: int) -> None:
        hold.wait(10.0)
        if n == 3:
            raise OSError("disk full")
        seen.append(n)

    stage: pl.Stage[int] = pl.Stage(consume, 2, "test-stage")
    try:
        for n in range(3):  # one being consumed, two queued: none blocks
            stage.put(n)
        blocked = threading.Thread(target=stage.put, args=(3,), daemon=True)
        blocked.start()
        blocked.join(0.2)
        assert blocked.is_alive()  # the queue is full: the producer waits (back-pressure)
        hold.set()
        blocked.join(10.0)
        assert not blocked.is_alive()
        with pytest.raises(OSError, match="disk full"):
            stage.drain()
        with pytest.raises(OSError, match="disk full"):
            stage.put(4)
        assert seen == [0, 1, 2]
    finally:
        hold.set()
        stage.close()
