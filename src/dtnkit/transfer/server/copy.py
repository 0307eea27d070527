"""HTTP third-party copy, server side: ``COPY`` with ``Source:`` (pull) or ``Destination:``
(push).

The active party moves the bytes with the client's own
:func:`~dtnkit.transfer.client.download` / :func:`~dtnkit.transfer.client.upload` in a
thread, forwarding ``TransferHeader<Name>`` headers with the prefix stripped, and answers
``202`` with a ``text/plain`` performance-marker stream (``Perf Marker`` ... ``End`` blocks
every ``marker_interval`` seconds, :mod:`dtnkit.transfer.wire.markers`), then one final line:
``success: Created`` or ``failure: <what>: <why>``.  A pull lands in a temporary name next to
the target and is renamed only after its digest matched the remote's; a failed or cancelled
copy (the COPY connection closed) leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import ssl
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.transfer import checksum, files, fsroot, paths, pipeline, tokens
from dtnkit.transfer.client import pace
from dtnkit.transfer.client.download import download
from dtnkit.transfer.client.errors import (
    ChecksumMismatch,
    DestinationExists,
    DigestNotOffered,
    Retryable,
)
from dtnkit.transfer.client.journals import part_path
from dtnkit.transfer.client.policy import StreamPolicy
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import (
    MAX_REDIRECTS,
    REDIRECTS,
    Session,
    Url,
    client_context,
    discard_remote,
    follow_redirect,
    same_origin,
)
from dtnkit.transfer.client.tpc import TpcError
from dtnkit.transfer.client.upload import upload
from dtnkit.transfer.client.verify import Verify
from dtnkit.transfer.server import addresses
from dtnkit.transfer.server.config import ServerConfig
from dtnkit.transfer.server.errors import HttpError, os_error, printable, refuse_link, show
from dtnkit.transfer.server.exchange import Exchange, Headers
from dtnkit.transfer.server.tpc_allow import GENERIC, AllowList, RemoteRefused
from dtnkit.transfer.wire import markers
from dtnkit.transfer.wire.digests import choose, format_value, parse_digest, parse_want_digest
from dtnkit.transfer.wire.upload import COMMIT, HEADER

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer as Buffer

MAX_STREAMS = 100
POLL = 0.1  # seconds between checks for a closed COPY connection
#: The only ``TransferHeader<Name>`` headers forwarded (as ``Name``), by lower-case name:
#: the remote's token, and the tape metadata FTS sends.  Anything else (Cookie, Host, ...)
#: is refused with 400: the client does not choose what the server sends on its behalf.
FORWARDED = {"authorization": "Authorization", "archivemetadata": "ArchiveMetadata"}


class Cancelled(Exception):
    """The COPY connection went away: stop the copy."""


@dataclass
class Reach:
    """Where this COPY's connections may go (the allow-list), whether every host it
    reached so far was listed there (then failure lines give the reason), and whether a
    write of this copy created the remote file (a ``201`` to its PUT or to its upload
    session's commit: only then is the file this copy's to remove when it fails)."""

    allow: AllowList
    listed: bool = True
    created: bool = False


class NotesCreation(http.client.HTTPConnection):
    """A connection that tells its :class:`Reach` when a PUT of a whole file, or an upload
    session's commit, answers ``201 Created`` (a session's start answers 201 too: it
    creates no file)."""

    reach: Reach | None = None
    method = ""
    upload_action: str | None = None

    def putrequest(
        self, method: str, url: str, skip_host: bool = False, skip_accept_encoding: bool = False
    ) -> None:
        self.method, self.upload_action = method.upper(), None
        super().putrequest(method, url, skip_host, skip_accept_encoding)

    def putheader(self, header: str | bytes, *values: Buffer | str | int) -> None:
        name = header.decode("latin-1") if isinstance(header, bytes) else header
        if name.lower() == HEADER.lower() and values:
            value = values[0]
            self.upload_action = (
                (str(value) if isinstance(value, str | int) else bytes(value).decode("latin-1"))
                .strip()
                .lower()
            )
        super().putheader(header, *values)

    def getresponse(self) -> http.client.HTTPResponse:
        response = super().getresponse()
        if (
            response.status == 201
            and self.reach is not None
            and (
                (self.method == "PUT" and self.upload_action is None)
                or (self.method == "POST" and self.upload_action == COMMIT)
            )
        ):
            self.reach.created = True
        return response


class NotedHTTPConnection(NotesCreation, pace.PacedHTTPConnection):
    pass


class NotedHTTPSConnection(NotesCreation, pace.PacedHTTPSConnection):
    pass


class ForwardingSession(Session):
    """A client session whose requests carry the COPY's forwarded TransferHeaders and go
    only to the address checked against the allow-list when the session was made
    (:class:`RemoteRefused` when none is allowed); redirects to other origins get a new,
    checked session without the forwarded ``Authorization``."""

    def __init__(self, url: Url, run: CopyRun, forward: Mapping[str, str], reach: Reach) -> None:
        super().__init__(url, run)
        self._forward = dict(forward)
        self.reach = reach
        self.address, listed = reach.allow.pick(url.host, url.port)
        reach.listed = reach.listed and listed
        self.tls: ssl.SSLContext | None = None
        if url.scheme == "https":
            self.tls = client_context(run.request)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        out = {"User-Agent": "dtnkit-tpc", **self._forward}
        if self.run.request.scitag is not None:  # the COPY's tag, to the passive party
            out["SciTag"] = str(self.run.request.scitag)
        out.update(extra or {})
        return out

    def connect(self) -> http.client.HTTPConnection:
        # to the address checked, whatever the name resolves to now; the socket keeps the
        # client's minimum rate and deadline (client/pace.py), as `cp`'s do
        rcvbuf = self.run.streams.rcvbuf()
        conn: NotesCreation
        if self.tls is not None:
            conn = NotedHTTPSConnection(
                self.url.host,
                self.url.port,
                self.run,
                self.tls,
                address=self.address,
                rcvbuf=rcvbuf,
            )
        else:
            conn = NotedHTTPConnection(
                self.url.host, self.url.port, self.run, address=self.address, rcvbuf=rcvbuf
            )
        conn.reach = self.reach
        return conn

    def for_url(self, url: Url) -> Session:
        if same_origin(url, self.url):
            return self
        kept = {k: v for k, v in self._forward.items() if k.lower() != "authorization"}
        return ForwardingSession(url, self.run, kept, self.reach)


@dataclass
class CopyJob:
    """One copy in its thread: bytes moved so far, cancel and done flags, the error."""

    total: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    put_sent: bool = False

    def progress(self, n: int) -> None:
        if self.cancel.is_set():
            raise Cancelled()
        with self.lock:
            self.total += n

    @property
    def sent(self) -> int:
        with self.lock:
            return self.total


def forwarded(headers: Headers) -> dict[str, str]:
    """The ``TransferHeader<Name>`` headers as ``Name``; 400 for a name not in
    :data:`FORWARDED`."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not name.lower().startswith("transferheader"):
            continue
        if name.lower() == "transferheaderscitag":  # the COPY's tag (flows.request_tag)
            continue
        real = FORWARDED.get(name[len("TransferHeader") :].lower())
        if real is None:
            allowed = " and ".join(f"TransferHeader{n}" for n in FORWARDED.values())
            raise HttpError(
                400,
                f"header {printable(name[:80])}",
                f"is not forwarded to the remote side (only {allowed} are)",
            )
        out[real] = value
    return out


def remote_url(value: str, header: str) -> Url:
    """The ``Source`` or ``Destination`` URL; 400 with the reason when it is not an http(s)
    URL whose host is an address or a host name (:func:`addresses.parse_host`)."""
    value = value.strip()
    try:
        url = Url.parse(value)  # dav(s):// read as http(s)://, as XRootD reads davs://
    except BadInput as exc:
        raise HttpError(400, f"{header} {value[:200]!r}", exc.why) from None
    try:
        if "[" in urlsplit(value).netloc and ":" not in url.host:
            raise addresses.BadHost("is in brackets but is no IPv6 address")
        addresses.parse_host(url.host)
    except addresses.BadHost as exc:
        raise HttpError(
            400, f"{header} {value[:200]!r}", f"its host {url.host[:100]!r} {exc}"
        ) from None
    return url


def _points_at_us(ex: Exchange, url: Url, path: Path) -> bool:
    if url.port != ex.local_port:
        return False
    names = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", *ex.local_names()}
    host = ex.headers.get("Host")
    if host:
        with contextlib.suppress(ValueError):  # a Host of "[::1" says nothing about us
            names.add(urlsplit(f"//{host}").hostname or "")
    if url.host not in names:
        return False
    try:
        other = paths.resolve(ex.services.config.root, url.path.split("?", 1)[0])
    except BadInput:
        return False
    return other == path


def streams(value: str | None) -> int | None:
    """The streams an ``X-Number-Of-Streams`` asks for; None when the request does not say
    (the pull then decides, as ``dtnkit cp --streams auto`` does)."""
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) > MAX_STREAMS:
        raise HttpError(
            400,
            f"X-Number-Of-Streams {value[:20]!r}",
            f"must be an integer from 0 to {MAX_STREAMS}",
        )
    return max(1, int(value))


def algorithm(value: str | None) -> str:
    if not value:
        return "adler32"
    try:
        chosen = choose(parse_want_digest(value), checksum.ALGORITHMS)
    except ValueError as exc:
        raise HttpError(400, "Want-Digest", str(exc)) from None
    if chosen is None:
        raise HttpError(
            400,
            f"Want-Digest {value[:80]!r}",
            f"names no algorithm we can verify ({', '.join(checksum.ALGORITHMS)})",
        )
    return checksum.canonical(chosen)


def require(value: str | None) -> bool | None:
    if value is None:
        return None
    low = value.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise HttpError(400, f"RequireChecksumVerification {value[:20]!r}", "must be true or false")


def resolve_remote(
    first: ForwardingSession, want: str | None
) -> tuple[Session, Url, int, dict[str, bytes]]:
    """HEAD the remote file (with ``Want-Digest: want``), following redirects.

    Returns the session for the final URL, that URL, the HEAD's status and the digests it
    offered.  The forwarded ``Authorization`` goes only to the origin it was given for; the
    redirect target is expected to authorize the request itself (e.g. an ``authz`` query).
    Every hop is checked against the allow-list (:meth:`ForwardingSession.for_url`).
    """
    remote = url = first.url
    hops = 0
    session: Session = first
    extra = {"Want-Digest": checksum.REGISTRY[want].rfc3230} if want else {}
    while True:
        status, headers, _body = session.with_retries(
            f"HEAD {url}",
            lambda s=session, u=url: s.request("HEAD", u, extra),  # type: ignore[misc]
        )
        if status not in REDIRECTS:
            break
        hops += 1
        if hops > MAX_REDIRECTS:
            raise TpcError(
                f"HEAD {remote}",
                f"more than {MAX_REDIRECTS} redirects",
                "check the remote server's redirect configuration",
            )
        url = follow_redirect(url, headers.get("Location"), f"HEAD {url}")
        session = first.for_url(url)
    digests: dict[str, bytes] = {}
    if status == 200 and headers.get("Digest"):
        with contextlib.suppress(ValueError):
            digests = parse_digest(headers["Digest"])
    return session, url, status, digests


def handle_copy(ex: Exchange) -> None:
    """Serve one COPY request."""
    h = ex.headers
    source, destination = h.get("Source"), h.get("Destination")
    if (source is None) == (destination is None):
        raise HttpError(
            400, "COPY", "needs exactly one of the Source (pull) and Destination (push) headers"
        )
    pull = source is not None
    need = "write" if pull else "read"  # the scope of the local side: pull writes here
    if tokens.bearer(h.get("Authorization")) is None:  # never anonymous, whatever the server
        raise HttpError(
            401,
            f"COPY {ex.log_target}",
            f"needs a bearer token with {need} scope (also with anonymous read)",
            [("WWW-Authenticate", 'Bearer realm="dtnkit"')],
        )
    ex.authorize(need)
    if ex.body_pending():
        ex.discard_body()
    credential = h.get("Credential")
    if credential is not None and credential.strip().lower() != "none":
        raise HttpError(
            400,
            f"Credential {credential[:40]!r}",
            "unsupported credential; send 'Credential: none' and a bearer token "
            "in TransferHeaderAuthorization",
        )
    path = ex.resolve()
    config = ex.services.config
    root = config.root
    where = show(path, root)
    remote = remote_url(
        (source if pull else destination) or "", "Source" if pull else "Destination"
    )
    if _points_at_us(ex, remote, path):
        raise HttpError(
            400,
            f"COPY {where}",
            f"{'Source' if pull else 'Destination'} is this same file on this same server",
        )
    forward = forwarded(h)
    n_streams = streams(h.get("X-Number-Of-Streams"))
    required = require(h.get("RequireChecksumVerification"))
    name = algorithm(h.get("Want-Digest"))
    overwrite = (h.get("Overwrite", "T") or "").strip().upper() != "F"
    names = files.rel(root, path)
    source_fd = -1  # push: the local file, opened under the root without following a symlink
    if pull:
        with fsroot.Root(root) as fs:
            parent, there = files.lstat_or_none(fs, names[:-1]), files.lstat_or_none(fs, names)
        if path == root or (there is not None and stat.S_ISDIR(there.st_mode)):
            raise HttpError(405, where, "is a collection; COPY to a file name under it")
        refuse_link(parent, path.parent, root)
        if parent is None or not stat.S_ISDIR(parent.st_mode):
            raise HttpError(409, where, "its parent collection does not exist; MKCOL it first")
        if not overwrite and there is not None:
            raise HttpError(412, where, "exists and Overwrite: F was sent")
    else:
        try:
            with fsroot.Root(root) as fs:
                source_fd = fs.open(names, os.O_RDONLY | os.O_NONBLOCK)
            st = os.fstat(source_fd)
        except OSError as exc:
            if source_fd >= 0:
                os.close(source_fd)
            raise os_error(exc, path, root) from None
        if not stat.S_ISREG(st.st_mode):
            os.close(source_fd)
            raise HttpError(405, where, f"is not a regular file ({st.st_mode:o})")

    # a pull the request does not fix decides its streams on its first connection, as
    # `cp --streams auto` does (client/policy.py), and says so in the log
    auto = StreamPolicy.for_this_host(None) if n_streams is None and pull else None
    request = CopyRequest(
        streams=n_streams or 1,
        checksum=name,
        verify=Verify.BLOCK if pull else Verify.SEQUENTIAL,
        retries=1,
        backoff=0.2,
        resume=False,  # a failed server-side copy leaves nothing to resume
        ca_file=config.ca_file,
        ca_dir=config.ca_dir,
        overwrite=overwrite,  # Overwrite: F -> a push PUTs If-None-Match: *
        scitag=ex.scitag,
    )  # SciTag on the remote requests, the flow label
    job = CopyJob()
    transfer = CopyRun.of(request, streams=auto, progress=job.progress)
    reach = Reach(config.tpc_allow)
    header = "Source" if pull else "Destination"
    try:
        first = ForwardingSession(remote, transfer, forward, reach)
    except RemoteRefused as exc:
        log(config, f"COPY {where}: {header} refused: {exc}")
        host = printable(remote.host)
        raise HttpError(
            403,
            f"COPY {where}",
            f"the {header} host {host} is not allowed by this "
            "server: its address is not public and not in --tpc-allow; the "
            f"server's admin can allow it with dtnkit serve --tpc-allow {host} (or "
            "a CIDR range holding its address)",
            [(markers.REFUSED_REMOTE, header)],
        ) from None
    if auto is not None and not config.quiet:  # beside the access log's lines
        auto.on_decision = lambda d: log(config, f"COPY {where}: streams auto: {d.reason}")
    if pull:

        def no_digest(url: Url, offered: list[str]) -> TpcError:
            return TpcError(
                f"source digest of {url}",
                f"the source offered no {name} digest "
                f"(offered: {', '.join(offered) or 'none'}), so the copy cannot "
                "be verified",
                "pick another Want-Digest algorithm, or send RequireChecksumVerification: false",
            )

        def work() -> None:
            if required is not False:
                # no HEAD first: the download's own GET tells the size and, with most
                # servers, the digest (client/first.py); a digest HEAD only when it did not
                try:
                    pull_file(first, remote, path, transfer, job, ex, overwrite=overwrite)
                except DigestNotOffered as exc:
                    raise no_digest(remote, exc.offered) from None
                return
            session, url, status, offered = resolve_remote(first, name)
            unverified = status == 200 and name not in offered  # the client allowed it
            pull_file(
                session,
                url,
                path,
                unchecked(transfer) if unverified else transfer,
                job,
                ex,
                overwrite=overwrite,
            )
    else:

        def work() -> None:
            session, url, _status, _offered = resolve_remote(first, None)
            push_file(
                session, fsroot.fd_path(source_fd), url, transfer, job, reach, required is not False
            )

    def run() -> None:
        detail: str | None = None
        try:
            work()
        except Cancelled:
            job.error = "COPY: cancelled (the client closed the connection)"
        except RemoteRefused as exc:
            detail = f"redirect refused: {exc}"
            reach.listed = False
        except DtnkitError as exc:
            detail = f"{exc.what}: {exc.why}" if exc.why else exc.what
        except Exception as exc:  # report, never crash the handler
            detail = f"COPY {where}: {exc.__class__.__name__}: {exc}"
        finally:
            if source_fd >= 0:
                os.close(source_fd)
            if detail is not None:
                # the local side is opened by descriptor (fsroot): name it as the client did
                detail = re.sub(
                    r"/proc/self/fd/\d+(?:/[^\s:]*)?", show(path, root), unrooted(detail, root)
                )
                log(config, f"COPY {where} ({header} {remote}) failed: {detail}")
                # only a listed remote's failure is told: else a scanner would learn which
                # ports answer (refused, timed out, TLS, an HTTP status, no digest...)
                job.error = detail if reach.listed else f"COPY {where}: {GENERIC}"
            job.done.set()

    interval = config.marker_interval

    def marker() -> bytes:
        return markers.format_marker(job.sent, int(time.time())).encode("utf-8", "replace")

    try:
        ex.start_chunked(202, [("Content-Type", "text/plain; charset=utf-8")])
        thread = threading.Thread(target=run, daemon=True, name="dtnkit-tpc")
        thread.start()
    except BaseException:
        if source_fd >= 0:
            os.close(source_fd)  # run() closes it once started
        raise
    try:
        next_marker = time.monotonic() + interval
        while not job.done.wait(POLL):
            if ex.client_gone():
                raise Cancelled()
            if time.monotonic() >= next_marker:
                ex.write_chunk(marker())
                next_marker = time.monotonic() + interval
        ex.write_chunk(marker())
        final = markers.success_line() if job.error is None else markers.failure_line(job.error)
        ex.write_chunk(final.encode("utf-8", "replace"))
        ex.end_chunked()
    except (Cancelled, OSError):
        job.cancel.set()
        thread.join(request.stall_timeout + 10)
        ex.close_after()
    ex.count_bytes(job.sent)


def unrooted(text: str, root: Path) -> str:
    """*text* with the served root's absolute path taken out of every path under it."""
    base = str(root).rstrip("/")
    return re.sub(re.escape(base) + r"(?=/|\b|$)", "", text) if base else text


def log(config: ServerConfig, line: str) -> None:
    """One line in the server log (a URL's query may hold a secret: it is cut)."""
    line = re.sub(r"\?[^\s'\"]*", "?...", printable(line))
    with contextlib.suppress(OSError, ValueError):
        config.log.write(line + "\n")
        config.log.flush()


def unchecked(transfer: CopyRun) -> CopyRun:
    """*transfer* with nothing verified (its streams and clock shared)."""
    return replace(transfer, request=replace(transfer.request, verify=Verify.NONE))


def pull_file(
    session: Session,
    url: Url,
    path: Path,
    transfer: CopyRun,
    job: CopyJob,
    ex: Exchange,
    *,
    overwrite: bool = True,
) -> None:
    """Download *url* to a part file next to *path*, then rename it over *path* (not over
    an existing file, whoever made it, unless *overwrite*).

    The directory is opened once under the root without following a symlink; the download
    writes through ``/proc/self/fd/N/<part>`` (that very directory, whatever is renamed
    meanwhile) and the rename is taken in it too."""
    root = ex.services.config.root
    try:
        with fsroot.Root(root) as fs:
            dirfd = fs.open_dir(files.rel(root, path.parent))
    except OSError as exc:
        raise TpcError(
            f"COPY {show(path, root)}",
            os_error(exc, path.parent, root).why,
            "check that the parent collection exists",
        ) from None
    name = files.part_for(path).name
    tmp = fsroot.fd_path(dirfd) / name
    directory = os.fstat(dirfd)
    files.LIVE.add_name(directory, name)
    files.LIVE.note_dir(root, files.rel(root, path.parent))
    committed = False
    try:
        # the part file is this copy's own: the rename below decides what is replaced
        result = download(
            session, url, tmp, replace(transfer, request=replace(transfer.request, overwrite=True))
        )
        if job.cancel.is_set():
            raise Cancelled()
        if overwrite:
            fsroot.replace_at(dirfd, name, path.name)
        else:
            try:
                files.rename_noreplace(name, path.name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            except FileExistsError:
                raise TpcError(
                    f"COPY {path.name}", "exists and Overwrite: F was sent", ""
                ) from None
        committed = True
        with contextlib.suppress(OSError):
            os.fsync(dirfd)
        if result.digest is not None:
            with contextlib.suppress(ValueError, OSError):
                value = {transfer.request.checksum: result.digest}
                st = os.stat(path.name, dir_fd=dirfd, follow_symlinks=False)
                ex.services.cache.store(path, files.file_key(st), value)
    finally:
        if not committed:
            for leftover in (name, part_path(tmp).name):
                with contextlib.suppress(OSError):
                    os.unlink(leftover, dir_fd=dirfd)
        files.LIVE.discard_name(directory, name)
        os.close(dirfd)


def push_file(
    session: Session,
    path: Path,
    url: Url,
    transfer: CopyRun,
    job: CopyJob,
    reach: Reach,
    required: bool = True,
) -> None:
    """PUT ``path`` to ``url``.  ``required``: the remote's digest must match (the upload
    fails when it offers none); otherwise it is compared only when the remote offers one.
    A failed or cancelled push removes the remote file only when this copy created it
    (:attr:`Reach.created`): a file the remote had before stays, whatever refused the PUT."""
    size = os.stat(path).st_size
    local: bytes | None = None
    request = transfer.request
    if not required:
        transfer = unchecked(transfer)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            local = pipeline.checksum_fd(fd, request.checksum, size, request.block_size)
        finally:
            os.close(fd)
    try:
        upload(session, path, url, transfer)
        if local is not None:
            _check_if_offered(session, url, request.checksum, local)
    except Cancelled:
        _delete_if_created(session, url, reach)
        raise
    except (ChecksumMismatch, DestinationExists):
        raise  # refused before commit (412), or deleted by upload() after a late mismatch;
        # or another writer's file that must stay
    except DtnkitError:
        _delete_if_created(session, url, reach)
        raise
    if job.cancel.is_set():  # the client left after the PUT: undo it (best effort)
        _delete_if_created(session, url, reach)
        raise Cancelled()


def _check_if_offered(session: Session, url: Url, name: str, local: bytes) -> None:
    """Compare with the remote digest when it offers one (RequireChecksumVerification: false)."""
    info = session.head(url, want=name)
    remote = info.digests.get(name)
    if remote is not None and remote != local:
        raise discard_remote(
            session,
            url,
            f"checksum mismatch for {url}",
            f"{name} local {format_value(name, local)}, remote {format_value(name, remote)}",
        )


def _delete_if_created(session: Session, url: Url, reach: Reach) -> None:
    """DELETE the remote file when this copy's PUT (or commit) created it: a ``201``.  No
    answer, an error, or a ``200``/``204`` (it replaced a file) leaves the remote as it is:
    the file may be one the remote had before the copy."""
    if not reach.created:
        return
    with contextlib.suppress(DtnkitError, Retryable):
        session.request("DELETE", url)
