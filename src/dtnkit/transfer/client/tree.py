"""Walking a remote tree for ``cp -r`` (download and relay): PROPFIND ``Depth: 1`` per
collection, without recursion, every member's name checked
(:func:`~dtnkit.transfer.client.answers.member_name`) before it becomes a local path or a
destination URL, at most :data:`MAX_DEPTH` levels, and no collection listed twice."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from dtnkit.transfer.client.answers import member_name, same_origin_href
from dtnkit.transfer.client.errors import BadAnswer
from dtnkit.transfer.client.session import Session, Url, check_status
from dtnkit.transfer.wire import multistatus

#: Deepest tree ``cp -r`` copies (levels below the top); a server whose listing goes deeper
#: (an endless or looping tree) is refused.
MAX_DEPTH = 256
#: Longest PROPFIND listing read.
MAX_LISTING = 256 * 2**20


@dataclass(frozen=True)
class TreeMember:
    url: Url  # where to fetch it: the listed collection's URL (query kept) and the name
    names: tuple[str, ...]  # its path below the top, one checked name per level
    is_dir: bool
    size: int


def listing(session: Session, url: Url) -> list[multistatus.Member]:
    """The members of a collection (``Depth: 1``) as the server lists them, unchecked
    (:func:`children` checks each name before using it).  A body larger than
    :data:`MAX_LISTING` or that does not parse is refused."""
    what = f"PROPFIND {url}"
    status, _headers, body = session.with_retries(
        what, lambda: session.request("PROPFIND", url, {"Depth": "1"}, limit=MAX_LISTING)
    )
    check_status(status, what, body, ok=(207,))
    try:
        return multistatus.parse(body, url.path.partition("?")[0])
    except ValueError as exc:
        raise BadAnswer(what, f"the listing cannot be used ({exc})", "check the server") from None


def children(session: Session, url: Url, names: tuple[str, ...] = ()) -> list[TreeMember]:
    """The members of the collection *url*, each name checked; a name listed twice is
    refused too (a file and a collection of one name cannot both be copied)."""
    what = f"PROPFIND {url}"
    out: list[TreeMember] = []
    seen: set[str] = set()
    for m in listing(session, url):
        if not same_origin_href(m.origin, url.scheme, url.host, url.port):
            raise BadAnswer(
                what,
                f"the listing names {m.origin + m.path!r}, on another server",
                "check the server; nothing was copied",
            )
        name = member_name(url.path, m.path, what)
        if name in seen:
            raise BadAnswer(
                what, f"the listing names {name!r} twice", "check the server; nothing was copied"
            )
        seen.add(name)
        child = url.child(name)
        if m.is_dir:  # a collection's URL ends with "/", as servers list it
            path, sep, query = child.path.partition("?")
            child = child.with_path(path + "/" + sep + query)
        out.append(TreeMember(child, (*names, name), m.is_dir, m.size))
    return out


def walk(session: Session, top: Url) -> Iterator[TreeMember]:
    """Every member under *top*, a collection before what it holds (depth first)."""

    def key(url: Url) -> str:
        return unquote(url.path.partition("?")[0]).rstrip("/")

    listed = {key(top)}
    stack: list[TreeMember] = [TreeMember(top, (), True, 0)]
    while stack:
        here = stack.pop()
        if len(here.names) >= MAX_DEPTH:
            raise BadAnswer(
                f"PROPFIND {top}",
                f"the tree is deeper than {MAX_DEPTH} levels (at {here.url})",
                "check the server (a loop?); copy a subtree",
            )
        dirs: list[TreeMember] = []
        for m in children(session, here.url, here.names):
            if m.is_dir:
                if key(m.url) in listed:
                    raise BadAnswer(
                        f"PROPFIND {here.url}",
                        f"the listing loops back to {m.url}",
                        "check the server",
                    )
                listed.add(key(m.url))
                dirs.append(m)
            yield m
        stack.extend(reversed(dirs))
