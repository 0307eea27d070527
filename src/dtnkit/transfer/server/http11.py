"""A strict, sans-I/O reader of HTTP/1.1 request heads (RFC 9112), and response heads.

Nothing here touches a socket: :class:`HeadScanner` finds where a head ends in the bytes
received so far, :func:`parse_head` turns a complete head into a :class:`Request` or raises
:class:`BadRequest` with the status to answer.  Strict on purpose, because a server that reads
a request differently from a proxy in front of it can be smuggled requests:

- lines end with CRLF; a bare CR or LF, a NUL or another control character is refused (400);
- a header line that starts with white space (obs-fold) is refused (400), as is a name that
  is not a token or white space before the colon;
- header values are ASCII (visible characters, space and tab): obs-text is refused (400), so
  no handler meets a non-ASCII digit such as ``²`` that :meth:`str.isdigit` accepts;
- ``Content-Length`` is ASCII digits, at most once (400 otherwise);
- any transfer coding but a single ``chunked`` is 501; ``Transfer-Encoding`` with
  ``Content-Length``, or on an HTTP/1.0 request, is 400 (and the connection is closed);
- ``Host`` exactly once on HTTP/1.1, ``Authorization`` at most once (400);
- a request line over :data:`MAX_LINE` is 414, a header line over it, more than
  :data:`MAX_HEADERS` headers or a head over :data:`MAX_HEAD` bytes are 431.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus

MAX_LINE = 16384  # bytes in the request line or one header line (long bearer tokens fit)
MAX_HEADERS = 100
MAX_HEAD = 64 * 1024  # the whole head
MAX_LENGTH_DIGITS = 18  # a Content-Length below 10**18 bytes

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(rb"[\x21-\x7e]+")
_VALUE = re.compile(rb"[\x20-\x7e\t]*")
_VERSION = re.compile(rb"HTTP/([0-9])\.([0-9])")
_DIGITS = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")
#: Headers that may appear at most once, beyond Content-Length and Transfer-Encoding.
_SINGLE = ("host", "authorization")


class BadRequest(Exception):
    """The head cannot be served: answer *status* with *why*, then close the connection."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(f"{status} {why}")
        self.status = status
        self.why = why


@dataclass
class Request:
    method: str
    target: str
    version: tuple[int, int]
    headers: Message = field(repr=False)
    content_length: int | None = None
    chunked: bool = False
    keep_alive: bool = True
    expect_continue: bool = False


class HeadScanner:
    """Finds where a head ends in a growing buffer, looking at each byte once.

    :meth:`end` is called with the whole buffer after each receive; it only scans what was
    added since the previous call (a head trickled a byte at a time costs no more than one
    sent at once).  Leading empty lines (CRLF) before a request line are skipped by
    :func:`parse_head`; here they count as part of the head.
    """

    __slots__ = ("lines", "scanned")

    def __init__(self) -> None:
        self.scanned = 0  # bytes already looked at
        self.lines = 0  # line ends seen

    def end(self, buf: bytes | bytearray) -> int | None:
        """The offset just past the blank line ending the head, or None to read more.

        Raises :class:`BadRequest`: 400 when a line ends with a bare LF; 431 when no head
        ends within :data:`MAX_HEAD` bytes or it has more than :data:`MAX_HEADERS` lines; 414
        or 431 when the line being received is already longer than :data:`MAX_LINE`.
        """
        begin = self.scanned
        self.scanned = len(buf)
        lf = buf.find(b"\n", begin)
        while lf >= 0:
            if lf == 0 or buf[lf - 1] != 0x0D:
                raise BadRequest(400, "a line ends with a bare LF; lines end with CRLF")
            if lf >= 3 and buf[lf - 3 : lf - 1] == b"\r\n":
                return lf + 1
            self.lines += 1
            if self.lines > MAX_HEADERS + 2:  # the request line, leading empty lines
                raise BadRequest(431, f"more than {MAX_HEADERS} header lines")
            lf = buf.find(b"\n", lf + 1)
        if len(buf) > MAX_HEAD:
            raise BadRequest(431, f"the request head is longer than {MAX_HEAD} bytes")
        last = buf.rfind(b"\r\n") + 2 if self.lines else 0
        if len(buf) - last > MAX_LINE:
            raise BadRequest(
                431 if self.lines else 414,
                f"a line of the request head is longer than {MAX_LINE} bytes",
            )
        return None


def head_end(buf: bytes | bytearray) -> int | None:
    """:meth:`HeadScanner.end` of a buffer looked at once."""
    return HeadScanner().end(buf)


def parse_head(head: bytes | bytearray) -> Request:
    """Parse a complete head (as delimited by :func:`head_end`)."""
    data = bytes(head)
    while data.startswith(b"\r\n"):
        data = data[2:]
    if not data.endswith(b"\r\n\r\n"):
        raise BadRequest(400, "the request head does not end with an empty line")
    lines = data[:-4].split(b"\r\n")
    method, target, version = _request_line(lines[0])
    if len(lines) - 1 > MAX_HEADERS:
        raise BadRequest(431, f"more than {MAX_HEADERS} header lines")
    headers = Message()
    seen: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, value = _header_line(line)
        headers[name] = value
        seen.setdefault(name.lower(), []).append(value)
    request = Request(method, target, version, headers)
    _framing(request, seen)
    return request


def _request_line(line: bytes) -> tuple[str, str, tuple[int, int]]:
    if len(line) > MAX_LINE:
        raise BadRequest(414, f"the request line is longer than {MAX_LINE} bytes")
    parts = line.split(b" ")
    if len(parts) != 3:
        raise BadRequest(400, "the request line is not 'METHOD TARGET HTTP/1.1'")
    method, target, version = parts
    if not _TOKEN.fullmatch(method):
        raise BadRequest(400, "the method is not a token")
    if not _TARGET.fullmatch(target):
        raise BadRequest(400, "the request target has a control, space or non-ASCII byte")
    match = _VERSION.fullmatch(version)
    if match is None:
        raise BadRequest(400, "the protocol is not HTTP/1.x")
    numbers = (int(match.group(1)), int(match.group(2)))
    if numbers[0] != 1:
        raise BadRequest(505, f"HTTP/{numbers[0]}.{numbers[1]} is not supported; use HTTP/1.1")
    return method.decode("ascii"), target.decode("ascii"), numbers


def _header_line(line: bytes) -> tuple[str, str]:
    if len(line) > MAX_LINE:
        raise BadRequest(431, f"a header line is longer than {MAX_LINE} bytes")
    if line[:1] in (b" ", b"\t"):
        raise BadRequest(400, "a header line starts with white space (obsolete line folding)")
    name, colon, value = line.partition(b":")
    if not colon:
        raise BadRequest(400, "a header line has no colon")
    if not _TOKEN.fullmatch(name):
        raise BadRequest(400, "a header name is not a token (no white space before the colon)")
    value = value.strip(b" \t")
    if not _VALUE.fullmatch(value):
        shown = name.decode("ascii")
        raise BadRequest(400, f"header {shown} has a control or non-ASCII byte")
    return name.decode("ascii"), value.decode("ascii")


def _framing(request: Request, seen: dict[str, list[str]]) -> None:
    for name in _SINGLE:
        if len(seen.get(name, ())) > 1:
            raise BadRequest(400, f"header {name.title()} is sent more than once")
    if request.version >= (1, 1) and "host" not in seen:
        raise BadRequest(400, "an HTTP/1.1 request needs a Host header")
    lengths = seen.get("content-length", [])
    codings = seen.get("transfer-encoding", [])
    if len(lengths) > 1:
        raise BadRequest(400, "Content-Length is sent more than once")
    if codings:
        if request.version < (1, 1):
            raise BadRequest(400, "Transfer-Encoding on an HTTP/1.0 request")
        if len(codings) > 1 or codings[0].lower() != "chunked":
            raise BadRequest(
                501, f"Transfer-Encoding {', '.join(codings)[:40]!r}: only chunked is supported"
            )
    if lengths and codings:
        raise BadRequest(400, "Content-Length and Transfer-Encoding together")
    if lengths:
        value = lengths[0].encode("ascii")
        if not _DIGITS.fullmatch(value) or len(value) > MAX_LENGTH_DIGITS:
            raise BadRequest(400, f"Content-Length {lengths[0][:20]!r} is not a byte count")
        request.content_length = int(value)
    request.chunked = bool(codings)
    tokens = {t.strip().lower() for v in seen.get("connection", []) for t in v.split(",")}
    if request.version >= (1, 1):
        request.keep_alive = "close" not in tokens
    else:
        request.keep_alive = "keep-alive" in tokens and "close" not in tokens
    expect = seen.get("expect", [])
    if expect:
        if len(expect) > 1 or expect[0].lower() != "100-continue":
            raise BadRequest(417, "only 'Expect: 100-continue' is supported")
        request.expect_continue = request.version >= (1, 1)


def parse_chunk_size(line: bytes) -> int:
    """The size on a chunk-size line (without its CRLF); ValueError when malformed."""
    size, _, ext = line.partition(b";")
    size = size.rstrip(b" \t")
    if not size or len(size) > 16 or not _HEX.fullmatch(size):
        raise ValueError(f"bad chunk-size line {line[:40]!r}")
    if ext and not _VALUE.fullmatch(ext):
        raise ValueError("a chunk extension has a control or non-ASCII byte")
    return int(size, 16)


STATUS_LINES: dict[int, bytes] = {}


def status_line(status: int) -> bytes:
    line = STATUS_LINES.get(status)
    if line is None:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Status"
        line = STATUS_LINES[status] = f"HTTP/1.1 {status} {phrase}\r\n".encode("ascii")
    return line


def response_head(status: int, headers: list[tuple[str, str]]) -> bytes:
    """The bytes of a response head; header values must not hold CR or LF (ValueError)."""
    parts = [status_line(status)]
    for name, value in headers:
        text = f"{name}: {value}\r\n"
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise ValueError(f"header {name!r} holds a line break")
        parts.append(text.encode("latin-1", "replace"))
    parts.append(b"\r\n")
    return b"".join(parts)
