"""WebDAV ``207 Multi-Status`` bodies (RFC 4918): built by the server, parsed by the client.

The server describes each member with an :class:`Entry` (its href already relative to the
served root and percent-encoded); :func:`build` writes the XML. :func:`parse` reads such a body
as the client's ``PROPFIND`` does: each ``response`` but the collection's own, with its path,
whether it is a collection and its ``getcontentlength``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit
from xml.sax.saxutils import escape as xml_escape

from dtnkit.transfer.wire import ranges

_NS = "{DAV:}"


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

    path: str
    is_dir: bool
    size: int


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
    return (f"<D:response><D:href>{xml_escape(href)}</D:href><D:propstat><D:prop>"
            f"{''.join(props)}</D:prop><D:status>HTTP/1.1 200 OK</D:status>"
            f"</D:propstat></D:response>\n")


def parse(body: bytes | str, own: str) -> list[Member]:
    """The members of a multistatus body other than the collection ``own`` (a URL path).

    An href may be a full URL or a path; its path is kept. A member is a collection when its
    properties hold ``collection``; a missing ``getcontentlength`` is 0. Malformed XML raises
    :class:`xml.etree.ElementTree.ParseError`, a non-integer length ValueError.
    """
    out: list[Member] = []
    own = own.rstrip("/")
    for resp in ET.fromstring(body).iter(f"{_NS}response"):
        href = resp.findtext(f"{_NS}href") or ""
        path = urlsplit(href).path
        if path.rstrip("/") == own:
            continue
        is_dir = resp.find(f".//{_NS}collection") is not None
        size = int(resp.findtext(f".//{_NS}getcontentlength") or 0)
        out.append(Member(path, is_dir, size))
    return out
