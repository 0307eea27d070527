"""Map an HTTP request path onto a file under the served root, refusing every escape.

:func:`resolve` is the only way the server turns a URL into a filesystem path.  The rules:

* the path must start with ``/`` and is percent-decoded exactly once (``%252e`` stays the
  literal name ``%2e``); a ``%`` not followed by two hex digits is refused;
* decoded bytes become a name with :func:`os.fsdecode`, so names that are not UTF-8 round-trip
  (:func:`href` is the inverse);
* NUL and other control characters are refused, and so is every ``..`` segment: clients
  normalise dot-segments before sending (RFC 3986 section 5.2.4), so one that arrives is hostile;
  empty and ``.`` segments are dropped, which makes ``//etc`` mean ``<root>/etc``;
* a name longer than 255 bytes is refused (:class:`BadInput`), a path longer than 4096 bytes
  too (:class:`PathTooLong`, which the server answers with 414);
* the result, with every symlink resolved, must still be inside the resolved root; the path
  returned is the unresolved one under the resolved root, so DELETE removes a link, not its
  target.

It reads the filesystem (to resolve symlinks) but changes nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote_from_bytes, unquote_to_bytes

from dtnkit.errors import BadInput

NAME_MAX = 255
PATH_MAX = 4096
PART_MARK = ".dtnkit-part-"

_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PathTooLong(BadInput):
    """The decoded path is longer than :data:`PATH_MAX` bytes (HTTP 414)."""


def resolve(root: Path, url_path: str) -> Path:
    """The file under ``root`` that ``url_path`` (no query string) names; raises BadInput."""
    segments = _segments(url_path)
    real_root = root.resolve()
    candidate = real_root.joinpath(*segments)
    try:
        real = candidate.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loop, permission denied on a parent
        raise BadInput(
            f"path {_show(url_path)}",
            f"cannot be resolved ({exc.__class__.__name__})",
            "use a path without symlink loops",
        ) from None
    if not real.is_relative_to(real_root):
        raise BadInput(
            f"path {_show(url_path)}",
            "leads outside the served root",
            "use a path inside the served tree",
        )
    return candidate


def relative_url(root: Path, path: Path) -> str:
    """The URL path (percent-encoded, starting with ``/``) of ``path`` under ``root``.

    ``root`` must be the resolved root, as the paths :func:`resolve` returns start with it.
    """
    rel = path.relative_to(root)
    return "/" + "/".join(href(part) for part in rel.parts)


def href(name: str) -> str:
    """Percent-encode one name for a URL path; the inverse of the decoding in :func:`resolve`."""
    return quote_from_bytes(os.fsencode(name), safe="")


def is_part_name(name: str) -> bool:
    """True for the temporary name of an upload in progress (``.<name>.dtnkit-part-<hex>``)."""
    return name.startswith(".") and PART_MARK in name


def part_name(name: str, token: str) -> str:
    return f".{name}{PART_MARK}{token}"


def names(url_path: str) -> list[str]:
    """The names ``url_path`` (no query string) leads through under the root, as
    :func:`resolve` reads them (decoded once; empty and ``.`` segments dropped); BadInput
    when :func:`resolve` would refuse the path.  Nothing is read from the filesystem."""
    return _segments(url_path)


def _segments(url_path: str) -> list[str]:
    if not url_path.startswith("/"):
        raise BadInput(
            f"path {_show(url_path)}",
            "does not start with '/'",
            "send an absolute path such as /data/file",
        )
    if _BAD_PERCENT.search(url_path):
        raise BadInput(
            f"path {_show(url_path)}",
            "has a '%' not followed by two hex digits",
            "percent-encode '%' as %25",
        )
    try:
        raw = unquote_to_bytes(url_path)
    except UnicodeEncodeError:
        raise BadInput(
            f"path {_show(url_path)}", "is not valid text", "percent-encode the path's bytes"
        ) from None
    if len(raw) > PATH_MAX:
        raise PathTooLong(
            f"path of {len(raw)} bytes", f"is longer than {PATH_MAX} bytes", "use a shorter path"
        )
    text = os.fsdecode(raw)
    if _CONTROL.search(text):
        raise BadInput(
            f"path {_show(url_path)}",
            "contains NUL or another control character",
            "rename the file",
        )
    segments: list[str] = []
    for seg in text.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            raise BadInput(
                f"path {_show(url_path)}", "contains a '..' segment", "send a normalised path"
            )
        if len(os.fsencode(seg)) > NAME_MAX:
            raise BadInput(
                f"a name of {len(os.fsencode(seg))} bytes",
                f"is longer than {NAME_MAX} bytes",
                "use a shorter name",
            )
        segments.append(seg)
    return segments


def _show(url_path: str) -> str:
    """A short, printable form of a hostile path for error messages."""
    text = url_path if len(url_path) <= 80 else url_path[:77] + "..."
    return repr(text)
