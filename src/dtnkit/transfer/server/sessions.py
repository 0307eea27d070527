"""Multi-stream (partial, resumable) uploads: POST to start/status/commit/abort, a session's
ranges by PUT, DELETE to abort.

The protocol (docs/transfer.md, "Partial uploads"); every step needs a token with write scope
and names the same path:

* ``POST <path>`` with ``Dtnkit-Upload: start`` and ``Upload-Length: N`` (optionally
  ``Dtnkit-Upload-Checksum: adler32|crc32c``: the server then hashes every range with it as it
  is written, so the commit needs no re-read) -> ``201`` with ``Dtnkit-Upload-Id`` (random,
  unguessable, tied to the path and to the token that started it) and
  ``Dtnkit-Upload-Expires`` (seconds of inactivity before the session is dropped).
* ``PUT <path>`` with ``Dtnkit-Upload-Id``, ``Content-Range: bytes a-b/N`` and a body of
  ``b-a+1`` bytes (optionally a ``Digest`` of the range, checked: 412) -> ``204``; the bytes go
  with ``pwrite`` into the hidden ``.<name>.dtnkit-part-u<hash of the id>``.  A range past N is
  416, a malformed one 400, one overlapping another received or in-flight range 409 (sending
  exactly the same range again replaces it).
* ``POST`` with ``Dtnkit-Upload: status`` and the id -> ``200`` with ``Upload-Length`` and
  ``Dtnkit-Upload-Ranges: a-b,c-d`` (the received ranges, merged): a client resumes from that.
* ``POST`` with ``Dtnkit-Upload: commit``, the id and ``Digest`` / ``Repr-Digest`` /
  ``Content-MD5`` of the whole file -> all of ``[0, N)`` must be there (else 409), the digest
  is checked (adler32/crc32c folded from the per-range values, md5/sha-256 by reading the part
  file once), the part is fsynced and renamed over the target (201, or 204 when it replaced a
  file).  A mismatch is 412 and the session and its part file are discarded.
* ``POST`` with ``Dtnkit-Upload: abort`` or ``DELETE <path>`` with the id -> ``204``.

An unknown, expired, other path's or other token's id is 404 (nothing reveals that it exists).
The sessions themselves are kept by :class:`~dtnkit.transfer.server.registry.SessionRegistry`.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from dtnkit.host.parsers import is_uint
from dtnkit.transfer import checksum, files, fsroot, pipeline
from dtnkit.transfer.server import access, integrity, put
from dtnkit.transfer.server.errors import HttpError, os_error, refuse_link, show
from dtnkit.transfer.server.exchange import Exchange
from dtnkit.transfer.server.registry import ReceivedRange, SessionRegistry, UploadSession
from dtnkit.transfer.wire import digests, ranges, upload
from dtnkit.units import counted


def is_session_request(ex: Exchange) -> bool:
    """A PUT or DELETE that names an upload session (else a whole-file PUT or a DELETE)."""
    return ex.headers.get(upload.ID_HEADER) is not None


def _owner(ex: Exchange) -> str:
    return access.principal(ex.headers.get("Authorization"))


def _registry(ex: Exchange) -> SessionRegistry:
    registry = ex.services.uploads
    if registry is None:
        raise HttpError(
            501,
            f"{ex.method} {ex.log_target}",
            "partial uploads are disabled on this server; upload the whole file",
        )
    return registry


def handle_post(ex: Exchange) -> None:
    action = (ex.headers.get(upload.HEADER) or "").strip().lower()
    if not action:
        raise HttpError(
            405,
            f"POST {ex.log_target}",
            f"POST is only for upload sessions ({upload.HEADER}: {'|'.join(upload.ACTIONS)})",
        )
    registry = _registry(ex)
    ex.authorize("write")
    if ex.body_pending():
        ex.discard_body()
    path = ex.resolve()
    if action == upload.START:
        _start(ex, registry, path)
        return
    if action not in upload.ACTIONS:
        raise HttpError(
            400, f"{upload.HEADER}: {action}", "expected start, status, commit or abort"
        )
    session = registry.get(ex.headers.get(upload.ID_HEADER), path, _owner(ex))
    if action == upload.STATUS:
        with session.lock:
            received = upload.format_ranges(session.merged())
        ex.send_empty(
            200,
            [
                (upload.LENGTH_HEADER, str(session.length)),
                (upload.RANGES_HEADER, received),
                (upload.ID_HEADER, session.ident),
            ],
        )
    elif action == upload.ABORT:
        registry.discard(session)
        ex.send_empty(204)
    else:
        _commit(ex, registry, session)


def handle_delete(ex: Exchange) -> None:
    registry = _registry(ex)
    ex.authorize("write")
    path = ex.resolve()
    session = registry.get(ex.headers.get(upload.ID_HEADER), path, _owner(ex))
    registry.discard(session)
    ex.send_empty(204)


def _start(ex: Exchange, registry: SessionRegistry, path: Path) -> None:
    root = ex.services.config.root
    where = show(path, root)
    value = (ex.headers.get(upload.LENGTH_HEADER) or "").strip()
    if not is_uint(value):
        raise HttpError(
            400, upload.LENGTH_HEADER, f"{value!r} is not a byte count; send the file size"
        )
    length = int(value)
    algorithm: str | None = None
    declared = ex.headers.get(upload.CHECKSUM_HEADER)
    if declared:
        try:
            algorithm = checksum.canonical(declared.strip())
        except ValueError as exc:
            raise HttpError(400, upload.CHECKSUM_HEADER, str(exc)) from None
        if algorithm not in checksum.COMBINABLE:
            algorithm = None  # md5/sha-256 are computed at commit, from the part file
    if path == root:
        raise HttpError(405, where, "the root is a collection; upload a file under it")
    names = files.rel(root, path)
    with fsroot.Root(root) as fs:
        parent, st = files.lstat_or_none(fs, names[:-1]), files.lstat_or_none(fs, names)
    refuse_link(parent, path.parent, root)
    if parent is None or not stat.S_ISDIR(parent.st_mode):
        raise HttpError(409, where, "its parent collection does not exist; MKCOL it first")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise HttpError(405, where, "is a collection")
    put.conditions(ex).check(st, where)  # refused before any byte
    integrity.check_space(path.parent, length, where, root)
    try:
        session = registry.create(path, length, _owner(ex), algorithm, ex.services.config.limits)
    except OSError as exc:
        raise os_error(exc, path, root) from None
    ex.send_empty(
        201,
        [
            (upload.ID_HEADER, session.ident),
            (upload.LENGTH_HEADER, str(length)),
            (upload.EXPIRES_HEADER, str(int(registry.expiry))),
        ],
    )


def handle_put_range(ex: Exchange) -> None:
    registry = _registry(ex)
    ex.authorize("write")
    path = ex.resolve()
    root = ex.services.config.root
    session = registry.get(ex.headers.get(upload.ID_HEADER), path, _owner(ex))
    value = ex.headers.get("Content-Range")
    if value is None:
        raise HttpError(
            400,
            f"PUT {show(path, root)} with {upload.ID_HEADER}",
            "needs Content-Range: bytes first-last/length",
        )
    try:
        a, b, n = ranges.parse_content_range(value)
    except ValueError as exc:
        raise HttpError(400, f"Content-Range {value!r}", str(exc)) from None
    if n != session.length:
        raise HttpError(
            400,
            f"Content-Range {value!r}",
            f"the length {n} is not the session's Upload-Length {session.length}",
        )
    if b >= n:
        raise HttpError(
            416,
            f"Content-Range {value!r}",
            f"ends beyond the length {n}",
            [("Content-Range", ranges.unsatisfied_range(n))],
        )
    count = b - a + 1
    length = ex.content_length()
    if length is not None and length != count:
        raise HttpError(
            400, f"Content-Range {value!r}", f"covers {count} bytes but Content-Length is {length}"
        )
    expected = integrity.request_digests(ex.headers)
    with session.lock:
        if session.closed or session.taken:
            raise HttpError(404, upload.ID_HEADER, "the upload session ended; start a new one")
        same = session.ranges.get(a)
        others = [s for s in session.spans() if s != (a, b)]
        hit = upload.overlapping(a, b, others)
        if hit is not None:
            raise HttpError(
                409, f"Content-Range {value!r}", f"overlaps the received range {hit[0]}-{hit[1]}"
            )
        hit = upload.overlapping(a, b, session.inflight)
        if hit is not None:
            raise HttpError(
                409,
                f"Content-Range {value!r}",
                f"overlaps the range {hit[0]}-{hit[1]} being received",
            )
        fd = registry.wake(session)  # its descriptor stays open while a range is in flight
        session.inflight.add((a, b))
    names = set(expected)
    if session.algorithm is not None:
        names.add(session.algorithm)
    sums = {name: checksum.new(name) for name in names}
    pos = a
    recorded = False
    try:

        def sink(view: memoryview) -> None:
            nonlocal pos
            if pos + len(view) > b + 1:
                raise HttpError(
                    400, f"Content-Range {value!r}", "the body is longer than the range"
                )
            for s in sums.values():
                s.update(view)
            files.pwrite_all(fd, view, pos)
            pos += len(view)

        try:
            size = ex.read_body(sink)
        except OSError as exc:
            if isinstance(exc, (ConnectionError, TimeoutError)):
                raise
            raise os_error(exc, path, root) from None
        ex.services.counters.add("received_bytes", size)
        ex.count_bytes(size)
        if size != count:
            raise HttpError(
                400, f"Content-Range {value!r}", f"covers {count} bytes but the body had {size}"
            )
        got = {name: s.digest() for name, s in sums.items()}
        detail = digests.mismatches(expected, got)
        if detail is not None:
            raise HttpError(
                412,
                f"PUT {show(path, root)} range {a}-{b}",
                f"checksum mismatch, range not recorded: {detail}",
            )
        rvalue = (
            checksum.from_bytes(session.algorithm, got[session.algorithm])
            if session.algorithm is not None
            else None
        )
        with session.lock:
            if same is not None:
                session.ranges.pop(a, None)
            session.ranges[a] = ReceivedRange(a, b, rvalue)
        ex.services.counters.add("range_puts", 1)
        ex.services.counters.add("range_bytes", count)
        recorded = True
    finally:
        with session.lock:
            session.inflight.discard((a, b))
            if not recorded:  # refused, cut or timed out: hold nothing for a client gone
                registry.rest(session)
        session.touched = time.monotonic()
    ex.send_empty(204)


def _commit(ex: Exchange, registry: SessionRegistry, session: UploadSession) -> None:
    root = ex.services.config.root
    path = session.path
    where = show(path, root)
    expected = integrity.request_digests(ex.headers, content=False)  # no body: no content
    conditions = put.conditions(ex)  # a malformed one is 400 before the session is taken
    with session.lock:
        if session.inflight:
            raise HttpError(409, f"commit of {where}", "ranges are still being received")
        gaps = session.missing()
        if gaps:
            registry.rest(session)  # resumable: the ranges stay, the descriptor closes
            raise HttpError(
                409,
                f"commit of {where}",
                f"{counted(len(gaps), 'range')} missing "
                f"({upload.format_ranges(gaps[:10])}); "
                "send them first",
                [(upload.RANGES_HEADER, upload.format_ranges(session.merged()))],
            )
        registry.wake(session)
        session.taken = True
        received = sorted(session.ranges.values(), key=lambda r: r.start)
        registry.forget(session)  # from here on the session is this request's
    committed = False
    try:
        got: dict[str, bytes] = {}
        alg = session.algorithm
        if alg is not None and (alg in expected or not expected):
            values = [(r.value, r.end - r.start + 1) for r in received]
            if all(v is not None for v, _n in values):
                got[alg] = checksum.to_bytes(
                    alg, checksum.combine_blocks(alg, [(v, n) for v, n in values if v is not None])
                )
        rest = [name for name in expected if name not in got]
        if rest:
            sums = {name: checksum.new(name) for name in rest}
            offset = 0
            for view in pipeline.read_chunks(session.fd, 0, session.length, pipeline.DEFAULT_BLOCK):
                for s in sums.values():
                    s.update(view)
                offset += len(view)
            if offset < session.length:
                raise HttpError(500, where, "the part file is shorter than the upload")
            ex.services.counters.add("checksum_bytes", offset)
            got.update({name: s.digest() for name, s in sums.items()})
        detail = digests.mismatches(expected, got)
        if detail is not None:
            raise HttpError(
                412,
                f"commit of {where}",
                f"checksum mismatch, nothing written, session discarded: {detail}",
            )
        try:
            os.fsync(session.fd)
            existed = conditions.commit(
                ex.services.cache, session.fd, session.part, path, got, root, where
            )
        except OSError as exc:
            raise os_error(exc, path, root) from None
        committed = True
    finally:
        registry.close_fd(session)
        if not committed:
            files.remove_part(session.part, root)
    headers = [("Digest", digests.format_digest(n, v)) for n, v in sorted(got.items())[:1]]
    ex.send_empty(204 if existed else 201, headers)
