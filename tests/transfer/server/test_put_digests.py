"""A PUT's digests are checked or refused, never ignored (RFC 9530): ``Content-Digest`` (the
server takes no content coding, so the content is the bytes received) is verified like
``Repr-Digest``; a malformed ``Repr-Digest`` or ``Content-Digest`` is 400 before the body is
read (also under ``Expect: 100-continue``), and nothing is written."""

from __future__ import annotations

import base64
import hashlib
import http.client
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.rawhttp import exchange

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server

BODY = b"hello, digests"


def sf(data: bytes) -> str:
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    root = tmp_path_factory.mktemp("put-digests")
    with start_server(root, tokens=tokens.parse("rw read,write\n"), quiet=True) as h:
        yield h


def put(h: ServerHandle, name: str, body: bytes, **headers: str) -> tuple[int, bytes]:
    c = http.client.HTTPConnection(h.host, h.port, timeout=10)
    try:
        c.request("PUT", f"/{name}", body=body, headers={"Authorization": "Bearer rw", **headers})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@pytest.mark.parametrize("header", ["Content-Digest", "Repr-Digest"])
def test_a_wrong_digest_is_412_and_a_right_one_commits(server: ServerHandle, header: str) -> None:
    name = f"wrong-{header}"
    status, body = put(server, name, BODY, **{header: sf(b"other bytes")})
    assert status == 412 and b"checksum mismatch" in body, body
    assert not (server.root / name).exists()
    assert put(server, name, BODY, **{header: sf(BODY)})[0] == 201
    assert (server.root / name).read_bytes() == BODY


def test_content_and_repr_digest_that_disagree_are_400(server: ServerHandle) -> None:
    status, body = put(
        server, "both", BODY, **{"Content-Digest": sf(BODY), "Repr-Digest": sf(b"x")}
    )
    assert status == 400 and b"disagrees" in body
    assert not (server.root / "both").exists()


@pytest.mark.parametrize("header", ["Content-Digest", "Repr-Digest"])
@pytest.mark.parametrize(
    "value",
    [
        "sha-256=abc",
        "sha-256=:!!!:",
        "nonsense((",
        'sha-256="x"',
        "sha-256=:AAAA:",
        "SHA-256=:AAAA:",
    ],
)
def test_a_malformed_digest_is_400_before_the_body(
    server: ServerHandle, header: str, value: str
) -> None:
    head = (
        f"PUT /malformed HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer rw\r\n"
        f"{header}: {value}\r\nContent-Length: {len(BODY)}\r\n"
        "Expect: 100-continue\r\n\r\n"
    ).encode()
    answer = exchange(server.port, head, half_close=False, deadline=5)
    assert answer.statuses and answer.statuses[0] == 400, answer.data[:200]  # no 100 first
    assert f"{header}:".encode() in answer.data
    assert not (server.root / "malformed").exists()


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["Content-Digest", "Repr-Digest", "Digest"]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80),
)
def test_any_digest_value_commits_whole_or_writes_nothing(
    server: ServerHandle, header: str, value: str
) -> None:
    status, _ = put(server, "fuzzed", BODY, **{header: value})
    assert status in (201, 204, 400, 412)
    if status in (201, 204):
        assert (server.root / "fuzzed").read_bytes() == BODY
        (server.root / "fuzzed").unlink()
    else:
        assert not (server.root / "fuzzed").exists()
