"""HTTP plumbing of the client: URLs, redirects, a :class:`Session` per server (connections,
small requests, retries), status checks, and the few requests every flow shares (the
source's digest, MKCOL, DELETE of a copy that failed verification)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urljoin, urlsplit

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.transfer.checksum import REGISTRY
from dtnkit.transfer.client.answers import check_file_size, content_length
from dtnkit.transfer.client.errors import (
    BadAnswer,
    ChecksumMismatch,
    DestinationExists,
    DigestNotOffered,
    FatalHttp,
    Redirected,
    Retryable,
    TransferError,
    reason,
)
from dtnkit.transfer.client.pace import PacedHTTPConnection, PacedHTTPSConnection
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.retry import fatal_transport
from dtnkit.transfer.wire.digests import parse_digest

#: Schemes read as another: WebDAV's names, as gfal2 and davix users write them.
ALIASES = {"dav": "http", "davs": "https"}
#: XRootD's own protocol: not HTTP; named so the refusal can say what to use instead.
XROOTD_SCHEMES = frozenset({"root", "roots", "xroot", "xroots"})


def _scheme(text: str) -> str:
    head, sep, _rest = text.partition("://")
    return head.lower() if sep and head.isascii() and head.isalpha() else ""


def is_url(text: str) -> bool:
    """A URL (http, https, dav, davs; also root:// so that it is refused, never taken for a
    local path), not a local path."""
    scheme = _scheme(text)
    return scheme in ("http", "https") or scheme in ALIASES or scheme in XROOTD_SCHEMES


def normalize(text: str) -> str:
    """*text* with ``dav://`` read as ``http://`` and ``davs://`` as ``https://``; BadInput
    for XRootD's ``root://`` (with the HTTP door or xrdcp as the way out).  The one place
    where the schemes users type become the ones dtnkit speaks."""
    scheme = _scheme(text)
    if scheme in ALIASES:
        return ALIASES[scheme] + text[len(scheme) :]
    if scheme in XROOTD_SCHEMES:
        parts = urlsplit(text)
        door = f"davs://{parts.hostname or 'host'}:1094/{parts.path.lstrip('/')[:200]}"
        raise BadInput(
            f"URL {text[:200]!r}",
            f"{scheme}:// is XRootD's own protocol, which dtnkit does not speak",
            f"use the server's HTTP door (e.g. {door}), or xrdcp",
        )
    return text


@dataclass(frozen=True, slots=True)
class Url:
    scheme: str
    host: str
    port: int
    path: str  # percent-encoded, starts with "/"

    @classmethod
    def parse(cls, text: str) -> Url:
        try:
            parts = urlsplit(normalize(text))
            hostname = parts.hostname
        except ValueError as exc:  # "Invalid IPv6 URL" (an unclosed "["), a bad netloc
            raise BadInput(
                f"URL {text[:200]!r}",
                f"cannot be parsed ({exc})",
                "write an IPv6 address between [ and ], e.g. http://[2001:db8::7]:8443/data/file",
            ) from None
        if parts.scheme not in ("http", "https") or not hostname:
            raise BadInput(
                f"URL {text!r}",
                "is not an http(s) URL",
                "pass e.g. http://127.0.0.1:8080/data/file or davs://host:1094/data/file",
            )
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise BadInput(f"URL {text!r}", "has a bad port", "fix the port") from None
        # the query stays in the request target: ?authz=..., a pool's session id, ...
        query = f"?{parts.query}" if parts.query else ""
        return cls(parts.scheme, hostname, port, (parts.path or "/") + query)

    def with_path(self, path: str) -> Url:
        return Url(self.scheme, self.host, self.port, path)

    def child(self, name: str) -> Url:
        path, sep, query = self.path.partition("?")
        base = path if path.endswith("/") else path + "/"
        return self.with_path(base + quote(name, safe="") + sep + query)

    @property
    def name(self) -> str:
        return unquote(self.path.partition("?")[0].rstrip("/").rsplit("/", 1)[-1])

    def parents(self) -> list[Url]:
        """The collections above this URL, the nearest first, the root ``/`` left out (its
        query, such as an ``authz``, kept on each)."""
        path, sep, query = self.path.partition("?")
        out: list[Url] = []
        head = path.rstrip("/").rsplit("/", 1)[0]
        while head:
            out.append(self.with_path(head + "/" + sep + query))
            head = head.rsplit("/", 1)[0]
        return out

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"


#: Longest body read from a small request's answer.
MAX_ANSWER = 16 * 2**20

#: Statuses followed as redirects; at most MAX_REDIRECTS hops.
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5


def same_origin(a: Url, b: Url) -> bool:
    """Same scheme, host and port (where a bearer token may be sent again)."""
    return (a.scheme, a.host.lower(), a.port) == (b.scheme, b.host.lower(), b.port)


def follow_redirect(base: Url, location: str | None, what: str) -> Url:
    """The URL a redirect points to (relative Locations resolved, query kept, ``davs://`` read
    as ``https://``); never from https down to plain http."""
    if not location or not location.strip():
        raise TransferError(what, "redirect without a Location header", "check the server")
    target = location.strip()
    if _scheme(target) in ALIASES:
        target = normalize(target)
    target = urljoin(str(base), target)
    try:
        url = Url.parse(target)
    except BadInput:
        raise TransferError(
            what,
            f"redirect to {target[:200]!r}, not an http(s) URL",
            "check the server's redirect configuration",
        ) from None
    if base.scheme == "https" and url.scheme != "https":
        raise TransferError(
            what,
            f"redirect from https down to {target[:200]!r} refused",
            "configure the server to redirect to https",
        )
    return url


#: ``struct tcp_info`` (linux/tcp.h) up to ``tcpi_rttvar``: eight ``__u8`` (state, ca_state,
#: retransmits, probes, backoff, options, the two wscale nibbles, the app-limited bits), then
#: ``__u32`` rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans, fackets,
#: last_data_sent, last_ack_sent, last_data_recv, last_ack_recv, pmtu, rcv_ssthresh, rtt
#: (offset 68, microseconds: the kernel's smoothed RTT), rttvar.  The layout only grows at its
#: end, so this prefix holds on every kernel since 2.6.
TCP_INFO_PREFIX = struct.Struct("=8B17I")
TCPI_RTT = 8 + 15  # index of tcpi_rtt in the unpacked prefix


def tcp_rtt(sock: socket.socket) -> float | None:
    """The kernel's smoothed round-trip time of a connected TCP socket, in seconds (the
    handshake gives the first sample); None where TCP_INFO is missing."""
    option = getattr(socket, "TCP_INFO", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, option, TCP_INFO_PREFIX.size)
    except OSError:
        return None
    if len(raw) < TCP_INFO_PREFIX.size:
        return None
    rtt_us = TCP_INFO_PREFIX.unpack(raw)[TCPI_RTT]
    return rtt_us / 1e6 if rtt_us > 0 else None


@dataclass(slots=True)
class RemoteInfo:
    size: int
    etag: str | None
    digests: dict[str, bytes]
    is_dir: bool = False
    last_modified: str | None = None


def info_of(headers: http.client.HTTPMessage, what: str, url: Url, block_size: int) -> RemoteInfo:
    """Size, ETag, digests and kind of a file from a ``200`` to a HEAD or a whole GET (its
    size must fit in blocks of *block_size*: :func:`check_file_size`)."""
    digests: dict[str, bytes] = {}
    if headers.get("Digest"):
        try:
            digests = parse_digest(headers["Digest"])
        except ValueError as exc:
            raise TransferError(
                f"Digest from {url}", f"cannot be parsed ({exc})", "check the server"
            ) from None
    size = content_length(headers.get("Content-Length"), what)
    check_file_size(size, block_size, what)
    ctype = headers.get("Content-Type", "")
    return RemoteInfo(
        size,
        headers.get("ETag"),
        digests,
        is_dir=ctype.startswith("text/plain") and headers.get("Accept-Ranges") is None,
        last_modified=headers.get("Last-Modified"),
    )


class Session:
    """Connection factory and request helpers for one server, for one copy's run (its
    request's token, TLS settings, retries and pace; its stream policy's receive buffer)."""

    def __init__(self, url: Url, run: CopyRun) -> None:
        self.url = url
        self.run = run
        self.token = run.request.token
        self._context: ssl.SSLContext | None = None
        if url.scheme == "https":
            self._context = client_context(run.request)
        self.rtt: float | None = None  # of the first connection that answered (TCP_INFO)
        self.peer: str | None = None  # that connection's remote address

    def note_path(self, conn: http.client.HTTPConnection) -> None:
        """Keep the round-trip time and remote address of the first connection that got an
        answer (what ``--streams auto`` decides from)."""
        if self.rtt is not None or conn.sock is None:
            return
        with contextlib.suppress(OSError):
            self.peer = str(conn.sock.getpeername()[0])
            self.rtt = tcp_rtt(conn.sock)

    def note_socket(self, sock: socket.socket) -> None:
        """:meth:`note_path` for a TCP socket whose handshake just ended (before TLS: the
        round trip of the SYN alone, without the TLS handshake's computing)."""
        if self.rtt is not None:
            return
        with contextlib.suppress(OSError):
            self.peer = str(sock.getpeername()[0])
            self.rtt = tcp_rtt(sock)

    def measure_path(self) -> float | None:
        """The round-trip time, measured on a new connection when none answered yet."""
        if self.rtt is None:
            c = self.connect()
            try:
                c.connect()
                self.note_path(c)
            except OSError:
                pass
            finally:
                c.close()
        return self.rtt

    def connect(self) -> http.client.HTTPConnection:
        """A new connection (connected at its first request) whose socket keeps the minimum
        rate and the deadline (:mod:`~dtnkit.transfer.client.pace`), with a set receive
        buffer only where the host lets it beat autotuning (autostreams.BufferLimits)."""
        rcvbuf = self.run.streams.rcvbuf()
        if self._context is not None:
            return PacedHTTPSConnection(
                self.url.host, self.url.port, self.run, self._context, rcvbuf=rcvbuf
            )
        return PacedHTTPConnection(self.url.host, self.url.port, self.run, rcvbuf=rcvbuf)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        out = {"User-Agent": "dtnkit-cp"}
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        if self.run.request.scitag is not None:
            out["SciTag"] = str(self.run.request.scitag)
        out.update(extra or {})
        return out

    def request(
        self,
        method: str,
        url: Url,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        conn: http.client.HTTPConnection | None = None,
        limit: int = MAX_ANSWER,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One small request; raises Retryable on connection trouble, BadAnswer when the
        answer's body is longer than *limit*."""
        own = conn is None
        c = conn or self.connect()
        try:
            c.request(method, url.path, body=body, headers=self.headers(headers))
            r = c.getresponse()
            data = r.read(limit + 1)
            if len(data) > limit:
                raise BadAnswer(
                    f"{method} {url}",
                    f"the answer is longer than {limit} bytes",
                    "check the server",
                )
            self.note_path(c)
            return r.status, r.headers, data
        except (OSError, http.client.HTTPException) as exc:
            c.close()
            fatal = fatal_transport(exc, f"{method} {url}")
            if fatal is not None:
                raise fatal from None
            raise Retryable(f"{method} {url}: {exc.__class__.__name__}: {exc}") from exc
        finally:
            if own:
                c.close()

    def with_retries(
        self, what: str, call: Callable[[], tuple[int, http.client.HTTPMessage, bytes]]
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """A small request (:meth:`request`), tried again after a transport failure or a
        5xx as the run's retry policy says."""

        def once() -> tuple[int, http.client.HTTPMessage, bytes]:
            status, headers, body = call()
            if status >= 500:
                raise Retryable(f"{what}: HTTP {status} {reason(body)}")
            return status, headers, body

        return self.run.request.retry.call(what, once)

    def for_url(self, url: Url) -> Session:
        """A session for *url* reached by a redirect: the token goes only to its own origin
        (the redirect target authorizes the request itself, e.g. with a query)."""
        if same_origin(url, self.url):
            return self
        other = Session(url, self.run)
        other.token = None
        return other

    def resolve(self, url: Url, want: str | None = None) -> tuple[Session, Url, RemoteInfo]:
        """HEAD *url* following redirects (a dCache door sends GETs to a pool, an XRootD
        redirector to a data server): the session and URL to fetch from, and what it is."""
        session, hops = self, 0
        while True:
            try:
                return session, url, session.head(url, want, redirects=True)
            except Redirected as moved:
                hops += 1
                if hops > MAX_REDIRECTS:
                    raise TransferError(
                        f"HEAD {url}",
                        f"more than {MAX_REDIRECTS} redirects",
                        "check the server's redirect configuration",
                    ) from None
                url = follow_redirect(url, moved.location, f"HEAD {url}")
                session = self.for_url(url)

    def head(self, url: Url, want: str | None = None, *, redirects: bool = False) -> RemoteInfo:
        """HEAD *url*; with ``redirects`` a 3xx raises :class:`Redirected` (see resolve)."""
        extra = {"Want-Digest": want_name(want)} if want else {}
        status, headers, body = self.with_retries(
            f"HEAD {url}", lambda: self.request("HEAD", url, extra)
        )
        if redirects and status in REDIRECTS:
            raise Redirected(headers.get("Location"))
        check_status(status, f"HEAD {url}", body)
        return info_of(headers, f"HEAD {url}", url, self.run.request.block_size)


def client_context(request: CopyRequest) -> ssl.SSLContext:
    """The TLS context of a client connection: --ca-file (else the system's store), and the
    grid's CA directory (``request.ca_dir``, $X509_CERT_DIR) when it exists, as gfal2, xrdcp
    and davix trust it; ``request.insecure``: nothing is verified."""
    if request.insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    try:
        ctx = ssl.create_default_context(cafile=request.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise BadInput(
            f"--ca-file {request.ca_file}", f"cannot be loaded ({exc})", "pass a PEM CA bundle"
        ) from None
    if request.ca_dir is not None and Path(request.ca_dir).is_dir():
        try:
            ctx.load_verify_locations(capath=request.ca_dir)
        except (OSError, ssl.SSLError) as exc:
            raise BadInput(
                f"X509_CERT_DIR {request.ca_dir}",
                f"cannot be used ({exc})",
                "point X509_CERT_DIR at a hashed CA directory (openssl rehash DIR)",
            ) from None
    return ctx


def want_name(name: str) -> str:
    """The name of *name* in a ``Want-Digest`` request header (RFC 3230)."""
    return REGISTRY[name].rfc3230


def check_status(status: int, what: str, body: bytes, ok: tuple[int, ...] = (200, 206)) -> None:
    if status in ok:
        return
    why = f"HTTP {status}" + (f" ({reason(body)})" if reason(body) else "")
    if status == 401:
        raise FatalHttp(
            what,
            f"{why}: not authenticated",
            "pass a valid --token-file, or set BEARER_TOKEN_FILE (dtnkit cp "
            "--help: where a token is looked for)",
        )
    if status == 403:
        raise FatalHttp(what, f"{why}: forbidden", "check the token's scope and the path")
    if status == 404:
        raise FatalHttp(what, f"{why}: not found", "check the URL")
    if status in REDIRECTS:
        raise FatalHttp(
            what,
            f"{why}: a redirect",
            "dtnkit cp follows redirects on the HEAD before a download, not on "
            "each request; copy from the URL the server redirects to",
        )
    raise FatalHttp(what, why, "check the request and the server log")


def answered_digest(headers: dict[str, str], name: str) -> bytes | None:
    """The *name* digest in a response's ``Digest`` header, if it has one that parses."""
    try:
        return parse_digest(headers.get("digest", "")).get(name)
    except ValueError:
        return None


def source_digest(session: Session, url: Url, name: str) -> bytes:
    """The source's whole-file *name* digest (a HEAD with ``Want-Digest``, redirects followed)."""
    _session, _url, info = session.resolve(url, want=name)
    if name not in info.digests:
        raise DigestNotOffered(f"source digest of {url}", name, list(info.digests))
    return info.digests[name]


def discard_remote(session: Session, url: Url, what: str, why: str) -> ChecksumMismatch:
    """DELETE a remote file that failed verification (best effort); the error to raise."""
    with contextlib.suppress(DtnkitError, Retryable):
        session.request("DELETE", url)
    return ChecksumMismatch(
        what, f"{why}; the remote copy was deleted", "retry; if it persists, check both storages"
    )


def status_of(
    session: Session, method: str, url: Url, conn: http.client.HTTPConnection | None = None
) -> int | None:
    """Status of a small request (None when the server could not be asked); on *conn* when
    given (a keep-alive connection), else on a new one."""
    try:
        return session.request(method, url, conn=conn)[0]
    except (Retryable, DtnkitError):
        return None


def create_only(overwrite: bool) -> dict[str, str]:
    """The header of a write that may not replace a file (no ``-f``): ``If-None-Match: *``."""
    return {} if overwrite else {"If-None-Match": "*"}


def refuse_existing(
    session: Session, url: Url, overwrite: bool, conn: http.client.HTTPConnection | None = None
) -> None:
    """Without ``-f`` (*overwrite* False): DestinationExists when *url* is there now (a HEAD,
    on *conn* when given), before any byte is sent, for servers that ignore
    ``If-None-Match`` on a PUT; the header still makes the commit atomic on servers that
    honour it."""
    if not overwrite and status_of(session, "HEAD", url, conn) == 200:
        raise DestinationExists(str(url))


def existing_after_412(session: Session, url: Url, status: int, overwrite: bool) -> None:
    """After a 412 to a write sent with ``If-None-Match: *``: DestinationExists when the
    target is there now (else the 412 was about something else, such as a digest)."""
    if status == 412 and not overwrite and status_of(session, "HEAD", url) == 200:
        raise DestinationExists(str(url))


def mkcol(session: Session, url: Url) -> None:
    status, _h, body = session.with_retries(f"MKCOL {url}", lambda: session.request("MKCOL", url))
    if status not in (201, 405):  # 405: exists already
        missing_parent(status, f"MKCOL {url}", body, session.run.request.parents)
        check_status(status, f"MKCOL {url}", body, ok=(201,))


def make_parents(session: Session, url: Url) -> int:
    """``cp -p/--parents``: MKCOL the collections missing above *url*, one level at a time
    (as gfal-copy -p and xrdcp -p): the nearest first, going up while the answer is 409 (its
    own parent is missing, RFC 4918 9.3.1), then down again.  405 is "exists": a collection
    there already, or one another client made meanwhile (a file there is the write's to
    refuse).  Returns how many this made."""

    def ask(parent: Url) -> tuple[int, bytes]:
        status, _h, body = session.with_retries(
            f"MKCOL {parent}", lambda: session.request("MKCOL", parent)
        )
        return status, body

    missing: list[Url] = []
    made = 0
    for parent in url.parents():
        status, body = ask(parent)
        if status == 201:
            made += 1
            break
        if status == 405:
            break
        if status != 409:
            check_status(status, f"MKCOL {parent}", body, ok=(201,))
        missing.append(parent)
    for parent in reversed(missing):
        status, body = ask(parent)
        if status == 201:
            made += 1
        elif status == 409:  # its parent answered 201 or 405 (or is the root): not a collection?
            raise FatalHttp(
                f"MKCOL {parent}",
                f"HTTP 409 ({reason(body)}): the server cannot make it in its parent",
                "check what is at the parent on the server (a file of that name?)",
            )
        elif status != 405:
            check_status(status, f"MKCOL {parent}", body, ok=(201,))
    return made


def missing_parent(status: int, what: str, body: bytes, parents: bool) -> None:
    """A write (PUT, MKCOL, a COPY pull) answered 409: the parent collection of its target
    is missing (RFC 4918 9.7.1, 9.3.1, 9.8.5); FatalHttp naming the fix.  *parents*:
    -p/--parents was given (and made or found every collection above the target)."""
    if status != 409:
        return
    why = (
        f"HTTP 409 ({reason(body)})"
        if reason(body)
        else "HTTP 409: the parent collection does not exist"
    )
    if parents:
        raise FatalHttp(
            what,
            f"{why}; -p/--parents made or found every collection above it",
            "check what is at the parent on the server (a file of that name?)",
        )
    raise FatalHttp(
        what,
        why,
        "rerun with -p/--parents to create the missing collections (MKCOL, one level at a time)",
    )
