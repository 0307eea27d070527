"""WebDAV's share of the methods: DELETE, MKCOL, PROPFIND (depth 0 and 1) and OPTIONS."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

from dtnkit.transfer import files, fsroot
from dtnkit.transfer.server import access, listing, put
from dtnkit.transfer.server.errors import HttpError, os_error, refuse_link, show
from dtnkit.transfer.server.exchange import Exchange
from dtnkit.transfer.wire import multistatus

MAX_PROPFIND_BODY = 1 << 20
PROPFIND_PIECE = 1 << 16  # characters of a streamed listing per chunk


def handle_delete(ex: Exchange) -> None:
    """DELETE, under ``If-Match`` / ``If-None-Match`` when sent (RFC 9110 13.1: a client
    deletes the version it saw, not one written since): 412 and nothing removed when the
    target's entity tag, taken just before the removal, does not satisfy them."""
    ex.authorize()
    path = ex.resolve()
    root = ex.services.config.root
    if path == root:
        raise HttpError(403, "/", "the served root cannot be deleted")
    conditions = put.conditions(ex)  # a malformed header is 400 before anything is removed
    where = show(path, root)
    try:
        if conditions.value.any:
            if conditions.value.if_match is not None:
                with fsroot.Root(root) as fs:  # a missing target fails If-Match: 412, not 404
                    conditions.check(files.lstat_or_none(fs, files.rel(root, path)), where)
            is_dir = files.remove_checked(root, path, lambda st: conditions.check(st, where))
        else:
            with fsroot.Root(root) as fs:
                is_dir = fs.remove(files.rel(root, path))
        if not is_dir:
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
    """``Allow`` is the route table's (passed in: the table names this handler).  A body is
    not read (OPTIONS needs no token, so nobody may hold a worker with a slow one): the
    answer closes the connection instead."""
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
    own = listing.ListedFile(path.name, path, st)
    headers = [("Content-Type", 'application/xml; charset="utf-8"')]
    if depth == "0" or not stat.S_ISDIR(st.st_mode):
        body = multistatus.build([own.wire(root)]).encode("utf-8")
        ex.send_bytes(207, headers, body)
        return
    # Depth 1 of a collection: streamed in pieces as the directory is read, in directory
    # order, so memory does not grow with the directory (200k entries are 75 MB of XML).
    with ex.services.listing.slot(
        access.principal(ex.headers.get("Authorization")), f"PROPFIND {ex.log_target}"
    ):
        _stream_members(ex, path, root, own, headers)


def _stream_members(
    ex: Exchange, path: Path, root: Path, own: listing.ListedFile, headers: list[tuple[str, str]]
) -> None:
    members = listing.iter_entries(path, root)
    ex.start_chunked(207, headers)
    piece = [multistatus.OPENING, multistatus.response(own.wire(root))]
    size = 0
    for item in members:  # an error now: the adapter cuts the connection (a cut body)
        text = multistatus.response(item.wire(root))
        piece.append(text)
        size += len(text)
        if size >= PROPFIND_PIECE:
            ex.write_chunk("".join(piece).encode("utf-8", "surrogateescape"))
            piece, size = [], 0
    piece.append(multistatus.CLOSING)
    ex.write_chunk("".join(piece).encode("utf-8", "surrogateescape"))
    ex.end_chunked()
