"""Bearer tokens for ``dtnkit serve``: a token file and a constant-time lookup.

File format, one token a line::

    # comment lines, blank lines and trailing "# ..." comments are ignored
    s3cr3t-reader   read
    s3cr3t-writer   read,write    # the transfer robot

A token is any run of non-blank characters; scopes are ``read`` and ``write``, comma-separated.
Error messages name the line number, never the token.

The client's side, :func:`discover`: the token ``dtnkit cp`` sends without ``--token``, found
as the WLCG Bearer Token Discovery spec says (as gfal2, davix and xrdcp find it).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dtnkit.errors import BadInput

if TYPE_CHECKING:
    from dtnkit.environment import Environment

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
                raise BadInput("token entry", f"unknown scope(s) {sorted(unknown)}"
                               if unknown else "empty token", "use read, write or read,write")
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
        raise BadInput(f"token file {path}", f"cannot be read ({exc.__class__.__name__})",
                       "pass a readable UTF-8 file with one 'TOKEN read|write|read,write' a line"
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
            raise BadInput(f"{source} line {number}",
                           f"has {len(fields)} fields, expected 2 (TOKEN SCOPES)",
                           "write one 'TOKEN read|write|read,write' a line")
        scopes = [s.strip() for s in fields[1].split(",")]
        bad = [s for s in scopes if s not in SCOPES]
        if bad:
            raise BadInput(f"{source} line {number}", f"has unknown scope(s) {bad}",
                           "use read, write or read,write")
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


# -- the client's side: where a bearer token comes from -------------------------------------

#: the most a token file may hold (a JWT is a few KiB; a file larger than this is not one)
MAX_TOKEN_FILE = 64 * 1024


@dataclass(frozen=True)
class Bearer:
    """A client's bearer token and where it was found (shown; the value never is)."""

    value: str = field(repr=False)
    source: str  # "--token", "--token-file /p", "$BEARER_TOKEN", "/tmp/bt_u0", ...


def read_token_file(path: Path, what: str, *, uid: int | None = None) -> str:
    """The token a file holds (surrounding white space stripped, as the WLCG discovery spec
    says); BadInput naming the file, never its content.  ``uid``: the file must belong to
    this user (a discovery file in a shared directory such as /tmp)."""
    try:
        with path.open("rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"{what} {path}", "is not a regular file",
                               "write the token into a file of its own")
            if uid is not None and st.st_uid != uid:
                raise BadInput(f"{what} {path}", f"belongs to uid {st.st_uid}, not to you "
                               f"(uid {uid}): it is not used",
                               "remove it, or pass --token-file with your own file")
            raw = handle.read(MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise BadInput(f"{what} {path}", f"cannot be read ({exc.strerror or exc})",
                       "pass a readable file holding the token") from None
    if len(raw) > MAX_TOKEN_FILE:
        raise BadInput(f"{what} {path}", f"is larger than {MAX_TOKEN_FILE} bytes: not a "
                       "token", "pass a file holding the token alone")
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise BadInput(f"{what} {path}", "is not ASCII text: not a bearer token",
                       "pass a file holding the token alone") from None
    if not token or any(c.isspace() or not c.isprintable() for c in token):
        raise BadInput(f"{what} {path}", "is empty" if not token else
                       "holds more than one word: not a bearer token",
                       "pass a file holding the token alone")
    return token


def discover(env: Environment) -> Bearer | None:
    """A token without --token (WLCG Bearer Token Discovery, after dtnkit's own
    $DTNKIT_TOKEN): $BEARER_TOKEN, then the file $BEARER_TOKEN_FILE names (which must
    exist), then $XDG_RUNTIME_DIR/bt_u$UID, then /tmp/bt_u$UID; None when none is there."""
    if env.token:
        return Bearer(env.token, env.token_origin or "$BEARER_TOKEN")
    for i, path in enumerate(env.token_files):
        named = i == 0 and env.token_file_named
        if not named and not os.path.lexists(path):
            continue
        what = "$BEARER_TOKEN_FILE" if named else "bearer token file"
        return Bearer(read_token_file(path, what, uid=None if named else env.uid),
                      str(path))
    return None
