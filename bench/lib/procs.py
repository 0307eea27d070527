"""Children the bench starts (stopped by their PID whatever happens), ports, files, progress."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

T0 = time.monotonic()


def log(msg: str) -> None:
    """A progress line on stderr, with the seconds since the bench started."""
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def stop(proc: subprocess.Popen[Any]) -> None:
    """Stop one child by its PID: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Tracked:
    """Children the bench started, stopped by PID whatever happens."""

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen[Any]] = {}

    def add(self, proc: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
        self.procs[proc.pid] = proc
        return proc

    def stop(self, proc: subprocess.Popen[Any]) -> None:
        stop(proc)
        self.procs.pop(proc.pid, None)

    def forget(self, proc: subprocess.Popen[Any]) -> None:
        self.procs.pop(proc.pid, None)

    def pids(self) -> list[int]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def stop_all(self) -> None:
        for pid in list(self.procs):
            self.stop(self.procs[pid])


def wait_port(
    port: int, proc: subprocess.Popen[Any], timeout: float = 20.0, host: str = "127.0.0.1"
) -> None:
    """Until something listens on *port* (the server's own answer, bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port} after {timeout} s")


def listening_url(line: str) -> str:
    """The base URL in ``dtnkit serve``'s first line (text or JSON), ending in "/"."""
    m = re.search(r"(https?://[^\s\"]+)", line)
    if not m:
        raise RuntimeError(f"dtnkit serve did not start: {line!r}")
    url = m.group(1)
    return url if url.endswith("/") else url + "/"


def make_file(path: Path, size: int) -> None:
    """*size* bytes of random data (16 MiB of it, repeated), mode 0644."""
    chunk = os.urandom(min(size, 16 * 2**20))
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
    path.chmod(0o644)


def fmt_size(size: int) -> str:
    gib, mib = 2**30, 2**20
    return f"{size // gib} GiB" if size >= gib and size % gib == 0 else f"{size // mib} MiB"
