"""The ends of a move and the engine pairing them, over real sockets against `dtnkit serve`:
HTTP ranges -> file (a download), local file -> upload session (an upload), HTTP ranges ->
upload session (a relay), and one PUT fed chunk by chunk."""

from __future__ import annotations

import hashlib
import os
import random
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.transfer import checksum as cks
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer import tokens
from dtnkit.transfer.client import upload_session as us
from dtnkit.transfer.client.ends import (
    FileSink,
    HttpRangeSource,
    LocalFileSource,
    SessionSink,
)
from dtnkit.transfer.client.engine import move
from dtnkit.transfer.client.oneput import SinglePut, pump, response_chunks
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.wire import digests as dg
from dtnkit.transfer.wire import upload as wup

TOKEN = "tok-rw"
BLOCK = 4096
DATA = random.Random(3).randbytes(9 * BLOCK + 77)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[ServerHandle, ServerHandle]]:
    handles: list[ServerHandle] = []
    try:
        for name in ("a", "b"):
            root = tmp_path / name
            root.mkdir()
            handles.append(
                start_server(root, tokens=tokens.parse(f"{TOKEN} read,write\n"), quiet=True)
            )
        yield handles[0], handles[1]
    finally:
        for h in handles:
            h.stop()


#: the engine's streams in these tests
THREE = StreamPlan(3, 3)


def options(**kw: object) -> CopyRun:
    base: dict[str, object] = {
        "token": TOKEN,
        "block_size": BLOCK,
        "streams": 3,
        "backoff": 0.01,
        "retries": 1,
        "stall_timeout": 10.0,
    }
    base.update(kw)
    return CopyRun.of(CopyRequest(**base))  # type: ignore[arg-type]


def remote(handle: ServerHandle, name: str, opts: CopyRun) -> tuple[Session, Url]:
    url = Url.parse(handle.url + name)
    return Session(url, opts), url


def test_http_ranges_into_a_file(
    servers: tuple[ServerHandle, ServerHandle], tmp_path: Path
) -> None:
    a, _b = servers
    (a.root / "x.bin").write_bytes(DATA)
    opts = options(checksum="adler32")
    session, url = remote(a, "x.bin", opts)
    info = session.head(url)
    blocks = pl.plan_blocks(info.size, BLOCK)
    verifier = pl.make_verifier("adler32", blocks, lambda b: b"", opts.request.max_buffered)
    moved: list[int] = []
    opts.progress = moved.append
    done: set[int] = set()
    dst = tmp_path / "x.out"
    fd = os.open(dst, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, info.size)
        retries = move(
            HttpRangeSource(session, url, info.etag),
            FileSink(fd),
            blocks,
            opts,
            THREE,
            size=info.size,
            verifier=verifier,
            done=done,
        )
        digest = verifier.digest()
    finally:
        verifier.close()
        os.close(fd)
    assert retries == 0 and done == {b.index for b in blocks} and sum(moved) == len(DATA)
    assert dst.read_bytes() == DATA
    assert digest == cks.to_bytes("adler32", zlib.adler32(DATA))


@pytest.mark.parametrize("name", ["crc32c", "md5"])
def test_local_file_into_an_upload_session(
    servers: tuple[ServerHandle, ServerHandle], tmp_path: Path, name: str
) -> None:
    _a, b = servers
    src = tmp_path / "up.bin"
    src.write_bytes(DATA)
    opts = options(checksum=name)
    session, url = remote(b, "up.bin", opts)
    ident = us.start(session, url, len(DATA), name)
    blocks = pl.plan_blocks(len(DATA), BLOCK)
    fd = os.open(src, os.O_RDONLY)
    source = LocalFileSource(fd, src)
    verifier = pl.make_verifier(name, blocks, source.read_back, opts.request.max_buffered)
    try:
        sink = SessionSink(
            session, url, ident, len(DATA), name, range_digest=name in cks.COMBINABLE, resume=False
        )
        move(source, sink, blocks, opts, THREE, size=len(DATA), verifier=verifier)
        digest = verifier.digest()
    finally:
        verifier.close()
        os.close(fd)
    assert digest == cks.file_checksum(src, name)
    assert us.status(session, url, ident) == [(0, len(DATA) - 1)]
    us.commit(session, url, ident, dg.format_digest(name, digest))  # the server checks it
    assert (b.root / "up.bin").read_bytes() == DATA


def test_http_ranges_into_an_upload_session(servers: tuple[ServerHandle, ServerHandle]) -> None:
    a, b = servers
    (a.root / "x.bin").write_bytes(DATA)
    opts = options(checksum="md5")
    src_session, src = remote(a, "x.bin", opts)
    dst_session, dst = remote(b, "y.bin", opts)
    info = src_session.head(src)
    reader = HttpRangeSource(src_session, src, info.etag)
    blocks = pl.plan_blocks(info.size, BLOCK)
    verifier = pl.make_verifier("md5", blocks, reader.read_back, opts.request.max_buffered)
    ident = us.start(dst_session, dst, info.size, "md5")
    try:
        move(
            reader,
            SessionSink(
                dst_session, dst, ident, info.size, "md5", range_digest=False, resume=False
            ),
            blocks,
            opts,
            THREE,
            size=info.size,
            verifier=verifier,
        )
        digest = verifier.digest()
    finally:
        verifier.close()
        reader.close()
    assert digest == hashlib.md5(DATA).digest()
    us.commit(dst_session, dst, ident, None)
    assert (b.root / "y.bin").read_bytes() == DATA


def test_a_local_sink_needs_a_networked_source(tmp_path: Path) -> None:
    src = tmp_path / "s"
    src.write_bytes(DATA)
    fd = os.open(src, os.O_RDWR)
    try:
        with pytest.raises(AssertionError, match="networked source"):
            move(
                LocalFileSource(fd, src),
                FileSink(fd),
                pl.plan_blocks(10, 5),
                options(),
                THREE,
                size=10,
            )
    finally:
        os.close(fd)


def test_one_put_fed_by_a_get(servers: tuple[ServerHandle, ServerHandle]) -> None:
    """The single-PUT relay pairing: a source's GET body pumped into one PUT, hashed."""
    a, b = servers
    (a.root / "x.bin").write_bytes(DATA)
    opts = options()
    src_session, src = remote(a, "x.bin", opts)
    dst_session, dst = remote(b, "z.bin", opts)
    conn = src_session.connect()
    sink = SinglePut(dst_session, dst, len(DATA), {"Content-Length": str(len(DATA))}, expect=True)
    try:
        conn.request("GET", src.path, headers=src_session.headers())
        r = conn.getresponse()
        assert sink.open() is None  # 100 Continue: the body may go
        hasher = cks.new("adler32")
        sent = pump(response_chunks(r, len(DATA), bytearray(1000), "GET"), sink, hasher, None)
        status, _headers, _body = sink.finish()
    finally:
        conn.close()
        sink.close()
    assert sent == len(DATA) and status in (200, 201, 204)
    assert hasher.digest() == cks.to_bytes("adler32", zlib.adler32(DATA))
    assert (b.root / "z.bin").read_bytes() == DATA


def test_upload_session_ranges() -> None:
    # the client reads the server's ranges with wire.upload, block by block
    assert wup.parse_ranges("0-9, 20-29,x-1,5,") == [(0, 9), (20, 29)]
    assert wup.parse_ranges(None) == []
    ranges = [(0, 9), (20, 29)]
    for block, held in (
        (pl.Block(0, 0, 10), True),
        (pl.Block(1, 10, 10), False),
        (pl.Block(2, 5, 10), False),
    ):
        assert wup.covered(block.offset, block.end, ranges) is held
