"""Fault injection for `dtnkit cp` downloads over real sockets: no mocks, no sleeps.

A TCP relay between the client and a real dtnkit server flips a body byte, cuts or stalls a
connection once; a byte is flipped in the part file between its write and the ondisk check; a
``dtnkit serve`` child process is SIGKILLed mid-transfer and the rerun resumes; malformed
ranges, digest requests and digest answers give clear errors.  Synchronisation is by events
and deadlines; every server, relay and process is stopped in ``finally``.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dtnkit.transfer import checksum as cks
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import ChecksumMismatch, TransferError
from dtnkit.transfer.client.journals import journal_path, part_path
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.client.session import Url
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.wire import digests as dg

BLOCK = 64 * 1024
NBLOCKS = 12
SIZE = NBLOCKS * BLOCK - 1000  # the last block is shorter


def payload(size: int = SIZE, seed: int = 11) -> bytes:
    return random.Random(seed).randbytes(size)


def opts(**kw: object) -> CopyRequest:
    base: dict[str, object] = {
        "block_size": BLOCK,
        "streams": 2,
        "backoff": 0.01,
        "retries": 2,
        "stall_timeout": 10.0,
    }
    base.update(kw)
    return CopyRequest(**base)  # type: ignore[arg-type]


def wait_for(predicate: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Poll *predicate* until true or the deadline passes."""
    deadline = time.monotonic() + seconds
    tick = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        tick.wait(0.005)
    return True


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if "dtnkit-part" in p.name)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, Path]]:
    root = tmp_path / "srv"
    root.mkdir()
    handle = start_server(root, host="127.0.0.1", port=0, anonymous_read=True, quiet=True)
    try:
        yield handle, root
    finally:
        handle.stop()


# --------------------------------------------------------------------------- the relay


class _Conn:
    def __init__(self) -> None:
        self.req = bytearray()
        self.flip = False  # the next response body gets the flip
        self.hdr = bytearray()
        self.body_seen: int | None = None
        self.sent = 0


class Relay:
    """127.0.0.1:port -> target port, with one-shot faults on the server -> client direction.

    ``flip_range``: flip byte ``flip_at`` of the body answering the GET whose Range starts at
    that offset; ``cut_after``: close the first connection that reaches that many bytes;
    ``stall_after``: stop forwarding on the first connection reaching that many bytes (until
    :meth:`stop`).
    """

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.flip_range: int | None = None
        self.flip_at = 0
        self.cut_after: int | None = None
        self.stall_after: int | None = None
        self.flipped = threading.Event()
        self.cut = threading.Event()
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.connections = 0
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()
                continue
            st = _Conn()
            with self._lock:
                self.connections += 1
                self._socks += [c, u]
            for fn in (self._up, self._down):
                t = threading.Thread(target=fn, args=(c, u, st), daemon=True)
                self._threads.append(t)
                t.start()

    @staticmethod
    def _close(*socks: socket.socket) -> None:
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _up(self, c: socket.socket, u: socket.socket, st: _Conn) -> None:
        try:
            while data := c.recv(65536):
                st.req += data
                while (end := st.req.find(b"\r\n\r\n")) >= 0:
                    head, st.req = bytes(st.req[:end]), st.req[end + 4 :]
                    with self._lock:
                        if (
                            self.flip_range is not None
                            and head.startswith(b"GET ")
                            and f"range: bytes={self.flip_range}-".encode() in head.lower()
                        ):
                            self.flip_range = None
                            st.flip = True  # earlier responses are all forwarded already
                u.sendall(data)
        except OSError:
            pass
        finally:
            self._close(c, u)

    def _down(self, c: socket.socket, u: socket.socket, st: _Conn) -> None:
        try:
            while raw := u.recv(65536):
                data = bytearray(raw)
                if st.flip:
                    if st.body_seen is None:
                        st.hdr += data
                        end = st.hdr.find(b"\r\n\r\n")
                        if end < 0:
                            continue
                        data, st.hdr, start, st.body_seen = st.hdr, bytearray(), end + 4, 0
                    else:
                        start = 0
                    pos = start + self.flip_at - st.body_seen
                    if start <= pos < len(data):
                        data[pos] ^= 0x01
                        st.flip, st.body_seen = False, None
                        self.flipped.set()
                    else:
                        st.body_seen += len(data) - start
                with self._lock:
                    cut = self.cut_after is not None and st.sent + len(data) >= self.cut_after
                    stall = self.stall_after is not None and st.sent + len(data) >= self.stall_after
                    limit = self.cut_after if cut else self.stall_after
                    if cut:
                        self.cut_after = None
                    if stall:
                        self.stall_after = None
                if (cut or stall) and limit is not None:
                    c.sendall(data[: limit - st.sent])
                    (self.cut if cut else self.stalled).set()
                    if stall:
                        self.release.wait(30)
                    return
                c.sendall(data)
                st.sent += len(data)
        except OSError:
            pass
        finally:
            self._close(c, u)

    def stop(self) -> None:
        self.release.set()
        self._close(self.sock)  # shutdown wakes the blocked accept()
        with self._lock:
            socks = list(self._socks)
        self._close(*socks)
        for t in self._threads:
            t.join(5)
        self._accept.join(5)


@pytest.fixture
def relayed(served: tuple[ServerHandle, Path]) -> Iterator[tuple[ServerHandle, Path, Relay]]:
    handle, root = served
    relay = Relay(handle.port)
    try:
        yield handle, root, relay
    finally:
        relay.stop()


# --------------------------------------------------------------------------- on the wire


@pytest.mark.parametrize("name", ["adler32", "md5"])
def test_flipped_wire_byte_refetches_only_the_bad_block(
    relayed: tuple[ServerHandle, Path, Relay], tmp_path: Path, name: str
) -> None:
    handle, root, relay = relayed
    data = payload()
    (root / "w.bin").write_bytes(data)
    relay.flip_range, relay.flip_at = 6 * BLOCK, 1234  # the second stream's span
    dst = tmp_path / "w.bin"
    before = handle.counters["sendfile_bytes"]
    summary = copy(f"http://127.0.0.1:{relay.port}/w.bin", str(dst), opts(checksum=name))
    assert relay.flipped.is_set()
    assert dst.read_bytes() == data
    result = summary.files[0]
    assert result.refetched_blocks == 1 and result.retries == 1
    assert summary.as_dict()["refetched_blocks"] == 1
    # the file once, plus the one bad block: no whole re-fetch (the server counts a body
    # after sending it: poll until it has, then check nothing more was sent)
    assert wait_for(lambda: handle.counters["sendfile_bytes"] - before >= SIZE + BLOCK)
    assert handle.counters["sendfile_bytes"] - before == SIZE + BLOCK
    assert leftovers(tmp_path) == []


def test_flipped_wire_byte_every_attempt_fails_clearly(
    relayed: tuple[ServerHandle, Path, Relay], tmp_path: Path
) -> None:
    """With --retries 0 the bad block is detected, nothing is committed, the error says so."""
    _handle, root, relay = relayed
    (root / "z.bin").write_bytes(payload())
    relay.flip_range, relay.flip_at = 0, 7
    dst = tmp_path / "z.bin"
    with pytest.raises(ChecksumMismatch) as info:
        copy(f"http://127.0.0.1:{relay.port}/z.bin", str(dst), opts(retries=0))
    assert "expected" in info.value.why and "was not written" in info.value.why
    assert "after 1 attempts" in info.value.why and "check the source" in info.value.next_step
    assert not dst.exists() and leftovers(tmp_path) == []


def test_cut_connection_is_retried(
    relayed: tuple[ServerHandle, Path, Relay], tmp_path: Path
) -> None:
    _handle, root, relay = relayed
    data = payload()
    (root / "c.bin").write_bytes(data)
    relay.cut_after = 3 * BLOCK + 500  # in the middle of a body (HEAD answers are small)
    dst = tmp_path / "c.bin"
    summary = copy(f"http://127.0.0.1:{relay.port}/c.bin", str(dst), opts())
    assert relay.cut.is_set()
    assert dst.read_bytes() == data
    assert summary.files[0].retries >= 1 and summary.files[0].refetched_blocks == 0


def test_stalled_stream_times_out_and_block_is_retried_on_a_new_connection(
    relayed: tuple[ServerHandle, Path, Relay], tmp_path: Path
) -> None:
    _handle, root, relay = relayed
    data = payload()
    (root / "s.bin").write_bytes(data)
    relay.stall_after = 2 * BLOCK + 100  # the body stops mid-block, the socket stays open
    dst = tmp_path / "s.bin"
    summary = copy(
        f"http://127.0.0.1:{relay.port}/s.bin",
        str(dst),
        opts(stall_timeout=0.5, streams=1, verify="file"),
    )
    assert relay.stalled.is_set()
    assert dst.read_bytes() == data
    assert summary.files[0].retries == 1
    # the stalled GET (also the first request), its replacement
    assert relay.connections >= 2


# --------------------------------------------------------------------------- on disk


def _flip_in_part(dst: Path, offset: int, after: int) -> Callable[[int], None]:
    """A progress hook (single stream: blocks in order) flipping one byte of the part file
    once *after* bytes are written: after the block was received and hashed in flight."""
    seen = [0]

    def hook(n: int) -> None:
        seen[0] += n
        if seen[0] >= after and seen[0] - n < after:
            with open(part_path(dst), "r+b") as f:
                f.seek(offset)
                byte = f.read(1)
                f.seek(offset)
                f.write(bytes([byte[0] ^ 0x80]))

    return hook


def test_disk_flip_is_caught_by_ondisk_and_only_that_block_refetched(
    served: tuple[ServerHandle, Path], tmp_path: Path
) -> None:
    handle, root = served
    data = payload()
    (root / "d.bin").write_bytes(data)
    dst = tmp_path / "d.bin"
    summary = copy(
        handle.url + "d.bin",
        str(dst),
        opts(level="ondisk", streams=1),
        progress=_flip_in_part(dst, BLOCK + 10, after=3 * BLOCK),
    )
    assert dst.read_bytes() == data
    assert summary.files[0].refetched_blocks == 1
    assert leftovers(tmp_path) == []


def test_disk_flip_is_invisible_to_inflight(
    served: tuple[ServerHandle, Path], tmp_path: Path
) -> None:
    """The documented limit: inflight verifies the bytes received, not what the disk holds."""
    handle, root = served
    data = payload()
    (root / "i.bin").write_bytes(data)
    dst = tmp_path / "i.bin"
    copy(
        handle.url + "i.bin",
        str(dst),
        opts(level="inflight", streams=1),
        progress=_flip_in_part(dst, BLOCK + 10, after=3 * BLOCK),
    )
    assert dst.read_bytes() != data  # committed: only --verify-level ondisk re-reads


# --------------------------------------------------------------------------- resume


def _interrupt(
    handle: ServerHandle, root: Path, dst: Path, after: int, **kw: object
) -> ServerHandle:
    """Stop the server from the progress hook after *after* bytes, so that the download fails
    on transport errors; return a new server on the same port and root."""
    lock = threading.Lock()  # the other streams wait in the hook while the server stops
    seen = [0]

    def hook(n: int) -> None:
        with lock:
            seen[0] += n
            if seen[0] >= after > seen[0] - n:
                handle.stop()
                # the rest may already sit in the socket buffers (one GET per stream):
                # the copy fails here, as after a transport failure
                raise TransferError(f"GET {dst.name}", "the server stopped")

    with pytest.raises(TransferError) as info:
        copy(handle.url + dst.name, str(dst), opts(retries=1, **kw), progress=hook)
    assert "rerun the same command to resume" in info.value.next_step
    assert not dst.exists()
    assert part_path(dst).exists() and journal_path(dst).exists()
    return start_server(root, host="127.0.0.1", port=handle.port, anonymous_read=True, quiet=True)


def _counting() -> tuple[list[int], Callable[[int], None]]:
    got = [0]

    def count(n: int) -> None:
        got[0] += n

    return got, count


@pytest.mark.parametrize(
    "tamper", ["none", "garbage", "values", "source", "no-resume", "truncated", "algorithm"]
)
def test_resume_after_transport_failure(
    served: tuple[ServerHandle, Path], tmp_path: Path, tamper: str
) -> None:
    handle, root = served
    data = payload()
    src = root / "r.bin"
    src.write_bytes(data)
    dst = tmp_path / "r.bin"
    checksum = "crc32c" if tamper == "algorithm" else "adler32"
    handle2 = _interrupt(handle, root, dst, after=4 * BLOCK, checksum=checksum)
    try:
        journal = journal_path(dst)
        doc = json.loads(journal.read_text())
        assert doc["size"] == SIZE and doc["block_size"] == BLOCK and len(doc["done"]) >= 4
        assert doc["checksum"] == checksum and set(doc["values"]) <= {str(i) for i in doc["done"]}
        kw: dict[str, object] = {}
        if tamper == "garbage":
            journal.write_text('{"version": 1, "done": [0, 1')
        elif tamper == "values":
            first = min(doc["done"])
            doc["values"][str(first)] ^= 1
            journal.write_text(json.dumps(doc))
        elif tamper == "source":
            os.utime(src, ns=(0, src.stat().st_mtime_ns + 10**9))  # same size, new ETag
        elif tamper == "no-resume":
            kw["resume"] = False
        elif tamper == "truncated":
            os.truncate(part_path(dst), 100)
        got, count = _counting()
        before = handle2.counters["sendfile_bytes"]
        summary = copy(handle2.url + "r.bin", str(dst), opts(**kw), progress=count)
        result = summary.files[0]
        assert dst.read_bytes() == data
        assert leftovers(tmp_path) == []
        assert got[0] == SIZE  # the progress bar counts kept blocks too: it ends at 100 %
        if tamper in ("none", "algorithm"):
            assert result.resumed_blocks == len(doc["done"]) and result.note is not None
            assert result.note.startswith("resumed")
            missing = SIZE - sum(min(BLOCK, SIZE - i * BLOCK) for i in doc["done"])
            assert wait_for(lambda: handle2.counters["sendfile_bytes"] - before >= missing)
            assert handle2.counters["sendfile_bytes"] - before == missing  # only those sent
        elif tamper == "values":
            assert result.resumed_blocks == len(doc["done"]) - 1
            assert result.note is not None and "did not match the journal" in result.note
        else:
            assert result.resumed_blocks == 0 and got[0] == SIZE
            assert result.note is not None and result.note.startswith("started over")
            why = {
                "garbage": "cannot be read",
                "source": "source changed",
                "no-resume": "--no-resume",
                "truncated": "expected size",
            }[tamper]
            assert why in result.note
    finally:
        handle2.stop()


def test_resume_with_md5_rehashes_kept_blocks(
    served: tuple[ServerHandle, Path], tmp_path: Path
) -> None:
    handle, root = served
    data = payload()
    (root / "m.bin").write_bytes(data)
    dst = tmp_path / "m.bin"
    handle2 = _interrupt(handle, root, dst, after=4 * BLOCK, checksum="md5")
    try:
        # damage a kept block on disk: md5 has no per-block values in the journal, so the
        # whole-file check catches it and the bad-block re-fetch repairs it
        done = json.loads(journal_path(dst).read_text())["done"]
        with open(part_path(dst), "r+b") as f:
            f.seek(min(done) * BLOCK + 3)
            f.write(b"\xff\xfe")
        summary = copy(handle2.url + "m.bin", str(dst), opts(checksum="md5"))
        assert dst.read_bytes() == data
        assert summary.files[0].resumed_blocks == len(done)
        assert summary.files[0].refetched_blocks == 1
    finally:
        handle2.stop()


def _serve_process(root: Path, port: int = 0) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "dtnkit.cli.main",
        "serve",
        "--root",
        str(root),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--anonymous-read",
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # returns at the first line or when the child exits
    if "listening on " not in line:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"server did not start: {line!r} (exit {proc.poll()})")
    return proc, line.split("listening on ", 1)[1].split()[0]


def _kill(proc: subprocess.Popen[str] | None) -> None:
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    if proc is not None:
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_server_process_killed_mid_transfer_then_rerun_resumes(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    root.mkdir()
    data = payload(4 * SIZE)
    (root / "k.bin").write_bytes(data)
    dst = tmp_path / "k.bin"
    first: subprocess.Popen[str] | None = None
    second: subprocess.Popen[str] | None = None
    try:
        first, url = _serve_process(root)
        port = Url.parse(url).port
        killed = threading.Event()
        lock = threading.Lock()
        seen = [0]

        def hook(n: int) -> None:
            with lock:
                seen[0] += n
                if seen[0] >= 10 * BLOCK and not killed.is_set():
                    assert first is not None
                    os.kill(first.pid, signal.SIGKILL)  # the server dies mid-transfer
                    first.wait(10)
                    killed.set()
                    # the rest may already sit in the socket buffers (one GET per
                    # stream): the copy fails here, as after a transport failure
                    raise TransferError("GET k.bin", "the server died")

        with pytest.raises(TransferError) as info:
            copy(url + "k.bin", str(dst), opts(retries=2), progress=hook)
        assert killed.is_set()
        assert "rerun the same command to resume" in info.value.next_step
        assert not dst.exists() and journal_path(dst).exists()
        second, url2 = _serve_process(root, port)
        assert url2 == url
        got, count = _counting()
        summary = copy(url + "k.bin", str(dst), opts(), progress=count)
        assert dst.read_bytes() == data
        # kept blocks are not fetched again (and count towards the progress bar's 100 %)
        assert got[0] == len(data) and summary.files[0].resumed_blocks >= 10
        assert leftovers(tmp_path) == []
    finally:
        _kill(first)
        _kill(second)


# --------------------------------------------------------------------------- malformed input


def _raw(
    handle: ServerHandle, method: str, path: str, headers: dict[str, str]
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=10)
    try:
        conn.request(method, path, headers=headers)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "value", ["bytes=5-2", "bytes=a-b", "bytes=0-1,3-4", "lines=0-5", "bytes=-", "bytes=0x1-2"]
)
def test_malformed_range_is_400(served: tuple[ServerHandle, Path], value: str) -> None:
    handle, root = served
    (root / "r").write_bytes(payload(1000))
    for method in ("GET", "HEAD"):
        status, _h, body = _raw(handle, method, "/r", {"Range": value})
        assert status == 400
        if method == "GET":
            assert b"Range" in body


@pytest.mark.parametrize(
    "value", ["adler32", "sha-256=11", "SHA-256=1", "md5=1.5", "crc32c=:AAAA:", "a" * 9000]
)
def test_bad_want_content_digest_is_400(served: tuple[ServerHandle, Path], value: str) -> None:
    handle, root = served
    (root / "w").write_bytes(payload(1000))
    status, _h, body = _raw(
        handle, "GET", "/w", {"Range": "bytes=0-99", "Want-Content-Digest": value}
    )
    assert status == 400 and b"Want-Content-Digest" in body


@pytest.mark.parametrize("name", cks.ALGORITHMS)
def test_content_digest_of_a_range(served: tuple[ServerHandle, Path], name: str) -> None:
    handle, root = served
    data = payload(5000)
    (root / "d").write_bytes(data)
    key = {"adler32": "adler", "sha256": "sha-256"}.get(name, name)
    part = cks.new(name)
    part.update(data[100:1100])
    whole = cks.new(name)
    whole.update(data)
    for method in ("HEAD", "GET"):
        status, h, body = _raw(
            handle, method, "/d", {"Range": "bytes=100-1099", "Want-Content-Digest": f"{key}=5"}
        )
        assert status == 206
        assert dg.parse_repr_digest(h["Content-Digest"]) == {name: part.digest()}
        assert body == (data[100:1100] if method == "GET" else b"")
    status, h, _body = _raw(handle, "GET", "/d", {"Want-Content-Digest": f"{key}=5"})
    assert status == 200 and dg.parse_repr_digest(h["Content-Digest"]) == {name: whole.digest()}
    # never an algorithm that was not asked for, nor a refused one
    for want in ("foo=5", f"{key}=0"):
        status, h, _body = _raw(
            handle, "HEAD", "/d", {"Range": "bytes=0-9", "Want-Content-Digest": want}
        )
        assert status == 206 and "Content-Digest" not in h


class Peer(http.server.ThreadingHTTPServer):
    """A foreign server with ranges and whatever ``Digest`` / ``Content-Digest`` it is told."""

    daemon_threads = True

    def __init__(self, data: bytes, digest: str, content_digest: str | None) -> None:
        self.data, self.digest, self.content_digest = data, digest, content_digest
        self.gets = 0
        super().__init__(("127.0.0.1", 0), _PeerHandler)
        self.thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(5)


class _PeerHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Peer

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self.server.gets += 1
        self._answer(head=False)

    def _answer(self, *, head: bool) -> None:
        data = self.server.data
        rng = self.headers.get("Range")
        start, end = 0, len(data) - 1
        if rng:
            a, b = rng.split("=", 1)[1].split("-")
            start, end = int(a), min(int(b), len(data) - 1)
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("ETag", '"peer"')
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        if self.headers.get("Want-Digest"):
            self.send_header("Digest", self.server.digest)
        if self.headers.get("Want-Content-Digest") and self.server.content_digest:
            self.send_header("Content-Digest", self.server.content_digest)
        self.end_headers()
        if not head:
            self.wfile.write(data[start : end + 1])


@pytest.mark.parametrize("case", ["bad-digest", "no-content-digest", "bad-content-digest"])
def test_malformed_or_missing_digest_answers_from_a_peer(tmp_path: Path, case: str) -> None:
    data = payload()
    good = f"adler32={zlib.adler32(data):08x}"
    wrong = f"adler32={zlib.adler32(data) ^ 1:08x}"
    digest = {"bad-digest": "adler32=not-hex!"}.get(case, wrong)
    content = "adler=:!!notbase64:" if case == "bad-content-digest" else None
    peer = Peer(data, digest, content)
    assert good != wrong
    try:
        dst = tmp_path / "p.bin"
        url = f"http://127.0.0.1:{peer.server_address[1]}/p.bin"
        if case == "no-content-digest":  # falls back to fetching the whole file again
            with pytest.raises(ChecksumMismatch) as mism:
                copy(url, str(dst), opts(retries=1))
            assert "after 2 attempts" in mism.value.why
            assert peer.gets == 2 * 2  # two attempts, one GET per stream's span
        else:
            with pytest.raises(TransferError) as info:
                copy(url, str(dst), opts(retries=1))
            header = "Content-Digest" if case == "bad-content-digest" else "Digest"
            assert info.value.what.startswith(f"{header} from")
            assert "cannot be parsed" in info.value.why and info.value.next_step
        assert not dst.exists() and leftovers(tmp_path) == []
    finally:
        peer.stop()


def test_journal_stays_until_the_rerun_ends(
    served: tuple[ServerHandle, Path], tmp_path: Path
) -> None:
    """A rerun that is itself killed outright (no chance to write a journal) must still leave
    the next run something to resume: the journal is removed only when the rerun ends."""
    handle, root = served
    data = payload()
    (root / "j.bin").write_bytes(data)
    dst = tmp_path / "j.bin"
    handle2 = _interrupt(handle, root, dst, after=4 * BLOCK)
    try:
        during: list[bool] = []
        summary = copy(
            handle2.url + "j.bin",
            str(dst),
            opts(),
            progress=lambda _n: during.append(journal_path(dst).exists()),
        )
    finally:
        handle2.stop()
    assert summary.files[0].resumed_blocks >= 4
    assert during and all(during)
    assert dst.read_bytes() == data and leftovers(tmp_path) == []
