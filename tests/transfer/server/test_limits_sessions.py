"""Upload-session limits are per token, and a client refused a session sends one PUT.

One write token used to be able to open all 512 sessions of a server in 0.4 s (declaring
31 GB of sparse part files on a 64 MiB filesystem), after which everyone's
``cp --streams 4`` failed (exit 20) instead of falling back to one PUT.
"""

from __future__ import annotations

import http.client
import random
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.transfer import tokens
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.server.limits import Limits

A, B, C, D = "lim-a", "lim-b", "lim-c", "lim-d"
BLOCK = 64 * 1024
MiB = 2**20


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def serve(root: Path, **kw: object) -> ServerHandle:
    root.mkdir(exist_ok=True)
    store = tokens.parse("".join(f"{t} read,write\n" for t in (A, B, C, D)))
    return start_server(root, tokens=store, quiet=True, **kw)  # type: ignore[arg-type]


def start(
    server: ServerHandle, token: str, path: str, length: int
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request(
            "POST",
            path,
            headers={
                "Authorization": f"Bearer {token}",
                "Dtnkit-Upload": "start",
                "Upload-Length": str(length),
            },
        )
        resp = conn.getresponse()
        return resp.status, dict(resp.headers.items()), resp.read()
    finally:
        conn.close()


def upload(server: ServerHandle, token: str, src: Path, name: str) -> tuple[int, str | None]:
    summary = copy(
        str(src),
        server.url + name,
        CopyRequest(token=token, streams=4, block_size=BLOCK, retries=1, backoff=0.05),
    )
    result = summary.files[0]
    return result.upload_streams, result.note


def test_one_token_cannot_take_every_session(tmp_path: Path) -> None:
    data = random.Random(1).randbytes(8 * BLOCK + 17)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    with serve(tmp_path / "root") as server:
        opened = 0
        for i in range(600):
            status, headers, body = start(server, A, f"/hog{i}", 1000)
            if status != 201:
                break
            opened += 1
        assert opened == Limits.sessions_per_token, opened
        assert status == 503 and headers.get("Retry-After"), (status, body)
        assert b"this token" in body
        # another token still gets its multi-stream upload
        streams, note = upload(server, B, src, "b.bin")
        assert streams == 4 and note is None
        assert (server.root / "b.bin").read_bytes() == data
        # the hog's own cp falls back to one PUT, and succeeds
        streams, note = upload(server, A, src, "a.bin")
        assert streams == 1 and note is not None and "503" in note
        assert (server.root / "a.bin").read_bytes() == data


def test_the_limit_is_a_flag(tmp_path: Path) -> None:
    with serve(tmp_path / "root", limits=Limits(sessions_per_token=2)) as server:
        assert [start(server, A, f"/f{i}", 10)[0] for i in range(3)] == [201, 201, 503]
        assert start(server, B, "/g", 10)[0] == 201


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs of this test's own."""
    where = tmp_path / f"limfs-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.needs_root
def test_reserved_bytes_are_checked_against_free_space(small_fs: Path, tmp_path: Path) -> None:
    """Sparse part files count as their declared size: per token (default: half the free
    space) and all tokens together (the free space)."""
    with serve(small_fs / "root") as server:
        assert start(server, A, "/a1", 20 * MiB)[0] == 201
        status, _h, body = start(server, A, "/a2", 20 * MiB)  # A: 40 MiB > 32 MiB
        assert status == 507 and b"this token" in body, body
        assert start(server, B, "/b1", 20 * MiB)[0] == 201
        assert start(server, C, "/c1", 20 * MiB)[0] == 201  # 60 MiB of 64 declared
        status, _h, body = start(server, D, "/d1", 20 * MiB)  # 80 MiB > 64 MiB free
        assert status == 507 and b"free" in body, body
        # A's cp of 16 MiB falls back to one PUT (which writes real bytes) and succeeds
        src = tmp_path / "src.bin"
        data = random.Random(2).randbytes(16 * MiB)
        src.write_bytes(data)
        streams, note = upload(server, A, src, "a.bin")
        assert streams == 1 and note is not None and "507" in note
        assert (server.root / "a.bin").read_bytes() == data


def test_the_byte_limit_is_a_flag(tmp_path: Path) -> None:
    with serve(tmp_path / "root", limits=Limits(session_bytes_per_token=1000)) as server:
        assert start(server, A, "/f", 600)[0] == 201
        assert start(server, A, "/g", 600)[0] == 507
        assert start(server, B, "/g", 600)[0] == 201
