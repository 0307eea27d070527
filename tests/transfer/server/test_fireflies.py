"""Fireflies of real transfers: a UDP collector on loopback receives a ``start`` and an
``end`` per data stream of ``dtnkit serve``, valid against the firefly schema (v1), with the
ids of the request's ``SciTag`` (from dtnkit cp, curl, a third-party copy) or the server's
default, and the bytes the kernel counted."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.transfer import tokens
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.client.tpc import third_party_copy
from dtnkit.transfer.server import ServerHandle, flows, start_server
from dtnkit.transfer.server.flows import Destination, Marking

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "scitags" / "firefly.schema.json").read_text()
)
VALIDATOR = jsonschema.Draft202012Validator(
    SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)
HEAD = "<134>1 "
RW, RO = "tagrw", "tagro"
SIZE = 3 * 2**20 + 17


class Collector:
    """A UDP socket on 127.0.0.1 that keeps what it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(5.0)
        self.port = int(self.sock.getsockname()[1])

    def take(self, n: int) -> list[dict[str, object]]:
        """The next *n* fireflies, each checked: syslog header, then schema-valid JSON."""
        out = []
        for _ in range(n):
            data = self.sock.recv(65536)
            text = data.decode("ascii")
            assert text.startswith(HEAD)
            head, sep, body = text.partition(" dtnkit - firefly-json - ")
            assert sep, text[:120]
            stamp = head.split()[1]
            assert dt.datetime.fromisoformat(stamp).tzinfo is not None
            doc = json.loads(body)
            VALIDATOR.validate(doc)
            life = doc["flow-lifecycle"]
            for key in ("start-time", "end-time", "current-time"):
                if key in life:
                    assert dt.datetime.fromisoformat(life[key]).utcoffset() == dt.timedelta(0)
            out.append(doc)
        return out

    def quiet(self) -> bool:
        """Nothing more arrives within 0.3 s (after a request that must send nothing)."""
        self.sock.settimeout(0.3)
        try:
            self.sock.recv(65536)
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(5.0)
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    try:
        yield c
    finally:
        c.close()


def serve(
    root: Path, collector: Collector, default: int | None = None, **kw: object
) -> ServerHandle:
    root.mkdir(exist_ok=True)
    marking = Marking(default, (Destination.parse(f"127.0.0.1:{collector.port}"),))
    return start_server(
        root,
        tokens=tokens.parse(f"{RW} read,write\n{RO} read\n"),
        anonymous_read=True,
        quiet=True,
        marking=marking,
        marker_interval=0.2,
        **kw,
    )  # type: ignore[arg-type]


def settled(server: ServerHandle) -> int:
    """Tagged streams once the server has finished every request (it records a stream's
    end after its answer went out, so the client may return first)."""
    deadline = time.monotonic() + 10
    while server.flows.active and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not server.flows.active
    return server.flows.tagged_total


def ids(doc: dict[str, object]) -> tuple[int, int]:
    ctx = doc["context"]
    assert isinstance(ctx, dict)
    return ctx["experiment-id"], ctx["activity-id"]


def by_flow(docs: list[dict[str, object]]) -> dict[tuple[object, ...], list[str]]:
    flows: dict[tuple[object, ...], list[str]] = {}
    for d in docs:
        fid = d["flow-id"]
        assert isinstance(fid, dict)
        key = (fid["src-port"], fid["dst-port"])
        flows.setdefault(key, []).append(d["flow-lifecycle"]["state"])  # type: ignore[index]
    return flows


def test_download_with_two_streams_sends_start_and_end_per_stream(
    tmp_path: Path, collector: Collector
) -> None:
    data = os.urandom(SIZE)
    with serve(tmp_path / "root", collector) as server:
        (server.root / "f.bin").write_bytes(data)
        copy(
            server.url + "f.bin",
            str(tmp_path / "got.bin"),
            CopyRequest(streams=2, scitag=143, token=RO, block_size=2**20),
        )
        assert (tmp_path / "got.bin").read_bytes() == data
        docs = collector.take(2 * settled(server))
    streams = by_flow(docs)
    assert streams and all(states == ["start", "end"] for states in streams.values())
    assert {ids(d) for d in docs} == {(2, 15)}
    ends = [d for d in docs if d["flow-lifecycle"]["state"] == "end"]  # type: ignore[index]
    sent = sum(d["usage"]["sent"] for d in ends)  # type: ignore[index]
    heads = 1024 * len(ends)  # each answer's head is counted too
    assert SIZE <= sent <= SIZE + heads
    for d in ends:
        fid = d["flow-id"]
        assert fid["afi"] == "ipv4" and fid["protocol"] == "tcp"  # type: ignore[index]
        assert fid["src-port"] == server.port  # type: ignore[index]  # src is the server
        life = d["flow-lifecycle"]
        assert life["end-time"] >= life["start-time"]  # type: ignore[index]


def test_upload_fireflies_count_the_received_bytes(tmp_path: Path, collector: Collector) -> None:
    data = os.urandom(SIZE)
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    with serve(tmp_path / "root", collector) as server:
        copy(str(src), server.url + "up.bin", CopyRequest(streams=1, scitag=(7 << 6) | 3, token=RW))
        assert (server.root / "up.bin").read_bytes() == data
        docs = collector.take(2 * settled(server))
    ends = [d for d in docs if d["flow-lifecycle"]["state"] == "end"]  # type: ignore[index]
    assert {ids(d) for d in docs} == {(7, 3)}
    received = sum(d["usage"]["received"] for d in ends)  # type: ignore[index]
    assert SIZE <= received <= SIZE + 64


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_a_plain_client_sending_the_header_yields_fireflies_with_its_ids(
    tmp_path: Path, collector: Collector
) -> None:
    with serve(tmp_path / "root", collector) as server:
        (server.root / "c.txt").write_bytes(b"x" * 1000)
        out = subprocess.run(
            ["curl", "-sf", "-H", "SciTag: 199", server.url + "c.txt"],
            capture_output=True,
            check=True,
        )
        assert out.stdout == b"x" * 1000
        start, end = collector.take(2)
    assert ids(start) == ids(end) == (3, 7)  # 199 = 3 << 6 | 7 (cms Cache... by id)
    assert start["flow-lifecycle"]["state"] == "start"  # type: ignore[index]
    assert end["usage"]["sent"] >= 1000  # type: ignore[index]


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
@pytest.mark.parametrize(
    "values",
    [
        ["abc"],
        ["-143"],
        ["99999999999"],
        ["65536"],
        ["64"],
        ["143", "143"],
        ["143", "199"],
        [""],
        ["1e3"],
    ],
)
def test_bad_scitag_headers_are_ignored_and_counted(
    tmp_path: Path, collector: Collector, values: list[str]
) -> None:
    with serve(tmp_path / "root", collector) as server:
        (server.root / "c.txt").write_bytes(b"y" * 100)
        argv = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"]
        for v in values:
            argv += ["-H", f"SciTag: {v}" if v else "SciTag;"]
        out = subprocess.run([*argv, server.url + "c.txt"], capture_output=True, text=True)
        assert out.stdout == "200"  # served all the same, as XRootD ignores a bad scitag
        settled(server)
        assert server.flows.rejected_tags == 1
        assert collector.quiet()  # no tag, no default: no firefly


def test_the_servers_default_tag_marks_requests_without_one(
    tmp_path: Path, collector: Collector
) -> None:
    with serve(tmp_path / "root", collector, default=(4 << 6) | 4) as server:
        (server.root / "d.txt").write_bytes(b"z" * 10)
        copy(server.url + "d.txt", str(tmp_path / "d.txt"), CopyRequest(token=RO))
        docs = collector.take(2)
        assert {ids(d) for d in docs} == {(4, 4)}
        # the header wins over the default
        copy(server.url + "d.txt", str(tmp_path / "e.txt"), CopyRequest(token=RO, scitag=143))
        assert {ids(d) for d in collector.take(2)} == {(2, 15)}


def test_fireflies_to_origin_reach_the_flows_peer(tmp_path: Path, collector: Collector) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "o.txt").write_bytes(b"o" * 10)
    marking = Marking(None, (Destination.parse(f"origin:{collector.port}"),))
    with start_server(root, anonymous_read=True, quiet=True, marking=marking) as server:
        copy(server.url + "o.txt", str(tmp_path / "o.txt"), CopyRequest(scitag=143))
        start, end = collector.take(2)
    assert start["flow-id"]["dst-ip"] == "127.0.0.1"  # type: ignore[index]
    assert end["flow-lifecycle"]["state"] == "end"  # type: ignore[index]


def test_a_send_that_fails_is_counted_not_raised(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "b.txt").write_bytes(b"b" * 10)
    # a broadcast address without SO_BROADCAST: sendto fails with EACCES
    marking = Marking(None, (Destination.parse("255.255.255.255:10514"),))
    with start_server(root, anonymous_read=True, quiet=True, marking=marking) as server:
        copy(server.url + "b.txt", str(tmp_path / "b.txt"), CopyRequest(scitag=143))
        assert (tmp_path / "b.txt").read_bytes() == b"b" * 10
        settled(server)
        server.flows.fireflies.flush()
        assert server.flows.fireflies.errors == 2 and server.flows.fireflies.sent == 0


def test_third_party_copy_forwards_the_tag_to_the_passive_party(
    tmp_path: Path, collector: Collector
) -> None:
    data = os.urandom(2**20)
    passive = serve(tmp_path / "a", collector, tpc_allow=["127.0.0.1"])
    other = Collector()
    try:
        with passive, serve(tmp_path / "b", other, tpc_allow=["127.0.0.1"]) as active:
            (passive.root / "x.bin").write_bytes(data)
            done = third_party_copy(
                "pull",
                passive.url + "x.bin",
                active.url + "y.bin",
                token=RW,
                remote_token=RO,
                streams=1,
                checksum="adler32",
                timeout=20,
                ca_file=None,
                insecure=False,
                scitag=143,
            )
            assert done.size == len(data)
            assert (active.root / "y.bin").read_bytes() == data
            # the passive side's GETs came with SciTag: 143 (from TransferHeaderSciTag)
            docs = collector.take(2 * settled(passive))
            assert docs and {ids(d) for d in docs} == {(2, 15)}
            ends = [d for d in docs if d["flow-lifecycle"]["state"] == "end"]  # type: ignore[index]
            assert sum(d["usage"]["sent"] for d in ends) >= len(data)  # type: ignore[index]
            # a push: the active server PUTs to the passive one with the COPY's tag
            before = settled(passive)
            done = third_party_copy(
                "push",
                active.url + "y.bin",
                passive.url + "z.bin",
                token=RO,
                remote_token=RW,
                streams=1,
                checksum="adler32",
                timeout=20,
                ca_file=None,
                insecure=False,
                scitag=199,
            )
            assert (passive.root / "z.bin").read_bytes() == data
            docs = collector.take(2 * (settled(passive) - before))
            assert docs and {ids(d) for d in docs} == {(3, 7)}
            ends = [d for d in docs if d["flow-lifecycle"]["state"] == "end"]  # type: ignore[index]
            assert sum(d["usage"]["received"] for d in ends) >= len(data)  # type: ignore[index]
    finally:
        other.close()


def test_serve_cli_refuses_a_bad_firefly_destination(
    tmp_path: Path, environment: Environment
) -> None:
    for dest, why in (
        ("host:0", "port '0' is not 1-65535"),
        ("[::1", "is not HOST:PORT"),
        ("tag-no-such-host.invalid", "does not resolve"),
        (":99", "no host"),
    ):
        code = main(
            [
                "serve",
                "--root",
                str(tmp_path),
                "--anonymous-read",
                "--port",
                "0",
                "--firefly-dest",
                dest,
            ],
            environment,
        )
        err = taken(environment.stderr)
        assert code == 9, err
        assert why in err and err.count("\n") == 1


def test_cp_tpc_flag_reaches_the_passive_party(
    tmp_path: Path, collector: Collector, environment: Environment
) -> None:
    passive = serve(tmp_path / "a", collector, tpc_allow=["127.0.0.1"])
    other = Collector()
    try:
        with passive, serve(tmp_path / "b", other, tpc_allow=["127.0.0.1"]) as active:
            (passive.root / "x.bin").write_bytes(b"q" * 5000)
            code = main(
                [
                    "cp",
                    "--tpc",
                    "pull",
                    "--experiment",
                    "cms",
                    "--activity",
                    "Debug",
                    "--token",
                    RW,
                    "--remote-token",
                    RO,
                    passive.url + "x.bin",
                    active.url + "y.bin",
                ],
                environment,
            )
            assert code == 0, taken(environment.stderr)
            docs = collector.take(2 * settled(passive))
            assert docs and {ids(d) for d in docs} == {(3, 8)}  # cms / Debug
    finally:
        other.close()


def test_a_segment_landing_between_the_baselines_reads_is_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The baseline of a request's received bytes is the kernel's count less what is queued:
    two reads.  The count reads 100 (the head), then 200 bytes of body land and the queue
    reads 200: that pair gave 100 - 200, cut to 0, and the body was counted 100 bytes over
    (an upload's fireflies were 221 over in a CI run).  Read again until the count holds
    still across the queue's read: 300 - 200 = the head's 100."""
    counts = iter([(0, 100), (0, 300), (0, 300), (0, 300)])
    queues = iter([200, 200])
    with monkeypatch.context() as patch, socket.socket() as sock:
        patch.setattr(flows, "tcp_bytes", lambda sock: next(counts))
        patch.setattr(flows, "queued", lambda sock: next(queues))
        assert flows.baseline(sock, 0) == (0, 100)
    # a real connection, the head and the body read at once: the baseline is the head
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        with client, server:
            head = b"PUT /f HTTP/1.1\r\n\r\n"
            client.sendall(head + b"x" * 1000)
            got = b""
            while len(got) < len(head) + 1000:
                got += server.recv(65536)
            assert flows.baseline(server, len(got) - len(head)) == (0, len(head))
