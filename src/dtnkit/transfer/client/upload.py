"""One local file to a server.

With ``streams > 1``, a file of more than one block and a server with upload sessions: the
pairing :class:`~dtnkit.transfer.client.ends.LocalFileSource` ->
:class:`~dtnkit.transfer.client.ends.SessionSink` on N keep-alive connections, each block
read into a pooled buffer, hashed (FIVER: the bytes read for sending) and sent; adler32/crc32c
values go with the range as a ``Digest`` (the server checks each range: a corrupted range is
re-sent alone) and are combined out of order into the whole-file value; md5/sha256 go
through :class:`~dtnkit.transfer.pipeline.OrderedHasher`.  The commit carries the whole-file
``Digest``; the server checks it before the rename, and a 412 discards the session and the
file is sent again (up to ``--retries``: the run's
:class:`~dtnkit.transfer.client.retry.RetryPolicy`).  Resume: the session id is kept in a journal
(:class:`~dtnkit.transfer.client.journals.UploadJournal`); the same command run again asks
the server which ranges it has and sends only the others.

Else one PUT (:func:`~dtnkit.transfer.client.oneput.upload_once`): ``sequential`` sends a
``Digest`` header computed before (the server verifies before committing); ``block`` hashes
the bytes in the pass that reads them for sending (FIVER); ``block`` and ``file`` then compare
with the server's ``Want-Digest`` answer and DELETE the remote file on a mismatch.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import os
from collections.abc import Callable
from pathlib import Path

from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.client import upload_session
from dtnkit.transfer.client.blocks import read_back
from dtnkit.transfer.client.ends import LocalFileSource, SessionSink
from dtnkit.transfer.client.engine import move
from dtnkit.transfer.client.errors import (
    ChecksumMismatch,
    SessionLost,
    TransferError,
    UseSinglePut,
)
from dtnkit.transfer.client.first import Spare
from dtnkit.transfer.client.journals import UploadJournal, journal_dir
from dtnkit.transfer.client.oneput import upload_once
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.request import CopyRun, FileResult
from dtnkit.transfer.client.session import (
    Session,
    Url,
)
from dtnkit.transfer.client.verify import Verify
from dtnkit.transfer.wire.digests import format_digest
from dtnkit.transfer.wire.upload import covered


def upload(session: Session, src: Path, url: Url, run: CopyRun) -> FileResult:
    """Several streams through an upload session when the streams are more than one (and
    not one PUT first: :meth:`~dtnkit.transfer.client.policy.StreamPolicy.one_put`), the file
    has more than one block and the server has sessions; else one PUT stream.

    Every request before the body goes on one keep-alive connection, whose handshake also
    gives ``--streams auto`` its round-trip time: the session start (which carries
    ``If-None-Match: *`` itself, so no HEAD goes first), then that connection is the first
    stream's; or, for one PUT, the HEAD that refuses an existing file pipelined with the
    PUT's head (:class:`~dtnkit.transfer.client.oneput.SinglePut`)."""
    note: str | None = None
    conn = session.connect()
    try:
        with contextlib.suppress(OSError):  # a failure is met again, and told, by the request
            conn.connect()
            session.note_path(conn)
        plan = run.streams.plan(session)
        if plan.most > 1 and not run.streams.one_put(plan):
            try:
                return upload_file(session, src, url, run, plan, conn=conn)
            except UseSinglePut as exc:
                if "HTTP" in str(exc) or "no upload sessions" in str(exc):
                    note = f"one PUT stream: {exc}"
        result, restarts = run.request.retry.again(
            lambda: upload_once(session, src, url, run, conn)
        )
    finally:
        conn.close()
    result.retries += restarts
    result.note = result.note or note
    return result


def session_lost(what: str) -> Callable[[BaseException, int], TransferError]:
    """The error when the tries of a session transfer ran out on lost sessions."""

    def exhausted(last: BaseException, times: int) -> TransferError:
        return TransferError(
            what,
            f"the upload session was lost {times} times ({last})",
            "check the server (restarts? its `dtnkit serve --upload-expiry`?)",
        )

    return exhausted


def upload_file(
    session: Session,
    src: Path,
    url: Url,
    run: CopyRun,
    plan: StreamPlan,
    journals: Path | None = None,
    conn: http.client.HTTPConnection | None = None,
) -> FileResult:
    """A multi-stream session upload; UseSinglePut before anything is sent when not possible.
    *journals*: where the resume journal goes (default :func:`journal_dir`); *conn*: a
    keep-alive connection to the server for the first session (its start, then the first
    stream); the caller closes it.  A commit mismatch or a lost session runs it again."""
    try:
        st = os.stat(src)
    except OSError as exc:
        raise UseSinglePut(str(exc)) from None
    if plan.most < 2 or st.st_size <= run.request.block_size:
        raise UseSinglePut("one block or one stream")
    journal = UploadJournal(src, st, url, run.request, journals or journal_dir())
    first = [True]

    def once() -> FileResult:
        resume = first[0]
        first[0] = False
        return upload_session_once(
            session, src, url, run, plan, journal, resume, conn if resume else None
        )

    result, restarts = run.request.retry.again(
        once, on=(ChecksumMismatch, SessionLost), exhausted=session_lost(f"upload {src} -> {url}")
    )
    result.retries += restarts
    return result


def upload_session_once(
    session: Session,
    src: Path,
    url: Url,
    run: CopyRun,
    plan: StreamPlan,
    journal: UploadJournal,
    resume: bool,
    conn: http.client.HTTPConnection | None = None,
) -> FileResult:
    """One session: its start (or status, to resume) on *conn* (a new one when None), which
    then carries the first stream's pipelined ranges; the other streams' connections are
    opened beside the start (:class:`~dtnkit.transfer.client.first.Spare`), so their TCP and
    TLS handshakes overlap its round trip instead of following it; the commit goes on a
    connection that a stream ended with, so no request after the first waits for a new
    handshake."""
    request = run.request
    verify = request.verify_plan()
    ctl = conn or session.connect()
    kept: list[http.client.HTTPConnection] = []
    spares: list[Spare] = []
    name = verify.algorithm
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    verifier: pipeline.BlockVerifier | None = None
    ident: str | None = None
    keep = False
    try:
        size = os.fstat(fd).st_size
        blocks = pipeline.plan_blocks(size, request.block_size)
        if not upload_session.refused(session):  # a server known to refuse gets one PUT
            spares = [Spare(session) for _ in range(min(plan.most, len(blocks)) - 1)]
        have: list[tuple[int, int]] = []
        old = journal.load() if resume and request.resume else None
        if old is not None:
            got = upload_session.status(session, url, old, conn=ctl)
            if got is not None:
                ident, have = old, got
            else:
                journal.remove()
        if ident is None:
            ident = upload_session.start(
                session,
                url,
                size,
                verify.session_algorithm,
                create_only=not request.overwrite,
                conn=ctl,
            )
            if request.resume:
                journal.save(ident)
        keep = request.resume  # from here a failure keeps the session for a rerun
        local: bytes | None = None
        if verify.sequential:
            local = pipeline.checksum_fd(fd, name, size, request.block_size)
        todo = [b for b in blocks if not covered(b.offset, b.end, have)]
        skipped = [b for b in blocks if covered(b.offset, b.end, have)]
        if verify.block:
            verifier = pipeline.make_verifier(
                name, blocks, functools.partial(read_back, fd), request.max_buffered
            )
            for b in skipped:  # sent by an earlier run: hash them from the source
                verifier.accept(b, read_back(fd, b))
        if skipped:
            run.progressed(sum(b.length for b in skipped))
        sink = SessionSink(
            session,
            url,
            ident,
            size,
            name,
            range_digest=verify.block and name in checksum.COMBINABLE,
            resume=request.resume,
        )
        retries = move(
            LocalFileSource(fd, src),
            sink,
            todo,
            run,
            plan,
            size=size,
            verifier=verifier,
            first=ctl if todo else None,
            spares=spares,
            keep=kept,
        )
        if verifier is not None:
            local = verifier.digest()
        elif verify.verify is Verify.FILE:
            local = pipeline.checksum_fd(fd, name, size, request.block_size)
        keep = False
        try:
            upload_session.commit(
                session,
                url,
                ident,
                format_digest(name, local) if local is not None else None,
                create_only=not request.overwrite,
                conn=kept[0] if kept else (None if todo else ctl),
            )
        finally:
            journal.remove()
        return FileResult(
            str(src),
            str(url),
            size,
            local,
            verify.upload_level,
            retries,
            read_back=len(skipped),
            resumed_blocks=len(skipped),
            resumed_bytes=sum(b.length for b in skipped),
            upload_streams=min(plan.most, max(1, len(todo))),
            algorithm=name,
        )
    except BaseException as exc:
        lost = isinstance(exc, SessionLost | ChecksumMismatch)
        if ident is not None and (
            not keep or lost or not isinstance(exc, TransferError | KeyboardInterrupt)
        ):
            if not lost:
                upload_session.abort(session, url, ident)
            journal.remove()
        raise
    finally:
        if verifier is not None:
            verifier.close()
        os.close(fd)
        for spare in spares:  # those no stream took (the taken ones are done with by now)
            spare.close()
        for c in kept:
            c.close()
        if conn is None:
            ctl.close()  # (a given one is the caller's)
