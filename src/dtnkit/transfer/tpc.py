"""HTTP third-party copy (HTTP-TPC): ``COPY`` with ``Source:`` (pull) or ``Destination:`` (push).

Server side (:func:`handle_copy`, called by ``dtnkit serve`` for COPY): the active party moves
the bytes with the client's own :func:`~dtnkit.transfer.client.download` /
:func:`~dtnkit.transfer.client.upload` in a thread, forwarding ``TransferHeader<Name>`` headers
with the prefix stripped, and answers ``202`` with a ``text/plain`` performance-marker stream
(``Perf Marker`` ... ``End`` blocks every ``marker_interval`` seconds), then one final line:
``success: Created`` or ``failure: <what>: <why>``.  A pull lands in a temporary name next to
the target and is renamed only after its digest matched the remote's; a failed or cancelled
copy (the COPY connection closed) leaves nothing behind.

Client side (:func:`request_copy`): sends COPY, accepts 201 and 202, parses the markers with
:class:`MarkerParser` and trusts only the final line.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import client as cl
from dtnkit.transfer.wire import digests as dg
from dtnkit.transfer import paths
from dtnkit.transfer import pipeline as pl

if TYPE_CHECKING:
    from dtnkit.transfer.server import _Handler

DEFAULT_MARKER_INTERVAL = 5.0
#: Statuses followed as redirects (COPY, the active side's HEAD); at most MAX_REDIRECTS hops.
REDIRECTS = cl.REDIRECTS
MAX_REDIRECTS = cl.MAX_REDIRECTS
same_origin = cl.same_origin
follow_redirect = cl.follow_redirect
MAX_STREAMS = 100
POLL = 0.1  # seconds between checks for a closed COPY connection
FINAL_PREFIXES = ("success:", "failure:", "failed:", "aborted:")
#: Headers a TransferHeader may not set on the active party's requests (framing, routing).
UNFORWARDABLE = frozenset({"host", "content-length", "transfer-encoding", "connection", "range",
                           "if-range", "te", "trailer", "upgrade", "expect", "keep-alive"})


class TpcError(cl.TransferError):
    """A third-party copy failed (the final line said so, or the request was refused)."""


class MarkerStreamError(TpcError):
    """The performance-marker stream could not be parsed."""


class _Cancelled(Exception):
    """The COPY connection went away: stop the copy."""


# =========================================================================== client side


@dataclass
class Marker:
    timestamp: int | None = None
    stripe_index: int | None = None
    stripe_bytes: int | None = None
    stripe_count: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class TpcResult:
    ok: bool
    final: str  # the final line as sent
    status: int
    markers: list[Marker] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def reason(self) -> str:
        return self.final.split(":", 1)[1].strip() if ":" in self.final else self.final

    @property
    def bytes(self) -> int | None:
        """Bytes the last marker reported (summed over stripes), or None without markers."""
        if not self.markers:
            return None
        last: dict[int, int] = {}
        for m in self.markers:
            if m.stripe_bytes is not None:
                last[m.stripe_index or 0] = m.stripe_bytes
        return sum(last.values()) if last else None


_INT_KEYS = {"timestamp": "timestamp", "stripe index": "stripe_index",
             "stripe bytes transferred": "stripe_bytes", "total stripe count": "stripe_count"}


class MarkerParser:
    """Line-by-line parser of a marker stream; lenient about case, spacing and unknown keys.

    :meth:`feed` returns a :class:`Marker` when a block ends; :meth:`finish` returns the final
    line (``success: ...``/``failure: ...``) or raises :class:`MarkerStreamError`.
    """

    def __init__(self) -> None:
        self._block: Marker | None = None
        self._final: str | None = None
        self._line = 0

    def _error(self, why: str) -> MarkerStreamError:
        return MarkerStreamError("performance-marker stream", f"line {self._line}: {why}",
                                 "the active server does not speak HTTP-TPC as expected")

    def feed(self, raw: str) -> Marker | None:
        self._line += 1
        line = raw.strip()
        if not line:
            return None
        low = line.lower()
        if self._final is not None:
            raise self._error(f"{line[:80]!r} after the final line {self._final[:80]!r}")
        if self._block is None:
            if low == "perf marker":
                self._block = Marker()
                return None
            if low.startswith(FINAL_PREFIXES):
                self._final = line
                return None
            raise self._error(f"expected 'Perf Marker' or a final line, got {line[:80]!r}")
        if low == "end":
            marker, self._block = self._block, None
            return marker
        if low == "perf marker" or low.startswith(FINAL_PREFIXES):
            raise self._error(f"{line[:80]!r} inside a marker (missing 'End')")
        key, sep, value = line.partition(":")
        if not sep:
            raise self._error(f"{line[:80]!r} is not 'Key: value'")
        key, value = " ".join(key.lower().split()), value.strip()
        attr = _INT_KEYS.get(key)
        if attr is None:
            self._block.extra[key] = value
            return None
        if not value.isdigit():
            raise self._error(f"{key} {value[:40]!r} is not a non-negative integer")
        setattr(self._block, attr, int(value))
        return None

    def finish(self) -> str:
        if self._block is not None:
            raise self._error("the stream ended inside a marker")
        if self._final is None:
            raise TpcError("third-party copy", "the marker stream ended without a final "
                           "'success:' or 'failure:' line (connection lost?)",
                           "check the destination and retry the copy")
        return self._final


def parse_stream(lines: Any, on_marker: Callable[[Marker], None] | None = None
                 ) -> tuple[str, list[Marker]]:
    """Parse an iterable of lines (str or bytes); returns (final line, markers)."""
    parser = MarkerParser()
    markers: list[Marker] = []
    for raw in lines:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        marker = parser.feed(text)
        if marker is not None:
            markers.append(marker)
            if on_marker is not None:
                on_marker(marker)
    return parser.finish(), markers


def request_copy(active_url: str, *, source: str | None = None,
                 destination: str | None = None, token: str | None = None,
                 transfer_headers: Mapping[str, str] | None = None, streams: int = 1,
                 timeout: float = 60.0, on_marker: Callable[[Marker], None] | None = None,
                 checksum: str | None = None, ca_file: str | None = None,
                 insecure: bool = False, require_checksum: bool | None = None) -> TpcResult:
    """Send COPY to the active party; follow its marker stream; trust only the final line.

    ``transfer_headers`` are sent as ``TransferHeader<Name>``.  ``timeout`` bounds the wait
    between two lines of the stream.  ``require_checksum`` sends
    ``RequireChecksumVerification: true|false`` (not sent when None).  A 301/302/303/307/308
    answer is followed (COPY again, at most :data:`MAX_REDIRECTS` hops, never from https to
    http); the bearer token goes only to the origin it was given for, the TransferHeaders
    (meant for the passive party) to every hop.  Raises :class:`TpcError` when the server
    refuses the request, :class:`MarkerStreamError` on a malformed stream; a ``failure:``
    final line gives a result with ``ok`` False.
    """
    if (source is None) == (destination is None):
        raise BadInput("third-party copy", "needs exactly one of source and destination",
                       "pass source= (pull) or destination= (push)")
    first = url = cl.Url.parse(active_url)
    headers = {"Credential": "none", "X-Number-Of-Streams": str(streams)}
    if require_checksum is not None:
        headers["RequireChecksumVerification"] = "true" if require_checksum else "false"
    if source is not None:
        headers["Source"] = source
    if destination is not None:
        headers["Destination"] = destination
    if checksum is not None:
        headers["Want-Digest"] = {"sha256": "sha-256"}.get(cks.canonical(checksum), checksum)
    for name, value in (transfer_headers or {}).items():
        headers[f"TransferHeader{name}"] = value
    start = time.monotonic()
    hops = 0
    while True:
        session = cl.Session(url, cl.Options(token=token if same_origin(url, first) else None,
                                             ca_file=ca_file, insecure=insecure,
                                             stall_timeout=timeout))
        conn = session.connect()
        what = f"COPY {url}"
        try:
            conn.request("COPY", url.path, headers=session.headers(headers))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise TpcError(what, f"{exc.__class__.__name__}: {exc}",
                           "check that the active server is up") from None
        if resp.status not in REDIRECTS:
            break
        location = resp.getheader("Location")
        conn.close()
        hops += 1
        if hops > MAX_REDIRECTS:
            raise TpcError(f"COPY {first}", f"more than {MAX_REDIRECTS} redirects",
                           "check the active server's redirect configuration")
        url = follow_redirect(url, location, what)
    try:
        if resp.status not in (201, 202):
            body = resp.read(4096)
            try:
                cl.check_status(resp.status, what, body, ok=(201, 202))
            except cl.TransferError as exc:
                raise TpcError(exc.what, exc.why, exc.next_step) from None

        def lines() -> Any:
            while True:
                try:
                    line = resp.readline(65536)
                except (OSError, http.client.HTTPException) as exc:
                    raise TpcError(what, f"the marker stream broke off ({exc})",
                                   "check the destination and retry") from None
                if not line:
                    return
                yield line

        final, markers = parse_stream(lines(), on_marker)
    finally:
        conn.close()
    ok = final.lower().startswith("success:")
    return TpcResult(ok, final, resp.status, markers, time.monotonic() - start)


# =========================================================================== server side


class _ForwardingSession(cl.Session):
    """A client session whose requests carry the COPY's TransferHeaders."""

    def __init__(self, url: cl.Url, options: cl.Options, forward: Mapping[str, str]) -> None:
        super().__init__(url, options)
        self._forward = dict(forward)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        out = {"User-Agent": "dtnkit-tpc", **self._forward}
        out.update(extra or {})
        return out


@dataclass
class _Job:
    total: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    put_sent: bool = False

    def progress(self, n: int) -> None:
        if self.cancel.is_set():
            raise _Cancelled()
        with self.lock:
            self.total += n

    @property
    def sent(self) -> int:
        with self.lock:
            return self.total


def _forwarded(headers: Any) -> dict[str, str]:
    from dtnkit.transfer.server import HttpError

    out: dict[str, str] = {}
    for name, value in headers.items():
        if not name.lower().startswith("transferheader"):
            continue
        real = name[len("TransferHeader"):]
        if not real or real.lower() in UNFORWARDABLE:
            raise HttpError(400, f"header {name}", "cannot be forwarded to the remote side")
        out[real] = value
    return out


def _remote_url(value: str, header: str) -> cl.Url:
    from dtnkit.transfer.server import HttpError

    value = value.strip()
    if value.startswith("davs://"):
        value = "https://" + value[len("davs://"):]
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpError(400, f"{header} {value[:200]!r}", "is not an http(s) URL")
    try:
        return cl.Url.parse(value)
    except BadInput as exc:
        raise HttpError(400, f"{header} {value[:200]!r}", exc.why) from None


def _points_at_us(handler: _Handler, url: cl.Url, path: Path) -> bool:
    server = handler.server
    if url.port != server.server_port:
        return False
    names = {server.server_name, "localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}
    host = handler.headers.get("Host")
    if host:
        names.add(urlsplit(f"//{host}").hostname or "")
    with contextlib.suppress(OSError):
        names.add(handler.connection.getsockname()[0])
    if url.host not in names:
        return False
    try:
        other = paths.resolve(server.config.root, url.path.split("?", 1)[0])
    except BadInput:
        return False
    return other == path


def _streams(value: str | None) -> int:
    from dtnkit.transfer.server import HttpError

    if value is None:
        return 1
    if not value.strip().isdigit() or int(value) > MAX_STREAMS:
        raise HttpError(400, f"X-Number-Of-Streams {value[:20]!r}",
                        f"must be an integer from 0 to {MAX_STREAMS}")
    return max(1, int(value))


def _algorithm(value: str | None) -> str:
    from dtnkit.transfer.server import HttpError

    if not value:
        return "adler32"
    try:
        chosen = dg.choose(dg.parse_want_digest(value), cks.ALGORITHMS)
    except ValueError as exc:
        raise HttpError(400, "Want-Digest", str(exc)) from None
    if chosen is None:
        raise HttpError(400, f"Want-Digest {value[:80]!r}",
                        f"names no algorithm we can verify ({', '.join(cks.ALGORITHMS)})")
    return cks.canonical(chosen)


def _require(value: str | None) -> bool | None:
    from dtnkit.transfer.server import HttpError

    if value is None:
        return None
    low = value.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise HttpError(400, f"RequireChecksumVerification {value[:20]!r}", "must be true or false")


def _resolve(remote: cl.Url, options: cl.Options, forward: Mapping[str, str],
             want: str | None) -> tuple[_ForwardingSession, cl.Url, int, dict[str, bytes]]:
    """HEAD the remote file (with ``Want-Digest: want``), following redirects.

    Returns the session for the final URL, that URL, the HEAD's status and the digests it
    offered.  The forwarded ``Authorization`` goes only to the origin it was given for; the
    redirect target is expected to authorize the request itself (e.g. an ``authz`` query).
    """
    url, hops = remote, 0
    session = _ForwardingSession(url, options, forward)
    extra = {"Want-Digest": {"sha256": "sha-256"}.get(want, want)} if want else {}
    while True:
        status, headers, _body = session.with_retries(
            f"HEAD {url}",
            lambda s=session, u=url: s.request("HEAD", u, extra))  # type: ignore[misc]
        if status not in REDIRECTS:
            break
        hops += 1
        if hops > MAX_REDIRECTS:
            raise TpcError(f"HEAD {remote}", f"more than {MAX_REDIRECTS} redirects",
                           "check the remote server's redirect configuration")
        url = follow_redirect(url, headers.get("Location"), f"HEAD {url}")
        kept = forward if same_origin(url, remote) else {
            k: v for k, v in forward.items() if k.lower() != "authorization"}
        session = _ForwardingSession(url, options, kept)
    digests: dict[str, bytes] = {}
    if status == 200 and headers.get("Digest"):
        with contextlib.suppress(ValueError):
            digests = dg.parse_digest(headers["Digest"])
    return session, url, status, digests


def handle_copy(handler: _Handler) -> None:
    """Serve one COPY request on ``handler`` (a ``dtnkit serve`` request handler)."""
    from dtnkit.transfer.server import HttpError, _os_error, _show

    h = handler.headers
    source, destination = h.get("Source"), h.get("Destination")
    if (source is None) == (destination is None):
        raise HttpError(400, "COPY", "needs exactly one of the Source (pull) and Destination "
                        "(push) headers")
    pull = source is not None
    handler._authorize("write" if pull else "read")
    if handler._body_pending():
        handler._discard_body()
    credential = h.get("Credential")
    if credential is not None and credential.strip().lower() != "none":
        raise HttpError(400, f"Credential {credential[:40]!r}",
                        "unsupported credential; send 'Credential: none' and a bearer token "
                        "in TransferHeaderAuthorization")
    path = handler._resolve()
    root = handler.server.config.root
    where = _show(path, root)
    remote = _remote_url((source if pull else destination) or "",
                         "Source" if pull else "Destination")
    if _points_at_us(handler, remote, path):
        raise HttpError(400, f"COPY {where}", f"{'Source' if pull else 'Destination'} is this "
                        "same file on this same server")
    forward = _forwarded(h)
    streams = _streams(h.get("X-Number-Of-Streams"))
    require = _require(h.get("RequireChecksumVerification"))
    algorithm = _algorithm(h.get("Want-Digest"))
    if pull:
        if path == root or path.is_dir():
            raise HttpError(405, where, "is a collection; COPY to a file name under it")
        if not path.parent.is_dir():
            raise HttpError(409, where, "its parent collection does not exist; MKCOL it first")
        if h.get("Overwrite", "T").strip().upper() == "F" and os.path.lexists(path):
            raise HttpError(412, where, "exists and Overwrite: F was sent")
    else:
        try:
            st = os.stat(path)
        except OSError as exc:
            raise _os_error(exc, path, root) from None
        if not os.path.isfile(path):
            raise HttpError(405, where, f"is not a regular file ({st.st_mode:o})")

    options = cl.Options(streams=streams, checksum=algorithm,
                         verify="block" if pull else "sequential", retries=1, backoff=0.2,
                         resume=False,  # a failed server-side copy leaves nothing to resume
                         ca_file=getattr(handler.server.config, "ca_file", None))
    options.check()
    job = _Job()
    options.progress = job.progress
    if pull:
        def work() -> None:
            session, url, status, offered = _resolve(remote, options, forward, algorithm)
            if status == 200 and algorithm not in offered:
                if require is False:
                    options.verify = "none"  # the client allowed an unverified copy
                else:
                    raise TpcError(f"source digest of {url}",
                                   f"the source offered no {algorithm} digest (offered: "
                                   f"{', '.join(offered) or 'none'}), so the copy cannot be "
                                   "verified", "pick another Want-Digest algorithm, or send "
                                   "RequireChecksumVerification: false")
            _pull(session, url, path, options, job, handler)
    else:
        def work() -> None:
            session, url, _status, _offered = _resolve(remote, options, forward, None)
            _push(session, path, url, options, job, require is not False)

    def run() -> None:
        try:
            work()
        except _Cancelled:
            job.error = "COPY: cancelled (the client closed the connection)"
        except DtnkitError as exc:
            job.error = f"{exc.what}: {exc.why}" if exc.why else exc.what
        except Exception as exc:  # report, never crash the handler
            job.error = f"COPY {where}: {exc.__class__.__name__}: {exc}"
        finally:
            job.done.set()

    interval = getattr(handler.server.config, "marker_interval", DEFAULT_MARKER_INTERVAL)
    handler.send_response(202)
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    thread = threading.Thread(target=run, daemon=True, name="dtnkit-tpc")
    thread.start()
    try:
        next_marker = time.monotonic() + interval
        while not job.done.wait(POLL):
            if _client_gone(handler.connection):
                raise _Cancelled()
            if time.monotonic() >= next_marker:
                _chunk(handler, _marker(job.sent))
                next_marker = time.monotonic() + interval
        _chunk(handler, _marker(job.sent))
        if job.error is None:
            _chunk(handler, "success: Created\n")
        else:
            _chunk(handler, "failure: " + " ".join(job.error.split())[:2000] + "\n")
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except (_Cancelled, OSError):
        job.cancel.set()
        thread.join(options.stall_timeout + 10)
        handler.close_connection = True
    handler._bytes += job.sent


def _client_gone(sock: socket.socket) -> bool:
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


def _marker(sent: int) -> str:
    return (f"Perf Marker\nTimestamp: {int(time.time())}\nStripe Index: 0\n"
            f"Stripe Bytes Transferred: {sent}\nTotal Stripe Count: 1\nEnd\n")


def _chunk(handler: _Handler, text: str) -> None:
    data = text.encode("utf-8", "replace")
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def _pull(session: cl.Session, url: cl.Url, path: Path, options: cl.Options, job: _Job,
          handler: _Handler) -> None:
    from dtnkit.transfer.server import _file_key, _fsync_dir

    tmp = path.with_name(paths.part_name(path.name, secrets.token_hex(8)))
    committed = False
    try:
        result = cl.download(session, url, tmp, options)
        if job.cancel.is_set():
            raise _Cancelled()
        os.replace(tmp, path)
        committed = True
        with contextlib.suppress(OSError):
            _fsync_dir(path.parent)
        if result.digest is not None:
            with contextlib.suppress(ValueError, OSError):
                name = options.checksum
                label = dg.format_digest(name, bytes(cks.DIGEST_SIZE[name])).split("=", 1)[0]
                value = dg.parse_digest(f"{label}={result.digest}")
                handler.server.cache.store(path, _file_key(os.stat(path)), value)
    finally:
        if not committed:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            with contextlib.suppress(OSError):
                os.unlink(cl.part_path(tmp))


def _push(session: cl.Session, path: Path, url: cl.Url, options: cl.Options,
          job: _Job, require: bool = True) -> None:
    """PUT ``path`` to ``url``.  ``require``: the remote's digest must match (the upload
    fails when it offers none); otherwise it is compared only when the remote offers one."""
    size = os.stat(path).st_size
    local: bytes | None = None
    if not require:
        options.verify = "none"
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            local = pl.checksum_fd(fd, options.checksum, size, options.block_size)
        finally:
            os.close(fd)
    try:
        cl.upload(session, path, url, options)
        if local is not None:
            _check_if_offered(session, url, options.checksum, local)
    except _Cancelled:
        _delete_if_sent(session, url, job, size)
        raise
    except cl.ChecksumMismatch:
        raise  # refused before commit (412), or deleted by upload() after a late mismatch
    except DtnkitError:
        _delete_if_sent(session, url, job, size)
        raise
    if job.cancel.is_set():  # the client left after the PUT: undo it (best effort)
        _delete_if_sent(session, url, job, size)
        raise _Cancelled()


def _check_if_offered(session: cl.Session, url: cl.Url, name: str, local: bytes) -> None:
    """Compare with the remote digest when it offers one (RequireChecksumVerification: false)."""
    info = session.head(url, want=name)
    remote = info.digests.get(name)
    if remote is not None and remote != local:
        raise cl.discard_remote(session, url, f"checksum mismatch for {url}",
                                f"{name} local {cl._show(name, local)}, remote "
                                f"{cl._show(name, remote)}")


def _delete_if_sent(session: cl.Session, url: cl.Url, job: _Job, size: int) -> None:
    """DELETE the remote file when the whole body went out (the PUT may have created it)."""
    if job.sent < size:
        return  # the body broke off: the remote discards its temporary
    with contextlib.suppress(DtnkitError, cl.Retryable):
        session.request("DELETE", url)
