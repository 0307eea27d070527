"""``dtnkit cp --timeline FILE``: a copy's steps and each connection's bytes over time, from
the kernel's TCP_INFO counts, as JSON; bad paths get one clear error and nothing written."""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.transfer import tokens
from dtnkit.transfer.client.timeline import Timeline
from dtnkit.transfer.server import start_server
from dtnkit.transfer.wire import tcpinfo

RO = "tlro"


def test_a_connection_is_sampled_until_it_closes() -> None:
    """A real loopback connection: its received bytes grow in the samples, the last one
    taken before it closes, and its end is marked once it has."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        peer, _ = listener.accept()
        line = Timeline(interval=0.001)
        index = line.connection()
        line.sample(index, client)
        peer.sendall(b"x" * 300_000)
        got = 0
        while got < 300_000:
            got += len(client.recv(65536))
        line.last(index)  # as a copy's connection tells it before it closes
        peer.close()
        client.close()
        line.close()
    doc = line.document()
    rows = doc["connections"][0]["rows"]
    assert rows[0][1] < 300_000 <= rows[-1][1]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    whats = [e["what"] for e in doc["events"]]
    assert whats[0] == "connect" and "closed" in whats and whats[-1] == "end"
    assert json.loads(json.dumps(doc)) == doc


def test_cp_writes_its_timeline(tmp_path: Path, environment: Environment) -> None:
    """Two streams from a dtnkit serve: the JSON holds the decision, both streams' starts
    and ends, the connections that carried the file, and every byte of it."""
    data = os.urandom(24 * 2**20)
    root = tmp_path / "root"
    root.mkdir()
    (root / "f.bin").write_bytes(data)
    out = tmp_path / "timeline.json"
    with start_server(root, tokens=tokens.parse(f"{RO} read\n"), quiet=True) as s:
        code = main(
            [
                "cp",
                "--token",
                RO,
                "--streams",
                "2",
                "--block-size",
                "4MiB",
                "--timeline",
                str(out),
                s.url + "f.bin",
                str(tmp_path / "f.bin"),
            ],
            environment,
        )
        assert code == 0, taken(environment.stderr)
    doc = json.loads(out.read_text())
    assert doc["schema"] == 1
    assert doc["process_start_s"] is None or doc["process_start_s"] <= 0
    whats = [e["what"] for e in doc["events"]]
    for step in (
        "connect",
        "tcp",
        "streams decided",
        "HEAD answered",
        "GET sent",
        "stream starts",
        "stream ends",
        "moved",
        "digest",
        "committed",
        "end",
    ):
        assert step in whats, (step, whats)
    assert {e["stream"] for e in doc["events"] if e["what"] == "stream starts"} == {0, 1}
    received = [c["rows"][-1][1] for c in doc["connections"] if c["rows"]]
    assert sum(received) >= len(data)  # plus the answers' headers
    times = [e["t"] for e in doc["events"]]
    assert times == sorted(times) and times[-1] >= 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cp_timeline_errors(tmp_path: Path, environment: Environment) -> None:
    src = tmp_path / "x"
    src.write_bytes(b"x")
    for argv, why in (
        (["--timeline", str(tmp_path / "no" / "t.json")], "does not exist"),
        (["--timeline", str(tmp_path)], "is a directory"),
        (["--timeline", str(tmp_path / "t.json"), "--tpc", "pull"], "not drawn for --tpc"),
    ):
        code = main(["cp", *argv, "http://127.0.0.1:9/x", "http://127.0.0.1:9/y"], environment)
        err = taken(environment.stderr)
        assert code == 9 and why in err and err.count("\n") == 1, err
        assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=tcpinfo.SIZE + 40))
def test_any_tcp_info_answer_parses_or_is_refused(raw: bytes) -> None:
    """Whatever the kernel (or a short read) gives: a TcpInfo of plain numbers, or None
    when it is shorter than the oldest layout."""
    info = tcpinfo.parse(raw)
    if len(raw) < tcpinfo.PREFIX.size:
        assert info is None
        return
    assert info is not None
    assert info.rtt_s is None or info.rtt_s > 0
    if len(raw) >= tcpinfo.BYTES.size:
        fields = struct.unpack_from("=8B24I4Q", raw)
        assert (info.bytes_acked, info.bytes_received) == (fields[-2], fields[-1])
    else:
        assert info.bytes_received is None
