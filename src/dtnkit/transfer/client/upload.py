"""One local file to a server.

With ``streams > 1``, a file of more than one block and a server with upload sessions: the
pairing :class:`~dtnkit.transfer.client.ends.LocalFileSource` ->
:class:`~dtnkit.transfer.client.ends.SessionSink` on N keep-alive connections, each block
read into a pooled buffer, hashed (FIVER: the bytes read for sending) and sent; adler32/crc32c
values go with the range as a ``Digest`` (the server checks each range: a corrupted range is
re-sent alone) and are combined out of order into the whole-file value; md5/sha256 go
through :class:`~dtnkit.transfer.pipeline.OrderedHasher`.  The commit carries the whole-file
``Digest``; the server checks it before the rename, and a 412 discards the session and the
file is sent again (up to ``--retries``).  Resume: the session id is kept in a journal
(:class:`~dtnkit.transfer.client.journals.UploadJournal`); the same command run again asks
the server which ranges it has and sends only the others.

Else one PUT (:func:`~dtnkit.transfer.client.ends.put_body`): ``sequential`` sends a
``Digest`` header computed before (the server verifies before committing); ``block`` hashes
the bytes in the pass that reads them for sending (FIVER); ``block`` and ``file`` then compare
with the server's ``Want-Digest`` answer and DELETE the remote file on a mismatch.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import os
import time
from collections.abc import Callable
from pathlib import Path

from dtnkit.errors import BadInput
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client import upload_session as us
from dtnkit.transfer.client.ends import LocalFileSource, SessionSink, move_blocks, put_body
from dtnkit.transfer.client.errors import (
    ChecksumMismatch,
    Retryable,
    SessionLost,
    TransferError,
    UseSinglePut,
    reason,
)
from dtnkit.transfer.client.journals import UploadJournal, journal_dir
from dtnkit.transfer.client.options import FileResult, Options
from dtnkit.transfer.client.session import (
    MAX_REDIRECTS,
    REDIRECTS,
    Session,
    Url,
    answered_digest,
    check_status,
    create_only,
    discard_remote,
    existing_after_412,
    follow_redirect,
    missing_parent,
    source_digest,
    want_name,
)
from dtnkit.transfer.client.streams import read_back, retry_on_mismatch, settle_streams
from dtnkit.transfer.client.verify import Verify
from dtnkit.transfer.wire import digests as dg
from dtnkit.transfer.wire.upload import covered


def upload(session: Session, src: Path, url: Url, options: Options) -> FileResult:
    """Several streams through an upload session when ``streams > 1``, the file has more
    than one block and the server has sessions; else one PUT stream.

    Every request before the body goes on one keep-alive connection, whose handshake also
    gives ``--streams auto`` its round-trip time: the session start (which carries
    ``If-None-Match: *`` itself, so no HEAD goes first), then that connection is the first
    stream's; or, for one PUT, the HEAD that refuses an existing file pipelined with the
    PUT's head (:class:`~dtnkit.transfer.client.ends.SinglePut`)."""
    note: str | None = None
    conn = session.connect()
    try:
        with contextlib.suppress(OSError):  # a failure is met again, and told, by the request
            conn.connect()
            session.note_path(conn)
        if settle_streams(options, session) > 1 and not starts_alone(options):
            try:
                return upload_file(session, src, url, options, conn=conn)
            except UseSinglePut as exc:
                if "HTTP" in str(exc) or "no upload sessions" in str(exc):
                    note = f"one PUT stream: {exc}"
        result = retry_on_mismatch(lambda: upload_once(session, src, url, options, conn),
                                   options)
    finally:
        conn.close()
    result.note = result.note or note
    return result


def starts_alone(options: Options) -> bool:
    """Whether ``--streams auto`` sends the upload as one PUT although its formula asks for
    several streams: the download's one-stream-first decision
    (:attr:`~dtnkit.transfer.client.autostreams.Decision.grow`: the rate is only an upper
    bound and one window carries 1 Gbit/s).  A download adds its other streams once the
    first is window-bound; a single PUT cannot, and an upload session of several streams
    from the start took 1.19x the download's time on a 50 ms / 1 Gbit/s lab path with tuned
    ends (two BBR flows leaving startup together into one queue lose more, and the session
    costs its start and commit).  Said once per run (``on_grow``)."""
    auto = options.auto
    decision = auto.decision if auto is not None else None
    if auto is None or decision is None or not decision.grow or options.streams < 2:
        return False
    auto.note_used(1, "1 stream: an upload sends one PUT when one window carries the "
                   "path (the rate is only an upper bound); give --streams N or --rate "
                   "for an upload session of several")
    return True


def upload_once(session: Session, src: Path, url: Url, options: Options,
                conn: http.client.HTTPConnection | None = None) -> FileResult:
    """One PUT of the whole file, with its redirects and retries; the first attempt on
    *conn* when given (a keep-alive connection to the server)."""
    plan = options.plan()
    name = plan.algorithm
    try:
        fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"source {src}", exc.strerror or str(exc), "check the path") from None
    try:
        size = os.fstat(fd).st_size
        extra = {"Content-Length": str(size), "Content-Type": "application/octet-stream",
                 **create_only(options)}
        if plan.checks:
            # ask the server to hash while it receives and answer with the Digest (RFC 3230),
            # instead of reading the new file back for a HEAD afterwards
            extra["Want-Digest"] = want_name(name)
        local: bytes | None = None
        if plan.sequential:
            local = pl.checksum_fd(fd, name, size, options.block_size)
            extra["Digest"] = dg.format_digest(name, local)

        def new_hasher() -> cks.Checksum | None:
            return cks.new(name) if plan.block else None

        hasher = new_hasher()
        retries = 0
        attempt = hops = 0
        target, target_session = url, session  # where the body goes (after redirects)
        while True:
            try:
                status, headers, body = put_body(
                    target_session, target, fd, size, extra, hasher, options, conn,
                    refuse_existing=not options.overwrite and hops == 0)
                conn = None  # put_body closed it; a retry or a redirect makes its own
            except Retryable as exc:
                conn = None
                if attempt >= options.retries:
                    raise TransferError(f"PUT {url}", f"failed after {attempt + 1} attempts "
                                        f"({exc})", "check that the server is up") from None
                time.sleep(options.backoff * 2**attempt)
                attempt += 1
                retries += 1
                hasher = new_hasher()
                continue
            if status >= 500:
                if attempt >= options.retries:
                    raise TransferError(f"PUT {url}", f"HTTP {status} {reason(body)}",
                                        "check the server log")
                time.sleep(options.backoff * 2**attempt)
                attempt += 1
                retries += 1
                hasher = new_hasher()
                continue
            if status in REDIRECTS:  # a door sending the body to a pool (dCache)
                hops += 1
                if hops > MAX_REDIRECTS:
                    raise TransferError(f"PUT {url}", f"more than {MAX_REDIRECTS} redirects",
                                        "check the server's redirect configuration")
                target = follow_redirect(target, headers.get("location"), f"PUT {target}")
                target_session = session.for_url(target)
                hasher = new_hasher()
                continue
            break
        existing_after_412(target_session, target, status, options)
        if status == 412 and plan.sequential:
            raise ChecksumMismatch(f"checksum mismatch for {src} -> {url}",
                                   f"the server refused the body: {reason(body)}",
                                   "retry; if it persists, check the source storage")
        missing_parent(status, f"PUT {url}", body, options.parents)
        check_status(status, f"PUT {url}", body, ok=(200, 201, 204))
        if hasher is not None:
            local = hasher.digest()
        elif plan.verify is Verify.FILE:
            local = pl.checksum_fd(fd, name, size, options.block_size)
        if plan.checks:
            remote = answered_digest(headers, name)
            if remote is None:  # not every server answers Want-Digest on a PUT
                remote = source_digest(session, url, name)
            if local is not None and remote != local:
                raise discard_remote(session, url, f"checksum mismatch for {src} -> {url}",
                                     f"{name} local {plan.show(local)}, remote "
                                     f"{plan.show(remote)}")
        # the server fsyncs before its rename: an upload is at least durable
        return FileResult(str(src), str(url), size, local, plan.upload_level, retries,
                          upload_streams=1, algorithm=name)
    finally:
        os.close(fd)


def with_restarts(once: Callable[[], FileResult], options: Options, what: str) -> FileResult:
    """Run a whole session transfer again after a commit mismatch or a lost session."""
    restarts = 0
    last: BaseException | None = None
    for _attempt in range(options.retries + 1):
        try:
            result = once()
        except (ChecksumMismatch, SessionLost) as exc:
            last = exc
            restarts += 1
            continue
        result.retries += restarts
        return result
    if isinstance(last, ChecksumMismatch):
        last.why += f" (after {options.retries + 1} attempts)"
        raise last
    raise TransferError(what, f"the upload session was lost {restarts} times ({last})",
                        "check the server (restarts? its `dtnkit serve --upload-expiry`?)")


def upload_file(session: Session, src: Path, url: Url, options: Options,
                journals: Path | None = None,
                conn: http.client.HTTPConnection | None = None) -> FileResult:
    """A multi-stream session upload; UseSinglePut before anything is sent when not possible.
    *journals*: where the resume journal goes (default :func:`journal_dir`); *conn*: a
    keep-alive connection to the server for the first session (its start, then the first
    stream); the caller closes it."""
    try:
        st = os.stat(src)
    except OSError as exc:
        raise UseSinglePut(str(exc)) from None
    if options.streams < 2 or st.st_size <= options.block_size:
        raise UseSinglePut("one block or one stream")
    journal = UploadJournal(src, st, url, options, journals or journal_dir())
    first = [True]

    def once() -> FileResult:
        resume = first[0]
        first[0] = False
        return upload_session_once(session, src, url, options, journal, resume,
                                   conn if resume else None)

    return with_restarts(once, options, f"upload {src} -> {url}")


def upload_session_once(session: Session, src: Path, url: Url, options: Options,
                        journal: UploadJournal, resume: bool,
                        conn: http.client.HTTPConnection | None = None) -> FileResult:
    """One session: its start (or status, to resume) on *conn* (a new one when None), which
    then carries the first stream's pipelined ranges; the commit goes on a connection that a
    stream ended with, so no request after the first waits for a new handshake."""
    plan = options.plan()
    ctl = conn or session.connect()
    kept: list[http.client.HTTPConnection] = []
    name = plan.algorithm
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    verifier: pl.BlockVerifier | None = None
    ident: str | None = None
    keep = False
    try:
        size = os.fstat(fd).st_size
        blocks = pl.plan_blocks(size, options.block_size)
        have: list[tuple[int, int]] = []
        old = journal.load() if resume and options.resume else None
        if old is not None:
            got = us.status(session, url, old, conn=ctl)
            if got is not None:
                ident, have = old, got
            else:
                journal.remove()
        if ident is None:
            ident = us.start(session, url, size, plan.session_algorithm,
                             create_only=not options.overwrite, conn=ctl)
            if options.resume:
                journal.save(ident)
        keep = options.resume  # from here a failure keeps the session for a rerun
        local: bytes | None = None
        if plan.sequential:
            local = pl.checksum_fd(fd, name, size, options.block_size)
        todo = [b for b in blocks if not covered(b.offset, b.end, have)]
        skipped = [b for b in blocks if covered(b.offset, b.end, have)]
        if plan.block:
            verifier = pl.make_verifier(name, blocks, functools.partial(read_back, fd),
                                        options.max_buffered)
            for b in skipped:  # sent by an earlier run: hash them from the source
                verifier.accept(b, read_back(fd, b))
        if skipped and options.progress is not None:
            options.progress(sum(b.length for b in skipped))
        sink = SessionSink(session, url, ident, size, name,
                           range_digest=plan.block and name in cks.COMBINABLE,
                           resume=options.resume)
        retries = move_blocks(LocalFileSource(fd, src), sink, todo, options, size=size,
                              verifier=verifier, first=ctl if todo else None, keep=kept)
        if verifier is not None:
            local = verifier.digest()
        elif plan.verify is Verify.FILE:
            local = pl.checksum_fd(fd, name, size, options.block_size)
        keep = False
        try:
            us.commit(session, url, ident, dg.format_digest(name, local)
                      if local is not None else None, create_only=not options.overwrite,
                      conn=kept[0] if kept else (None if todo else ctl))
        finally:
            journal.remove()
        result = FileResult(str(src), str(url), size, local, plan.upload_level, retries,
                            read_back=len(skipped), resumed_blocks=len(skipped),
                            resumed_bytes=sum(b.length for b in skipped), algorithm=name)
        result.upload_streams = min(options.streams, max(1, len(todo)))
        return result
    except BaseException as exc:
        lost = isinstance(exc, SessionLost | ChecksumMismatch)
        if ident is not None and (not keep or lost or not isinstance(
                exc, TransferError | KeyboardInterrupt)):
            if not lost:
                us.abort(session, url, ident)
            journal.remove()
        raise
    finally:
        if verifier is not None:
            verifier.close()
        os.close(fd)
        for c in kept:
            c.close()
        if conn is None:
            ctl.close()  # (a given one is the caller's)
