"""Remote to remote through this client (``cp https://A/x https://B/y`` without TPC).

On N streams through an upload session when B has them: the pairing
:class:`~dtnkit.transfer.client.ends.HttpRangeSource` (on its own connections) ->
:class:`~dtnkit.transfer.client.ends.SessionSink`; else one GET from A piped into one PUT to
B carrying A's digest (:func:`~dtnkit.transfer.client.oneput.relay_put_once`).  The bytes
are hashed in flight and compared with A's ``Digest`` before B commits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dtnkit.errors import BadInput
from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.client import upload_session
from dtnkit.transfer.client.blocks import Background
from dtnkit.transfer.client.ends import HttpRangeSource, SessionSink
from dtnkit.transfer.client.engine import move
from dtnkit.transfer.client.errors import (
    ChecksumMismatch,
    SessionLost,
    UseSinglePut,
)
from dtnkit.transfer.client.oneput import relay_put_once
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.request import CopyRun, FileResult
from dtnkit.transfer.client.session import (
    RemoteInfo,
    Session,
    Url,
    mkcol,
    refuse_existing,
    source_digest,
)
from dtnkit.transfer.client.tree import walk
from dtnkit.transfer.client.upload import session_lost
from dtnkit.transfer.wire.digests import format_digest


def relay(
    src_session: Session, src: Url, dst_session: Session, dst: Url, run: CopyRun
) -> FileResult:
    """Copy one file from one server to another through this client."""
    request = run.request
    src_session, src, info = src_session.resolve(src)
    if info.is_dir:
        raise BadInput(f"{src}", "is a collection", "pass -r to copy a directory")
    run.sized(info.size)
    refuse_existing(dst_session, dst, request.overwrite)
    plan = run.streams.plan(dst_session)
    if plan.most > 1 and info.size > request.block_size:
        try:
            result, restarts = request.retry.again(
                lambda: relay_session_once(src_session, src, info, dst_session, dst, run, plan),
                on=(ChecksumMismatch, SessionLost),
                exhausted=session_lost(f"relay {src} -> {dst}"),
            )
        except UseSinglePut:
            pass
        else:
            result.retries += restarts
            return result
    result, restarts = request.retry.again(
        lambda: relay_put_once(src_session, src, dst_session, dst, run)
    )
    result.retries += restarts
    return result


def relay_session_once(
    src_session: Session,
    src: Url,
    info: RemoteInfo,
    dst_session: Session,
    dst: Url,
    run: CopyRun,
    plan: StreamPlan,
) -> FileResult:
    """One upload session fed with the source's ranges on the engine's streams, committed
    only when the bytes relayed have the source's digest."""
    request = run.request
    verify = request.verify_plan()
    name = verify.algorithm
    expected: Background | None = None
    ident = upload_session.start(
        dst_session, dst, info.size, verify.session_algorithm, create_only=not request.overwrite
    )
    reader = HttpRangeSource(src_session, src, info.etag, info.size)
    verifier: pipeline.BlockVerifier | None = None
    done = False
    try:
        if verify.checks:
            expected = Background(lambda: source_digest(src_session, src, name))
        blocks = pipeline.plan_blocks(info.size, request.block_size)
        if verify.checks:
            verifier = pipeline.make_verifier(name, blocks, reader.read_back, request.max_buffered)
        sink = SessionSink(
            dst_session,
            dst,
            ident,
            info.size,
            name,
            range_digest=verifier is not None and name in checksum.COMBINABLE,
            resume=request.resume,
        )
        retries = move(reader, sink, blocks, run, plan, size=info.size, verifier=verifier)
        got = verifier.digest() if verifier is not None else None
        want = expected.result() if expected is not None else None
        if got is not None and want is not None and got != want:
            raise ChecksumMismatch(
                f"checksum mismatch for {src} -> {dst}",
                f"{name} source {verify.show(want)}, relayed {verify.show(got)}; "
                f"nothing was committed",
                "retry; if it persists, check the source storage",
            )
        done = True
        upload_session.commit(
            dst_session,
            dst,
            ident,
            format_digest(name, got) if got is not None else None,
            create_only=not request.overwrite,
        )
        return FileResult(
            str(src),
            str(dst),
            info.size,
            got,
            verify.upload_level,
            retries + reader.retries,
            upload_streams=min(plan.most, len(blocks)),
            algorithm=name,
        )
    finally:
        if not done:
            upload_session.abort(dst_session, dst, ident)
        if verifier is not None:
            verifier.close()
        reader.close()
        if expected is not None:
            with contextlib.suppress(BaseException):
                expected.result()


def relay_walk(
    src_session: Session, src: Url, dst_session: Session, dst: Url
) -> Iterator[tuple[Url, Url]]:
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
