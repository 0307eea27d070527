"""Round trips before the first byte (issue 11, WAN speed): what ``dtnkit cp`` and a
``dtnkit serve`` pulling a third-party copy send, counted by a TCP relay in front of a real
``dtnkit serve`` over real sockets.

One stream: one ``GET`` of the whole file with ``Want-Digest`` on one connection, no HEAD,
and a digest HEAD (beside the transfer) only when the GET's answer carried no ``Digest``.
Several streams: a HEAD on the first stream's connection, then one ranged GET per stream
(spans), not one per block.  Before this work a single verified stream sent a HEAD, a digest
HEAD and the GET on three connections.
"""

from __future__ import annotations

import http.client
import io
import json
import re
import secrets
import shutil
import sys
from pathlib import Path

import pytest
from tests.conftest import taken
from tests.transfer.client import test_receive_wan as test_wan_receive
from tests.transfer.client.test_receive_wan import CountingRelay, payload

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer import tokens
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.engine import spans
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle, start_server

# the same server and counting relay as the receive-path tests
served = test_wan_receive.served

BLOCK = 64 * 1024
SIZE = 12 * BLOCK - 1000
RW = "trip-rw"


def opts(**kw: object) -> CopyRequest:
    base: dict[str, object] = {
        "block_size": BLOCK,
        "streams": 1,
        "backoff": 0.01,
        "retries": 2,
        "stall_timeout": 10.0,
    }
    base.update(kw)
    return CopyRequest(**base)  # type: ignore[arg-type]


def ask(
    port: int, method: str, path: str, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    """One request straight to the server (not through the relay)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def requests(relay: CountingRelay) -> list[str]:
    """Each request as 'METHOD [Range] [want]' in the order the relay saw them."""
    out = []
    for head in relay.requests:
        m = re.search(r"^Range: *(\S+)", head, re.M | re.I)
        want = "want" if re.search(r"^Want-Digest:", head, re.M | re.I) else ""
        out.append(" ".join(x for x in (head.split()[0], m.group(1) if m else "", want) if x))
    return out


def test_one_stream_is_one_get_on_one_connection_when_the_digest_is_cached(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path
) -> None:
    """Before: HEAD, HEAD with Want-Digest and GET, on three connections."""
    handle, root, relay = served
    data = payload(SIZE)
    (root / "f.bin").write_bytes(data)
    assert "digest" in ask(handle.port, "HEAD", "/f.bin", {"Want-Digest": "adler32"})[1]
    summary = copy(f"http://127.0.0.1:{relay.port}/f.bin", str(tmp_path / "f.bin"), opts())
    assert (tmp_path / "f.bin").read_bytes() == data
    assert requests(relay) == ["GET want"]
    assert relay.connections == 1
    assert summary.files[0].digest is not None  # verified against the GET's Digest


def test_a_get_without_digest_asks_it_beside_the_transfer(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path
) -> None:
    """A file larger than one hashing block, digest not cached: the server does not hash it
    before the GET's first byte; the client asks a digest HEAD on its own connection."""
    _handle, root, relay = served
    big = 9 * 2**20
    data = payload(big, seed=5)
    (root / "big.bin").write_bytes(data)
    summary = copy(
        f"http://127.0.0.1:{relay.port}/big.bin", str(tmp_path / "big.bin"), opts(block_size=2**20)
    )
    assert (tmp_path / "big.bin").read_bytes() == data
    assert sorted(requests(relay)) == ["GET want", "HEAD want"]
    assert relay.connections == 2
    assert summary.files[0].digest is not None


def test_serve_answers_digest_on_a_get_only_when_cheap(
    served: tuple[ServerHandle, Path, CountingRelay],
) -> None:
    handle, root, _relay = served
    (root / "small").write_bytes(b"x" * 1000)
    (root / "big").write_bytes(payload(9 * 2**20, seed=6))
    want = {"Want-Digest": "adler32"}
    assert "digest" in ask(handle.port, "GET", "/small", want)[1]  # one hashing block
    status, headers, body = ask(handle.port, "GET", "/big", want)
    assert status == 200 and "digest" not in headers and len(body) == 9 * 2**20
    head = ask(handle.port, "HEAD", "/big", want)[1]["digest"]  # a HEAD computes it
    assert ask(handle.port, "GET", "/big", want)[1]["digest"] == head  # now cached


def test_several_streams_ask_one_get_per_span(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path
) -> None:
    """Before: a HEAD, a digest HEAD and twelve per-block GETs on five connections."""
    handle, root, relay = served
    data = payload(SIZE, seed=7)
    (root / "s.bin").write_bytes(data)
    ask(handle.port, "HEAD", "/s.bin", {"Want-Digest": "adler32"})
    copy(f"http://127.0.0.1:{relay.port}/s.bin", str(tmp_path / "s.bin"), opts(streams=4))
    assert (tmp_path / "s.bin").read_bytes() == data
    seen = requests(relay)
    assert seen.count("HEAD") == 1 and seen.count("HEAD want") == 1
    gets = sorted(
        (r for r in seen if r.startswith("GET")), key=lambda r: int(r.split("=")[1].split("-")[0])
    )
    assert gets == [
        f"GET bytes={a}-{b}"
        for a, b in (
            (0, 3 * BLOCK - 1),
            (3 * BLOCK, 6 * BLOCK - 1),
            (6 * BLOCK, 9 * BLOCK - 1),
            (9 * BLOCK, SIZE - 1),
        )
    ]
    assert relay.connections == 5  # four streams (the first asked the HEAD) + the digest


def test_an_ordered_digest_keeps_block_order_with_several_streams(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path
) -> None:
    """md5 must see the bytes in order: per-block GETs, as before, rather than spans."""
    _handle, root, relay = served
    data = payload(SIZE, seed=8)
    (root / "m.bin").write_bytes(data)
    summary = copy(
        f"http://127.0.0.1:{relay.port}/m.bin",
        str(tmp_path / "m.bin"),
        opts(streams=3, checksum="md5"),
    )
    assert (tmp_path / "m.bin").read_bytes() == data
    assert len([r for r in requests(relay) if r.startswith("GET")]) == 12
    assert summary.files[0].read_back == 0 or summary.files[0].read_back < 12


def test_spans_cut_bytes_evenly_and_keep_order() -> None:
    blocks = pl.plan_blocks(10 * BLOCK + 5, BLOCK)
    groups = spans(blocks, 4)
    assert [b.index for g in groups for b in g] == list(range(11))
    sizes = [len(g) for g in groups]
    assert len(sizes) == 4 and max(sizes) - min(sizes) <= 1
    assert spans(blocks[:2], 4) == [[blocks[0]], [blocks[1]]]
    assert spans([], 3) == []


def test_tpc_pull_is_one_get_and_decides_its_own_streams(tmp_path: Path) -> None:
    """dtnkit serve pulling from dtnkit serve: before, the source saw a HEAD (resolve), a
    HEAD (the download's), a digest HEAD and the GET; a COPY without X-Number-Of-Streams
    took one stream without saying why.  Now the source sees one GET and the active side's
    log says what its streams auto chose."""
    ra, rb = tmp_path / "a", tmp_path / "b"
    ra.mkdir()
    rb.mkdir()
    data = payload(SIZE, seed=9)
    (ra / "src.bin").write_bytes(data)
    source = start_server(ra, tokens=tokens.parse(f"{RW} read,write\n"), quiet=True)
    log = io.StringIO()
    active = start_server(
        rb,
        tokens=tokens.parse(f"{RW} read,write\n"),
        log=log,
        marker_interval=0.2,
        tpc_allow=["127.0.0.1"],
    )
    relay = CountingRelay(source.port)
    try:
        auth = {"Authorization": f"Bearer {RW}"}
        assert (
            "digest" in ask(source.port, "HEAD", "/src.bin", {**auth, "Want-Digest": "adler32"})[1]
        )
        status, _h, body = ask(
            active.port,
            "COPY",
            "/dst.bin",
            {
                **auth,
                "Source": f"http://127.0.0.1:{relay.port}/src.bin",
                "TransferHeaderAuthorization": f"Bearer {RW}",
                "Credential": "none",
            },
        )
        assert status == 202
        assert body.decode().strip().splitlines()[-1] == "success: Created", body
        assert (rb / "dst.bin").read_bytes() == data
        assert requests(relay) == ["GET want"]
        assert relay.connections == 1
        said = [line for line in log.getvalue().splitlines() if "streams auto" in line]
        assert said and "1 stream" in said[0], log.getvalue()
    finally:
        relay.close()
        active.stop()
        source.stop()


def test_cli_auto_with_a_window_that_covers_the_path_is_one_get(
    served: tuple[ServerHandle, Path, CountingRelay], tmp_path: Path, environment: Environment
) -> None:
    """``--streams auto`` on a path whose rate x RTT one window covers (loopback): one
    stream, said with its reason, and one GET."""
    handle, root, relay = served
    data = payload(SIZE, seed=11)
    (root / "a.bin").write_bytes(data)
    ask(handle.port, "HEAD", "/a.bin", {"Want-Digest": "adler32"})
    code = main(
        [
            "cp",
            "--streams",
            "auto",
            "--rate",
            "1gbit",
            "--format",
            "json",
            "-v",
            f"http://127.0.0.1:{relay.port}/a.bin",
            str(tmp_path / "a.bin"),
        ],
        environment,
    )
    out, err = taken(environment.stdout), taken(environment.stderr)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["streams"] == 1 and doc["streams_auto"]["streams"] == 1
    assert "--streams auto: 1 stream" in err
    assert requests(relay) == ["GET want"]
    assert (tmp_path / "a.bin").read_bytes() == data


LAB_TOOLS = [t for t in ("iptables",) if shutil.which(t) is None]


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(LAB_TOOLS), reason=f"needs {', '.join(LAB_TOOLS)}")
def test_requests_on_a_50ms_lab_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real 50 ms path (untuned ends: auto takes several streams), as the server's
    access log records them: several streams send a HEAD, a digest HEAD and one GET per
    stream (not one per block); then one stream, the digest now cached, sends one GET."""
    from dtnkit.lab import path as lab

    state = tmp_path / "lab"
    monkeypatch.setenv("DTNKIT_LAB_STATE", str(state))
    root = tmp_path / "srv"
    root.mkdir()
    data = payload(16 * 2**20, seed=12)
    (root / "f").write_bytes(data)
    log = tmp_path / "serve.log"
    with (
        lab.path(f"trip{secrets.token_hex(2)}", state_root=state, rtt_ms=50, rate_bps=10**9) as p,
        open(log, "w") as errlog,
    ):
        server = p.dst.popen(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "serve",
                "--root",
                str(root),
                "--host",
                p.dst.address,
                "--port",
                "0",
                "--anonymous-read",
            ],
            stderr=errlog,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            assert "listening on" in line, line
            url = line.split("listening on ", 1)[1].split()[0] + "f"

            def cp(*args: str) -> dict[str, object]:
                res = p.src.run(
                    [
                        sys.executable,
                        "-m",
                        "dtnkit",
                        "cp",
                        url,
                        str(tmp_path / "got"),
                        "-f",
                        "--block-size",
                        "1M",
                        "--format",
                        "json",
                        *args,
                    ],
                    check=False,
                )
                assert res.returncode == 0, res.stderr
                assert (tmp_path / "got").read_bytes() == data
                doc: dict[str, object] = json.loads(res.stdout)
                return doc

            n = cp("--streams", "auto", "--rate", "1gbit")["streams"]
            assert cp("--streams", "1")["streams"] == 1
        finally:
            server.terminate()
            server.wait(10)
    # the log is complete once the server has stopped
    seen = [
        m.group(1)
        for m in (re.search(r'"(GET|HEAD) /f HTTP/1\.1"', x) for x in log.read_text().splitlines())
        if m
    ]
    assert isinstance(n, int) and 2 <= n < 16
    # auto: a HEAD, a digest HEAD, a GET per stream, and one per tail a stream that ended
    # took from another (engine.Shares): fewer than one per 1 MiB block; then one stream:
    # one GET (cached digest)
    assert seen.count("HEAD") == 2 and n + 1 <= seen.count("GET") < 16 + 1, seen
