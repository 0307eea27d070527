"""HTTP third-party copy between two in-process ``dtnkit serve`` instances on 127.0.0.1."""

from __future__ import annotations

import http.client
import os
import re
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dtnkit.transfer import tokens
from dtnkit.transfer.client.tpc import (
    Marker,
    MarkerStreamError,
    TpcError,
    parse_stream,
    request_copy,
)
from dtnkit.transfer.server import ServerHandle, start_server

A_RW, A_RO, B_RW, B_RO = "a-read-write", "a-read-only", "b-read-write", "b-read-only"
BIG = os.urandom(1 << 20) * 12  # 12 MiB
SMALL = bytes(range(256)) * 64 + b"tail"


def adler(data: bytes) -> str:
    return f"{zlib.adler32(data):08x}"


@pytest.fixture()
def pair(tmp_path: Path) -> Iterator[tuple[ServerHandle, ServerHandle]]:
    ra, rb = tmp_path / "a", tmp_path / "b"
    ra.mkdir()
    rb.mkdir()
    sa = start_server(
        ra,
        tokens=tokens.parse(f"{A_RW} read,write\n{A_RO} read\n"),
        quiet=True,
        marker_interval=0.2,
        tpc_allow=["127.0.0.1"],
    )
    try:
        sb = start_server(
            rb,
            tokens=tokens.parse(f"{B_RW} read,write\n{B_RO} read\n"),
            quiet=True,
            marker_interval=0.2,
            tpc_allow=["127.0.0.1"],
        )
    except BaseException:
        sa.stop()
        raise
    try:
        yield sa, sb
    finally:
        sa.stop()
        sb.stop()


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if ".dtnkit-part" in p.name)


def test_pull_round_trip_with_markers(pair: tuple[ServerHandle, ServerHandle]) -> None:
    a, b = pair
    (a.root / "x.bin").write_bytes(BIG)
    seen: list[Marker] = []
    res = request_copy(
        b.url + "y.bin",
        source=a.url + "x.bin",
        token=B_RW,
        transfer_headers={"Authorization": f"Bearer {A_RO}"},
        streams=2,
        timeout=20,
        on_marker=seen.append,
    )
    assert res.ok, res.final
    assert res.status == 202 and res.final == "success: Created"
    assert (b.root / "y.bin").read_bytes() == BIG
    assert adler((b.root / "y.bin").read_bytes()) == adler(BIG)
    assert seen and seen == res.markers and res.bytes == len(BIG)
    assert seen[-1].stripe_count == 1 and seen[-1].timestamp
    assert leftovers(b.root) == []


def test_push_round_trip(pair: tuple[ServerHandle, ServerHandle]) -> None:
    a, b = pair
    (a.root / "x.bin").write_bytes(BIG)
    res = request_copy(
        a.url + "x.bin",
        destination=b.url + "z.bin",
        token=A_RO,
        transfer_headers={"Authorization": f"Bearer {B_RW}"},
        timeout=20,
        checksum="crc32c",
    )
    assert res.ok, res.final
    assert (b.root / "z.bin").read_bytes() == BIG
    assert res.bytes == len(BIG)
    assert leftovers(b.root) == [] and leftovers(a.root) == []


def test_missing_source_fails_and_creates_nothing(pair: tuple[ServerHandle, ServerHandle]) -> None:
    a, b = pair
    res = request_copy(
        b.url + "y.bin",
        source=a.url + "nope.bin",
        token=B_RW,
        transfer_headers={"Authorization": f"Bearer {A_RO}"},
        timeout=20,
    )
    assert not res.ok and res.final.startswith("failure:") and "404" in res.final
    assert list(b.root.iterdir()) == []


def test_corrupted_source_digest_mismatch(pair: tuple[ServerHandle, ServerHandle]) -> None:
    a, b = pair
    src = a.root / "x.bin"
    src.write_bytes(SMALL)
    conn = http.client.HTTPConnection(a.host, a.port, timeout=10)
    conn.request(
        "HEAD", "/x.bin", headers={"Authorization": f"Bearer {A_RO}", "Want-Digest": "adler32"}
    )
    assert conn.getresponse().headers["Digest"] == f"adler32={adler(SMALL)}"
    conn.close()
    st = src.stat()
    with open(src, "r+b") as f:  # same size, same mtime: the server's cached digest is stale
        f.write(b"X")
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    res = request_copy(
        b.url + "y.bin",
        source=a.url + "x.bin",
        token=B_RW,
        transfer_headers={"Authorization": f"Bearer {A_RO}"},
        timeout=20,
    )
    assert not res.ok and "checksum mismatch" in res.final
    assert list(b.root.iterdir()) == []


@pytest.mark.parametrize("auth", [None, "Bearer wrong", f"Bearer {B_RO}"])
def test_bad_transfer_authorization(
    pair: tuple[ServerHandle, ServerHandle], auth: str | None
) -> None:
    a, b = pair
    (a.root / "x.bin").write_bytes(SMALL)
    if auth == f"Bearer {B_RO}":  # push with a read-only token for the destination
        res = request_copy(
            a.url + "x.bin",
            destination=b.url + "z.bin",
            token=A_RO,
            transfer_headers={"Authorization": auth},
            timeout=20,
        )
        assert not res.ok and "403" in res.final
        assert list(b.root.iterdir()) == []
        return
    headers = {"Authorization": auth} if auth else {}
    res = request_copy(
        b.url + "y.bin", source=a.url + "x.bin", token=B_RW, transfer_headers=headers, timeout=20
    )
    assert not res.ok and "401" in res.final
    assert list(b.root.iterdir()) == []


def refused(pattern: str, active: str, **kw: Any) -> None:
    with pytest.raises(TpcError) as info:
        request_copy(active, timeout=20, **kw)
    assert re.search(pattern, info.value.render()), info.value.render()


def test_scopes_and_refusals(pair: tuple[ServerHandle, ServerHandle]) -> None:
    a, b = pair
    (a.root / "x.bin").write_bytes(SMALL)
    refused("403.*write scope", b.url + "y.bin", source=a.url + "x.bin", token=B_RO)
    refused("401", b.url + "y.bin", source=a.url + "x.bin", token=None)
    refused("400.*same file", a.url + "x.bin", source=a.url + "x.bin", token=A_RW)
    refused(
        "400.*same file", a.url + "x.bin", source=f"http://localhost:{a.port}/./x.bin", token=A_RW
    )
    refused("400.*not an http", b.url + "y.bin", source="ftp://127.0.0.1/x", token=B_RW)
    refused("400.*not an http", a.url + "x.bin", destination="file:///etc/passwd", token=A_RO)
    # raw requests: both headers, a Credential we do not support
    for extra, pattern in (
        ({"Source": a.url + "x.bin", "Destination": a.url + "q"}, b"exactly one"),
        ({"Source": a.url + "x.bin", "Credential": "gridsite"}, b"unsupported credential"),
    ):
        conn = http.client.HTTPConnection(b.host, b.port, timeout=10)
        conn.request("COPY", "/y.bin", headers={"Authorization": f"Bearer {B_RW}", **extra})
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        assert resp.status == 400 and pattern in body
    assert list(b.root.iterdir()) == []


def test_marker_parser() -> None:
    good = [
        "Perf Marker\n",
        "    Timestamp: 1700000000\n",
        "STRIPE INDEX: 0\n",
        "Stripe Bytes Transferred: 42\n",
        "Total Stripe Count: 1\n",
        "RemoteConnections: tcp:127.0.0.1:1\n",
        "End\n",
        "\n",
        "success: Created\n",
    ]
    final, markers = parse_stream(good)
    assert final == "success: Created" and markers[0].stripe_bytes == 42
    assert markers[0].extra == {"remoteconnections": "tcp:127.0.0.1:1"}
    bad = {
        "not a non-negative integer": [
            "Perf Marker",
            "Stripe Bytes Transferred: lots",
            "End",
            "success: Created",
        ],
        "missing 'End'": ["Perf Marker", "Timestamp: 1", "success: Created"],
        "not 'Key: value'": ["Perf Marker", "garbage", "End", "success: Created"],
        "expected 'Perf Marker'": ["Timestamp: 1", "success: Created"],
        "ended inside a marker": ["Perf Marker", "Timestamp: 1"],
        "after the final line": ["success: Created", "failure: late"],
    }
    for why, lines in bad.items():
        with pytest.raises(MarkerStreamError, match=why):
            parse_stream(lines)
    with pytest.raises(TpcError, match="without a final"):
        parse_stream(["Perf Marker", "End"])
    final, _ = parse_stream([b"failure: x: y\n"])
    assert final == "failure: x: y"


class _SlowSource(BaseHTTPRequestHandler):
    """HEAD and ranged GET of a fixed body, sent slowly (for the cancellation test)."""

    protocol_version = "HTTP/1.1"
    body = SMALL * 64  # about 1 MiB

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _head(self, status: int, length: int, extra: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self) -> None:
        extra = {"Digest": f"adler32={adler(self.body)}"} if "Want-Digest" in self.headers else {}
        self._head(200, len(self.body), extra)

    def do_GET(self) -> None:
        if "Range" not in self.headers:  # the whole file (a one-stream pull's first GET)
            data = self.body
            self._head(200, len(data), {})
        else:
            first, last = self.headers["Range"].split("=")[1].split("-")
            data = self.body[int(first) : int(last) + 1]
            self._head(206, len(data), {"Content-Range": f"bytes {first}-{last}/{len(self.body)}"})
        try:
            for i in range(0, len(data), 65536):
                self.wfile.write(data[i : i + 65536])
                time.sleep(0.05)
        except OSError:
            pass


@pytest.fixture()
def slow() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowSource)
    server.daemon_threads = True
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


def test_periodic_markers_on_a_slow_pull(
    pair: tuple[ServerHandle, ServerHandle], slow: ThreadingHTTPServer
) -> None:
    _a, b = pair
    seen: list[int] = []
    res = request_copy(
        b.url + "y.bin",
        source=f"http://127.0.0.1:{slow.server_port}/x",
        token=B_RW,
        timeout=20,
        on_marker=lambda m: seen.append(m.stripe_bytes or 0),
    )
    assert res.ok, res.final
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] == len(_SlowSource.body)
    assert (b.root / "y.bin").read_bytes() == _SlowSource.body


def test_client_disconnect_leaves_no_part_file(
    pair: tuple[ServerHandle, ServerHandle], slow: ThreadingHTTPServer
) -> None:
    _a, b = pair
    conn = http.client.HTTPConnection(b.host, b.port, timeout=10)
    conn.request(
        "COPY",
        "/y.bin",
        headers={
            "Authorization": f"Bearer {B_RW}",
            "Credential": "none",
            "Source": f"http://127.0.0.1:{slow.server_port}/x.bin",
        },
    )
    resp = conn.getresponse()
    assert resp.status == 202
    time.sleep(0.3)
    assert leftovers(b.root), "the copy should be in progress"
    conn.close()
    resp.close()
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and leftovers(b.root):
        time.sleep(0.1)
    assert leftovers(b.root) == []
    assert not (b.root / "y.bin").exists()


def test_cli_tpc_pull_and_push(pair: tuple[ServerHandle, ServerHandle]) -> None:
    import json

    from dtnkit.cli.cp import cp

    a, b = pair
    (a.root / "x.bin").write_bytes(SMALL)
    runner = CliRunner()
    out = runner.invoke(
        cp,
        [
            "--tpc",
            "pull",
            "--token",
            B_RW,
            "--remote-token",
            A_RO,
            "--json",
            a.url + "x.bin",
            b.url + "y.bin",
        ],
    )
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["digest"] == adler(SMALL) and result["mode"] == "pull"
    assert (b.root / "y.bin").read_bytes() == SMALL
    out = runner.invoke(
        cp,
        [
            "--tpc",
            "push",
            "--token",
            A_RO,
            "--remote-token",
            B_RW,
            "--json",
            a.url + "x.bin",
            b.url + "w.bin",
        ],
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["digest"] == adler(SMALL)
    assert (b.root / "w.bin").read_bytes() == SMALL
    out = runner.invoke(
        cp,
        [
            "--tpc",
            "pull",
            "--token",
            B_RW,
            "--remote-token",
            "bad",
            a.url + "x.bin",
            b.url + "v.bin",
        ],
    )
    assert out.exit_code != 0 and not (b.root / "v.bin").exists()
