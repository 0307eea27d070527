"""Checks of what a server answers, before the client acts on it: lengths, the
``Content-Range`` of every ``206``, and the names a listing gives (which become local file
names or destination URLs).  Each refusal is a :class:`~dtnkit.transfer.client.errors.BadAnswer`
(exit 22): a hostile or broken server is not retried."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from dtnkit.transfer.client.errors import BadAnswer

#: Largest length or offset taken from a server (as ``Content-Length`` and ``Content-Range``
#: can express in 19 digits).
MAX_LENGTH = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")
_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,19})-([0-9]{1,19})/([0-9]{1,19})")
#: Most blocks one file may be cut into (the block list is planned up front: a server
#: claiming 2**62 bytes must not make the client plan 2**39 blocks); 32 TiB at 8 MiB blocks.
MAX_BLOCKS = 2**22
#: The longest file name a listing may give (Linux NAME_MAX, in UTF-8 bytes).
NAME_MAX = 255


def content_length(value: str | None, what: str, *, default: int | None = 0) -> int:
    """A ``Content-Length`` value: ASCII decimal digits only (no sign, no ``²``)."""
    if value is None:
        if default is None:
            raise BadAnswer(what, "the answer has no Content-Length", "check the server")
        return default
    text = value.strip()
    if not _DIGITS.fullmatch(text) or int(text) > MAX_LENGTH:
        raise BadAnswer(
            what,
            f"Content-Length {value[:40]!r} is not a number of bytes",
            "check the server (a proxy in between?)",
        )
    return int(text)


def check_file_size(size: int, block_size: int, what: str) -> None:
    """A remote file's size must fit in :data:`MAX_BLOCKS` blocks of *block_size*."""
    if size > MAX_BLOCKS * block_size:
        raise BadAnswer(
            what,
            f"Content-Length {size} would be more than {MAX_BLOCKS} blocks of {block_size} bytes",
            "check the server; if the file is that large, raise --block-size",
        )


def check_content_range(
    value: str | None, first: int, last: int, size: int | None, what: str
) -> None:
    """A ``206`` answer must be for exactly the bytes asked for, of the size known from the
    HEAD (any total when *size* is None): ``bytes first-last/size``; anything else (no
    header, other bytes, another total, ``*``) is refused, whatever the verify mode."""
    asked = f"bytes {first}-{last}/{size if size is not None else 'N'}"
    m = _CONTENT_RANGE.fullmatch((value or "").strip())
    got = tuple(int(g) for g in m.groups()) if m is not None else None
    if (
        got is None
        or got[:2] != (first, last)
        or (size is not None and got[2] != size)
        or got[2] <= last
    ):
        shown = "no Content-Range" if value is None else f"Content-Range {value[:80]!r}"
        raise BadAnswer(
            what,
            f"{shown} is not the range asked for ({asked})",
            "check the server (a proxy or cache in between?); nothing was committed",
        )


def member_name(listed_path: str, href_path: str, what: str) -> str:
    """The name of a listing's member *href_path* (percent-encoded, as the server sent it)
    in the collection at *listed_path*: the member must lie directly under the collection,
    and its decoded name must be a plain file name (no separator, not ``.`` or ``..``, no
    NUL, not empty).  Anything else is refused: it would be written outside the
    destination."""
    base = [unquote(p) for p in listed_path.partition("?")[0].rstrip("/").split("/")]
    parts = (href_path[:-1] if href_path.endswith("/") else href_path).split("/")
    where = f"the listing names {href_path[:200]!r}"
    try:
        name = unquote(parts[-1], errors="strict")
    except UnicodeDecodeError:
        raise BadAnswer(
            what, f"{where}, whose name is not UTF-8", "check the server; nothing was copied"
        ) from None
    if len(parts) != len(base) + 1 or [unquote(p) for p in parts[:-1]] != base:
        raise BadAnswer(
            what,
            f"{where}, not a member of the listed collection",
            "check the server; nothing was copied",
        )
    if (
        name in ("", ".", "..")
        or any(c in name for c in "/\\\0")
        or len(name.encode("utf-8", "surrogateescape")) > NAME_MAX
    ):
        raise BadAnswer(
            what,
            f"{where}, whose name {name[:80]!r} is not a plain file name",
            "check the server; nothing was copied",
        )
    return name


def same_origin_href(origin: str, scheme: str, host: str, port: int) -> bool:
    """Whether a full-URL href's ``scheme://host[:port]`` is the listed server's origin."""
    if not origin:
        return True
    parts = urlsplit(origin)
    try:
        their_port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    return (parts.scheme, (parts.hostname or "").lower(), their_port) == (
        scheme,
        host.lower(),
        port,
    )
