"""Bearer tokens for ``dtnkit serve``: a token file and a constant-time lookup.

File format, one token a line::

    # comment lines, blank lines and trailing "# ..." comments are ignored
    s3cr3t-reader   read
    s3cr3t-writer   read,write    # the transfer robot

A token is any run of non-blank characters; scopes are ``read`` and ``write``, comma-separated.
Error messages name the line number, never the token.

The client's side (the token ``dtnkit cp`` sends) is :mod:`dtnkit.transfer.client.bearer`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dtnkit.errors import BadInput

if TYPE_CHECKING:
    pass

SCOPES = ("read", "write")


@dataclass(frozen=True)
class TokenStore:
    """Known tokens (as SHA-256 digests) and their scopes."""

    entries: tuple[tuple[bytes, frozenset[str]], ...]

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, Iterable[str]]]) -> TokenStore:
        entries = []
        for token, scopes in pairs:
            scope_set = frozenset(scopes)
            unknown = scope_set - set(SCOPES)
            if not token or unknown:
                why = (
                    f"unknown {'scope' if len(unknown) == 1 else 'scopes'} {sorted(unknown)}"
                    if unknown
                    else "empty token"
                )
                raise BadInput("token entry", why, "use read, write or read,write")
            entries.append((_digest(token), scope_set))
        return cls(tuple(entries))

    def scopes(self, token: str) -> frozenset[str] | None:
        """The scopes of ``token``, or None when unknown; compares every entry in constant time."""
        given = _digest(token)
        found: frozenset[str] | None = None
        for known, scopes in self.entries:
            # No early exit: the time taken does not depend on which entry matches.
            if hmac.compare_digest(given, known) and found is None:
                found = scopes
        return found

    def __len__(self) -> int:
        return len(self.entries)


def load(path: Path) -> TokenStore:
    """Parse a token file; raises BadInput naming the line (never the token)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(
            f"token file {path}",
            f"cannot be read ({exc.__class__.__name__})",
            "pass a readable UTF-8 file with one 'TOKEN read|write|read,write' a line",
        ) from None
    return parse(text, source=str(path))


def parse(text: str, *, source: str = "token file") -> TokenStore:
    pairs: list[tuple[str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = stripped.split()
        for i, text in enumerate(fields):
            if text.startswith("#"):  # a trailing comment
                fields = fields[:i]
                break
        if len(fields) != 2:
            raise BadInput(
                f"{source} line {number}",
                f"has {len(fields)} fields, expected 2 (TOKEN SCOPES)",
                "write one 'TOKEN read|write|read,write' a line",
            )
        scopes = [s.strip() for s in fields[1].split(",")]
        bad = [s for s in scopes if s not in SCOPES]
        if bad:
            raise BadInput(
                f"{source} line {number}",
                f"has unknown scope(s) {bad}",
                "use read, write or read,write",
            )
        pairs.append((fields[0], scopes))
    return TokenStore.from_pairs(pairs)


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else None."""
    if not authorization:
        return None
    scheme, _, rest = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = rest.strip()
    return token or None


def _digest(token: str) -> bytes:
    # Hashing first makes the comparison independent of the token's length too.
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
