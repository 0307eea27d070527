"""Multi-stream, resumable uploads (upload sessions) over real loopback sockets.

A small TCP proxy between the client and the in-process `dtnkit serve` flips a byte, cuts a
connection or plays dead, once, on the client-to-server direction.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import random
import socket
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.transfer.test_faults import wait_for

from dtnkit.transfer import checksum as cks
from dtnkit.transfer import tokens
from dtnkit.transfer.client import journals
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import TransferError
from dtnkit.transfer.client.journals import journal_dir
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.server.janitor import sweep
from dtnkit.transfer.wire import digests as dg

TOKEN = "tok-rw"
READER = "tok-ro"
OTHER = "tok-rw2"
BLOCK = 4096
SIZE = 7 * BLOCK + 1234  # not a multiple of the block size


def payload(size: int, seed: int = 5) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(d))
    return d


def serve(root: Path, **kw: object) -> ServerHandle:
    store = tokens.parse(f"{TOKEN} read,write\n{READER} read\n{OTHER} read,write\n")
    return start_server(root, tokens=store, quiet=True, **kw)  # type: ignore[arg-type]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, Path]]:
    root = tmp_path / "srv"
    root.mkdir()
    with serve(root) as h:
        yield h, root


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


def parts(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if "dtnkit-part" in p.name]


class Proxy:
    """TCP relay to ``port``; on the client->server direction, once: flip the byte at
    ``flip_at`` of a connection's stream, or cut the connection there; or, with
    ``dead_after``, cut every connection once that many bytes went through in total (until
    :meth:`heal`)."""

    def __init__(
        self,
        port: int,
        *,
        flip_at: int | None = None,
        cut_at: int | None = None,
        dead_after: int | None = None,
        lose_answer_to: bytes | None = None,
    ) -> None:
        self.target = port
        self.flip_at, self.cut_at, self.dead_after = flip_at, cut_at, dead_after
        self.lose_answer_to = lose_answer_to  # once: forward that request, drop its answer
        self.fired = 0
        self.total = 0
        self.healed = False
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def heal(self) -> None:
        with self.lock:
            self.healed = True

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.target))
            self._socks += [conn, up]
            lose = threading.Event()  # this connection's answers are dropped from now on
            for a, b, inspect in ((conn, up, True), (up, conn, False)):
                t = threading.Thread(target=self._pump, args=(a, b, inspect, lose), daemon=True)
                with self.lock:
                    self._threads.append(t)
                t.start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, inspect: bool, lose: threading.Event
    ) -> None:
        seen = 0
        dropping = False  # the client is gone: what the server still says is read, not sent
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if inspect:
                    with self.lock:
                        if (
                            self.lose_answer_to is not None
                            and self.lose_answer_to in data
                            and not self.fired
                        ):
                            self.fired += 1
                            lose.set()  # before the server can answer
                    data, cut = self._tamper(bytearray(data), seen)
                    seen += len(data)
                    if cut:
                        break
                elif lose.is_set():
                    break  # the answer never reaches the client
                if not dropping:
                    try:
                        dst.sendall(data)
                    except OSError:
                        if inspect:
                            raise
                        dropping = True
        except OSError:
            pass
        if inspect:
            # the client's side ends (or is cut) here; the server's sees only an end of
            # stream after what was forwarded, and the other pump reads on until the server
            # closes: once it has, all the server will ever receive has been handled
            with contextlib.suppress(OSError):
                src.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            return
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def settled(self) -> bool:
        """Every relayed connection has ended, its server side closed by the server (one still
        in the server's accept queue too): each range that reached the server whole is
        recorded by now."""
        with self.lock:
            threads = list(self._threads)
        return not any(t.is_alive() for t in threads)

    def _tamper(self, data: bytearray, seen: int) -> tuple[bytearray, bool]:
        with self.lock:
            if self.dead_after is not None and not self.healed:
                self.total += len(data)
                if self.total > self.dead_after:
                    self.fired += 1
                    return data, True
            at = self.flip_at if self.flip_at is not None else self.cut_at
            if at is not None and not self.fired and seen <= at < seen + len(data):
                self.fired += 1
                if self.cut_at is not None:
                    return data[: at - seen], True
                data[at - seen] ^= 0x01
        return data, False

    def stop(self) -> None:
        self.sock.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                # a shutdown wakes a pump blocked in recv() on a connection still open (a
                # close alone does not: each join below then waited its whole 5 s)
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        for t in self._threads:
            t.join(5)
        assert not any(t.is_alive() for t in self._threads), "a relay thread did not end"


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("name", cks.ALGORITHMS)
def test_multi_stream_round_trip(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str, streams: int
) -> None:
    handle, root = served
    data = payload(SIZE)
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    before = handle.counters
    o = opts(checksum=name, streams=streams)
    summary = copy(str(src), handle.url + "up.bin", o)
    assert (root / "up.bin").read_bytes() == data
    assert parts(root) == []
    f = summary.files[0]
    assert dg.format_value(name, f.digest) == dg.format_value(name, cks.file_checksum(src, name))
    assert f.level == "durable" and f.upload_streams == streams
    assert summary.as_dict()["upload_streams"] == streams
    ranges = handle.counters["range_puts"] - before["range_puts"]
    assert ranges == (8 if streams > 1 else 0)  # one stream: the plain PUT
    # sessions: adler32/crc32c folded from per-range values, nothing read back; md5/sha256
    # read once at commit; one PUT: hashed while received (Want-Digest on the PUT)
    read = handle.counters["checksum_bytes"] - before["checksum_bytes"]
    assert read == (SIZE if streams > 1 and name not in cks.COMBINABLE else 0)
    assert list((tmp_path / "state").rglob("*.json")) == []  # journal gone


@pytest.mark.parametrize("size", [0, 1, BLOCK, BLOCK + 1])
def test_small_and_empty_files(
    served: tuple[ServerHandle, Path], tmp_path: Path, size: int
) -> None:
    handle, root = served
    src = tmp_path / "s"
    src.write_bytes(payload(size))
    summary = copy(str(src), handle.url + "s", opts(checksum="md5"))
    assert (root / "s").read_bytes() == payload(size)
    assert summary.files[0].upload_streams == (2 if size > BLOCK else 1)


def test_fallback_to_one_put_without_sessions(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    root.mkdir()
    with serve(root, upload_sessions=False) as handle:
        data = payload(SIZE)
        src = tmp_path / "f"
        src.write_bytes(data)
        o = opts()
        summary = copy(str(src), handle.url + "f", o)
        assert (root / "f").read_bytes() == data
        result = summary.as_dict()
        assert result["upload_streams"] == 1
        assert summary.files[0].note and "501" in summary.files[0].note
        assert handle.counters["range_puts"] == 0
        status, _h, body = _call(
            handle, "POST", "/f", {"Dtnkit-Upload": "start", "Upload-Length": "5"}
        )
        assert status == 501 and b"disabled" in body


# --------------------------------------------------------------------------- damage on the wire


@pytest.mark.parametrize("name", ["adler32", "md5"])
def test_corrupted_range_is_resent(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str
) -> None:
    """adler32: the range's own Digest fails (412), that range alone is re-sent; md5: the
    commit fails (412), nothing is committed, the file is sent again."""
    handle, root = served
    data = payload(SIZE)
    src = tmp_path / "c"
    src.write_bytes(data)
    proxy = Proxy(handle.port, flip_at=2000)  # inside the first range's body
    try:
        before = handle.counters
        summary = copy(str(src), proxy.url + "c", opts(checksum=name))
    finally:
        proxy.stop()
    assert proxy.fired == 1
    assert (root / "c").read_bytes() == data and parts(root) == []
    assert summary.files[0].retries >= 1
    sent = handle.counters["range_bytes"] - before["range_bytes"]
    if name == "adler32":
        assert sent == SIZE  # the bad range was never recorded; only it was re-sent
    else:
        assert sent >= SIZE + SIZE - BLOCK  # a second session


def test_range_cut_mid_way_is_retried(served: tuple[ServerHandle, Path], tmp_path: Path) -> None:
    handle, root = served
    data = payload(SIZE)
    src = tmp_path / "k"
    src.write_bytes(data)
    proxy = Proxy(handle.port, cut_at=2000)
    try:
        summary = copy(str(src), proxy.url + "k", opts(checksum="crc32c"))
    finally:
        proxy.stop()
    assert proxy.fired == 1
    assert (root / "k").read_bytes() == data
    assert summary.files[0].retries >= 1


def test_interrupted_upload_resumes_with_missing_ranges_only(
    served: tuple[ServerHandle, Path], tmp_path: Path, state_dir: Path
) -> None:
    handle, root = served
    data = payload(SIZE)
    src = tmp_path / "r"
    src.write_bytes(data)
    proxy = Proxy(handle.port, dead_after=3 * BLOCK)
    try:
        with pytest.raises(TransferError) as info:
            copy(str(src), proxy.url + "r", opts(retries=0, streams=2))
        assert "rerun the same command to resume" in info.value.next_step
        assert not (root / "r").exists()
        assert len(parts(root)) == 1 and len(list(state_dir.rglob("*.json"))) == 1
        # a range that reached the server whole before the cut may still be recorded
        assert wait_for(proxy.settled)
        first = handle.counters["range_bytes"]
        assert 0 < first < SIZE
        proxy.heal()
        summary = copy(str(src), proxy.url + "r", opts(retries=0, streams=2))
    finally:
        proxy.stop()
    assert (root / "r").read_bytes() == data and parts(root) == []
    # only the missing ones: every range recorded once over both runs (a range that reached
    # the server whole before the cut may be recorded after `first` was read: pipelined
    # streams have two on the way)
    assert handle.counters["range_bytes"] == SIZE
    assert summary.files[0].read_back >= first // BLOCK  # hashed from the source, not sent
    assert list(state_dir.rglob("*.json")) == []


def test_no_resume_keeps_no_journal_and_sends_everything(
    served: tuple[ServerHandle, Path], tmp_path: Path, state_dir: Path
) -> None:
    handle, root = served
    data = payload(SIZE)
    src = tmp_path / "n"
    src.write_bytes(data)
    proxy = Proxy(handle.port, dead_after=3 * BLOCK)
    try:
        with pytest.raises(TransferError) as info:
            copy(str(src), proxy.url + "n", opts(retries=0, streams=2, resume=False))
        assert "resume" not in info.value.next_step
        assert list(state_dir.rglob("*.json")) == []
        # ranges that reached the server whole before the cut are recorded by its workers
        # even after the client gave up (pipelined streams have more on the way)
        assert wait_for(proxy.settled)
        proxy.heal()
        before = handle.counters["range_bytes"]
        summary = copy(str(src), proxy.url + "n", opts(streams=2, resume=False))
    finally:
        proxy.stop()
    assert (root / "n").read_bytes() == data
    assert handle.counters["range_bytes"] - before >= SIZE
    assert summary.files[0].read_back == 0  # nothing taken from the first run's session


def test_changed_source_does_not_resume(
    served: tuple[ServerHandle, Path], tmp_path: Path, state_dir: Path
) -> None:
    handle, root = served
    src = tmp_path / "m"
    src.write_bytes(payload(SIZE))
    proxy = Proxy(handle.port, dead_after=3 * BLOCK)
    try:
        with pytest.raises(TransferError):
            copy(str(src), proxy.url + "m", opts(retries=0, streams=2))
        proxy.heal()
        src.write_bytes(payload(SIZE, seed=9))  # another file now: another journal key
        assert wait_for(proxy.settled)  # the cut ranges all recorded
        before = handle.counters["range_bytes"]
        summary = copy(str(src), proxy.url + "m", opts(streams=2))
    finally:
        proxy.stop()
    assert (root / "m").read_bytes() == payload(SIZE, seed=9)
    assert handle.counters["range_bytes"] - before >= SIZE
    assert summary.files[0].read_back == 0  # nothing taken from the first run's session


# --------------------------------------------------------------------------- hostile requests


def _call(
    h: ServerHandle,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
    token: str | None = TOKEN,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    c = http.client.HTTPConnection(h.host, h.port, timeout=20)
    hdrs = dict(headers)
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    try:
        c.request(method, path, body=body, headers=hdrs)
        r = c.getresponse()
        return r.status, r.headers, r.read()
    finally:
        c.close()


def _start(h: ServerHandle, path: str, length: int, token: str = TOKEN) -> str:
    status, headers, body = _call(
        h,
        "POST",
        path,
        {
            "Dtnkit-Upload": "start",
            "Upload-Length": str(length),
            "Dtnkit-Upload-Checksum": "adler32",
        },
        token=token,
    )
    assert status == 201, body
    return str(headers["Dtnkit-Upload-Id"])


def _put(
    h: ServerHandle,
    path: str,
    ident: str,
    rng: str,
    body: bytes,
    token: str = TOKEN,
    extra: dict[str, str] | None = None,
) -> int:
    status, _h, _b = _call(
        h,
        "PUT",
        path,
        {"Dtnkit-Upload-Id": ident, "Content-Range": rng, **(extra or {})},
        body,
        token=token,
    )
    return status


def test_session_protocol_and_hostile_requests(served: tuple[ServerHandle, Path]) -> None:
    h, root = served
    data = payload(100)
    ident = _start(h, "/x", 100)
    assert _put(h, "/x", ident, "bytes 0-49/100", data[:50]) == 204
    # malformed, past the length, wrong total, body/range disagreement, overlap
    assert _put(h, "/x", ident, "bytes 50-/100", data[50:]) == 400
    assert _put(h, "/x", ident, "bytes=50-99/100", data[50:]) == 400
    assert _put(h, "/x", ident, "bytes 60-50/100", b"") == 400
    assert _put(h, "/x", ident, "bytes 90-109/100", payload(20)) == 416
    assert _put(h, "/x", ident, "bytes 50-99/200", data[50:]) == 400
    assert _put(h, "/x", ident, "bytes 50-99/100", data[50:90]) == 400
    assert _put(h, "/x", ident, "bytes 40-59/100", data[40:60]) == 409
    # a range with a wrong Digest is refused and not recorded
    bad = dg.format_digest("adler32", (zlib.adler32(b"nope")).to_bytes(4, "big"))
    assert _put(h, "/x", ident, "bytes 50-99/100", data[50:], extra={"Digest": bad}) == 412
    # ids: unknown, another path, another token; scopes
    assert _put(h, "/x", "not-an-id", "bytes 50-99/100", data[50:]) == 404
    assert _put(h, "/y", ident, "bytes 50-99/100", data[50:]) == 404
    assert _put(h, "/x", ident, "bytes 50-99/100", data[50:], token=OTHER) == 404
    assert _put(h, "/x", ident, "bytes 50-99/100", data[50:], token=READER) == 403
    status, _hd, _b = _call(
        h, "POST", "/x", {"Dtnkit-Upload": "start", "Upload-Length": "1"}, token=None
    )
    assert status == 401
    status, _hd, _b = _call(
        h, "POST", "/x", {"Dtnkit-Upload": "start", "Upload-Length": "1"}, token=READER
    )
    assert status == 403
    status, _hd, _b = _call(h, "POST", "/x", {"Dtnkit-Upload": "start", "Upload-Length": "-1"})
    assert status == 400
    status, _hd, _b = _call(h, "POST", "/nodir/x", {"Dtnkit-Upload": "start", "Upload-Length": "1"})
    assert status == 409
    status, _hd, _b = _call(h, "POST", "/x", {})
    assert status == 405
    # status, then a commit with a range missing
    status, hd, _b = _call(h, "POST", "/x", {"Dtnkit-Upload": "status", "Dtnkit-Upload-Id": ident})
    assert status == 200 and hd["Dtnkit-Upload-Ranges"] == "0-49"
    good = dg.format_digest("md5", hashlib.md5(data).digest())
    status, _hd, body = _call(
        h, "POST", "/x", {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident, "Digest": good}
    )
    assert status == 409 and b"missing" in body and not (root / "x").exists()
    # the same range again replaces it; then a commit with a wrong digest: 412, all gone
    assert _put(h, "/x", ident, "bytes 0-49/100", data[:50]) == 204
    assert _put(h, "/x", ident, "bytes 50-99/100", data[50:]) == 204
    wrong = dg.format_digest("md5", hashlib.md5(b"other").digest())
    status, _hd, body = _call(
        h, "POST", "/x", {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident, "Digest": wrong}
    )
    assert status == 412 and b"mismatch" in body
    assert not (root / "x").exists() and parts(root) == []
    assert _put(h, "/x", ident, "bytes 0-49/100", data[:50]) == 404  # discarded
    # a good session commits (adler32 folded, md5 read once); abort with DELETE
    ident = _start(h, "/x", 100)
    assert _put(h, "/x", ident, "bytes 50-99/100", data[50:]) == 204
    assert _put(h, "/x", ident, "bytes 0-49/100", data[:50]) == 204
    both = dg.format_digest("adler32", zlib.adler32(data).to_bytes(4, "big"))
    status, hd, _b = _call(
        h,
        "POST",
        "/x",
        {
            "Dtnkit-Upload": "commit",
            "Dtnkit-Upload-Id": ident,
            "Digest": both,
            "Content-MD5": good.split("=", 1)[1],
        },
    )
    assert status == 201 and (root / "x").read_bytes() == data
    ident = _start(h, "/z", 10)
    status, _hd, _b = _call(h, "DELETE", "/z", {"Dtnkit-Upload-Id": ident}, token=OTHER)
    assert status == 404
    status, _hd, _b = _call(h, "DELETE", "/z", {"Dtnkit-Upload-Id": ident})
    assert status == 204 and parts(root) == [] and not (root / "z").exists()
    # a part file cannot be reached by name
    assert _call(h, "GET", "/.x.dtnkit-part-uabc", {})[0] == 403
    # a Content-Range without a session is still refused
    assert _call(h, "PUT", "/w", {"Content-Range": "bytes 0-1/2"}, b"ab")[0] == 501


def test_expired_session_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    root.mkdir()
    with serve(root, upload_expiry=0.0) as h:
        ident = _start(h, "/e", 10)
        assert _put(h, "/e", ident, "bytes 0-9/10", payload(10)) == 404
        assert not (root / "e").exists()


def test_orphan_part_files_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    (root / "d").mkdir(parents=True)
    orphan = root / "d" / ".f.dtnkit-part-u0123456789abcdef"
    orphan.write_bytes(b"x")
    plain = root / "d" / ".g.dtnkit-part-0123"  # a single PUT's: the janitor's too
    plain.write_bytes(b"y")
    with serve(root, upload_expiry=3600.0) as h:
        assert sweep(h.root, 3600.0) == 0  # younger than the expiry
        assert sweep(h.root, 0.0) == 2
        assert not orphan.exists() and not plain.exists()


def test_journal_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert journal_dir() == tmp_path / "dtnkit" / "uploads"
    monkeypatch.delenv("XDG_STATE_HOME")
    expected = (
        Path("/var/lib/dtnkit/uploads")
        if hasattr(journals.os, "geteuid") and journals.os.geteuid() == 0
        else Path.home() / ".local/state/dtnkit/uploads"
    )
    assert journal_dir() == expected


def test_lost_commit_answer_is_not_a_lost_upload(
    served: tuple[ServerHandle, Path], tmp_path: Path, state_dir: Path
) -> None:
    """The commit went through but its answer was lost: the retried commit finds no session
    (404), and the client checks the target's digest instead of sending the file again."""
    handle, root = served
    data = payload(SIZE)
    src = tmp_path / "c"
    src.write_bytes(data)
    proxy = Proxy(handle.port, lose_answer_to=b"Dtnkit-Upload: commit")
    try:
        summary = copy(str(src), proxy.url + "c", opts(streams=2, stall_timeout=1.0))
    finally:
        proxy.stop()
    assert proxy.fired == 1
    assert (root / "c").read_bytes() == data
    assert handle.counters["range_bytes"] == SIZE  # sent once
    assert summary.files[0].upload_streams == 2


@pytest.mark.parametrize("name", ["adler32", "md5"])
def test_single_put_digest_comes_with_the_answer(
    served: tuple[ServerHandle, Path], tmp_path: Path, name: str
) -> None:
    """``Want-Digest`` on the PUT: the server hashes while receiving and answers ``Digest``,
    so verifying reads nothing back; with a wrong algorithm token it is a 400."""
    handle, root = served
    data = payload(SIZE)
    src = tmp_path / "w"
    src.write_bytes(data)
    before = handle.counters.get("checksum_bytes", 0)
    summary = copy(str(src), handle.url + "w", opts(streams=1, checksum=name))
    assert (root / "w").read_bytes() == data
    assert dg.format_value(name, summary.files[0].digest) == dg.format_value(
        name, _digest(name, data)
    )
    assert handle.counters.get("checksum_bytes", 0) == before  # no read-back, no HEAD hash
    status, headers, _body = _call(
        handle, "PUT", "/w2", {"Want-Digest": "adler32;q=0.5, md5", "Content-Length": "3"}, b"abc"
    )
    assert status == 201 and headers["Digest"] == "md5=kAFQmDzST7DWlj99KOF/cg=="
    status, _h, _body = _call(
        handle, "PUT", "/w3", {"Want-Digest": "md5;q=x", "Content-Length": "3"}, b"abc"
    )
    assert status == 400 and not (root / "w3").exists()


def _digest(name: str, data: bytes) -> bytes:
    h = cks.new(name)
    h.update(data)
    return h.digest()
