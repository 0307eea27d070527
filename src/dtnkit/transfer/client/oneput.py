"""One ``PUT`` of a whole body, without blocks or streams: the :class:`SinglePut` sink fed
chunk by chunk by :func:`pump`, from a local file (:func:`put_body`, :func:`upload_once`:
an upload of one stream, or to a server without upload sessions) or from a source's ``GET``
body (:func:`relay_put_once`: a relay of one stream).  ``Expect: 100-continue`` first, so a
refusal or a redirect costs no bytes; the body is hashed as it is sent (FIVER) and compared
with what the server answers, or carries the source's digest for the server to check.
"""

from __future__ import annotations

import http.client
import io
import os
import select
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from dtnkit.errors import BadInput
from dtnkit.host.parsers import is_uint
from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.client.answers import content_length
from dtnkit.transfer.client.ends import LocalFileSource
from dtnkit.transfer.client.errors import (
    ChecksumMismatch,
    DestinationExists,
    Retryable,
    TransferError,
    reason,
)
from dtnkit.transfer.client.request import CopyRun, FileResult
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
from dtnkit.transfer.client.verify import Verify
from dtnkit.transfer.wire.digests import format_digest

#: How long a PUT waits for ``100 Continue`` (or an early final answer: a redirect, 401, 403)
#: before sending the body anyway, as RFC 9110 asks of clients (a server may ignore Expect).
EXPECT_WAIT = 1.0
_MAX_LINE = 8192

Answer = tuple[int, dict[str, str], bytes]


def _answer_head(fp: io.RawIOBase, what: str) -> tuple[int, dict[str, str]]:
    """The status and lower-cased headers of an answer, read byte by byte (nothing past
    it)."""

    def line() -> bytes:
        out = bytearray()
        while not out.endswith(b"\n"):
            c = fp.read(1)
            if not c or len(out) > _MAX_LINE:
                raise Retryable(f"{what}: malformed or truncated answer")
            out += c
        return bytes(out)

    parts = line().split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise Retryable(f"{what}: not an HTTP status line: {b' '.join(parts[:2])!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    for _ in range(100):
        raw = line()
        if raw in (b"\r\n", b"\n"):
            break
        key, _sep, value = raw.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    return status, headers


def early_answer(conn: http.client.HTTPConnection, wait: float = EXPECT_WAIT) -> Answer | None:
    """After request headers with ``Expect: 100-continue``: None when the body may go (``100
    Continue``, or no answer within *wait*); otherwise the server's final answer (status,
    lower-cased headers, body up to 64 KiB), and the body must not be sent."""
    sock = conn.sock
    pending = getattr(sock, "pending", None)  # TLS: bytes OpenSSL has read already
    if not (pending is not None and pending()) and not select.select([sock], [], [], wait)[0]:
        return None
    # unbuffered: reads nothing past the interim answer (the server sends nothing more until
    # it has the body), so http.client can still read the final response afterwards
    fp = sock.makefile("rb", buffering=0)
    try:
        status, headers = _answer_head(fp, "PUT")
        if status == 100:
            return None
        length = headers.get("content-length", "0")
        want = min(int(length) if is_uint(length) else 0, 65536)
        body = bytearray()
        while len(body) < want:
            chunk = fp.read(want - len(body))
            if not chunk:
                break
            body += chunk
        return status, headers, bytes(body)
    finally:
        fp.close()


class SinglePut:
    """One ``PUT`` of a whole body on its own connection.  With *expect* (and a body) it asks
    ``Expect: 100-continue`` first, so a refusal (401, 403) or a redirect costs no bytes."""

    def __init__(
        self,
        session: Session,
        url: Url,
        size: int,
        extra: dict[str, str],
        *,
        expect: bool,
        conn: http.client.HTTPConnection | None = None,
        refuse_existing: bool = False,
    ) -> None:
        self.session, self.url, self.size = session, url, size
        self.extra, self.expect = extra, expect and size > 0
        self.conn = conn or session.connect()  # a given keep-alive one needs no handshake
        self.refuse_existing = refuse_existing

    def open(self) -> Answer | None:
        """Send the request headers; the server's early answer when the body must not go.

        With *refuse_existing* a ``HEAD`` goes first on the same connection (no handshake of
        its own), for servers that ignore ``If-None-Match: *``; DestinationExists when it
        answers 200, and nothing of the PUT is sent."""
        extra = {**self.extra, "Expect": "100-continue"} if self.expect else self.extra

        def put_head() -> None:
            self.conn.putrequest("PUT", self.url.path, skip_accept_encoding=True)
            for key, value in self.session.headers(extra).items():
                self.conn.putheader(key, value)
            self.conn.endheaders()

        if self.refuse_existing:
            # not pipelined with the PUT's head: a server that ignores If-None-Match (XRootD
            # 5.5.3) truncates the target on the PUT's head alone, body or not
            status = self.session.request("HEAD", self.url, conn=self.conn)[0]
            if status == 200:
                raise DestinationExists(str(self.url))
        put_head()
        return early_answer(self.conn) if self.expect else None

    def write(self, data: memoryview) -> None:
        self.conn.sock.sendall(data)

    def finish(self) -> Answer:
        r = self.conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()

    def close(self) -> None:
        self.conn.close()


def pump(
    chunks: Iterable[memoryview],
    sink: SinglePut,
    hasher: checksum.Checksum | None,
    progress: Callable[[int], None] | None,
) -> int:
    """Send *chunks* in order into *sink*, hashing each as sent (FIVER); the bytes sent."""
    sent = 0
    for view in chunks:
        if hasher is not None:
            hasher.update(view)  # FIVER: hash the bytes read for sending
        sink.write(view)
        sent += len(view)
        if progress is not None:
            progress(len(view))
    return sent


def put_body(
    session: Session,
    url: Url,
    fd: int,
    size: int,
    extra: dict[str, str],
    hasher: checksum.Checksum | None,
    conn: http.client.HTTPConnection | None = None,
    refuse_existing: bool = False,
) -> Answer:
    """One PUT of the local file *fd* (``Expect: 100-continue`` first), on *conn* when given
    (a keep-alive connection), else on a new one; with *refuse_existing* a HEAD pipelined
    before it (:class:`SinglePut`); connection trouble is :class:`Retryable`."""
    sink = SinglePut(
        session, url, size, extra, expect=True, conn=conn, refuse_existing=refuse_existing
    )
    try:
        early = sink.open()
        if early is not None:
            return early
        source = LocalFileSource(fd, f"fd {fd}")
        run = session.run
        sent = pump(source.chunks(size, run.request.block_size), sink, hasher, run.progress)
        if sent < size:
            raise TransferError(
                f"source {size}", f"ended at {sent} bytes", "do not modify files while copying them"
            )
        return sink.finish()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise Retryable(f"PUT {url}: {exc.__class__.__name__}: {exc}") from exc
    finally:
        sink.close()


def response_chunks(
    r: http.client.HTTPResponse, size: int, buf: bytearray, what: str
) -> Iterator[memoryview]:
    """The body of *r* (*size* bytes) through *buf*, chunk by chunk; Retryable when it ends
    early."""
    view = memoryview(buf)
    got = 0
    while got < size:
        n = r.readinto(view[: min(len(buf), size - got)])
        if not n:
            raise Retryable(f"{what}: closed after {got} of {size} bytes")
        got += n
        yield view[:n]


class ServerError(Retryable):
    """A 5xx answer to a PUT: worth another try; when the tries run out, the answer is what
    is told."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status} {reason(body)}")
        self.status, self.body = status, body


def upload_once(
    session: Session,
    src: Path,
    url: Url,
    run: CopyRun,
    conn: http.client.HTTPConnection | None = None,
) -> FileResult:
    """One PUT of the whole file, with its redirects and retries; the first attempt on
    *conn* when given (a keep-alive connection to the server)."""
    request = run.request
    verify = request.verify_plan()
    name = verify.algorithm
    try:
        fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise BadInput(f"source {src}", exc.strerror or str(exc), "check the path") from None
    try:
        size = os.fstat(fd).st_size
        extra = {
            "Content-Length": str(size),
            "Content-Type": "application/octet-stream",
            **create_only(request.overwrite),
        }
        if verify.checks:
            # ask the server to hash while it receives and answer with the Digest (RFC 3230),
            # instead of reading the new file back for a HEAD afterwards
            extra["Want-Digest"] = want_name(name)
        local: bytes | None = None
        if verify.sequential:
            local = pipeline.checksum_fd(fd, name, size, request.block_size)
            extra["Digest"] = format_digest(name, local)
        retries = hops = 0
        target, target_session = url, session  # where the body goes (after redirects)

        def put() -> tuple[int, dict[str, str], bytes, checksum.Checksum | None]:
            """One PUT, following redirects (a door sending the body to a pool: dCache)."""
            nonlocal conn, hops, target, target_session
            while True:
                hasher = checksum.new(name) if verify.block else None
                given, conn = conn, None  # put_body closes it: a retry makes its own
                status, headers, body = put_body(
                    target_session,
                    target,
                    fd,
                    size,
                    extra,
                    hasher,
                    given,
                    refuse_existing=not request.overwrite and hops == 0,
                )
                if status >= 500:
                    raise ServerError(status, body)
                if status not in REDIRECTS:
                    return status, headers, body, hasher
                hops += 1
                if hops > MAX_REDIRECTS:
                    raise TransferError(
                        f"PUT {url}",
                        f"more than {MAX_REDIRECTS} redirects",
                        "check the server's redirect configuration",
                    )
                target = follow_redirect(target, headers.get("location"), f"PUT {target}")
                target_session = session.for_url(target)

        def retried() -> None:
            nonlocal retries
            retries += 1

        def give_up(attempts: int, exc: BaseException) -> TransferError:
            if isinstance(exc, ServerError):
                return TransferError(
                    f"PUT {url}", f"HTTP {exc.status} {reason(exc.body)}", "check the server log"
                )
            return TransferError(
                f"PUT {url}",
                f"failed after {attempts} attempts ({exc})",
                "check that the server is up",
            )

        status, headers, body, hasher = request.retry.call(
            f"PUT {url}", put, retried=retried, give_up=give_up
        )
        existing_after_412(target_session, target, status, request.overwrite)
        if status == 412 and verify.sequential:
            raise ChecksumMismatch(
                f"checksum mismatch for {src} -> {url}",
                f"the server refused the body: {reason(body)}",
                "retry; if it persists, check the source storage",
            )
        missing_parent(status, f"PUT {url}", body, request.parents)
        check_status(status, f"PUT {url}", body, ok=(200, 201, 204))
        if hasher is not None:
            local = hasher.digest()
        elif verify.verify is Verify.FILE:
            local = pipeline.checksum_fd(fd, name, size, request.block_size)
        if verify.checks:
            remote = answered_digest(headers, name)
            if remote is None:  # not every server answers Want-Digest on a PUT
                remote = source_digest(session, url, name)
            if local is not None and remote != local:
                raise discard_remote(
                    session,
                    url,
                    f"checksum mismatch for {src} -> {url}",
                    f"{name} local {verify.show(local)}, remote {verify.show(remote)}",
                )
        # the server fsyncs before its rename: an upload is at least durable
        return FileResult(
            str(src),
            str(url),
            size,
            local,
            verify.upload_level,
            retries,
            upload_streams=1,
            algorithm=name,
        )
    finally:
        os.close(fd)


def relay_put_once(
    src_session: Session, src: Url, dst_session: Session, dst: Url, run: CopyRun
) -> FileResult:
    """One GET stream from the source piped into one PUT carrying the source's digest."""
    request = run.request
    verify = request.verify_plan()
    name = verify.algorithm
    want = source_digest(src_session, src, name) if verify.checks else None
    hasher = checksum.new(name) if verify.checks else None
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
        extra = {
            "Content-Length": str(size),
            "Content-Type": "application/octet-stream",
            **create_only(request.overwrite),
        }
        if want is not None:
            extra["Digest"] = format_digest(name, want)
        buf = bytearray(max(1, min(request.block_size, size, 2**20 * 4)))
        sink = SinglePut(dst_session, dst, size, extra, expect=False)
        try:
            sink.open()
            pump(response_chunks(r, size, buf, f"GET {src}"), sink, hasher, run.progress)
            status, _headers, body = sink.finish()
        except (Retryable, OSError, http.client.HTTPException) as exc:
            raise ChecksumMismatch(f"relay {src} -> {dst}", f"broke off ({exc})", "retry") from None
        existing_after_412(dst_session, dst, status, request.overwrite)
        if status == 412:
            raise ChecksumMismatch(
                f"checksum mismatch for {src} -> {dst}",
                f"the destination refused the body: {reason(body)}",
                "retry; if it persists, check the source storage",
            )
        missing_parent(status, f"PUT {dst}", body, request.parents)
        check_status(status, f"PUT {dst}", body, ok=(200, 201, 204))
        got = hasher.digest() if hasher is not None else None
        if got is not None and want is not None and got != want:
            raise discard_remote(
                dst_session,
                dst,
                f"checksum mismatch for {src} -> {dst}",
                f"{name} source {verify.show(want)}, relayed {verify.show(got)}",
            )
        return FileResult(
            str(src), str(dst), size, got, verify.upload_level, upload_streams=1, algorithm=name
        )
    finally:
        sconn.close()
        if sink is not None:
            sink.close()
