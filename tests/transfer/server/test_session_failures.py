"""An upload session that fails a range or a commit holds nothing open: its part file's
descriptor is closed at once (the server's own /proc/self/fd no longer points at the part),
while the session, its received ranges and its part stay for the client to resume; its next
range or commit reopens the part (only the file it created, never through a symlink)."""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.polling import until

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.wire import digests as dg

DATA = bytes(range(256)) * 4  # 1024 bytes
HALF = len(DATA) // 2


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerHandle]:
    with start_server(tmp_path, tokens=tokens.parse("rw read,write\n"), quiet=True) as h:
        yield h


def call(
    h: ServerHandle, method: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    c = http.client.HTTPConnection(h.host, h.port, timeout=30)
    try:
        c.request(method, "/up", body=body, headers={"Authorization": "Bearer rw", **headers})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def start(h: ServerHandle) -> str:
    status, headers, body = call(
        h, "POST", {"Dtnkit-Upload": "start", "Upload-Length": str(len(DATA))}
    )
    assert status == 201, body
    return headers["Dtnkit-Upload-Id"]


def put_range(
    h: ServerHandle, ident: str, first: int, last: int, body: bytes, digest: str | None = None
) -> int:
    headers = {"Dtnkit-Upload-Id": ident, "Content-Range": f"bytes {first}-{last}/{len(DATA)}"}
    if digest is not None:
        headers["Digest"] = digest
    return call(h, "PUT", headers, body)[0]


def open_parts(root: Path) -> list[str]:
    """The part files this process (the in-process server) has a descriptor of."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)) and "dtnkit-part" in target:
            out.append(target)
    return out


def md5(data: bytes) -> str:
    return dg.format_digest("md5", hashlib.md5(data).digest())


def test_a_refused_range_closes_the_descriptor_and_the_session_resumes(
    server: ServerHandle,
) -> None:
    ident = start(server)
    assert put_range(server, ident, 0, HALF - 1, DATA[:HALF]) == 204
    assert len(open_parts(server.root)) == 1  # a live session holds its part open
    assert (
        put_range(server, ident, HALF, len(DATA) - 1, DATA[HALF:], digest=md5(b"not these bytes"))
        == 412
    )
    assert open_parts(server.root) == []
    status, headers, _ = call(
        server, "POST", {"Dtnkit-Upload": "status", "Dtnkit-Upload-Id": ident}
    )
    assert status == 200 and headers["Dtnkit-Upload-Ranges"] == f"0-{HALF - 1}"
    assert put_range(server, ident, HALF, len(DATA) - 1, DATA[HALF:]) == 204
    status, _, body = call(
        server, "POST", {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident, "Digest": md5(DATA)}
    )
    assert status == 201, body
    assert (server.root / "up").read_bytes() == DATA
    assert open_parts(server.root) == []


def test_a_range_cut_off_closes_the_descriptor(server: ServerHandle) -> None:
    ident = start(server)
    with socket.create_connection((server.host, server.port), timeout=30) as s:
        s.sendall(
            f"PUT /up HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer rw\r\n"
            f"Dtnkit-Upload-Id: {ident}\r\nContent-Range: bytes 0-{HALF - 1}/{len(DATA)}"
            f"\r\nContent-Length: {HALF}\r\n\r\n".encode()
            + DATA[:10]
        )
    # the server notices the cut when its receive ends; poll its descriptors for that
    until("the part's descriptor closed", lambda: open_parts(server.root) == [], 30)
    assert put_range(server, ident, 0, len(DATA) - 1, DATA) == 204  # resumed: reopened
    status, _, _ = call(
        server, "POST", {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident, "Digest": md5(DATA)}
    )
    assert status == 201 and (server.root / "up").read_bytes() == DATA


def test_a_commit_with_ranges_missing_closes_the_descriptor(server: ServerHandle) -> None:
    ident = start(server)
    assert put_range(server, ident, 0, HALF - 1, DATA[:HALF]) == 204
    status, _, body = call(
        server, "POST", {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident, "Digest": md5(DATA)}
    )
    assert status == 409 and b"missing" in body
    assert open_parts(server.root) == []
    assert put_range(server, ident, HALF, len(DATA) - 1, DATA[HALF:]) == 204
    status, _, _ = call(
        server, "POST", {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident, "Digest": md5(DATA)}
    )
    assert status == 201 and (server.root / "up").read_bytes() == DATA


def test_a_resting_session_whose_part_was_swapped_is_gone(server: ServerHandle) -> None:
    ident = start(server)
    assert put_range(server, ident, 0, HALF - 1, DATA[:HALF], digest=md5(b"x")) == 412
    (part,) = [p for p in server.root.iterdir() if "dtnkit-part" in p.name]
    outside = server.root.parent / f"{server.root.name}-outside"
    outside.write_bytes(b"\0" * len(DATA))
    part.unlink()
    part.symlink_to(outside)  # a local user plants a link where the part was
    assert put_range(server, ident, 0, len(DATA) - 1, DATA) == 404
    assert outside.read_bytes() == b"\0" * len(DATA)
    status, _, _ = call(server, "POST", {"Dtnkit-Upload": "status", "Dtnkit-Upload-Id": ident})
    assert status == 404
