"""A PROPFIND of a large directory is streamed: the server's memory does not grow with it.

Before, a depth-1 PROPFIND built the whole 207 body in memory (75 MB for 200k entries, and
ten at once took 3.3 GiB of RSS).  Here ten clients ask at once for a 12,000-entry listing
from a ``dtnkit serve`` child process, and wait until all have their answer's head before
reading the bodies; the server's peak RSS (VmHWM) may not grow by more than a fraction of
what ten bodies would take.
"""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.transfer.wire import multistatus

ENTRIES = 12_000
CLIENTS = 10


def peak_rss(pid: int) -> int:
    """VmHWM of *pid*, bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def child_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    root = tmp_path / "root"
    big = root / "big"
    big.mkdir(parents=True)
    for i in range(ENTRIES):
        fd = os.open(big / f"entry-with-a-fairly-long-name-{i:06d}.dat", os.O_CREAT | os.O_WRONLY)
        os.close(fd)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit.cli.main",
            "serve",
            "--root",
            str(root),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--anonymous-read",
            "--quiet",
            "--listing-slots",
            str(CLIENTS),
        ],  # all ten listings stream at once
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"listening on http://127\.0\.0\.1:([0-9]+)/", line)
        assert found, line + (proc.stderr.read() if proc.stderr and proc.poll() else "")
        port = int(found.group(1))
        yield proc, port, root
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def propfind(port: int, path: str) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("PROPFIND", path, headers={"Depth": "1"})
    return conn.getresponse()


def test_ten_large_propfinds_at_once_keep_memory_bounded(
    child_server: tuple[subprocess.Popen[str], int, Path],
) -> None:
    proc, port, _root = child_server
    small = propfind(port, "/")  # warm up: imports, threads, the first listing
    assert small.status == 207
    small.read()
    one = propfind(port, "/big/")
    body = one.read()
    members = multistatus.parse(body, "/big/")
    assert one.status == 207 and len(members) == ENTRIES
    assert {m.path for m in members} == {
        f"/big/entry-with-a-fairly-long-name-{i:06d}.dat" for i in range(ENTRIES)
    }
    base = peak_rss(proc.pid)
    answers: list[http.client.HTTPResponse] = []
    lock = threading.Lock()

    def ask() -> None:
        resp = propfind(port, "/big/")
        with lock:
            answers.append(resp)

    threads = [threading.Thread(target=ask) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(answers) == CLIENTS
    bodies = [resp.read() for resp in answers]
    grown = peak_rss(proc.pid) - base
    assert all(len(b) == len(body) and b.endswith(multistatus.CLOSING.encode()) for b in bodies)
    print(
        f"PROPFIND x{CLIENTS}: server peak RSS grew {grown / 2**20:.1f} MiB; body "
        f"{len(body) / 2**20:.1f} MiB"
    )
    # ten bodies held at once would be CLIENTS x len(body) (about 40 MB here), and the
    # structures behind them several times that
    assert grown < len(body) * CLIENTS / 4, (grown, len(body))
