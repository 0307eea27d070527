"""WebDAV's share of the methods: DELETE, MKCOL, PROPFIND (depth 0 and 1) and OPTIONS."""

from __future__ import annotations

import errno
import stat

from dtnkit.transfer import files, fsroot
from dtnkit.transfer.server import listing
from dtnkit.transfer.server.errors import HttpError, os_error, refuse_link, show
from dtnkit.transfer.server.exchange import Exchange
from dtnkit.transfer.wire import multistatus

MAX_PROPFIND_BODY = 1 << 20


def handle_delete(ex: Exchange) -> None:
    ex.authorize()
    path = ex.resolve()
    root = ex.services.config.root
    if path == root:
        raise HttpError(403, "/", "the served root cannot be deleted")
    try:
        with fsroot.Root(root) as fs:
            if not fs.remove(files.rel(root, path)):
                ex.services.cache.forget(path)
    except OSError as exc:
        raise os_error(exc, path, root) from None
    ex.send_empty(204)


def handle_mkcol(ex: Exchange) -> None:
    ex.authorize()
    if ex.body_pending():
        raise HttpError(415, "MKCOL with a body", "is not supported (RFC 4918 9.3)")
    path = ex.resolve()
    root = ex.services.config.root
    where = show(path, root)
    names = files.rel(root, path)
    try:
        with fsroot.Root(root) as fs:
            if files.lstat_or_none(fs, names) is not None:
                raise HttpError(405, where, "already exists")
            parent = files.lstat_or_none(fs, names[:-1])
            refuse_link(parent, path.parent, root)
            if parent is None or not stat.S_ISDIR(parent.st_mode):
                raise HttpError(409, where, "its parent collection does not exist")
            fs.mkdir(names)
    except FileExistsError:
        raise HttpError(405, where, "already exists") from None
    except OSError as exc:
        raise os_error(exc, path, root) from None
    ex.send_empty(201)


def handle_options(ex: Exchange, allow: str) -> None:
    """``Allow`` is the route table's (passed in: the table names this handler)."""
    if ex.body_pending():
        ex.read_small_body(MAX_PROPFIND_BODY)
    ex.send_empty(200, [("Allow", allow), ("DAV", "1"), ("Accept-Ranges", "bytes")])


def handle_propfind(ex: Exchange) -> None:
    ex.authorize()
    path = ex.resolve()
    root = ex.services.config.root
    depth = (ex.headers.get("Depth", "1") or "").strip().lower()
    if depth == "infinity":
        raise HttpError(403, "PROPFIND with Depth: infinity", "is not supported; use 0 or 1")
    if depth not in ("0", "1"):
        raise HttpError(400, f"Depth {depth!r}", "must be 0 or 1")
    ex.read_small_body(MAX_PROPFIND_BODY)  # the requested properties are ignored
    try:
        with fsroot.Root(root) as fs:
            st = fs.lstat(files.rel(root, path))
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "a symbolic link", path.name)
    except OSError as exc:
        raise os_error(exc, path, root) from None
    items = [listing.Entry(path.name, path, st)]
    if depth == "1" and stat.S_ISDIR(st.st_mode):
        items.extend(listing.entries(path, root))
    body = multistatus.build(item.wire(root) for item in items).encode("utf-8")
    ex.send_bytes(207, [("Content-Type", 'application/xml; charset="utf-8"')], body)
