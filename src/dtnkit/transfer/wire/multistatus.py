"""WebDAV ``207 Multi-Status`` bodies (RFC 4918): built by the server, parsed by the client.

The server describes each member with an :class:`Entry` (its href already relative to the
served root and percent-encoded); :func:`build` writes the XML. :func:`parse` reads such a body
as the client's ``PROPFIND`` does: each ``response`` but the collection's own, with its path,
whether it is a collection and its ``getcontentlength``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit
from xml.parsers import expat

from dtnkit.host.parsers import is_uint
from dtnkit.transfer.wire import ranges

_DAV = "DAV: "  # expat's namespace-qualified names: "DAV: href"


def xml_escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as entities (as ``xml.sax.saxutils.escape``)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


@dataclass(frozen=True)
class Entry:
    """One member of a listing."""

    href: str  # percent-encoded path; a collection's gets a trailing "/"
    is_dir: bool
    size: int
    mtime: float
    etag: str


class Member(NamedTuple):
    """One member of a parsed listing."""

    path: str  # the href's path, percent-encoded as sent
    is_dir: bool
    size: int
    origin: str = ""  # the href's ``scheme://host[:port]`` when it is a full URL, else ""


#: Limits of :func:`parse`: a listing nested deeper, with more members or a longer href or
#: text is refused rather than parsed (no DOCTYPE at all: no entities, no bombs).
MAX_NESTING = 64
MAX_MEMBERS = 5_000_000
MAX_TEXT = 65536


class ListingError(ValueError):
    """A multistatus body that is malformed, too large, or uses a DOCTYPE."""


#: the start and the end of a multistatus body; :func:`response` is one member between them
#: (a server streams a long listing in pieces)
OPENING = '<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">\n'
CLOSING = "</D:multistatus>\n"


def build(entries: Iterable[Entry]) -> str:
    """The multistatus XML for the entries, in the given order."""
    return "".join([OPENING, *(response(item) for item in entries), CLOSING])


def response(item: Entry) -> str:
    """One ``D:response`` element."""
    href = item.href
    if item.is_dir and not href.endswith("/"):
        href += "/"
    props = [f"<D:getlastmodified>{ranges.http_date(item.mtime)}</D:getlastmodified>"]
    if item.is_dir:
        props.append("<D:resourcetype><D:collection/></D:resourcetype>")
    else:
        props.append("<D:resourcetype/>")
        props.append(f"<D:getcontentlength>{item.size}</D:getcontentlength>")
        props.append(f"<D:getetag>{xml_escape(item.etag)}</D:getetag>")
    return (
        f"<D:response><D:href>{xml_escape(href)}</D:href><D:propstat><D:prop>"
        f"{''.join(props)}</D:prop><D:status>HTTP/1.1 200 OK</D:status>"
        f"</D:propstat></D:response>\n"
    )


def parse(body: bytes | str, own: str) -> list[Member]:
    """The members of a multistatus body other than the collection ``own`` (a URL path).

    An href may be a full URL or a path; its path is kept (and its origin in
    ``Member.origin``). A member is a collection when its properties hold ``collection``; a
    missing ``getcontentlength`` is 0.  The body is read with expat directly and never
    expands an entity: a DOCTYPE (where entity bombs and external entities live) is refused,
    as are elements nested deeper than :data:`MAX_NESTING`, more than :data:`MAX_MEMBERS`
    members and texts longer than :data:`MAX_TEXT`.  Every refusal, malformed XML and a
    length that is not a decimal number of bytes raise :class:`ListingError` (a ValueError).
    """
    own = own.rstrip("/")
    depth = 0
    response = -1  # depth of the open <response>, -1 outside one
    capture: str | None = None  # "href" or "getcontentlength" while inside one
    texts: list[str] = []
    found: dict[str, str] = {}  # the first href and length of the open response
    is_dir = False
    members: list[tuple[str, bool, str | None]] = []

    def refuse(*_args: object) -> int:
        raise ListingError("a DOCTYPE or entity in a listing is refused")

    def start(name: str, _attrs: object) -> None:
        nonlocal depth, response, capture, is_dir
        depth += 1
        if depth > MAX_NESTING:
            raise ListingError(f"elements nested deeper than {MAX_NESTING}")
        local = name[len(_DAV) :] if name.startswith(_DAV) else None
        if local == "response" and response < 0:
            response, is_dir = depth, False
            found.clear()
        elif response >= 0 and local in ("href", "getcontentlength") and local not in found:
            capture = local
            texts.clear()
        elif response >= 0 and local == "collection":
            is_dir = True

    def end(_name: str) -> None:
        nonlocal depth, response, capture
        if capture is not None:
            found[capture] = "".join(texts)
            capture = None
        if depth == response:
            if len(members) >= MAX_MEMBERS:
                raise ListingError(f"more than {MAX_MEMBERS} members")
            members.append((found.get("href", ""), is_dir, found.get("getcontentlength")))
            response = -1
        depth -= 1

    def text(data: str) -> None:
        if capture is not None:
            texts.append(data)
            if sum(map(len, texts)) > MAX_TEXT:
                raise ListingError(f"a text longer than {MAX_TEXT} characters")

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(body, True)
    except expat.ExpatError as exc:
        raise ListingError(f"malformed XML ({exc})") from None
    out: list[Member] = []
    for raw, dir_, size_text in members:
        parts = urlsplit(raw.strip())
        if parts.path.rstrip("/") == own:
            continue
        size = 0
        if size_text is not None:
            digits = size_text.strip()
            if not (is_uint(digits) and len(digits) <= 19):
                raise ListingError(f"getcontentlength {digits[:40]!r} is not a number of bytes")
            size = int(digits)
        origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme or parts.netloc else ""
        out.append(Member(parts.path, dir_, size, origin))
    return out
