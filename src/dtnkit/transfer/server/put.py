"""PUT of a whole file: into a part file, fsync, checksum check, rename over the target."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from dtnkit.transfer import checksum, files, fsroot
from dtnkit.transfer.server import integrity
from dtnkit.transfer.server.errors import HttpError, os_error, refuse_link, show
from dtnkit.transfer.server.exchange import Exchange
from dtnkit.transfer.wire import ranges
from dtnkit.transfer.wire.conditions import WriteConditions
from dtnkit.transfer.wire.digests import format_digest, mismatches


def check(ex: Exchange, path: Path) -> None:
    """What can be refused before the body is sent (also before ``100 Continue``)."""
    root = ex.services.config.root
    where = show(path, root)
    if path == root:
        raise HttpError(405, where, "the root is a collection; PUT a file under it")
    if ex.headers.get("Content-Range") is not None:
        raise HttpError(
            501,
            f"PUT {where} with Content-Range",
            "a partial upload needs an upload session (POST with "
            "Dtnkit-Upload: start, then Dtnkit-Upload-Id on each range); "
            "or upload the whole file",
        )
    encoding = (ex.headers.get("Content-Encoding", "identity") or "").strip().lower()
    if encoding not in ("", "identity"):
        raise HttpError(
            415, f"Content-Encoding {encoding!r}", "is not supported; send the bytes as they are"
        )
    names = files.rel(root, path)
    with fsroot.Root(root) as fs:
        parent, st = files.lstat_or_none(fs, names[:-1]), files.lstat_or_none(fs, names)
    refuse_link(parent, path.parent, root)
    if parent is None or not stat.S_ISDIR(parent.st_mode):
        raise HttpError(409, where, "its parent collection does not exist; MKCOL it first")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise HttpError(405, where, "is a collection")
    conditions(ex).check(st, where)
    integrity.request_digests(ex.headers)  # a malformed digest is 400 before the body too


class Conditions:
    """A write's ``If-Match`` / ``If-None-Match``: asked before the body (:meth:`check`) and
    again at the commit, on the target as it is just before the rename (:meth:`commit`)."""

    def __init__(self, value: WriteConditions) -> None:
        self.value = value

    def check(self, st: os.stat_result | None, where: str) -> None:
        why = self.value.refusal(ranges.etag(st) if st is not None else None)
        if why is not None:
            raise HttpError(412, where, why)

    def commit(
        self,
        cache: files.ChecksumCache,
        fd: int,
        part: Path,
        path: Path,
        digests: Mapping[str, bytes],
        root: Path,
        where: str,
    ) -> bool:
        """:func:`files.commit_part` under these conditions (412 when they fail): with
        ``If-None-Match: *`` the rename never replaces a file, whoever made it."""
        try:
            return files.commit_part(
                cache,
                fd,
                part,
                path,
                digests,
                root,
                replace=not self.value.create_only,
                precondition=(lambda st: self.check(st, where)) if self.value.any else None,
            )
        except FileExistsError:
            raise HttpError(412, where, "exists and If-None-Match: * was sent") from None


def conditions(ex: Exchange) -> Conditions:
    """The request's write conditions; 400 when a header is malformed."""
    h = ex.headers
    try:
        return Conditions(WriteConditions.parse(h.get("If-Match"), h.get("If-None-Match")))
    except ValueError as exc:
        raise HttpError(400, "If-Match/If-None-Match", str(exc)) from None


def handle_put(ex: Exchange) -> None:
    ex.authorize()
    path = ex.resolve()
    check(ex, path)
    root = ex.services.config.root
    where = show(path, root)
    expected = integrity.request_digests(ex.headers)
    length = ex.content_length()
    if length is None and not ex.is_chunked():
        raise HttpError(411, f"PUT {where}", "needs Content-Length or Transfer-Encoding: chunked")
    if length is not None:
        integrity.check_space(path.parent, length, where, root)
    # Want-Digest on a PUT (RFC 3230: any request may ask for the resulting instance's
    # digest): hashed while receiving, answered in the response and cached, so a client
    # that verifies needs no HEAD that would read the new file back
    answer = integrity.want_digest(ex.headers.get("Want-Digest"))
    sums = {name: checksum.new(name) for name in {*expected, *([answer] if answer else [])}}
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
        detail = mismatches(expected, got)
        if detail is not None:
            raise HttpError(412, f"PUT {where}", f"checksum mismatch, nothing written: {detail}")
        try:
            existed = conditions(ex).commit(ex.services.cache, fd, part, path, got, root, where)
        except OSError as exc:
            raise os_error(exc, path, root) from None
        committed = True
    finally:
        files.release(fd)
        os.close(fd)
        if not committed:
            files.remove_part(part, root)
    ex.send_empty(
        204 if existed else 201, [("Digest", format_digest(answer, got[answer]))] if answer else []
    )
