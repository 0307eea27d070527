"""Remote to remote through this client (``cp https://A/x https://B/y`` without TPC).

On N streams through an upload session when B has them: the pairing
:class:`~dtnkit.transfer.client.ends.HttpRangeSource` (on its own connections) ->
:class:`~dtnkit.transfer.client.ends.SessionSink`; else one GET from A piped into one PUT to
B carrying A's digest.  The bytes are hashed in flight and compared with A's ``Digest``
before B commits.
"""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Iterator

from dtnkit.errors import BadInput
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client import upload_session as us
from dtnkit.transfer.client.answers import content_length
from dtnkit.transfer.client.ends import (
    HttpRangeSource,
    SessionSink,
    SinglePut,
    move_blocks,
    pump,
    response_chunks,
)
from dtnkit.transfer.client.errors import ChecksumMismatch, Retryable, UseSinglePut, reason
from dtnkit.transfer.client.options import FileResult, Options
from dtnkit.transfer.client.session import (
    RemoteInfo,
    Session,
    Url,
    check_status,
    create_only,
    discard_remote,
    existing_after_412,
    missing_parent,
    mkcol,
    refuse_existing,
    source_digest,
)
from dtnkit.transfer.client.streams import Background, retry_on_mismatch, settle_streams
from dtnkit.transfer.client.tree import walk
from dtnkit.transfer.client.upload import with_restarts
from dtnkit.transfer.wire import digests as dg


def relay(src_session: Session, src: Url, dst_session: Session, dst: Url,
          options: Options) -> FileResult:
    """Copy one file from one server to another through this client."""
    src_session, src, info = src_session.resolve(src)
    if info.is_dir:
        raise BadInput(f"{src}", "is a collection", "pass -r to copy a directory")
    options.sized(info.size)
    refuse_existing(dst_session, dst, options)
    use_session = settle_streams(options, dst_session) > 1 and info.size > options.block_size
    if use_session:
        try:
            return with_restarts(
                lambda: relay_session_once(src_session, src, info, dst_session, dst, options),
                options, f"relay {src} -> {dst}")
        except UseSinglePut:
            pass
    return retry_on_mismatch(
        lambda: relay_put_once(src_session, src, dst_session, dst, options), options)


def relay_session_once(src_session: Session, src: Url, info: RemoteInfo,
                       dst_session: Session, dst: Url, options: Options) -> FileResult:
    plan = options.plan()
    name = plan.algorithm
    expected: Background | None = None
    ident = us.start(dst_session, dst, info.size, plan.session_algorithm,
                     create_only=not options.overwrite)
    reader = HttpRangeSource(src_session, src, info.etag, options, info.size)
    verifier: pl.BlockVerifier | None = None
    done = False
    try:
        if plan.checks:
            expected = Background(lambda: source_digest(src_session, src, name))
        blocks = pl.plan_blocks(info.size, options.block_size)
        if plan.checks:
            verifier = pl.make_verifier(name, blocks, reader.read_back, options.max_buffered)
        sink = SessionSink(dst_session, dst, ident, info.size, name,
                           range_digest=verifier is not None and name in cks.COMBINABLE,
                           resume=options.resume)
        retries = move_blocks(reader, sink, blocks, options, size=info.size,
                              verifier=verifier)
        got = verifier.digest() if verifier is not None else None
        want = expected.result() if expected is not None else None
        if got is not None and want is not None and got != want:
            raise ChecksumMismatch(
                f"checksum mismatch for {src} -> {dst}",
                f"{name} source {plan.show(want)}, relayed {plan.show(got)}; "
                f"nothing was committed", "retry; if it persists, check the source storage")
        done = True
        us.commit(dst_session, dst, ident,
                  dg.format_digest(name, got) if got is not None else None,
                  create_only=not options.overwrite)
        result = FileResult(str(src), str(dst), info.size, got, plan.upload_level,
                            retries + reader.retries, algorithm=name)
        result.upload_streams = min(options.streams, len(blocks))
        return result
    finally:
        if not done:
            us.abort(dst_session, dst, ident)
        if verifier is not None:
            verifier.close()
        reader.close()
        if expected is not None:
            with contextlib.suppress(BaseException):
                expected.result()


def relay_put_once(src_session: Session, src: Url, dst_session: Session, dst: Url,
                   options: Options) -> FileResult:
    """One GET stream from the source piped into one PUT carrying the source's digest."""
    plan = options.plan()
    name = plan.algorithm
    want = source_digest(src_session, src, name) if plan.checks else None
    hasher = cks.new(name) if plan.checks else None
    sconn = src_session.connect()
    sink: SinglePut | None = None
    try:
        try:
            sconn.request("GET", src.path, headers=src_session.headers())
            r = sconn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            raise ChecksumMismatch(f"GET {src}", f"failed ({exc})", "retry") from None
        if r.status != 200:
            check_status(r.status, f"GET {src}", r.read(4096), ok=(200,))
        size = content_length(r.headers.get("Content-Length"), f"GET {src}", default=None)
        extra = {"Content-Length": str(size), "Content-Type": "application/octet-stream",
                 **create_only(options)}
        if want is not None:
            extra["Digest"] = dg.format_digest(name, want)
        buf = bytearray(max(1, min(options.block_size, size, 2**20 * 4)))
        sink = SinglePut(dst_session, dst, size, extra, expect=False)
        try:
            sink.open()
            pump(response_chunks(r, size, buf, f"GET {src}"), sink, hasher, options.progress)
            status, _headers, body = sink.finish()
        except (Retryable, OSError, http.client.HTTPException) as exc:
            raise ChecksumMismatch(f"relay {src} -> {dst}", f"broke off ({exc})",
                                   "retry") from None
        existing_after_412(dst_session, dst, status, options)
        if status == 412:
            raise ChecksumMismatch(f"checksum mismatch for {src} -> {dst}",
                                   f"the destination refused the body: {reason(body)}",
                                   "retry; if it persists, check the source storage")
        missing_parent(status, f"PUT {dst}", body, options.parents)
        check_status(status, f"PUT {dst}", body, ok=(200, 201, 204))
        got = hasher.digest() if hasher is not None else None
        if got is not None and want is not None and got != want:
            raise discard_remote(dst_session, dst, f"checksum mismatch for {src} -> {dst}",
                                 f"{name} source {plan.show(want)}, relayed "
                                 f"{plan.show(got)}")
        result = FileResult(str(src), str(dst), size, got, plan.upload_level, algorithm=name)
        result.upload_streams = 1
        return result
    finally:
        sconn.close()
        if sink is not None:
            sink.close()


def relay_walk(src_session: Session, src: Url, dst_session: Session,
               dst: Url) -> Iterator[tuple[Url, Url]]:
    """(source file, destination file) pairs of a tree, every name checked
    (:func:`~dtnkit.transfer.client.tree.walk`); MKCOLs the destination collections."""
    mkcol(dst_session, dst)
    for member in walk(src_session, src):
        target = dst
        for name in member.names:
            target = target.child(name)
        if member.is_dir:
            mkcol(dst_session, target)
        else:
            yield member.url, target
