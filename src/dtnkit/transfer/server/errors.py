"""The errors a handler raises; the adapter turns them into a plain-text ``what: why`` answer."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from dtnkit.transfer import paths


class HttpError(Exception):
    """A response with a plain-text ``what: why`` body."""

    def __init__(
        self, status: int, what: str, why: str, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        super().__init__(f"{status} {what}: {why}")
        self.status = status
        self.what = what
        self.why = why
        self.headers = list(headers)


class BodyError(Exception):
    """The request body broke off or was malformed: answer, then close the connection."""


def show(path: Path, root: Path) -> str:
    """*path* as a URL path under the served root, for messages."""
    try:
        return paths.relative_url(root, path)
    except ValueError:
        return "(outside the root)"


def printable(text: str) -> str:
    """*text* safe for one log line (no control characters, no double quotes)."""
    return "".join(c if c.isprintable() and c != '"' else f"\\x{ord(c):02x}" for c in text)


def refuse_link(st: os.stat_result | None, path: Path, root: Path) -> None:
    """HttpError 400 when *st* (an lstat) is a symlink: the server follows none."""
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise os_error(OSError(errno.ELOOP, "a symbolic link"), path, root)


def os_error(exc: OSError, path: Path, root: Path) -> HttpError:
    """The HTTP answer to a failed file operation on *path*."""
    where = show(path, root)
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return HttpError(404, where, "not found")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return HttpError(403, where, f"permission denied ({os.strerror(code)})")
    if code in (errno.ENOSPC, errno.EDQUOT):
        return HttpError(507, where, f"no space left ({os.strerror(code)})")
    if code == errno.ENOTEMPTY:
        return HttpError(409, where, "the collection is not empty")
    if code == errno.EISDIR:
        return HttpError(405, where, "is a collection")
    if code == errno.ENAMETOOLONG:
        return HttpError(414, where, "the name is too long for the filesystem")
    if code == errno.ELOOP:  # fsroot refuses every symlink, inside the tree or not
        return HttpError(
            400, where, "is or passes through a symbolic link, which this server does not follow"
        )
    reason = os.strerror(code) if code else exc.__class__.__name__
    return HttpError(500, where, reason)
