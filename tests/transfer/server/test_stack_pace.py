"""A request body must keep coming: a client that trickles its body is cut after one rate
window instead of holding a worker for the whole receive timeout (300 s per receive before)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from dtnkit.transfer import tokens
from dtnkit.transfer.server import start_server

TOKEN = "pace-token-0123456789"


def _trickle(sock: socket.socket, stop: threading.Event, every: float) -> None:
    """A slow client: 8 bytes per *every* seconds, until the server closes or *stop*."""
    while not stop.wait(every):  # the pace of the client under test, not a synchronisation
        try:
            sock.sendall(b"x" * 8)
        except OSError:
            return


def _put_trickled(port: int, length: int, every: float, seconds: float) -> tuple[bool, float]:
    """(closed by the server, after how long) for a PUT whose body trickles."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=seconds)
    stop = threading.Event()
    try:
        sock.sendall(
            f"PUT /slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        feeder = threading.Thread(target=_trickle, args=(sock, stop, every), daemon=True)
        start = time.monotonic()
        feeder.start()
        try:
            while sock.recv(65536):
                pass  # an answer, then the close
            return True, time.monotonic() - start
        except TimeoutError:
            return False, time.monotonic() - start
        except OSError:  # reset
            return True, time.monotonic() - start
    finally:
        stop.set()
        sock.close()


def test_a_trickled_body_is_cut_after_one_rate_window(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    store = tokens.parse(f"{TOKEN} read,write\n")
    with start_server(root, tokens=store, quiet=True, body_min_rate=1024, rate_window=1.0) as h:
        closed, took = _put_trickled(h.port, 10**6, 0.05, seconds=30)  # ~160 B/s
    assert closed, "the server still waits for a body trickled at 160 B/s after 30 s"
    assert took < 15  # one window (1 s) and the receive that ends it, with room for load
    assert not (root / "slow").exists()
    assert not [p for p in root.iterdir() if "dtnkit-part" in p.name]  # the part is gone


def test_a_body_that_keeps_the_rate_is_taken(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    store = tokens.parse(f"{TOKEN} read,write\n")
    body = b"y" * 4000
    with start_server(root, tokens=store, quiet=True, body_min_rate=8, rate_window=1.0) as h:
        sock = socket.create_connection(("127.0.0.1", h.port), timeout=30)
        with sock:
            sock.sendall(
                f"PUT /ok HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            for i in range(0, len(body), 1000):  # 1000 B per 0.3 s: well over 8 B/s
                sock.sendall(body[i : i + 1000])
                time.sleep(0.3)  # the client's pace under test, not a synchronisation
            answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201") or answer.startswith(b"HTTP/1.1 204"), answer
    assert (root / "ok").read_bytes() == body
