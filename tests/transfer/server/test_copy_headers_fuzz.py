"""COPY's own headers, fuzzed over raw sockets: 1,000 generated COPY requests in every run,
10,000 in the nightly one (``DTNKIT_FUZZ``, tests/support/fuzz.py: hypothesis examples of 50,
each batch sent on 50 connections at once) with malformed,
odd and valid ``Source``/``Destination`` URLs (unclosed brackets, zone IDs, bad ports,
userinfo, percent-encoding, every IPv4 and IPv6 spelling) and the other COPY headers.

No answer is a 500, no 400 is more than one line, and the server's log holds no traceback.
The server runs in a network namespace of its own (only ``lo``), so the copies a valid
request starts reach nothing outside it, whatever address or name they were given.
"""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support import freshnet, fuzz
from tests.support.rawhttp import Answer, LockedLog, exchange

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server

pytestmark = [pytest.mark.needs_root]

BATCH = 50
EXAMPLES = fuzz.batches(BATCH)
RW = "copy-fuzz-rw"
STATUS = re.compile(rb"^HTTP/1\.1 (\d{3}) ")

SCHEMES = ["http", "https", "dav", "davs", "HTTP", "root", "ftp", "", "http:", "file"]
SEPARATORS = ["://"] * 6 + [":/", ":", "//", "", ":///"]
USERINFO = [""] * 6 + ["u@", "u:p@", "@", "a@b@", "8.8.8.8@", "%31%30.0.0.5@", "[::1]@"]
HOSTS = [
    "127.0.0.1",
    "[::1",
    "[::1]",
    "::1",
    "[",
    "]",
    "[]",
    "[v1.x]",
    "[fe80::1%25lo]",
    "[fe80::1%lo",
    "[fe80::1%25]",
    "[fe80::1%25%41]",
    "[::1::2]",
    "[::ffff:127.0.0.1]",
    "[64:ff9b::7f00:1]",
    "[64:ff9b::808:808]",
    "[fec0::1]",
    "[2002:7f00:1::1]",
    "10.0.0.%35",
    "0x7f000001",
    "127.1",
    "1.2.3.4.5",
    "10.0.0.256",
    "09",
    "localhost",
    "LOCALHOST.",
    "",
    "%",
    "%%",
    "8.8.8.8",
    "8.8.8.8.",
    "0",
    "0x",
    "a..b",
    "dtn.example.invalid",
    "a" * 64,
    "ex ample",
    "h\tost",
    "[2001:db8::1]",
]
PORTS = [""] * 4 + [
    ":",
    ":0",
    ":80",
    ":65535",
    ":65536",
    ":-1",
    ":x",
    ":+80",
    ":99999999999999999999",
    ": 80",
    ":8_0",
    "::80",
]
PATHS = [
    "",
    "/",
    "/f",
    "/f?authz=x",
    "#",
    "/%00",
    "/\\..\\x",
    "/%2e%2e/etc/passwd",
    "?q",
    "/" + "p" * 300,
]
DAMAGE = "[]%@:/#?\\ \t!$&'()*+,;=~_-.0123456789"
OTHER = [
    ("X-Number-Of-Streams", ["0", "1", "4", "101", "-1", "x", "", "1e3", "99999999999"]),
    ("Want-Digest", ["adler32", "md5", "sha-256;q=0.5, md5", "nope", "", "md5;q=x"]),
    ("Overwrite", ["T", "F", "f", "x", ""]),
    ("RequireChecksumVerification", ["true", "false", "maybe", ""]),
    ("Credential", ["none", "gridsite", "", "None "]),
    ("TransferHeaderAuthorization", ["Bearer remote", "", "x" * 300]),
    ("TransferHeaderCookie", ["a=b"]),
    ("TransferHeaderArchiveMetadata", ["tape=1"]),
    ("SciTag", ["65", "0", "x", "99999"]),
    ("Host", ["[::1", "[", "x:y:z", "127.0.0.1:1"]),
]


def url(rnd: random.Random) -> str:
    """One Source or Destination value: pieces of URLs put together, sometimes damaged, or
    plain printable noise."""
    if rnd.random() < 0.1:
        return "".join(rnd.choice(DAMAGE + "abcxyz") for _ in range(rnd.randint(0, 40)))
    text = (
        rnd.choice(SCHEMES)
        + rnd.choice(SEPARATORS)
        + rnd.choice(USERINFO)
        + rnd.choice(HOSTS)
        + rnd.choice(PORTS)
        + rnd.choice(PATHS)
    )
    for _ in range(rnd.choice([0, 0, 0, 1, 2])):
        at = rnd.randint(0, len(text))
        text = text[:at] + rnd.choice(DAMAGE) + text[at + rnd.randint(0, 1) :]
    return text


def request(seed: int, port: int) -> bytes:
    """One COPY built from *seed* (hypothesis draws and shrinks seeds)."""
    rnd = random.Random(seed)
    target = rnd.choice(["/f", "/new.bin", "/", "/d/", "/d/g", "/missing/x"])
    headers = [("Host", f"127.0.0.1:{port}")]
    if rnd.random() < 0.9:
        headers.append(("Authorization", f"Bearer {RW}"))
    kinds = rnd.choice(
        [["Source"], ["Destination"], ["Source"], ["Destination"], ["Source", "Destination"], []]
    )
    headers += [(kind, url(rnd)) for kind in kinds]
    for name, values in rnd.sample(OTHER, rnd.randint(0, 4)):
        headers.append((name, rnd.choice(values)))
    head = f"COPY {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    return (head + "Connection: close\r\n\r\n").encode("utf-8", "replace")


def check(raw: bytes, answer: Answer) -> None:
    m = STATUS.match(answer.data)
    assert m is not None, (raw, answer.data[:200])
    status = int(m.group(1))
    assert status != 500, (raw, answer.data[:500])
    if status == 400:
        body = answer.data.split(b"\r\n\r\n", 1)[1]
        assert body.count(b"\n") == 1 and b"Traceback" not in body, (raw, body)


def fuzz(root: Path, examples: int) -> None:
    """The whole run, in the child's own network namespace."""
    root.mkdir()
    (root / "f").write_bytes(b"x" * 70000)
    (root / "d").mkdir()
    log = LockedLog()
    store = tokens.parse(f"{RW} read,write\n")
    server: ServerHandle
    with (
        start_server(
            root, tokens=store, log=log, marker_interval=0.2, tpc_allow=["127.0.0.1"]
        ) as server,
        ThreadPoolExecutor(BATCH) as pool,
    ):

        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(st.integers(0, 2**32), min_size=BATCH, max_size=BATCH))
        def batches(seeds: list[int]) -> None:
            raws = [request(seed, server.port) for seed in seeds]
            answers = pool.map(lambda raw: exchange(server.port, raw, deadline=60.0), raws)
            for raw, answer in zip(raws, answers, strict=True):
                check(raw, answer)

        batches()
        text = log.text()
    assert "Traceback" not in text and "internal error" not in text, text[-4000:]


@pytest.mark.fuzz
def test_malformed_copy_headers_get_a_400_never_a_500(tmp_path: Path) -> None:
    failure = freshnet.run_in_fresh_netns(lambda: fuzz(tmp_path / "root", EXAMPLES), timeout=1500)
    assert failure is None, failure


@pytest.mark.parametrize(
    "value",
    [
        "http://[::1",
        "http://[::1/f",
        "https://[fe80::1%25%41]/f",
        "http://[::1::2]/f",
        "http://[v1.x]/f",
        "http://[]/f",
        "http://[::1]:99999/f",
        "http://[::1]:-1/f",
        "http://:80/f",
        "ftp://h/f",
        "root://h//f",
        "http://10.0.0.%35/f",
        "http:///f",
        "",
        "http://a b/f",
        "http://1.2.3.4.5/f",
        "http://[fe80::1%25]/f",
    ],
)
def test_each_malformed_remote_is_one_400_with_its_reason(tmp_path: Path, value: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "f").write_bytes(b"x")
    log = LockedLog()
    with start_server(root, tokens=tokens.parse(f"{RW} read,write\n"), log=log) as server:
        for header, path in (("Source", "/new.bin"), ("Destination", "/f")):
            raw = (
                f"COPY {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {RW}\r\n"
                f"{header}: {value}\r\nConnection: close\r\n\r\n"
            ).encode()
            answer = exchange(server.port, raw)
            assert answer.statuses == [400], (header, value, answer.data[-300:])
            body = answer.data.split(b"\r\n\r\n", 1)[1].decode()
            assert body.count("\n") == 1 and body.startswith(header), body
    assert "Traceback" not in log.text() and not (root / "new.bin").exists()
