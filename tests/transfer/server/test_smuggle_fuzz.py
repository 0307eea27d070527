"""Fuzzing the request parser over raw sockets: 1,000 generated malformed requests in every
run, 10,000 in the nightly one (``DTNKIT_FUZZ``, tests/support/fuzz.py: hypothesis examples
of 50 requests, each batch sent on 50 concurrent connections; ``DTNKIT_FUZZ=100000`` for a
deeper hunt).

The server is a ``dtnkit serve --metrics`` child process.  For every request: no 500, every
connection answered or closed within a deadline after we stop sending; at the end no
traceback and no "internal error" on the server's stderr (its log, and whatever a thread
that died would print), the server still answers, and no file under the root changed (the
server's only token reads; COPY never carries it, so no request leaves the host)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support import fuzz

BATCH = 50
EXAMPLES = fuzz.batches(BATCH)
DEADLINE = 10.0  # seconds for a batch: every connection answered and closed
RO = "tok-fuzz-read"
STATUS = re.compile(rb"HTTP/1\.1 (\d{3}) ")

METHODS = [
    b"GET",
    b"HEAD",
    b"PUT",
    b"DELETE",
    b"MKCOL",
    b"PROPFIND",
    b"COPY",
    b"POST",
    b"OPTIONS",
    b"MOVE",
    b"BREW",
    b"get",
    b"G ET",
    b"GET\x00",
    b"",
]
TARGETS = [
    b"/f",
    b"/",
    b"/d/",
    b"/d/g",
    b"/%2e%2e/etc/passwd",
    b"/../x",
    b"/f?x=1",
    b"*",
    b"http://h/f",
    b"/%00",
    b"//f",
    b"/f\xff",
    b"/" + b"a" * 300,
    b"/metrics",
    b"/%6detrics",
    b"//metrics/",
    b"http://h/./metrics",
    b"/%",
]
VERSIONS = [
    b"HTTP/1.1",
    b"HTTP/1.0",
    b"HTTP/2.0",
    b"HTTP/1.1 ",
    b"HTTP/1.x",
    b"http/1.1",
    b"HTTP/0.9",
    b"",
]
SEPARATORS = [b"\r\n"] * 8 + [b"\n", b"\r", b"\r\n ", b"\r\n\t", b"\r\r\n", b"\n\r"]
NUMBERS = [
    b"0",
    b"5",
    b"10",
    b"-1",
    b"+5",
    b"5, 5",
    b"\xb2",
    b"\xc2\xb2",
    b"0x10",
    b"1e3",
    b"99999999999999999999999",
    b" 7 ",
    b"",
    b"\x00",
]
HEADERS = [
    (b"Host", [b"x", b"", b"a b", b"127.0.0.1:1"]),
    (b"Content-Length", NUMBERS),
    (
        b"Transfer-Encoding",
        [
            b"chunked",
            b"Chunked",
            b"gzip",
            b"chunked, gzip",
            b"identity",
            b" chunked",
            b"chunked\x0b",
            b"",
        ],
    ),
    (
        b"Authorization",
        [
            f"Bearer {RO}".encode(),
            b"Bearer",
            b"Basic Zm9vOmJhcg==",
            b"Bearer " + b"x" * 5000,
            f"bearer  {RO}".encode(),
        ],
    ),
    (b"Range", [b"bytes=0-3", b"bytes=5-2", b"bytes=-", b"bytes=0-1,2-3", b"bytes=\xb2-"]),
    (b"Want-Digest", [b"adler32", b"md5;q=0.5, sha-256", b"\xff", b"x" * 200]),
    (b"Want-Content-Digest", [b"adler32=1", b"sha-256", b"md5=1.5"]),
    (b"Depth", [b"0", b"1", b"infinity", b"\xb2"]),
    (b"Expect", [b"100-continue", b"200-ok", b""]),
    (b"Connection", [b"close", b"keep-alive", b"upgrade", b""]),
    (b"X-Number-Of-Streams", NUMBERS),
    (b"Dtnkit-Upload", [b"start", b"commit", b"\xb2"]),
    (b"Dtnkit-Upload-Length", NUMBERS),
    (b"Content-Range", [b"bytes 0-4/5", b"bytes */5", b"bytes 5-0/1", b"\xb2"]),
    (b"If-None-Match", [b"*", b'"x"']),
    (b"If-Match", [b"*", b'"x"', b'W/"x"', b"x", b'"x", *', b""]),
    (b"Content-Digest", [b"sha-256=:AAAA:", b"sha-256=abc", b"((", b"adler=:AAAAAA==:"]),
    (b"Repr-Digest", [b"sha-256=:" + b"A" * 43 + b"=:", b"md5=:x:", b"unknown=:AA==:"]),
    (b"Digest", [b"adler32=00000000", b"md5=", b"sha-256=zz"]),
    (b"X Bad", [b"1"]),
    (b"X-Bad ", [b"1"]),
    (b"", [b"1"]),
    (b"\xc3\xa9", [b"1"]),
]
#: framing headers (Content-Length, Transfer-Encoding) come up three times as often
WEIGHTS = [3 if name in (b"Content-Length", b"Transfer-Encoding") else 1 for name, _ in HEADERS]
CHUNKED_BODIES = [
    b"0\r\n\r\n",
    b"5\r\nhello\r\n0\r\n\r\n",
    b"5\r\nhel",
    b"z\r\n",
    b"5\nhello\n0\n\n",
    b"5;a=b\r\nhello\r\n0\r\nT: 1\r\n\r\n",
    b"-1\r\n",
    b"ffffffffffffffffff\r\n",
]


def request(seed: int) -> bytes:
    """One malformed (or odd, or valid) request, built from *seed*: hypothesis draws and
    shrinks seeds, which keeps 10,000 requests a run cheap to generate."""
    rnd = random.Random(seed)
    method = rnd.choice(METHODS)
    line = b" ".join([method, rnd.choice(TARGETS), rnd.choice(VERSIONS)])
    sep = rnd.choice(SEPARATORS)
    parts = [line]
    for name, values in rnd.choices(HEADERS, WEIGHTS, k=rnd.randint(0, 8)):
        if method == b"COPY" and name == b"Authorization":
            continue  # a COPY with a valid token could reach out of the host
        parts.append(name + b": " + rnd.choice(values))
    if method == b"COPY":
        parts.append(b"Source: http://127.0.0.1:9/x")
    body = rnd.choice([b"", b"hello", *CHUNKED_BODIES]) + rnd.randbytes(rnd.randint(0, 64))
    raw = sep.join(parts) + sep + sep + body
    for _ in range(rnd.choice([0, 0, 0, 1, 2, 3])):  # byte-level damage
        at = rnd.randint(0, len(raw))
        byte = rnd.choice([b"\r", b"\n", b"\x00", b" ", b":", b"\xb2", b"\x7f", b"0"])
        kind = rnd.randint(0, 2)
        if kind == 0:
            raw = raw[:at] + byte + raw[at:]
        elif kind == 1:
            raw = raw[:at] + raw[at + 1 :]
        else:
            raw = raw[:at] + byte + raw[at + 1 :]
    return raw


def send_batch(port: int, raws: list[bytes]) -> list[tuple[bool, bytes]]:
    """Send each request on its own connection, half-close, read until the server closes."""
    sel = selectors.DefaultSelector()
    states = []
    for raw in raws:
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        state = {"sock": s, "raw": raw, "sent": 0, "data": bytearray(), "closed": False}
        states.append(state)
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, state)
    end = time.monotonic() + DEADLINE
    open_ = len(states)
    try:
        while open_ and time.monotonic() < end:
            for key, mask in sel.select(max(0.0, end - time.monotonic())):
                state = key.data
                s = state["sock"]
                try:
                    if mask & selectors.EVENT_WRITE:
                        if state["sent"] < len(state["raw"]):
                            state["sent"] += s.send(state["raw"][state["sent"] :])
                        if state["sent"] >= len(state["raw"]):
                            s.shutdown(socket.SHUT_WR)
                            sel.modify(s, selectors.EVENT_READ, state)
                    if mask & selectors.EVENT_READ:
                        data = s.recv(65536)
                        if data:
                            state["data"] += data
                            continue
                        raise ConnectionResetError
                except BlockingIOError:
                    continue
                except OSError:  # EOF, reset or broken pipe: the server closed
                    state["closed"] = True
                    sel.unregister(s)
                    open_ -= 1
    finally:
        for state in states:
            state["sock"].close()
        sel.close()
    return [(bool(st_["closed"]), bytes(st_["data"])) for st_ in states]


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            out[str(p.relative_to(root))] = (p.lstat().st_mtime_ns, digest)
    return out


@pytest.mark.fuzz
def test_fuzzed_requests_never_500_hang_or_write(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "f").write_bytes(b"0123456789" * 100)
    (root / "d" / "g").write_bytes(b"g")
    (root / "metrics").write_bytes(b"a file named metrics")
    before = snapshot(root)
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text(f"{RO} read\n")
    tokens_file.chmod(0o600)
    stderr = tmp_path / "serve.stderr"
    count = 0
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "serve",
                "--root",
                str(root),
                "--port",
                "0",
                "--tokens",
                str(tokens_file),
                "--metrics",
                "--format",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, stderr.read_text()
        port = int(json.loads(line)["url"].rsplit(":", 1)[1].strip("/"))

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(seeds=st.lists(st.integers(0, 2**64), min_size=BATCH, max_size=BATCH))
        def batch_of(seeds: list[int]) -> None:
            nonlocal count
            batch = [request(seed) for seed in seeds]
            for raw, (closed, data) in zip(batch, send_batch(port, batch), strict=True):
                assert closed, f"no close within {DEADLINE} s after {raw[:200]!r}"
                statuses = [int(m) for m in STATUS.findall(data)]
                assert 500 not in statuses, (raw[:300], data[:300])
            count += len(batch)

        t0 = time.monotonic()
        batch_of()
        seconds = time.monotonic() - t0
        # still serving after all of it
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                f"GET /f HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {RO}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"0123456789")
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"{count} fuzzed requests in {seconds:.1f} s")
    assert count >= BATCH * EXAMPLES
    assert snapshot(root) == before
    text = stderr.read_text(errors="replace")
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    assert proc.returncode == 0, text[-2000:]
