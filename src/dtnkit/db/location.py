"""Where the results are: a file path (SQLite) or a ``postgresql://`` URL.

A :class:`DbUrl` prints redacted (``str()`` and ``repr()`` hide the password), so a URL that
ends up in an error, a hint or a log shows ``postgresql://user:***@host/db``.  The full URL
is only ``DbUrl.url``, read by the backend when it connects.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

from dtnkit.errors import BadInput

#: the URL schemes libpq accepts
SCHEMES = ("postgresql", "postgres")
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# compiled when first used (re's cache), not at import: every command imports this module
_ODD = "[\x00-\x1f\x7f\ud800-\udfff]"
_QUERY_SECRET = r"(?i)((?:^|&)(?:password|sslpassword)=)[^&]*"


class DbUrl:
    """A PostgreSQL URL; shown redacted."""

    __slots__ = ("url",)

    def __init__(self, url: str) -> None:
        self.url = url

    def __str__(self) -> str:
        return redact(self.url)

    def __repr__(self) -> str:
        return f"DbUrl({redact(self.url)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DbUrl) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def password(self) -> str:
        """The password written in the URL ('' when none: libpq then reads ~/.pgpass or
        $PGPASSWORD)."""
        head = self.url.split("://", 1)[-1].split("?", 1)[0]
        at = head.rfind("@")
        userinfo = head[:at] if at >= 0 else ""
        found = [unquote(userinfo.split(":", 1)[1])] if ":" in userinfo else []
        query = self.url.split("?", 1)[1] if "?" in self.url else ""
        found += [
            unquote(m.split("=", 1)[1])
            for m in query.split("&")
            if m.lower().startswith(("password=", "sslpassword="))
        ]
        return next((p for p in found if p), "")


#: what ``--db`` names
Location = Path | DbUrl


def redact(text: str) -> str:
    """``text`` (a URL) with any password replaced by ``***``."""
    match = _SCHEME_RE.match(text)
    if not match:
        return text
    rest = text[match.end() :]
    head, sep, query = rest.partition("?")
    at = head.rfind("@")
    if at >= 0 and ":" in head[:at]:
        head = head[:at].split(":", 1)[0] + ":***" + head[at:]
    if sep:
        query = re.sub(_QUERY_SECRET, r"\1***", query)
    return text[: match.end()] + head + sep + query


def is_url(text: str) -> bool:
    return bool(_SCHEME_RE.match(text))


def parse_location(value: str | Path | DbUrl) -> Location:
    """A path or a ``postgresql://`` URL from a flag or ``$DTNKIT_DB``; BadInput for an empty
    value or another scheme."""
    if isinstance(value, Path):
        return value
    text = value.url if isinstance(value, DbUrl) else value.strip()
    if not text:
        raise BadInput(
            "empty --db",
            "it names an SQLite file or a postgresql:// URL",
            "e.g. --db /var/lib/dtnkit/results.sqlite",
        )
    match = _SCHEME_RE.match(text)
    if not match:
        return Path(text if isinstance(value, DbUrl) else value)
    if match.group(1).lower() not in SCHEMES:
        raise BadInput(
            f"unsupported results store URL {redact(text)!r}",
            "--db takes an SQLite file path or a postgresql:// URL",
            "e.g. --db postgresql://dtnkit@db.example.org/dtnkit",
        )
    odd = re.search(_ODD, text)
    if odd:
        raise BadInput(
            f"bad results store URL {redact(text)!r}",
            f"it holds {odd.group()!r} (a URL is UTF-8 text without control characters)",
            "percent-encode the character (%XX), or fix the URL",
        )
    return value if isinstance(value, DbUrl) else DbUrl(text)


def shown(location: Location) -> str:
    """How a location is shown to people (a URL redacted)."""
    return str(location)
