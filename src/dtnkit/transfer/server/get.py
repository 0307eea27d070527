"""GET and HEAD: files (a single byte range, conditional requests, digests) and listings.

Plain-HTTP bodies go out with ``sendfile(2)`` (no copy through Python), TLS bodies in 1 MiB
pieces (the adapter decides). ``Want-Digest`` / ``Want-Repr-Digest`` are answered from the
per-file checksum cache.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from dtnkit.transfer import checksum, files, fsroot, pipeline
from dtnkit.transfer.server import access, integrity, listing
from dtnkit.transfer.server.errors import HttpError, os_error, show
from dtnkit.transfer.server.exchange import Exchange, FileLike
from dtnkit.transfer.wire import ranges
from dtnkit.transfer.wire.digests import format_digest, format_repr_digest

BLOCK = 8 * 2**20  # hashing block (GET digests)


def handle_get(ex: Exchange) -> None:
    serve(ex, head=False)


def handle_head(ex: Exchange) -> None:
    serve(ex, head=True)


def serve(ex: Exchange, *, head: bool) -> None:
    ex.authorize()
    path = ex.resolve()
    root = ex.services.config.root
    try:
        with fsroot.Root(root) as fs:
            fd = fs.open(files.rel(root, path), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise os_error(exc, path, root) from None
    # *fd* has one owner at a time, and is closed exactly once: here until it is either closed
    # (not a regular file) or handed to the file object, which the ``with`` below closes.  A
    # second close of the same number would close whatever descriptor another request had been
    # given meanwhile (a listening socket, another client's file).
    try:
        st = os.fstat(fd)
        regular = stat.S_ISREG(st.st_mode)
        if regular:
            os.set_blocking(fd, True)
            f = open(fd, "rb", buffering=0)  # noqa: SIM115 (closed by the with below)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        if not stat.S_ISDIR(st.st_mode):
            raise HttpError(403, show(path, root), "is not a regular file")
        _send_listing(ex, path, head=head)
        return
    with f:
        _send_file(ex, f.fileno(), f, st, path, head=head)


def _send_file(
    ex: Exchange, fd: int, f: FileLike, st: os.stat_result, path: Path, *, head: bool
) -> None:
    size = st.st_size
    tag = ranges.etag(st)
    last_modified = ranges.http_date(st.st_mtime)
    h = ex.headers
    if ranges.not_modified(h.get("If-None-Match"), h.get("If-Modified-Since"), tag, st.st_mtime):
        ex.send_head(304, [("ETag", tag), ("Last-Modified", last_modified)])
        return
    span: tuple[int, int] | None = None
    range_value = h.get("Range")
    if range_value is not None and ranges.if_range_holds(h.get("If-Range"), tag, st.st_mtime):
        try:
            span = ranges.parse_range(range_value, size)
        except ranges.RangeNotSatisfiable as exc:
            raise HttpError(
                416,
                f"Range {range_value!r}",
                str(exc),
                [("Content-Range", ranges.unsatisfied_range(size))],
            ) from None
        except ValueError as exc:
            raise HttpError(400, f"Range {range_value!r}", str(exc)) from None
    digest_headers = _digest_headers(ex, fd, st, path, head=head)
    digest_headers += _content_digest(ex, fd, st, path, span)
    start, end = span if span is not None else (0, size - 1)
    count = end - start + 1 if size else 0
    headers = [("Content-Type", "application/octet-stream"), ("Content-Length", str(count))]
    if span is not None:
        headers.append(("Content-Range", ranges.format_content_range(start, end, size)))
    headers += [("Accept-Ranges", "bytes"), ("ETag", tag), ("Last-Modified", last_modified)]
    ex.send_head(206 if span is not None else 200, headers + digest_headers)
    if head or not count:
        return
    ex.send_file(f, start, count)


def _send_listing(ex: Exchange, path: Path, *, head: bool) -> None:
    names = []  # names only, not every member's stat: memory of a large directory
    with ex.services.listing.slot(
        access.principal(ex.headers.get("Authorization")), f"{ex.method} {ex.log_target}"
    ):
        for entry in listing.iter_entries(path, ex.services.config.root):
            names.append(entry.name + ("/" if entry.is_dir else ""))
    body = "".join(f"{name}\n" for name in sorted(names)).encode("utf-8", "surrogateescape")
    ex.send_bytes(200, [("Content-Type", "text/plain; charset=utf-8")], body, head=head)


def _digest_headers(
    ex: Exchange, fd: int, st: os.stat_result, path: Path, *, head: bool = True
) -> list[tuple[str, str]]:
    """``Digest`` / ``Repr-Digest`` for ``Want-Digest`` / ``Want-Repr-Digest``.

    A HEAD waits for the digest (computed once, then cached).  A GET gets it only when it is
    cheap: cached, or of a file of at most one hashing block; hashing a large file before the
    first byte of its body would hold the transfer back, and a client that needs the digest
    asks with a HEAD beside the transfer instead (``dtnkit cp`` does).
    """
    want = ex.headers.get("Want-Digest")
    want_repr = ex.headers.get("Want-Repr-Digest")
    if want is None and want_repr is None:
        return []
    old = integrity.want_digest(want)
    new = integrity.want_repr_digest(want_repr)
    names = [n for n in (old, new) if n is not None]
    if not names:
        return []
    if not head and st.st_size > BLOCK:
        digests = ex.services.cache.lookup(path, files.file_key(st))
    else:
        digests = checksums(ex, fd, st, path, names)
    headers = []
    if old is not None and old in digests:
        headers.append(("Digest", format_digest(old, digests[old])))
    if new is not None and new in digests:
        headers.append(("Repr-Digest", format_repr_digest({new: digests[new]})))
    return headers


def _content_digest(
    ex: Exchange, fd: int, st: os.stat_result, path: Path, span: tuple[int, int] | None
) -> list[tuple[str, str]]:
    """``Want-Content-Digest`` (RFC 9530) -> ``Content-Digest`` of the bytes a GET sends.

    For a range, the digest of that range (also on HEAD: of what a GET would send): from
    the range-digest cache, else read and hashed in one of the token's hashing slots; a
    range over ``--range-digest-max`` gets none (the field is a preference).  Without a
    range the content is the whole representation, answered from the checksum cache.  Only
    an algorithm that was asked for; a malformed field is 400.
    """
    want = ex.headers.get("Want-Content-Digest")
    if want is None:
        return []
    name = integrity.want_repr_digest(want, "Want-Content-Digest")
    if name is None:
        return []
    if span is None:
        value = checksums(ex, fd, st, path, [name])[name]
        return [("Content-Digest", format_repr_digest({name: value}))]
    start, end = span
    count = end - start + 1
    gate = ex.services.hashing
    if count > gate.limits.range_digest_max:
        return []
    key = (files.file_key(st), start, end, name)
    cached = gate.cached_range(key)
    if cached is None:
        with gate.once(key):
            cached = gate.cached_range(key)  # computed while this request waited?
            if cached is None:
                with gate.slot(
                    access.principal(ex.headers.get("Authorization")),
                    f"{ex.method} {show(path, ex.services.config.root)}",
                ):
                    cached = _range_digest(ex, fd, st, path, name, start, count)
                gate.store_range(key, cached)
    return [("Content-Digest", format_repr_digest({name: cached}))]


def _range_digest(
    ex: Exchange, fd: int, st: os.stat_result, path: Path, name: str, start: int, count: int
) -> bytes:
    h = checksum.new(name)
    done = 0
    for view in pipeline.read_chunks(fd, start, count, BLOCK):
        h.update(view)
        done += len(view)
    ex.services.counters.add("checksum_bytes", done)
    if done != count or files.file_key(os.fstat(fd)) != files.file_key(st):
        raise HttpError(
            503,
            show(path, ex.services.config.root),
            "changed while its range digest was computed; retry",
            [("Retry-After", "1")],
        )
    return h.digest()


def checksums(
    ex: Exchange, fd: int, st: os.stat_result, path: Path, names: Iterable[str]
) -> dict[str, bytes]:
    """Digests of the open file *fd* (*st* its stat), from the cache or by reading it once."""
    cache = ex.services.cache
    key = files.file_key(st)
    have = cache.lookup(path, key)
    missing = sorted({n for n in names if n not in have})
    if not missing:
        cache.hits += 1
        return have
    gate = ex.services.hashing
    with gate.once((str(path), key)):
        have = cache.lookup(path, key)  # another request may have computed it meanwhile
        missing = sorted({n for n in names if n not in have})
        if not missing:
            cache.hits += 1
            return have
        with gate.slot(
            access.principal(ex.headers.get("Authorization")),
            f"{ex.method} {show(path, ex.services.config.root)}",
        ):
            return _compute(ex, fd, st, path, have, missing)


def _compute(
    ex: Exchange,
    fd: int,
    st: os.stat_result,
    path: Path,
    have: dict[str, bytes],
    missing: list[str],
) -> dict[str, bytes]:
    """Read the file once for the *missing* digests; store them in the checksum cache."""
    cache = ex.services.cache
    key = files.file_key(st)
    cache.misses += 1
    sums = {n: checksum.new(n) for n in missing}
    offset = 0
    for view in pipeline.read_chunks(fd, 0, None, BLOCK):
        for s in sums.values():
            s.update(view)
        offset += len(view)
    ex.services.counters.add("checksum_bytes", offset)
    after = os.fstat(fd)
    if files.file_key(after) != key or offset != st.st_size:
        raise HttpError(
            503,
            show(path, ex.services.config.root),
            "changed while its checksum was computed; retry",
            [("Retry-After", "1")],
        )
    fresh = {n: s.digest() for n, s in sums.items()}
    cache.store(path, key, fresh)
    have.update(fresh)
    return have
