"""Conditional writes (RFC 9110, 13.1.1 and 13.1.2): ``If-Match`` and ``If-None-Match`` on a
PUT or an upload session, as values.

The server asks twice: before the body (so a refused upload costs no bytes) and again at the
commit, under the lock of the rename, with the entity tag the target has then.  Nothing here
touches a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# an entity tag: optional W/, then a quoted string of etagc characters (RFC 9110, 8.8.3)
_TAG = re.compile(r'\s*((?:W/)?"[\x21\x23-\x7e\x80-\xff]*")\s*')


def parse_tags(value: str) -> list[str] | None:
    """The entity tags of an ``If-Match`` / ``If-None-Match`` value; None for ``*``;
    ValueError when malformed."""
    if value.strip() == "*":
        return None
    tags: list[str] = []
    for part in value.split(","):
        if not part.strip():
            continue
        m = _TAG.fullmatch(part)
        if m is None:
            raise ValueError(f'{part.strip()[:40]!r} is not an entity tag ("..." or W/"...")')
        tags.append(m.group(1))
    if not tags:
        raise ValueError("no entity tag")
    return tags


@dataclass(frozen=True)
class WriteConditions:
    """The conditions of one write: ``if_match`` / ``if_none_match`` are None when the header
    is absent, ``["*"]`` for ``*``, else the tags."""

    if_match: list[str] | None = None
    if_none_match: list[str] | None = None

    @classmethod
    def parse(cls, if_match: str | None, if_none_match: str | None) -> WriteConditions:
        """ValueError when a header is malformed."""

        def one(value: str | None) -> list[str] | None:
            if value is None:
                return None
            tags = parse_tags(value)
            return ["*"] if tags is None else tags

        return cls(one(if_match), one(if_none_match))

    @property
    def any(self) -> bool:
        return self.if_match is not None or self.if_none_match is not None

    @property
    def create_only(self) -> bool:
        """``If-None-Match: *``: the write may only create; the commit must not replace."""
        return self.if_none_match == ["*"]

    def refusal(self, current: str | None) -> str | None:
        """Why the write fails its conditions (HTTP 412), or None; *current* is the target's
        strong entity tag now, None when there is no target."""
        if self.if_match is not None:
            if current is None:
                return "does not exist and If-Match was sent"
            # strong comparison: a weak tag never matches
            if self.if_match != ["*"] and current not in self.if_match:
                return "has another entity tag than If-Match names (it changed)"
        if self.if_none_match is not None and current is not None:
            if self.if_none_match == ["*"]:
                return "exists and If-None-Match: * was sent"
            bare = current.removeprefix("W/")
            if any(t.removeprefix("W/") == bare for t in self.if_none_match):
                return "has an entity tag If-None-Match names"
        return None
