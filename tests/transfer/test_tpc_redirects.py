"""TPC redirects, RequireChecksumVerification and failed-pull cleanup (found against real
peers: XRootD/dCache redirect, XRootD 5.5 offers only its configured digests and leaves a
0-byte file after a failed pull)."""

from __future__ import annotations

import os
import re
import socket
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dtnkit.transfer import tokens
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import FatalHttp, TransferError
from dtnkit.transfer.client.oneput import put_body
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import MAX_REDIRECTS, Session, Url, follow_redirect
from dtnkit.transfer.client.tpc import TpcError, request_copy
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.wire import digests as dg

DATA = bytes(range(256)) * 4096  # 1 MiB
RW, RO = "rw-token", "ro-token"


class _Peer(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[tuple[str, str, str | None]]
    redirect_to: str | None
    data: bytes
    received: dict[str, bytes]  # PUT bodies by path


class _Handler(BaseHTTPRequestHandler):
    """Redirects everything (307) when ``redirect_to`` is set, else serves ``data`` with
    ranges but no Digest (a server that cannot checksum)."""

    protocol_version = "HTTP/1.1"
    server: _Peer

    def log_message(self, *args: Any) -> None:
        pass

    def _redirecting(self) -> bool:
        return self.server.redirect_to is not None and not self.path.startswith("/real/")

    def handle_expect_100(self) -> bool:
        # a door redirects a PUT before the body: no "100 Continue" then
        return True if self._redirecting() else super().handle_expect_100()

    def _any(self) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))
        if self.command == "PUT" and not self._redirecting():
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.server.received[self.path] = body
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.command == "DELETE":
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(201 if self.command == "PUT" else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self._redirecting():
            self.send_response(307)
            self.send_header("Location", self.server.redirect_to + self.path.lstrip("/"))
            self.send_header("Content-Length", "0")
            if self.command == "PUT":
                self.close_connection = True  # the body (if any came) was not read
            self.end_headers()
            return
        data = self.server.data
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        body = data[int(m[1]) : int(m[2]) + 1] if m else data
        self.send_response(206 if m else 200)
        if m:  # a 206 names its range (RFC 9110 15.3.7): the client checks it
            last = int(m[1]) + len(body) - 1
            self.send_header("Content-Range", f"bytes {m[1]}-{last}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    do_GET = do_HEAD = do_COPY = do_PUT = do_DELETE = do_POST = _any


@pytest.fixture()
def peer() -> Iterator[_Peer]:
    server = _Peer(("127.0.0.1", 0), _Handler)
    server.seen, server.redirect_to, server.data, server.received = [], None, DATA, {}
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture()
def dk(tmp_path: Path) -> Iterator[ServerHandle]:
    (tmp_path / "root").mkdir()
    handle = start_server(
        tmp_path / "root",
        tokens=tokens.parse(f"{RW} read,write\n{RO} read\n"),
        quiet=True,
        marker_interval=0.2,
        tpc_allow=["127.0.0.1"],
    )
    try:
        yield handle
    finally:
        handle.stop()


def peer_url(peer: _Peer) -> str:
    return f"http://127.0.0.1:{peer.server_address[1]}/"


def test_request_copy_follows_a_redirect_without_leaking_the_token(
    peer: _Peer, dk: ServerHandle
) -> None:
    (dk.root / "x.bin").write_bytes(DATA)
    peer.redirect_to = dk.url  # the "door" redirects the COPY to the active dtnkit
    with pytest.raises(TpcError, match="401"):
        request_copy(
            peer_url(peer) + "y.bin",
            source=dk.url + "x.bin",
            token=RW,
            transfer_headers={"Authorization": f"Bearer {RO}"},
            timeout=10,
        )
    # the token was for the door, not the other origin: dtnkit refused the COPY without it
    assert peer.seen == [("COPY", "/y.bin", f"Bearer {RW}")]
    assert not (dk.root / "y.bin").exists()


def test_request_copy_redirect_same_origin_keeps_token_and_is_bounded(
    peer: _Peer, dk: ServerHandle
) -> None:
    peer.redirect_to = peer_url(peer) + "again/"  # a redirect loop on the same origin
    with pytest.raises(TpcError, match="more than 5 redirects"):
        request_copy(peer_url(peer) + "y.bin", source=dk.url + "x.bin", token=RW, timeout=10)
    assert len(peer.seen) == MAX_REDIRECTS + 1
    assert all(auth == f"Bearer {RW}" for _m, _p, auth in peer.seen)


def test_follow_redirect_rules() -> None:
    base = Url.parse("https://door:8443/a/b")
    assert str(follow_redirect(base, "/c?authz=t", "x")) == "https://door:8443/c?authz=t"
    assert str(follow_redirect(base, "davs://pool:2880/d", "x")) == "https://pool:2880/d"
    with pytest.raises(TransferError, match="down to"):
        follow_redirect(base, "http://pool/d", "x")
    with pytest.raises(TransferError, match="without a Location"):
        follow_redirect(base, None, "x")


def test_active_pull_follows_the_source_redirect(
    peer: _Peer, dk: ServerHandle, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    with start_server(tmp_path / "other", tokens=tokens.parse(f"{RO} read\n"), quiet=True) as other:
        (other.root / "real.bin").write_bytes(DATA)
        peer.redirect_to = other.url  # the source "door" redirects to the data server
        res = request_copy(
            dk.url + "got.bin",
            source=peer_url(peer) + "real.bin",
            token=RW,
            transfer_headers={"Authorization": f"Bearer {RO}"},
            timeout=10,
        )
    # cross-origin: the forwarded token is not re-sent, so the data server refuses (401)
    assert not res.ok and "401" in res.final
    assert peer.seen[0][:2] == ("GET", "/real.bin")  # the pull's first request is its GET
    assert not (dk.root / "got.bin").exists()


def test_active_pull_follows_a_same_origin_redirect(peer: _Peer, dk: ServerHandle) -> None:
    peer.redirect_to = peer_url(peer) + "real/"  # HEAD /a.bin -> 307 /real/a.bin (same origin)
    res = request_copy(
        dk.url + "got.bin",
        source=peer_url(peer) + "a.bin",
        token=RW,
        transfer_headers={"Authorization": f"Bearer {RO}"},
        timeout=10,
        require_checksum=False,
    )  # the peer offers no digest
    assert res.ok, res.final
    assert (dk.root / "got.bin").read_bytes() == DATA
    assert peer.seen[0] == ("HEAD", "/a.bin", f"Bearer {RO}")
    assert ("GET", "/real/a.bin", f"Bearer {RO}") in peer.seen  # token kept: same origin
    assert zlib.adler32((dk.root / "got.bin").read_bytes()) == zlib.adler32(DATA)


def test_require_checksum_verification(peer: _Peer, dk: ServerHandle) -> None:
    src = peer_url(peer) + "nodigest.bin"  # serves ranges but never a Digest
    strict = request_copy(dk.url + "a.bin", source=src, token=RW, timeout=10, require_checksum=True)
    assert not strict.ok and "offered no adler32" in strict.final
    default = request_copy(dk.url + "b.bin", source=src, token=RW, timeout=10)
    assert not default.ok and "offered no adler32" in default.final  # default: required
    lax = request_copy(dk.url + "c.bin", source=src, token=RW, timeout=10, require_checksum=False)
    assert lax.ok, lax.final
    assert (dk.root / "c.bin").read_bytes() == DATA
    assert not (dk.root / "a.bin").exists() and not (dk.root / "b.bin").exists()
    assert not [p for p in dk.root.iterdir() if "dtnkit-part" in p.name]


def test_push_without_remote_digest_needs_require_false(peer: _Peer, dk: ServerHandle) -> None:
    (dk.root / "p.bin").write_bytes(DATA)
    strict = request_copy(
        dk.url + "p.bin", destination=peer_url(peer) + "p.bin", token=RO, timeout=10
    )
    assert not strict.ok and "did not offer" in strict.final
    lax = request_copy(
        dk.url + "p.bin",
        destination=peer_url(peer) + "q.bin",
        token=RO,
        timeout=10,
        require_checksum=False,
    )
    assert lax.ok, lax.final
    assert ("PUT", "/q.bin", None) in peer.seen
    assert ("DELETE", "/p.bin", None) in peer.seen  # the unverifiable strict push was undone


def test_bad_require_header_is_400(dk: ServerHandle) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", dk.port, timeout=10)
    conn.request(
        "COPY",
        "/x.bin",
        headers={
            "Authorization": f"Bearer {RW}",
            "Source": "http://127.0.0.1:1/y",
            "RequireChecksumVerification": "maybe",
        },
    )
    resp = conn.getresponse()
    assert resp.status == 400 and b"RequireChecksumVerification" in resp.read()
    conn.close()


# --------------------------------------------------------------------------- cp downloads


def test_download_follows_a_door_redirect_to_the_data_server(
    peer: _Peer, dk: ServerHandle, tmp_path: Path
) -> None:
    """A door (dCache, an XRootD redirector) sends the client to a data server on another
    origin: the HEAD follows it, the ranges and the digest come from the data server, the
    token stays with the door, and the query the door added is kept."""
    (dk.root / "x.bin").write_bytes(DATA)
    with start_server(dk.root, quiet=True, anonymous_read=True) as pool:
        peer.redirect_to = pool.url
        dst = tmp_path / "x.bin"
        summary = copy(
            peer_url(peer) + "x.bin?authz=abc",
            str(dst),
            CopyRequest(token=RW, streams=2, block_size=256 * 1024),
        )
    assert dst.read_bytes() == DATA
    assert dg.format_value("adler32", summary.files[0].digest) == f"{zlib.adler32(DATA):08x}"
    assert peer.seen == [("HEAD", "/x.bin?authz=abc", f"Bearer {RW}")]  # only the door's


def test_download_redirect_on_the_same_origin_keeps_the_token(peer: _Peer, tmp_path: Path) -> None:
    peer.redirect_to = peer_url(peer) + "real/"
    dst = tmp_path / "y.bin"
    copy(peer_url(peer) + "y.bin", str(dst), CopyRequest(token=RW, verify="none"))
    assert dst.read_bytes() == DATA
    # the GET is redirected and asked again at the target: no HEAD before it
    assert [m for m, _p, _a in peer.seen] == ["GET", "GET"]
    assert {a for _m, _p, a in peer.seen} == {f"Bearer {RW}"}
    assert peer.seen[-1][1] == "/real/y.bin"


def test_download_redirect_loop_is_bounded(peer: _Peer, tmp_path: Path) -> None:
    peer.redirect_to = peer_url(peer)
    with pytest.raises(TransferError, match="more than 5 redirects"):
        copy(peer_url(peer) + "z.bin", str(tmp_path / "z.bin"), CopyRequest(verify="none"))
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- cp uploads


def test_upload_follows_a_put_redirect_before_sending_the_body(peer: _Peer, tmp_path: Path) -> None:
    """``Expect: 100-continue``: the door answers 307 to the headers, the body goes only to the
    pool (here on the same origin, so the token goes along)."""
    src = tmp_path / "up.bin"
    src.write_bytes(DATA)
    peer.redirect_to = peer_url(peer) + "real/"
    summary = copy(str(src), peer_url(peer) + "up.bin", CopyRequest(token=RW, verify="none"))
    assert summary.files[0].size == len(DATA)
    assert peer.seen == [
        ("PUT", "/up.bin", f"Bearer {RW}"),
        ("PUT", "/real/up.bin", f"Bearer {RW}"),
    ]
    assert peer.received == {"/real/up.bin": DATA}


def test_multi_stream_upload_to_a_redirecting_door_falls_back_to_one_put(
    peer: _Peer, tmp_path: Path
) -> None:
    """A door that redirects the session start too: one PUT, which follows the redirect."""
    src = tmp_path / "up4.bin"
    src.write_bytes(DATA)
    peer.redirect_to = peer_url(peer) + "real/"
    summary = copy(
        str(src),
        peer_url(peer) + "up4.bin",
        CopyRequest(token=RW, verify="none", streams=4, block_size=128 * 1024),
    )
    assert summary.files[0].upload_streams == 1
    assert [(m, p) for m, p, _a in peer.seen] == [
        ("POST", "/up4.bin"),
        ("PUT", "/up4.bin"),
        ("PUT", "/real/up4.bin"),
    ]
    assert peer.received == {"/real/up4.bin": DATA}


def test_upload_redirect_to_another_origin_does_not_leak_the_token(
    peer: _Peer, dk: ServerHandle, tmp_path: Path
) -> None:
    src = tmp_path / "up.bin"
    src.write_bytes(DATA)
    peer.redirect_to = dk.url
    with pytest.raises(FatalHttp, match="401"):
        copy(str(src), peer_url(peer) + "up.bin", CopyRequest(token=RW, verify="none"))
    assert not (dk.root / "up.bin").exists() and peer.received == {}


def test_upload_refused_before_the_body(dk: ServerHandle, tmp_path: Path) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(DATA * 8)
    with pytest.raises(FatalHttp, match="403"):
        copy(str(src), dk.url + "big.bin", CopyRequest(token=RO, retries=0))
    assert not (dk.root / "big.bin").exists()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno",
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
    ],
)
def test_an_early_answer_means_no_body_is_sent(tmp_path: Path, answer: bytes) -> None:
    """A raw server answers the PUT's headers at once, then counts every byte that still
    arrives until the client closes: with ``Expect: 100-continue`` none of the body does."""
    listener = socket.create_server(("127.0.0.1", 0))
    after: list[int] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            assert b"expect: 100-continue" in head.lower()
            extra = len(head.split(b"\r\n\r\n", 1)[1])
            conn.sendall(answer)
            while chunk := conn.recv(65536):
                extra += len(chunk)
            after.append(extra)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    src = tmp_path / "f.bin"
    src.write_bytes(DATA)
    url = Url.parse(f"http://127.0.0.1:{listener.getsockname()[1]}/f.bin")
    session = Session(url, CopyRun.of(CopyRequest()))
    fd = os.open(src, os.O_RDONLY)
    try:
        status, headers, _body = put_body(
            session, url, fd, len(DATA), {"Content-Length": str(len(DATA))}, None
        )
    finally:
        os.close(fd)
        thread.join(10)
        listener.close()
    assert status in (403, 307) and after == [0]
    assert status == 403 or headers["location"] == "/x"
