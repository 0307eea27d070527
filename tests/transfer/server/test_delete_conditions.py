"""DELETE honours ``If-Match`` / ``If-None-Match`` (RFC 9110 13.1): a client deletes the
version it saw, never one written since; a refused DELETE removes nothing."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    root = tmp_path_factory.mktemp("delete-conditions")
    with start_server(root, tokens=tokens.parse("rw read,write\n"), quiet=True) as h:
        yield h


def request(h: ServerHandle, method: str, path: str, **headers: str) -> tuple[int, str, bytes]:
    c = http.client.HTTPConnection(h.host, h.port, timeout=10)
    try:
        c.request(method, path, headers={"Authorization": "Bearer rw", **headers})
        r = c.getresponse()
        return r.status, r.getheader("ETag") or "", r.read()
    finally:
        c.close()


def test_delete_with_a_stale_if_match_is_412_and_removes_nothing(server: ServerHandle) -> None:
    f = server.root / "a"
    f.write_bytes(b"version 1")
    _, seen, _ = request(server, "HEAD", "/a")
    f.write_bytes(b"version 2, written by someone else")
    status, _, body = request(server, "DELETE", "/a", **{"If-Match": seen})
    assert status == 412, body
    assert f.read_bytes() == b"version 2, written by someone else"
    _, now, _ = request(server, "HEAD", "/a")
    assert request(server, "DELETE", "/a", **{"If-Match": now})[0] == 204
    assert not f.exists()


def test_if_match_on_a_missing_file_is_412_and_star_needs_a_file(server: ServerHandle) -> None:
    assert request(server, "DELETE", "/gone", **{"If-Match": '"x"'})[0] == 412
    assert request(server, "DELETE", "/gone", **{"If-Match": "*"})[0] == 412
    (server.root / "b").write_bytes(b"b")
    assert request(server, "DELETE", "/b", **{"If-None-Match": "*"})[0] == 412
    assert (server.root / "b").exists()
    assert request(server, "DELETE", "/b", **{"If-Match": "*"})[0] == 204


def test_a_malformed_condition_is_400_and_removes_nothing(server: ServerHandle) -> None:
    (server.root / "c").write_bytes(b"c")
    status, _, body = request(server, "DELETE", "/c", **{"If-Match": "not-a-tag"})
    assert status == 400 and b"entity tag" in body
    assert (server.root / "c").exists()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60))
def test_any_if_match_value_is_412_or_400_unless_it_names_the_file(
    server: ServerHandle, value: str
) -> None:
    f = server.root / "p"
    f.write_bytes(b"p")
    _, tag, _ = request(server, "HEAD", "/p")
    status, _, _ = request(server, "DELETE", "/p", **{"If-Match": value})
    names_it = value.strip() == "*" or tag in [v.strip() for v in value.split(",")]
    assert status == (204 if names_it else 412) or (status == 400 and not names_it)
    assert f.exists() == (status != 204)
