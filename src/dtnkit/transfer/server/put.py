"""PUT of a whole file: into a part file, fsync, checksum check, rename over the target."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dtnkit.transfer import checksum as cks
from dtnkit.transfer import files, fsroot
from dtnkit.transfer.server import integrity
from dtnkit.transfer.server.errors import HttpError, os_error, refuse_link, show
from dtnkit.transfer.server.exchange import Exchange
from dtnkit.transfer.wire import digests as dg


def check(ex: Exchange, path: Path) -> None:
    """What can be refused before the body is sent (also before ``100 Continue``)."""
    root = ex.services.config.root
    where = show(path, root)
    if path == root:
        raise HttpError(405, where, "the root is a collection; PUT a file under it")
    if ex.headers.get("Content-Range") is not None:
        raise HttpError(501, f"PUT {where} with Content-Range",
                        "a partial upload needs an upload session (POST with "
                        "Dtnkit-Upload: start, then Dtnkit-Upload-Id on each range); "
                        "or upload the whole file")
    encoding = (ex.headers.get("Content-Encoding", "identity") or "").strip().lower()
    if encoding not in ("", "identity"):
        raise HttpError(415, f"Content-Encoding {encoding!r}",
                        "is not supported; send the bytes as they are")
    names = files.rel(root, path)
    with fsroot.Root(root) as fs:
        parent, st = files.lstat_or_none(fs, names[:-1]), files.lstat_or_none(fs, names)
    refuse_link(parent, path.parent, root)
    if parent is None or not stat.S_ISDIR(parent.st_mode):
        raise HttpError(409, where, "its parent collection does not exist; MKCOL it first")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise HttpError(405, where, "is a collection")
    if (ex.headers.get("If-None-Match", "") or "").strip() == "*" and st is not None:
        raise HttpError(412, where, "exists and If-None-Match: * was sent")


def handle_put(ex: Exchange) -> None:
    ex.authorize()
    path = ex.resolve()
    check(ex, path)
    root = ex.services.config.root
    where = show(path, root)
    expected = integrity.request_digests(ex.headers)
    length = ex.content_length()
    if length is None and not ex.is_chunked():
        raise HttpError(411, f"PUT {where}",
                        "needs Content-Length or Transfer-Encoding: chunked")
    if length is not None:
        integrity.check_space(path.parent, length, where, root)
    # Want-Digest on a PUT (RFC 3230: any request may ask for the resulting instance's
    # digest): hashed while receiving, answered in the response and cached, so a client
    # that verifies needs no HEAD that would read the new file back
    answer = integrity.want_digest(ex.headers.get("Want-Digest"))
    sums = {name: cks.new(name) for name in {*expected, *([answer] if answer else [])}}
    part = files.part_for(path)
    try:
        fd = files.create_part(part, root)
    except OSError as exc:
        raise os_error(exc, path, root) from None
    committed = False
    try:
        def sink(view: memoryview) -> None:
            for s in sums.values():
                s.update(view)
            files.write_all(fd, view)

        try:
            size = ex.read_body(sink)
            ex.services.counters.add("received_bytes", size)
            ex.count_bytes(size)
            os.fsync(fd)
        except OSError as exc:
            if isinstance(exc, (ConnectionError, TimeoutError)):
                raise
            raise os_error(exc, path, root) from None
        got = {name: s.digest() for name, s in sums.items()}
        detail = dg.mismatches(expected, got)
        if detail is not None:
            raise HttpError(412, f"PUT {where}",
                            f"checksum mismatch, nothing written: {detail}")
        try:
            existed = files.commit_part(ex.services.cache, fd, part, path, got, root)
        except OSError as exc:
            raise os_error(exc, path, root) from None
        committed = True
    finally:
        files.release(fd)
        os.close(fd)
        if not committed:
            files.remove_part(part, root)
    ex.send_empty(204 if existed else 201, [("Digest", dg.format_digest(
        answer, got[answer]))] if answer else [])
