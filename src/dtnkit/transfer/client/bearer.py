"""Where the bearer token ``dtnkit cp`` sends comes from, when no ``--token`` is given: the
WLCG Bearer Token Discovery spec (as gfal2, davix and xrdcp find it), after dtnkit's own
$DTNKIT_TOKEN; and the checks of a token file (``--token-file``, a discovery file).

The server's token store is :mod:`dtnkit.transfer.tokens`; a copy does not load it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from dtnkit.environment import Environment
from dtnkit.errors import BadInput

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
                raise BadInput(
                    f"{what} {path}",
                    "is not a regular file",
                    "write the token into a file of its own",
                )
            if uid is not None and st.st_uid != uid:
                raise BadInput(
                    f"{what} {path}",
                    f"belongs to uid {st.st_uid}, not to you (uid {uid}): it is not used",
                    "remove it, or pass --token-file with your own file",
                )
            raw = handle.read(MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise BadInput(
            f"{what} {path}",
            f"cannot be read ({exc.strerror or exc})",
            "pass a readable file holding the token",
        ) from None
    if len(raw) > MAX_TOKEN_FILE:
        raise BadInput(
            f"{what} {path}",
            f"is larger than {MAX_TOKEN_FILE} bytes: not a token",
            "pass a file holding the token alone",
        )
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise BadInput(
            f"{what} {path}",
            "is not ASCII text: not a bearer token",
            "pass a file holding the token alone",
        ) from None
    if not token or any(c.isspace() or not c.isprintable() for c in token):
        raise BadInput(
            f"{what} {path}",
            "is empty" if not token else "holds more than one word: not a bearer token",
            "pass a file holding the token alone",
        )
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
        return Bearer(read_token_file(path, what, uid=None if named else env.uid), str(path))
    return None
