"""A GET or HEAD of something in the tree that is not a regular file (a FIFO, a device node) is
refused with 403, and refusing it touches no other request's descriptor: readers of regular
files beside it get every body intact, and the server still takes new connections.

A descriptor closed twice is closed a second time under whatever number the kernel has given
out meanwhile: another client's file (a 200 with the wrong bytes), its socket (a cut
connection) or the listening socket (the server stops accepting for good)."""

from __future__ import annotations

import hashlib
import http.client
import os
import threading
import urllib.parse
from pathlib import Path

from tests.support.served import serve_subprocess

TOKEN = "nonregular-token"
FILES = {f"dc_{c}.bin": bytes([i]) * (256 * 1024 + i) for i, c in enumerate("abcd")}
FIFO_REQUESTS = 400
READS_PER_READER = 60


def _connect(url: str) -> http.client.HTTPConnection:
    u = urllib.parse.urlsplit(url)
    assert u.hostname is not None and u.port is not None
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def test_fifo_refused_and_concurrent_readers_get_their_own_bytes(tmp_path: Path) -> None:
    with serve_subprocess(tmp_path, TOKEN) as (url, root):
        for name, data in FILES.items():
            (root / name).write_bytes(data)
        os.mkfifo(root / "pipe")
        want = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}
        wrong: list[str] = []
        refusals: list[int] = []

        def reader(name: str) -> None:
            for _ in range(READS_PER_READER):
                conn = _connect(url)  # a new connection each time: new descriptors to reuse
                try:
                    conn.request("GET", "/" + name)
                    resp = conn.getresponse()
                    body = resp.read()
                    if resp.status != 200 or hashlib.sha256(body).hexdigest() != want[name]:
                        wrong.append(f"{name}: {resp.status}, {len(body)} bytes")
                except (OSError, http.client.HTTPException) as exc:
                    wrong.append(f"{name}: {exc.__class__.__name__}: {exc}")
                finally:
                    conn.close()

        def prober() -> None:
            conn = _connect(url)
            try:
                for i in range(FIFO_REQUESTS):
                    conn.request("HEAD" if i % 2 else "GET", "/pipe")
                    resp = conn.getresponse()
                    resp.read()
                    refusals.append(resp.status)
            finally:
                conn.close()

        threads = [threading.Thread(target=reader, args=(n,)) for n in FILES]
        threads.append(threading.Thread(target=prober))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a request hung"

        assert refusals == [403] * FIFO_REQUESTS
        assert wrong == [], f"{len(wrong)} bad answers, first: {wrong[:3]}"
        # the listening socket is intact: a fresh connection is still served
        conn = _connect(url)
        try:
            conn.request("GET", "/dc_a.bin")
            resp = conn.getresponse()
            assert resp.status == 200
            assert resp.read() == FILES["dc_a.bin"]
        finally:
            conn.close()
