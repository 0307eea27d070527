"""Raw-socket HTTP/1.1 for parser tests: send exact bytes, read every response until close."""

from __future__ import annotations

import io
import re
import socket
import threading
import time
from dataclasses import dataclass, field

STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


@dataclass
class Answer:
    """What came back on one connection."""

    data: bytes
    closed: bool  # the server closed (EOF or reset) before the deadline
    seconds: float
    statuses: list[int] = field(default_factory=list)


def exchange(
    port: int,
    raw: bytes,
    *,
    deadline: float = 5.0,
    half_close: bool = True,
    host: str = "127.0.0.1",
) -> Answer:
    """Send *raw*, optionally shut down our sending side, read until the server closes.

    ``closed`` False means the server neither closed nor stopped talking within *deadline*.
    """
    t0 = time.monotonic()
    chunks: list[bytes] = []
    closed = False
    with socket.create_connection((host, port), timeout=deadline) as sock:
        try:
            sock.sendall(raw)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            closed = True
        while not closed:
            left = deadline - (time.monotonic() - t0)
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            except OSError:  # reset: closed too
                closed = True
                break
            if not data:
                closed = True
                break
            chunks.append(data)
    data = b"".join(chunks)
    statuses = [int(m.group(1)) for m in STATUS.finditer(data)]  # bodies here never hold one
    return Answer(data, closed, time.monotonic() - t0, statuses)


class LockedLog(io.StringIO):
    """A log the server's threads write to and a test reads."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, s: str) -> int:
        with self.lock:
            return super().write(s)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()
