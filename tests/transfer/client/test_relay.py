"""Remote to remote without third-party copy: relayed through the client, two real servers
with different tokens, over loopback sockets."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.cli.cp import cp
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import tokens
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import FatalHttp
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.wire import digests as dg

TOKEN_A = "tok-a"
TOKEN_B = "tok-b"
BLOCK = 4096
SIZE = 6 * BLOCK + 777


def payload(size: int, seed: int = 11) -> bytes:
    return random.Random(seed).randbytes(size)


def two(tmp_path: Path, **b_kw: object) -> tuple[ServerHandle, Path, ServerHandle, Path]:
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    a_root.mkdir()
    b_root.mkdir()
    a = start_server(a_root, tokens=tokens.parse(f"{TOKEN_A} read,write\n"), quiet=True)
    b = start_server(b_root, tokens=tokens.parse(f"{TOKEN_B} read,write\n"), quiet=True, **b_kw)  # type: ignore[arg-type]
    return a, a_root, b, b_root


@pytest.fixture
def pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ServerHandle, Path, ServerHandle, Path]]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    a, a_root, b, b_root = two(tmp_path)
    try:
        yield a, a_root, b, b_root
    finally:
        a.stop()
        b.stop()


def opts(**kw: object) -> CopyRequest:
    base: dict[str, object] = {
        "src_token": TOKEN_A,
        "dst_token": TOKEN_B,
        "block_size": BLOCK,
        "streams": 4,
        "backoff": 0.01,
        "retries": 2,
        "stall_timeout": 10.0,
    }
    base.update(kw)
    return CopyRequest(**base)  # type: ignore[arg-type]


def parts(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if "dtnkit-part" in p.name]


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("name", ["adler32", "md5"])
def test_relay_file(
    pair: tuple[ServerHandle, Path, ServerHandle, Path], name: str, streams: int
) -> None:
    a, a_root, b, b_root = pair
    data = payload(SIZE)
    (a_root / "x").write_bytes(data)
    summary = copy(a.url + "x", b.url + "y", opts(checksum=name, streams=streams, max_buffered=1))
    assert (b_root / "y").read_bytes() == data and parts(b_root) == []
    f = summary.files[0]
    assert dg.format_value(name, f.digest) == dg.format_value(
        name, cks.file_checksum(a_root / "x", name)
    )
    assert f.upload_streams == streams
    assert b.counters["range_puts"] == (7 if streams > 1 else 0)


def test_relay_tree_and_empty_file(pair: tuple[ServerHandle, Path, ServerHandle, Path]) -> None:
    a, a_root, b, b_root = pair
    files = {
        "t/a": payload(SIZE, 1),
        "t/s/b": payload(100, 2),
        "t/s/d/c": b"",
        "t/s/d/e": payload(3 * BLOCK, 3),
    }
    for rel, data in files.items():
        (a_root / rel).parent.mkdir(parents=True, exist_ok=True)
        (a_root / rel).write_bytes(data)
    summary = copy(a.url + "t", b.url + "copy", opts(recursive=True, parallel=2))
    assert len(summary.files) == 4
    for rel, data in files.items():
        assert (b_root / "copy" / rel.removeprefix("t/")).read_bytes() == data
    assert parts(b_root) == []


def test_relay_to_a_server_without_sessions(tmp_path: Path) -> None:
    a, a_root, b, b_root = two(tmp_path, upload_sessions=False)
    try:
        data = payload(SIZE)
        (a_root / "x").write_bytes(data)
        summary = copy(a.url + "x", b.url, opts())
        assert (b_root / "x").read_bytes() == data
        assert summary.files[0].upload_streams == 1
    finally:
        a.stop()
        b.stop()


def test_relay_wrong_token_fails_clearly(
    pair: tuple[ServerHandle, Path, ServerHandle, Path],
) -> None:
    a, a_root, b, b_root = pair
    (a_root / "x").write_bytes(payload(SIZE))
    with pytest.raises(FatalHttp, match="HEAD"):
        copy(a.url + "x", b.url + "y", opts(src_token=TOKEN_B))
    with pytest.raises(FatalHttp):
        copy(a.url + "x", b.url + "y", opts(dst_token=TOKEN_A))
    assert not (b_root / "y").exists() and parts(b_root) == []


def test_cli_relay_json(
    pair: tuple[ServerHandle, Path, ServerHandle, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, a_root, b, b_root = pair
    data = payload(SIZE)
    (a_root / "x").write_bytes(data)
    rc = cp.main(
        [
            a.url + "x",
            b.url + "y",
            "--streams",
            "3",
            "--block-size",
            "4KiB",
            "--src-token",
            TOKEN_A,
            "--dst-token",
            TOKEN_B,
            "--json",
            "--checksum",
            "crc32c",
        ],
        standalone_mode=False,
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["upload_streams"] == 3 and out["bytes"] == SIZE
    assert (b_root / "y").read_bytes() == data
