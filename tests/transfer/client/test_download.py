"""`dtnkit cp` over real sockets on 127.0.0.1 against the in-process `dtnkit serve`.

Real files in tmp_path, no mocks of the client; a tiny raw-socket server plays the server that
dies mid-transfer. Every server is stopped, also when a test fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.cli.cp import cp
from dtnkit.cli.main import main
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer import tokens
from dtnkit.transfer.client.blocks import BufferPool, CombineHasher
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import ChecksumMismatch, FatalHttp, TransferError
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.wire import digests as dg

TOKEN = "tok-rw"
BLOCK = 4096
SIZE = 5 * BLOCK + 1234  # not a multiple of the block size


def payload(size: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, Path]]:
    root = tmp_path / "srv"
    root.mkdir()
    store = tokens.parse(f"{TOKEN} read,write\n")
    handle = start_server(root, host="127.0.0.1", port=0, tokens=store, quiet=True)
    try:
        yield handle, root
    finally:
        handle.stop()


def opts(**kw: object) -> CopyRequest:
    base: dict[str, object] = {
        "token": TOKEN,
        "block_size": BLOCK,
        "streams": 4,
        "backoff": 0.01,
        "retries": 2,
        "stall_timeout": 10.0,
    }
    base.update(kw)
    return CopyRequest(**base)  # type: ignore[arg-type]


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if "dtnkit-part" in p.name]


# --------------------------------------------------------------------------- pipeline (pure)


def test_plan_blocks_cover_the_file() -> None:
    blocks = pl.plan_blocks(SIZE, BLOCK)
    assert len(blocks) == 6 and blocks[-1].length == 1234
    assert sum(b.length for b in blocks) == SIZE
    assert all(b.offset == i * BLOCK for i, b in enumerate(blocks))
    assert pl.plan_blocks(0, BLOCK) == []
    with pytest.raises(ValueError):
        pl.plan_blocks(10, 0)


@pytest.mark.parametrize("name", ["adler32", "crc32c"])
def test_combined_block_values_equal_whole_file_checksum(name: str) -> None:
    data = payload(SIZE)
    blocks = pl.plan_blocks(len(data), BLOCK)
    comb = pl.BlockCombiner(name, blocks)
    for b in random.Random(1).sample(blocks, len(blocks)):  # out of order
        comb.accept(b, data[b.offset : b.offset + b.length])
    whole = cks.new(name)
    whole.update(data)
    assert comb.digest() == whole.digest()
    if name == "adler32":
        assert comb.digest() == zlib.adler32(data).to_bytes(4, "big")


@pytest.mark.parametrize("name", ["md5", "sha256"])
@pytest.mark.parametrize("held", [0, 1, 8])
def test_ordered_hasher_bounded_buffer(name: str, held: int) -> None:
    data = payload(SIZE * 3)
    blocks = pl.plan_blocks(len(data), BLOCK)
    hasher = pl.OrderedHasher(
        name, blocks, lambda b: data[b.offset : b.offset + b.length], max_buffered=held
    )
    try:
        for b in reversed(blocks):  # worst case: the first block comes last
            hasher.accept(b, data[b.offset : b.offset + b.length])
        assert hasher.digest(timeout=10) == hashlib.new(name, data).digest()
        assert hasher.peak_buffered <= held + 1  # K out of order + the next one
        if held < len(blocks) - 1:
            assert hasher.read_back > 0
    finally:
        hasher.close()


def test_ordered_hasher_incomplete_is_an_error() -> None:
    blocks = pl.plan_blocks(3 * BLOCK, BLOCK)
    hasher = pl.OrderedHasher("md5", blocks, lambda b: b"\0" * b.length)
    hasher.accept(blocks[1], b"\0" * BLOCK)
    hasher.close()
    with pytest.raises(RuntimeError, match="incomplete"):
        hasher.digest()


# --------------------------------------------------------------------------- download


@pytest.mark.parametrize("name", cks.ALGORITHMS)
@pytest.mark.parametrize("verify", pl.VERIFY_MODES)
@pytest.mark.parametrize("streams", [1, 4])
def test_download_round_trip(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str, verify: str, streams: int
) -> None:
    handle, root = served
    data = payload(SIZE)
    (root / "f.bin").write_bytes(data)
    dst = tmp_path / "out.bin"
    summary = copy(
        handle.url + "f.bin", str(dst), opts(checksum=name, verify=verify, streams=streams)
    )
    assert dst.read_bytes() == data
    assert leftovers(tmp_path) == []
    result = summary.files[0]
    assert result.size == SIZE and result.level == "inflight"
    if verify == "none":
        assert result.digest is None
    else:
        assert dg.format_value(name, result.digest) == dg.format_value(
            name, cks.file_checksum(dst, name)
        )


def test_download_empty_file(served: tuple[ServerHandle, Path], tmp_path: Path) -> None:
    handle, root = served
    (root / "empty").write_bytes(b"")
    for name in ("adler32", "sha256"):
        dst = tmp_path / f"empty-{name}"
        copy(handle.url + "empty", str(dst), opts(checksum=name))
        assert dst.exists() and dst.read_bytes() == b""


def test_download_md5_with_tiny_reorder_buffer(
    served: tuple[ServerHandle, Path], tmp_path: Path
) -> None:
    handle, root = served
    data = payload(64 * BLOCK + 17)
    (root / "big").write_bytes(data)
    dst = tmp_path / "big"
    copy(handle.url + "big", str(dst), opts(checksum="md5", streams=8, max_buffered=1))
    assert dst.read_bytes() == data


def corrupt_behind_cache(path: Path, handle: ServerHandle, name: str) -> None:
    """Let the server cache the digest, then flip a byte keeping size and mtime."""
    session = Session(Url.parse(handle.url), CopyRun.of(opts()))
    session.head(Url.parse(handle.url + path.name), want=name)
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(SIZE // 2)
        byte = f.read(1)
        f.seek(SIZE // 2)
        f.write(bytes([byte[0] ^ 0x01]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("name", ["adler32", "crc32c", "md5", "sha256"])
@pytest.mark.parametrize("verify", ["block", "file", "sequential"])
def test_corrupted_source_is_detected_and_not_committed(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str, verify: str
) -> None:
    handle, root = served
    src = root / "c.bin"
    src.write_bytes(payload(SIZE))
    corrupt_behind_cache(src, handle, name)
    dst = tmp_path / "c.bin"
    with pytest.raises(ChecksumMismatch) as info:
        copy(handle.url + "c.bin", str(dst), opts(checksum=name, verify=verify, retries=1))
    assert "checksum mismatch" in info.value.what
    assert "expected" in info.value.why and "after 2 attempts" in info.value.why
    assert not dst.exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("level", ["durable", "ondisk"])
def test_levels_reported(served: tuple[ServerHandle, Path], tmp_path: Path, level: str) -> None:
    handle, root = served
    data = payload(SIZE)
    (root / "l.bin").write_bytes(data)
    dst = tmp_path / "l.bin"
    summary = copy(handle.url + "l.bin", str(dst), opts(level=level))
    assert dst.read_bytes() == data
    expected = pl.achieved_level(level, tmp_path)
    assert summary.files[0].level == expected
    assert summary.as_dict()["level"] == expected


def test_ondisk_detects_corruption_too(served: tuple[ServerHandle, Path], tmp_path: Path) -> None:
    handle, root = served
    src = root / "o.bin"
    src.write_bytes(payload(SIZE))
    corrupt_behind_cache(src, handle, "adler32")
    with pytest.raises(ChecksumMismatch):
        copy(handle.url + "o.bin", str(tmp_path / "o.bin"), opts(level="ondisk", retries=0))
    assert not (tmp_path / "o.bin").exists() and leftovers(tmp_path) == []


def test_wrong_token_is_fatal_and_writes_nothing(
    served: tuple[ServerHandle, Path], tmp_path: Path
) -> None:
    handle, root = served
    (root / "t.bin").write_bytes(payload(100))
    out = tmp_path / "dl"
    out.mkdir()
    with pytest.raises(FatalHttp) as info:
        copy(handle.url + "t.bin", str(out / "t.bin"), opts(token="wrong"))
    assert "401" in info.value.why and "--token" in info.value.next_step
    assert list(out.iterdir()) == []
    up = tmp_path / "u.bin"
    up.write_bytes(b"x" * 10)
    with pytest.raises(FatalHttp):
        copy(str(up), handle.url + "u.bin", opts(token="wrong"))
    assert not (root / "u.bin").exists() and leftovers(root) == []


def test_missing_source_is_404(served: tuple[ServerHandle, Path], tmp_path: Path) -> None:
    handle, _root = served
    with pytest.raises(FatalHttp, match="HEAD"):
        copy(handle.url + "nope", str(tmp_path / "x"), opts())
    assert not (tmp_path / "x").exists()


class DyingServer:
    """Answers HEAD correctly, then cuts every GET body in the middle."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.gets = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            buf = b""
            try:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    buf += chunk
                head = buf.split(b"\r\n\r\n")[0].decode()
                method = head.split(" ", 1)[0]
                size = len(self.data)
                digest = f"adler32={zlib.adler32(self.data):08x}"
                if method == "HEAD":
                    conn.sendall(
                        (
                            f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n"
                            f'Accept-Ranges: bytes\r\nETag: "x"\r\n'
                            f"Content-Type: application/octet-stream\r\n"
                            f"Digest: {digest}\r\nConnection: close\r\n\r\n"
                        ).encode()
                    )
                    return
                self.gets += 1
                asked = head.partition("Range: bytes=")[2].partition("\r\n")[0]
                first = int(asked.partition("-")[0] or 0)
                last = min(int(asked.partition("-")[2] or size - 1), size - 1)  # as asked
                conn.sendall(
                    (
                        f"HTTP/1.1 206 Partial Content\r\n"
                        f"Content-Length: {last - first + 1}\r\n"
                        f"Content-Range: bytes {first}-{last}/{size}\r\n\r\n"
                    ).encode()
                    + self.data[first : first + BLOCK // 2]
                )
            except OSError:
                return

    def stop(self) -> None:
        self._stop.set()
        self._accept.join()
        self.sock.close()
        for t in self._threads:
            t.join(5)


def test_server_dying_mid_transfer_retries_then_fails(tmp_path: Path) -> None:
    server = DyingServer(payload(SIZE))
    try:
        dst = tmp_path / "d.bin"
        with pytest.raises(TransferError) as info:
            copy(f"http://127.0.0.1:{server.port}/d.bin", str(dst), opts(retries=2, streams=2))
        assert "failed after 3 attempts" in info.value.why
        assert "connection closed" in info.value.why
        assert server.gets >= 3
        assert not dst.exists() and leftovers(tmp_path) == []
    finally:
        server.stop()


def test_stall_timeout_retries(tmp_path: Path) -> None:
    """A listener that never answers: the stall timeout fires on each attempt."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        port = sock.getsockname()[1]
        with pytest.raises(TransferError, match="HEAD"):
            copy(
                f"http://127.0.0.1:{port}/x",
                str(tmp_path / "x"),
                opts(retries=1, stall_timeout=0.2),
            )
        assert not (tmp_path / "x").exists()
    finally:
        sock.close()


# --------------------------------------------------------------------------- upload


@pytest.mark.parametrize("name", cks.ALGORITHMS)
@pytest.mark.parametrize("verify", pl.VERIFY_MODES)
def test_upload_round_trip(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str, verify: str
) -> None:
    handle, root = served
    data = payload(SIZE, seed=3)
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    summary = copy(str(src), handle.url, opts(checksum=name, verify=verify))
    assert (root / "up.bin").read_bytes() == data
    assert leftovers(root) == []
    if verify != "none":
        assert dg.format_value(name, summary.files[0].digest) == dg.format_value(
            name, cks.file_checksum(src, name)
        )
        assert summary.files[0].level == "durable"


def test_upload_empty(served: tuple[ServerHandle, Path], tmp_path: Path) -> None:
    handle, root = served
    src = tmp_path / "e"
    src.write_bytes(b"")
    copy(str(src), handle.url + "e", opts())
    assert (root / "e").read_bytes() == b""


# --------------------------------------------------------------------------- trees, CLI


def test_recursive_round_trip_parallel(served: tuple[ServerHandle, Path], tmp_path: Path) -> None:
    handle, root = served
    tree = tmp_path / "tree"
    (tree / "sub" / "deeper").mkdir(parents=True)
    files = {
        "a": payload(SIZE, 1),
        "sub/b": payload(100, 2),
        "sub/deeper/c": b"",
        "sub/deeper/d": payload(3 * BLOCK, 4),
    }
    for rel, data in files.items():
        (tree / rel).write_bytes(data)
    up = copy(str(tree), handle.url + "tree", opts(recursive=True, parallel=3))
    assert len(up.files) == 4
    for rel, data in files.items():
        assert (root / "tree" / rel).read_bytes() == data
    back = tmp_path / "back"
    down = copy(handle.url + "tree/", str(back), opts(recursive=True, parallel=3, checksum="md5"))
    assert len(down.files) == 4
    for rel, data in files.items():
        assert (back / rel).read_bytes() == data
    assert leftovers(back) == []


def test_cli_json_summary(
    served: tuple[ServerHandle, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle, root = served
    data = payload(SIZE)
    (root / "j.bin").write_bytes(data)
    monkeypatch.setenv("DTNKIT_TOKEN", TOKEN)
    dst = tmp_path / "j.bin"
    rc = cp.main(
        [
            handle.url + "j.bin",
            str(dst),
            "--streams",
            "4",
            "--block-size",
            "4KiB",
            "--json",
            "--verify-level",
            "durable",
        ],
        standalone_mode=False,
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {
        "files",
        "bytes",
        "seconds",
        "rate_bps",
        "checksum",
        "digest",
        "verify",
        "level",
        "streams",
        "retries",
        "refetched_blocks",
        "resumed_blocks",
        "resumed_bytes",
        "notes",
    }
    assert out["refetched_blocks"] == 0 and out["resumed_blocks"] == 0 and out["notes"] == []
    assert out["resumed_bytes"] == 0
    assert out["files"] == 1 and out["bytes"] == SIZE and out["streams"] == 4
    assert out["digest"] == f"{zlib.adler32(data):08x}" and out["level"] == "durable"
    assert dst.read_bytes() == data


def test_cli_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput):
        cp.main([str(tmp_path / "a"), str(tmp_path / "b")], standalone_mode=False)
    with pytest.raises(DtnkitError):
        cp.main(
            ["http://127.0.0.1:1/x", str(tmp_path / "b"), "--block-size", "zz"],
            standalone_mode=False,
        )


# --------------------------------------------------------------------------- hot path (buffers)


@pytest.mark.parametrize("held", [0, 2, 8])
def test_ordered_hasher_releases_every_buffer_once(held: int) -> None:
    data = payload(12 * BLOCK + 99)
    blocks = pl.plan_blocks(len(data), BLOCK)
    released: list[int] = []
    order = blocks[1::2] + blocks[0::2]
    bufs = {b.index: bytearray(data[b.offset : b.offset + b.length]) for b in blocks}
    hasher = pl.OrderedHasher(
        "md5", blocks, lambda b: data[b.offset : b.offset + b.length], max_buffered=held
    )
    ids = {id(buf): i for i, buf in bufs.items()}
    hasher.set_release(lambda buf: released.append(ids.get(id(buf), -1)))
    try:
        for b in order:
            hasher.accept(b, bufs[b.index])
        assert hasher.digest(timeout=10) == hashlib.md5(data).digest()
    finally:
        hasher.close()
    accepted = [r for r in released if r >= 0]
    assert sorted(accepted) == list(range(len(blocks)))  # each accepted buffer exactly once


def test_ordered_hasher_close_releases_held_buffers() -> None:
    blocks = pl.plan_blocks(4 * BLOCK, BLOCK)
    released: list[object] = []
    hasher = pl.OrderedHasher("sha256", blocks, lambda b: b"\0" * b.length, max_buffered=4)
    hasher.set_release(released.append)
    held = [bytearray(BLOCK) for _ in range(3)]
    for b, buf in zip(blocks[1:], held, strict=True):  # block 0 never comes: all are held
        hasher.accept(b, buf)
    hasher.close()
    assert sorted(map(id, released)) == sorted(map(id, held))


def test_buffer_pool_reuses_block_buffers() -> None:
    pool = BufferPool(BLOCK)
    a = pool.get()
    pool.put(memoryview(a)[:10])  # a view of a pooled buffer gives the buffer back
    assert pool.get() is a
    pool.put(b"x" * BLOCK)  # read-back bytes are not pooled
    pool.put(bytearray(3))  # nor buffers of another size
    assert pool.get() is not a and len(pool.get()) == BLOCK


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_combine_hasher_concurrent_streams(depth: int) -> None:
    data = payload(40 * BLOCK + 5)
    blocks = pl.plan_blocks(len(data), BLOCK)
    combiner = pl.BlockCombiner("adler32", blocks)
    pool = BufferPool(BLOCK)
    hasher = CombineHasher(combiner, pool, depth=depth)

    def stream(mine: list[pl.Block]) -> None:
        for b in mine:
            buf = pool.get()
            buf[: b.length] = data[b.offset : b.offset + b.length]
            hasher.submit(b, buf)

    threads = [threading.Thread(target=stream, args=(blocks[i::3],)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hasher.close()
    assert hasher.error is None
    assert combiner.digest() == cks.to_bytes("adler32", zlib.adler32(data))
    if depth == 0:
        assert hasher.inline == len(blocks)


def test_combine_hasher_reports_errors() -> None:
    blocks = pl.plan_blocks(2 * BLOCK, BLOCK)
    pool = BufferPool(BLOCK)
    hasher = CombineHasher(pl.BlockCombiner("crc32c", blocks), pool)
    bad = pl.Block(0, 0, BLOCK + 1)  # longer than the buffer: accept refuses it
    hasher.submit(bad, bytearray(BLOCK))
    hasher.close()
    assert isinstance(hasher.error, ValueError)


@pytest.mark.parametrize("name", ["adler32", "crc32c", "md5", "sha256"])
@pytest.mark.parametrize("streams,held", [(1, 8), (3, 0), (3, 2)])
def test_download_many_blocks_reused_buffers(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str, streams: int, held: int
) -> None:
    """Receive buffers are reused across blocks: neither the data nor the digest mix them."""
    handle, root = served
    data = payload(50 * BLOCK + 333, seed=11)
    (root / "many").write_bytes(data)
    dst = tmp_path / "many"
    summary = copy(
        handle.url + "many", str(dst), opts(checksum=name, streams=streams, max_buffered=held)
    )
    assert dst.read_bytes() == data
    assert dg.format_value(name, summary.files[0].digest) == dg.format_value(
        name, cks.file_checksum(dst, name)
    )
    assert leftovers(tmp_path) == []


def test_cli_exit_codes_name_the_failure(
    served: tuple[ServerHandle, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """20: transfer failed (rerun may help), 21: integrity, 22: refused; JSON errors too."""
    handle, root = served
    src = root / "e.bin"
    src.write_bytes(payload(SIZE))
    corrupt_behind_cache(src, handle, "adler32")
    base = ["cp", "--retries", "0", "--json", "--token", TOKEN]
    assert main([*base, handle.url + "e.bin", str(tmp_path / "e")]) == 21
    assert main([*base, handle.url + "missing", str(tmp_path / "m")]) == 22
    assert main([*base[:-1], "wrong", handle.url + "e.bin", str(tmp_path / "t")]) == 22
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/x"
    assert main([*base, dead, str(tmp_path / "d")]) == 20
    out, dec, docs = capsys.readouterr().out.strip(), json.JSONDecoder(), []
    while out:
        doc, end = dec.raw_decode(out)
        docs.append(doc)
        out = out[end:].strip()
    assert [d["error"]["exit_status"] for d in docs] == [21, 22, 22, 20]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["srv"]  # nothing written


@pytest.mark.parametrize("wait", [0.0, 10.0])
def test_ordered_hasher_back_pressure_keeps_blocks_in_memory(wait: float) -> None:
    """A stream ahead of the hasher waits for room instead of dropping its block (which the
    hasher would then read back from the destination); without waiting, blocks are dropped."""
    data = payload(6 * BLOCK)
    blocks = pl.plan_blocks(len(data), BLOCK)
    hasher = pl.OrderedHasher(
        "md5", blocks, lambda b: data[b.offset : b.offset + b.length], max_buffered=1
    )
    try:
        ahead = threading.Thread(
            target=lambda: [
                hasher.accept(b, data[b.offset : b.offset + b.length], wait=wait)
                for b in blocks[1:]
            ]
        )
        ahead.start()
        if wait == 0.0:
            ahead.join()  # every block but the first arrived; all but one were dropped
        hasher.accept(blocks[0], data[:BLOCK])
        ahead.join(20)
        assert hasher.digest(timeout=20) == hashlib.md5(data).digest()
        assert (hasher.read_back == 0) == (wait > 0)
    finally:
        hasher.close()


def test_ordered_hasher_back_pressure_gives_way_to_stop() -> None:
    data = payload(3 * BLOCK)
    blocks = pl.plan_blocks(len(data), BLOCK)
    hasher = pl.OrderedHasher(
        "md5", blocks, lambda b: data[b.offset : b.offset + b.length], max_buffered=1
    )
    stop = threading.Event()
    stop.set()
    try:
        hasher.accept(blocks[1], data[BLOCK : 2 * BLOCK])
        start = time.monotonic()
        hasher.accept(blocks[2], data[2 * BLOCK :], wait=30.0, stop=stop)  # full: no wait
        assert time.monotonic() - start < 5
        hasher.accept(blocks[0], data[:BLOCK])
        assert hasher.digest(timeout=20) == hashlib.md5(data).digest()
        assert hasher.read_back == 1
    finally:
        hasher.close()


@pytest.mark.parametrize("name", ["adler32", "md5"])
def test_download_to_dev_null_verifies_in_memory(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str
) -> None:
    """``cp URL /dev/null``: the network path alone, every byte still checked in flight."""
    handle, root = served
    data = payload(SIZE)
    (root / "n.bin").write_bytes(data)
    summary = copy(handle.url + "n.bin", "/dev/null", opts(checksum=name))
    assert dg.format_value(name, summary.files[0].digest) == dg.format_value(
        name, _digest(name, data)
    )
    assert summary.files[0].level == "inflight"
    corrupt_behind_cache(root / "n.bin", handle, name)
    with pytest.raises(ChecksumMismatch, match="from the network"):
        copy(handle.url + "n.bin", "/dev/null", opts(checksum=name, retries=0))
    with pytest.raises(BadInput) as info:
        copy(handle.url + "n.bin", "/dev/null", opts(verify="file"))
    assert "is a device" in info.value.why


def _digest(name: str, data: bytes) -> bytes:
    h = cks.new(name)
    h.update(data)
    return h.digest()
