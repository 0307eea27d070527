"""Which file a request names and whether its token may touch it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

from dtnkit.transfer import paths, tokens
from dtnkit.transfer.server.config import ServerConfig
from dtnkit.transfer.server.errors import HttpError, show


def target_path(raw: str) -> str:
    """The path of a request target (origin or absolute form), without query and fragment."""
    if not raw.isascii():
        raise HttpError(400, "request target", "has non-ASCII bytes; percent-encode them")
    if raw.startswith(("http://", "https://")):
        raw = urlsplit(raw).path or "/"
    return raw.split("?", 1)[0].split("#", 1)[0]


def resolve(root: Path, raw_target: str) -> Path:
    """The file under *root* a request target names; never an upload's part file."""
    path = paths.resolve(root, target_path(raw_target))
    rel = path.relative_to(root)
    if any(paths.is_part_name(part) for part in rel.parts):
        raise HttpError(403, show(path, root), "is the temporary name of an upload")
    return path


def authorize(config: ServerConfig, authorization: str | None, need: str, what: str) -> None:
    """Check the bearer token in *authorization* for scope *need* ("read" or "write").

    *what* (``METHOD /path``) names the request in the 401/403 answer.
    """
    token = tokens.bearer(authorization)
    if token is None:
        if need == "read" and config.anonymous_read:
            return
        raise HttpError(
            401,
            what,
            f"needs a bearer token with {need} scope",
            [("WWW-Authenticate", 'Bearer realm="dtnkit"')],
        )
    scopes = config.tokens.scopes(token) if config.tokens is not None else None
    if scopes is None:
        raise HttpError(
            401,
            what,
            "the bearer token is not valid",
            [("WWW-Authenticate", 'Bearer realm="dtnkit", error="invalid_token"')],
        )
    if need not in scopes:
        raise HttpError(403, what, f"the bearer token does not have {need} scope")


def principal(authorization: str | None) -> str:
    """Who a request counts against for per-token limits: a hash of its bearer token, or
    "" for every request without one."""
    token = tokens.bearer(authorization)
    if token is None:
        return ""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()
