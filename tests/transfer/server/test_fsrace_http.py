"""The race of ``test_fsrace.py`` over real HTTP: fewer tries (a few hundred per method, a few
dozen third-party copies, both directions), the same attacker, the same verdict: nothing
read from, created in or removed from the outside directory."""

from __future__ import annotations

import http.client
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support import fsrace
from tests.support.fsrace import INSIDE, OUTSIDE, OUTSIDE_ONLY, TOKEN, Layout

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the attacker calls renameat2 as syscall 316 (x86_64)"
)

SWAPS = 10_000
TRIES = 200
COPIES = 25
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def setup() -> Iterator[tuple[Layout, ServerHandle, ServerHandle, Path]]:
    base = Path(tempfile.mkdtemp(prefix="dk11fs-"))
    lay = Layout.make(base)
    remote = base / "remote"
    remote.mkdir()
    (remote / "src").write_bytes(INSIDE)
    store = tokens.parse(f"{TOKEN} read,write\n")
    with (
        start_server(
            lay.root, tokens=store, quiet=True, marker_interval=0.05, tpc_allow=("127.0.0.1",)
        ) as h,
        start_server(remote, tokens=store, quiet=True) as other,
    ):
        yield lay, h, other, remote
    lay.close()
    shutil.rmtree(base)


def hammer(
    layout: Layout,
    h: ServerHandle,
    tries: int,
    one: Callable[[http.client.HTTPConnection, int], bool],
) -> int:
    """*tries* requests (more while the swapper has made fewer than SWAPS swaps) on one
    kept-alive connection; the number of escapes."""
    conn = http.client.HTTPConnection(h.host, h.port, timeout=30)
    escapes = i = 0
    deadline = time.monotonic() + 20
    try:
        with fsrace.swapping(layout) as swapper:
            while i < tries or (swapper.swaps() < SWAPS and time.monotonic() < deadline):
                escapes += one(conn, i)
                i += 1
    finally:
        conn.close()
    assert (swapper.final or 0) >= SWAPS
    print(f"\n{i} tries, {escapes} escapes, {swapper.final} swaps")
    return escapes


def request(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, list[tuple[str, str]], bytes]:
    conn.request(method, path, body=body, headers={**AUTH, **(headers or {})})
    r = conn.getresponse()
    return r.status, r.getheaders(), r.read()


def test_methods_over_http(setup: tuple[Layout, ServerHandle, ServerHandle, Path]) -> None:
    lay, h, _other, _remote = setup
    before = lay.outside_names()
    for i in range(TRIES * 2):
        for fd in (lay.inside_fd, lay.outside_fd):
            os.close(os.open(f"hv-{i}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    victims = lay.outside_names()

    def reads(conn: http.client.HTTPConnection, i: int) -> bool:
        method, path, headers = [
            ("GET", "/d/file", {}),
            ("HEAD", "/d/file", {"Want-Digest": "adler32"}),
            ("PROPFIND", "/d/", {"Depth": "1"}),
            ("GET", "/d/", {}),
        ][i % 4]
        _status, _headers, body = request(conn, method, path, headers)
        return OUTSIDE[:20] in body or OUTSIDE_ONLY.encode() in body

    def writes(conn: http.client.HTTPConnection, i: int) -> bool:
        method, path, body = [
            ("PUT", f"/d/hp-{i}", b"new"),
            ("MKCOL", f"/d/hc-{i}", None),
            ("DELETE", f"/d/hv-{i % (TRIES * 2)}", None),
        ][i % 3]
        request(conn, method, path, body=body)
        return False

    def wrote(names: set[str]) -> bool:
        return any(n.startswith("hp-") for n in names) and any(n.startswith("hc-") for n in names)

    read_escapes = hammer(lay, h, TRIES, reads)
    # The writes must really have written somewhere inside (else "nothing escaped" proves
    # nothing).  Which state of the swapped directory a request meets is the scheduler's
    # choice: on a loaded machine a whole round of writes once met only the swapped state, so
    # a round that wrote nothing inside is run again, at most three rounds in all.
    for _round in range(3):
        hammer(lay, h, TRIES, writes)
        if wrote(lay.inside_names()):
            break
    print(f"outside: {len(lay.outside_names() ^ victims)} names created or removed")
    assert read_escapes == 0
    assert lay.outside_names() == victims
    assert victims - before == {f"hv-{i}" for i in range(TRIES * 2)}
    assert (lay.outside / "file").read_bytes() == OUTSIDE
    assert wrote(lay.inside_names())


def test_copy_over_http(setup: tuple[Layout, ServerHandle, ServerHandle, Path]) -> None:
    lay, h, other, remote = setup
    before = lay.outside_names()
    base = f"http://127.0.0.1:{other.port}"

    def copy(conn: http.client.HTTPConnection, i: int) -> bool:
        headers = {"TransferHeaderAuthorization": f"Bearer {TOKEN}", "Credential": "none"}
        if i % 2:
            request(conn, "COPY", f"/d/pulled-{i}", {**headers, "Source": f"{base}/src"})
            return False
        request(conn, "COPY", "/d/file", {**headers, "Destination": f"{base}/pushed-{i}"})
        pushed = remote / f"pushed-{i}"
        return pushed.exists() and pushed.read_bytes() == OUTSIDE

    push_escapes = hammer(lay, h, COPIES * 2, copy)
    print(f"outside: {len(lay.outside_names() ^ before)} names created or removed")
    assert push_escapes == 0
    assert lay.outside_names() == before
    # without the attacker, the same copies work (both directions)
    conn = http.client.HTTPConnection(h.host, h.port, timeout=30)
    try:
        copy(conn, 1001)
        assert not copy(conn, 1002)
    finally:
        conn.close()
    assert (lay.root / "d" / "pulled-1001").read_bytes() == INSIDE
    assert (remote / "pushed-1002").read_bytes() == INSIDE
    assert not [n for n in lay.inside_names() if "dtnkit-part" in n]
