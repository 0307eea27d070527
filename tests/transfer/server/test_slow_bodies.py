"""A request body cannot hold one of the server's workers: a client without a token is
answered on its head, before any body is read, and a small body (of a GET, an OPTIONS, a
PROPFIND) must arrive whole within one rate window (a body the method does not use, within
a few seconds), as a large one must keep the rate floor.

Every wait below is bounded by a socket timeout far above what the server may take: a server
that waited for the body would leave the test's receive to time out, and the test fail."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, adapter, start_server

WINDOW = 1.0  # the servers' rate window, seconds
HANG = 20.0  # a receive that waits this long means the server waited for the body


@pytest.fixture
def token_only(tmp_path: Path) -> Iterator[ServerHandle]:
    (tmp_path / "f").write_bytes(b"x" * 1000)
    with start_server(
        tmp_path, tokens=tokens.parse("secret-token read,write\n"), quiet=True, rate_window=WINDOW
    ) as h:
        yield h


@pytest.fixture
def anonymous(tmp_path: Path) -> Iterator[ServerHandle]:
    (tmp_path / "f").write_bytes(b"x" * 1000)
    with start_server(tmp_path, anonymous_read=True, quiet=True, rate_window=WINDOW) as h:
        yield h


def _send_head(h: ServerHandle, head: str) -> socket.socket:
    s = socket.create_connection((h.host, h.port), timeout=HANG)
    s.sendall(head.encode())
    return s


def _answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes (or TimeoutError after HANG s of nothing)."""
    out = b""
    while True:
        data = s.recv(65536)
        if not data:
            return out
        out += data


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE"])
def test_no_token_is_refused_on_the_head_before_the_body(
    token_only: ServerHandle, method: str
) -> None:
    s = _send_head(token_only, f"{method} /f HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
    try:
        s.settimeout(HANG)
        first = s.recv(65536)  # not one byte of the body was sent
    finally:
        s.close()
    assert first.startswith(b"HTTP/1.1 401 "), first[:80]


@pytest.mark.parametrize("method,path", [("GET", "/f"), ("PROPFIND", "/")])
def test_a_trickled_small_body_is_cut_within_its_window(
    anonymous: ServerHandle, method: str, path: str
) -> None:
    s = _send_head(
        anonymous, f"{method} {path} HTTP/1.1\r\nHost: x\r\nDepth: 0\r\nContent-Length: 100\r\n\r\n"
    )
    stop = threading.Event()

    def trickle() -> None:
        for _ in range(100):
            if stop.wait(0.2):  # 100 bytes at 5 B/s: 20 s, far past the 1 s window
                return
            try:
                s.send(b"a")
            except OSError:
                return

    t = threading.Thread(target=trickle)
    t0 = time.monotonic()
    t.start()
    try:
        try:
            answer = _answer(s)
        except ConnectionResetError:  # closed with the trickled bytes unread: a reset
            answer = b""
        took = time.monotonic() - t0
    finally:
        stop.set()
        t.join()
        s.close()
    # cut long before the body could have come whole (20 s); what it answered, if anything,
    # is no success
    assert took < 100 * 0.2 / 2, f"the connection was held {took:.1f} s"
    assert not answer.startswith(b"HTTP/1.1 2"), answer[:80]


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE"])
def test_a_body_the_method_does_not_use_is_cut_well_before_the_rate_window(
    tmp_path: Path, method: str
) -> None:
    """A reader (anyone, under --anonymous-read) trickling a GET body holds a worker for
    adapter.UNEXPECTED_BODY_WITHIN seconds, not the whole default rate window (30 s): 600
    such connections once starved every legitimate GET beyond 512 workers."""
    (tmp_path / "f").write_bytes(b"x" * 1000)
    with start_server(
        tmp_path, anonymous_read=True, quiet=True, tokens=tokens.parse("secret-token read,write\n")
    ) as h:
        assert h.limits.rate_window > 3 * adapter.UNEXPECTED_BODY_WITHIN
        auth = "Authorization: Bearer secret-token\r\n" if method == "DELETE" else ""
        s = _send_head(h, f"{method} /f HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 100\r\n\r\na")
        t0 = time.monotonic()
        try:
            try:
                answer = _answer(s)  # one byte of 100 came: the rest never does
            except ConnectionResetError:
                answer = b""
            took = time.monotonic() - t0
        finally:
            s.close()
        assert took < h.limits.rate_window / 2, f"held {took:.1f} s"
        assert not answer.startswith(b"HTTP/1.1 2"), answer[:80]
        assert (tmp_path / "f").exists()  # the DELETE did not run


def test_an_options_body_is_not_waited_for(anonymous: ServerHandle) -> None:
    s = _send_head(anonymous, "OPTIONS / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
    try:
        answer = _answer(s)  # the server closes: the unread body ends the connection
    finally:
        s.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]


def test_a_small_body_in_time_keeps_the_connection(anonymous: ServerHandle) -> None:
    s = _send_head(
        anonymous,
        "GET /f HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    try:
        answer = _answer(s)
    finally:
        s.close()
    assert answer.count(b"HTTP/1.1 200 ") == 2, answer[:200]
