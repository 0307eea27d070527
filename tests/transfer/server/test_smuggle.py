"""Strict request parsing over raw sockets (issue 11 items 8 and 12): every head a proxy could
read differently is refused with 4xx/5xx-but-not-500, nothing hidden in a body is executed,
and the server log never holds a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.rawhttp import LockedLog, exchange

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server

RW = "tok-smuggle-rw"
AUTH = f"Authorization: Bearer {RW}\r\n".encode()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, Path, LockedLog]]:
    root = tmp_path / "root"
    root.mkdir()
    (root / "victim").write_bytes(b"keep me")
    (root / "f").write_bytes(b"0123456789")
    log = LockedLog()
    handle = start_server(root, tokens=tokens.parse(f"{RW} read,write\n"), log=log)
    try:
        yield handle, root, log
    finally:
        handle.stop()
        assert "Traceback" not in log.text() and "internal error" not in log.text()


HIDDEN = b"DELETE /victim HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n"


def test_two_different_content_lengths_are_400_and_hide_nothing(served: tuple) -> None:
    handle, root, _log = served
    raw = (
        b"PUT /up HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"Content-Length: 0\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(HIDDEN)
        + HIDDEN
    )
    answer = exchange(handle.port, raw)
    assert answer.statuses == [400] and answer.closed
    assert (root / "victim").read_bytes() == b"keep me"


def test_content_length_with_chunked_is_400_closed_and_hides_nothing(served: tuple) -> None:
    handle, root, _log = served
    body = b"0\r\n\r\n" + HIDDEN
    raw = (
        b"PUT /up HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"Transfer-Encoding: chunked\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )
    answer = exchange(handle.port, raw)
    assert answer.statuses == [400] and answer.closed
    assert b"Connection: close" in answer.data
    assert (root / "victim").read_bytes() == b"keep me"
    assert not (root / "up").exists()


def test_duplicate_authorization_is_400(served: tuple) -> None:
    handle, root, _log = served
    raw = (
        b"DELETE /victim HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"Authorization: Bearer someone-else\r\n\r\n"
    )
    assert exchange(handle.port, raw).statuses == [400]
    raw = (
        b"DELETE /victim HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer someone-else\r\n"
        + AUTH
        + b"\r\n"
    )
    assert exchange(handle.port, raw).statuses == [400]
    assert (root / "victim").exists()


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Length: \xc2\xb2",  # '2' superscript in UTF-8
        b"Content-Length: \xb2",  # ... and in Latin-1, which str.isdigit() accepts
        b"X-Number-Of-Streams: \xb2",
        b"X-Number-Of-Streams: \xc2\xb2",
        b"Content-Length: +5",
        b"Content-Length: 5, 5",
        b"Content-Length: 0x5",
        b"Content-Length: 99999999999999999999999",
    ],
)
def test_non_ascii_or_odd_numbers_are_400_without_a_traceback(served: tuple, header: bytes) -> None:
    handle, _root, log = served
    for method in (b"PUT /n", b"COPY /f"):
        raw = (
            method
            + b" HTTP/1.1\r\nHost: x\r\n"
            + AUTH
            + b"Source: http://127.0.0.1:9/x\r\n"
            + header
            + b"\r\n\r\nhello"
        )
        answer = exchange(handle.port, raw)
        assert answer.statuses and answer.statuses[0] == 400, (method, answer.data[:200])
    assert "Traceback" not in log.text()


@pytest.mark.parametrize(
    "head",
    [
        b"GET /f HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n",  # obs-fold
        b"GET /f HTTP/1.1\r\nHost: x\r\n\tX-A: 1\r\n\r\n",
        b"GET /f HTTP/1.1\r\nHost: x\r\nX A: 1\r\n\r\n",  # space in the name
        b"GET /f HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n",  # space before the colon
        b"GET /f HTTP/1.1\r\nHost: x\r\nX(A): 1\r\n\r\n",
        b"GET /f HTTP/1.1\r\nHost: x\r\n: 1\r\n\r\n",
        b"GET /f HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n",
        b"GET /f HTTP/1.1\r\nHost: x\r\nX-A: 1\rX-B: 2\r\n\r\n",  # bare CR
        b"GET /f HTTP/1.1\r\nHost: x\nX-B: 2\r\n\r\n",  # bare LF
        b"GET /f HTTP/1.1\nHost: x\n\n",
        b"GET /f HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
        b"GET /f HTTP/1.1\r\nHost: x\r\nX-A: caf\xc3\xa9\r\n\r\n",
        b"GET /f\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET  /f HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /f HTTP/1.1 \r\nHost: x\r\n\r\n",
        b"GET /f HTTP/1.1\r\n\r\n",  # no Host
        b"GET /f HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        b"G\x01T /f HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /f HTTPS/1.1\r\nHost: x\r\n\r\n",
        b"PUT /t HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
)
def test_malformed_heads_are_400(served: tuple, head: bytes) -> None:
    handle, root, _log = served
    answer = exchange(handle.port, head)
    assert answer.statuses == [400], answer.data[:300]
    assert answer.closed
    assert sorted(p.name for p in root.iterdir()) == ["f", "victim"]


def test_overlong_lines_and_too_many_headers(served: tuple) -> None:
    handle, _root, _log = served
    assert exchange(handle.port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n").statuses == [414]
    long_header = b"GET /f HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 20000 + b"\r\n\r\n"
    assert exchange(handle.port, long_header).statuses == [431]
    many = b"GET /f HTTP/1.1\r\nHost: x\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n"
    assert exchange(handle.port, many).statuses == [431]
    huge = b"GET /f HTTP/1.1\r\nHost: x\r\n" + (b"X-A: " + b"a" * 8000 + b"\r\n") * 10
    assert exchange(handle.port, huge).statuses == [431]


@pytest.mark.parametrize("coding", [b"gzip", b"chunked, gzip", b"gzip, chunked", b"identity"])
def test_unknown_transfer_coding_is_501(served: tuple, coding: bytes) -> None:
    handle, root, _log = served
    raw = (
        b"PUT /t HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"Transfer-Encoding: "
        + coding
        + b"\r\n\r\n0\r\n\r\n"
    )
    answer = exchange(handle.port, raw)
    assert answer.statuses == [501] and answer.closed
    assert not (root / "t").exists()


def test_two_transfer_encoding_headers_are_501(served: tuple) -> None:
    handle, root, _log = served
    raw = (
        b"PUT /t HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    assert exchange(handle.port, raw).statuses == [501]
    assert not (root / "t").exists()


@pytest.mark.parametrize(
    "chunks",
    [
        b"5\r\nhello\r\n0\r\n\r\n",
    ],
)
def test_chunked_put_and_pipelined_requests_still_work(served: tuple, chunks: bytes) -> None:
    handle, root, _log = served
    raw = (
        b"PUT /c HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + chunks
        + b"GET /f HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"\r\n"
        + b"GET /c HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"Connection: close\r\n\r\n"
    )
    answer = exchange(handle.port, raw)
    assert answer.statuses == [201, 200, 200], answer.data
    assert answer.data.endswith(b"hello") and b"0123456789" in answer.data
    assert (root / "c").read_bytes() == b"hello"


@pytest.mark.parametrize(
    "chunks",
    [
        b"5 ; x\x01=1\r\nhello\r\n0\r\n\r\n",
        b"+5\r\nhello\r\n0\r\n\r\n",
        b"0x5\r\nhello\r\n0\r\n\r\n",
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\nhelloXX0\r\n\r\n",
        b"5\r\nhello\r\n0\r\n" + b"X-T: 1\r\n" * 2000 + b"\r\n",
        b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
    ],
)
def test_malformed_chunked_bodies_are_400_and_commit_nothing(served: tuple, chunks: bytes) -> None:
    handle, root, _log = served
    raw = (
        b"PUT /c HTTP/1.1\r\nHost: x\r\n"
        + AUTH
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + chunks
        + HIDDEN
    )
    answer = exchange(handle.port, raw)
    assert answer.statuses == [400], answer.data
    assert not (root / "c").exists() and (root / "victim").exists()


def test_the_head_scanner_fed_a_byte_at_a_time_agrees_and_refuses_early() -> None:
    from dtnkit.transfer.server import http11

    head = b"\r\nGET /f HTTP/1.1\r\nHost: x\r\n" + b"X-A: 1\r\n" * 50 + b"\r\n"
    raw = head + b"GET /next HTTP/1.1\r\n"
    scanner = http11.HeadScanner()
    ends = [scanner.end(raw[:n]) for n in range(1, len(raw) + 1)]
    first = next(i for i, e in enumerate(ends) if e is not None)
    assert first == len(head) - 1 and ends[first] == len(head) == http11.head_end(raw)
    assert http11.parse_head(raw[: len(head)]).headers.get_all("X-A") == ["1"] * 50
    many = b"GET /f HTTP/1.1\r\n" + b"X:1\r\n" * 200
    scanner = http11.HeadScanner()
    with pytest.raises(http11.BadRequest) as refused:
        for n in range(1, len(many) + 1):
            scanner.end(many[:n])
    assert refused.value.status == 431 and n < len(b"GET /f HTTP/1.1\r\n") + 5 * 103
    with pytest.raises(http11.BadRequest) as bare:  # before the head could end
        http11.HeadScanner().end(b"GET /f HTTP/1.1\r\nHost: x\nX: " + b"y" * 20)
    assert bare.value.status == 400
