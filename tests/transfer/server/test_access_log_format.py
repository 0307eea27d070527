"""`dtnkit serve`'s access log is the Combined Log Format Apache httpd and nginx write
(``%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"``), with the time, and never the
token or a query string (before: ``127.0.0.1 "GET /f" 200 1048576 0.004s``, no time, a
format of its own).  Real requests over a socket to an in-process server; the line's
function is fuzzed with hostile values."""

from __future__ import annotations

import io
import re
import socket
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, accesslog, start_server

TOKEN = "ht-secret-token-0123456789"
#: the Combined Log Format, as a log parser reads it: quoted fields hold \" and \\ escapes
QUOTED = r'"((?:[^"\\]|\\.)*)"'
COMBINED = re.compile(
    r"^(\S+) (\S+) (\S+) \[([^\]]+)\] "
    + QUOTED
    + r" (\d{3}) (\d+|-) "
    + QUOTED
    + " "
    + QUOTED
    + "$"
)


class Log(io.StringIO):
    """The server's log; its lines once the server has written ``n`` of them."""

    def lines_when(self, n: int, timeout: float = 10.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            lines = [x for x in self.getvalue().splitlines() if x]
            if len(lines) >= n or time.monotonic() > deadline:
                return lines
            time.sleep(0.01)  # the server writes the line after it has answered


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, Log]]:
    root = tmp_path / "srv"
    root.mkdir()
    (root / "f").write_bytes(b"x" * 1000)
    log = Log()
    with start_server(
        root, quiet=False, log=log, tokens=tokens.parse(f"{TOKEN} read,write\n")
    ) as handle:
        yield handle, log


def ask(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_every_request_is_one_combined_log_format_line(served: tuple[ServerHandle, Log]) -> None:
    handle, log = served
    before = time.time()
    assert ask(
        handle.port,
        b"GET /f?authz=QUERYSECRET&x=1 HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
        b"Referer: https://user:pw@portal.example/page?token=REFSECRET#frag\r\n"
        b'User-Agent: curl/8.5.0 "quoted" back\\slash\r\n'
        b"Connection: close\r\n\r\n",
    ).startswith(b"HTTP/1.1 200")
    ask(
        handle.port,
        b"HEAD /f HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\nConnection: close\r\n\r\n",
    )
    ask(
        handle.port,
        b"GET /nosuch HTTP/1.0\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n",
    )
    ask(handle.port, b"GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")  # no token
    ask(handle.port, b"BR\x01KEN\r\n\r\n")
    lines = log.lines_when(5)
    after = time.time()
    assert len(lines) == 5, lines
    parsed = []
    for line in lines:
        m = COMBINED.fullmatch(line)
        assert m, line
        parsed.append(m.groups())
        when = datetime.strptime(m.group(4), "%d/%b/%Y:%H:%M:%S %z").timestamp()
        assert before - 1 <= when <= after + 1, line
    text = log.getvalue()
    for secret in (TOKEN, "QUERYSECRET", "REFSECRET", "user:pw", "frag"):
        assert secret not in text, secret
    get, head, missing, anonymous, broken = parsed
    assert get[:3] == ("127.0.0.1", "-", "-")
    assert get[4:9] == (
        "GET /f HTTP/1.1",
        "200",
        "1000",
        "https://portal.example/page",
        'curl/8.5.0 \\"quoted\\" back\\\\slash',
    )
    assert head[4:9] == ("HEAD /f HTTP/1.1", "200", "-", "-", "-")  # no body: %b is -
    assert missing[4:6] == ("GET /nosuch HTTP/1.0", "404")
    assert anonymous[4:6] == ("GET /f HTTP/1.1", "401")
    assert broken[4:6] == ("-", "400")


# ---- the line itself, with whatever a client sends -------------------------------------------
def unescape(text: str) -> str:
    r"""What a log parser makes of an escaped field (\" \\ \xhh)."""
    raw = re.sub(
        r"\\x([0-9a-f]{2})",
        lambda m: chr(int(m.group(1), 16)),
        re.sub(r'\\(["\\])', lambda m: m.group(1), text),
    )
    return raw.encode("latin-1").decode("utf-8", "surrogatepass")


@settings(max_examples=300, deadline=None)
@given(
    method=st.text(min_size=1, max_size=20),
    target=st.text(max_size=200),
    agent=st.none() | st.text(max_size=200),
    ref=st.none() | st.text(max_size=200),
    host=st.sampled_from(["127.0.0.1", "::1", "2001:db8::7"]),
    status=st.integers(100, 599),
    sent=st.integers(-1, 2**63),
    epoch=st.floats(0, 4e9),
)
def test_any_request_gives_one_parseable_line(
    method: str,
    target: str,
    agent: str | None,
    ref: str | None,
    host: str,
    status: int,
    sent: int,
    epoch: float,
) -> None:
    line = accesslog.line(
        host=host,
        epoch=epoch,
        method=method,
        target=target,
        version=(1, 1),
        status=status,
        sent=sent,
        referer_value=ref,
        agent=agent,
    )
    assert "\n" not in line and "\r" not in line
    m = COMBINED.fullmatch(line)
    assert m, line
    assert m.group(1) == host and m.group(6) == str(status)
    assert m.group(7) == (str(sent) if sent > 0 else "-")
    assert unescape(m.group(5)) == f"{method} {accesslog.without_query(target)} HTTP/1.1"
    assert unescape(m.group(9)) == (agent or "-")
    assert "?" not in unescape(m.group(8))  # never a query string
    assert all(" " <= c <= "~" for c in line)  # ASCII: control bytes and the rest escaped
    datetime.strptime(m.group(4), "%d/%b/%Y:%H:%M:%S %z")
