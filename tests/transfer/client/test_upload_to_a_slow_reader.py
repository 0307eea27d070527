"""An upload into a server that reads its body slowly, or stops reading: the client's send
buffer fills and every send waits for room (transfer.sending.send_all).  --deadline still
ends the copy at its time, and a server that stops reading is a stall (--stall-timeout),
each with one clear error and exit 20, no traceback.  A real socket server on loopback
whose receive buffer is small; times are bounded from above only, with a wide margin."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment

BODY = 8 * 2**20


@contextlib.contextmanager
def slow_reader(rate: float) -> Iterator[str]:
    """A server on 127.0.0.1 that takes a PUT's head, answers ``100 Continue`` and reads the
    body at *rate* bytes a second (0: never), 16 KiB receive buffer; yields its base URL."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            head = b""
            while b"\r\n\r\n" not in head and not stop.is_set():
                got = conn.recv(4096)
                if not got:
                    break
                head += got
            with contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            while not stop.is_set():  # the body, at the rate (or never)
                if rate and not stop.wait(1024 / rate):
                    with contextlib.suppress(OSError):
                        if not conn.recv(1024):
                            break
                elif not rate:
                    stop.wait(0.2)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
        for c in conns:
            c.close()
        t.join(5)


def upload(env: Environment, src: Path, url: str, *argv: str) -> tuple[int, str, float]:
    began = time.monotonic()
    code = main(["cp", "--retries", "0", "--streams", "1", *argv, str(src), url + "up"], env)
    return code, taken(env.stderr), time.monotonic() - began


def test_the_deadline_ends_an_upload_whose_server_reads_slowly(
    tmp_path: Path, environment: Environment
) -> None:
    """8 MiB into a server reading 20 KiB/s (7 minutes): above the minimum rate, so
    --deadline 2 ends it, the send buffer full all along."""
    src = tmp_path / "f"
    src.write_bytes(b"\1" * BODY)
    with slow_reader(20 * 1024) as base:
        code, err, took = upload(
            environment, src, base, "--low-speed-limit", "100", "--deadline", "2"
        )
    assert code == 20, err
    assert "--deadline of 2 s passed" in err and "Traceback" not in err, err
    assert took < 15, took


def test_a_server_that_stops_reading_is_a_stall(tmp_path: Path, environment: Environment) -> None:
    """A server that never reads the body: the wait for room in the send buffer ends after
    --stall-timeout, one error, exit 20."""
    src = tmp_path / "f"
    src.write_bytes(b"\1" * BODY)
    with slow_reader(0) as base:
        code, err, took = upload(environment, src, base, "--stall-timeout", "1")
    assert code == 20, err
    assert "Traceback" not in err and "dtnkit: error:" in err, err
    assert "timed out" in err, err
    assert took < 15, took
