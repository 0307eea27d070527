"""With ``--metrics`` on, every spelling of ``/metrics`` is the endpoint and none reaches a
file named ``metrics`` in the served root: the route is chosen on the path as the server
reads it (decoded once, empty and ``.`` segments dropped), not on the raw bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.rawhttp import exchange

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server

SECRET = b"the root's own file named metrics\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerHandle]:
    (tmp_path / "metrics").write_bytes(SECRET)
    with start_server(
        tmp_path,
        tokens=tokens.parse("rw read,write\n"),
        anonymous_read=True,
        metrics=True,
        metrics_anonymous=True,
        quiet=True,
    ) as h:
        yield h


@pytest.mark.parametrize(
    "target",
    [
        "/metrics",
        "/%6detrics",
        "/%6D%65trics",
        "//metrics",
        "/metrics/",
        "/./metrics",
        "///metrics//",
        "/metrics?x=1",
        "http://h/metrics",
        "http://h//%6detrics/",
    ],
)
def test_every_spelling_of_metrics_is_the_endpoint(server: ServerHandle, target: str) -> None:
    answer = exchange(
        server.port, f"GET {target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode()
    )
    assert answer.statuses == [200], answer.data[:200]
    assert SECRET not in answer.data
    assert b"dtnkit_" in answer.data  # the exposition, not the file


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PROPFIND", "MKCOL"])
def test_no_method_reaches_the_file_named_metrics(server: ServerHandle, method: str) -> None:
    answer = exchange(
        server.port,
        f"{method} /%6detrics/ HTTP/1.1\r\nHost: h\r\n"
        "Authorization: Bearer rw\r\nContent-Length: 3\r\n"
        "Connection: close\r\n\r\nnew".encode(),
    )
    assert answer.statuses == [405], answer.data[:200]
    assert (server.root / "metrics").read_bytes() == SECRET


def test_other_names_are_files_as_before(server: ServerHandle) -> None:
    (server.root / "metricsx").write_bytes(b"x")
    (server.root / "d").mkdir()
    (server.root / "d" / "metrics").write_bytes(b"deeper")
    for target, body in (("/metricsx", b"x"), ("/d/metrics", b"deeper")):
        answer = exchange(
            server.port, f"GET {target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode()
        )
        assert answer.statuses == [200] and answer.data.endswith(body)
