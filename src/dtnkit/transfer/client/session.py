"""HTTP plumbing of the client: URLs, redirects, a :class:`Session` per server (connections,
small requests, retries), status checks, and the few requests every flow shares (the
source's digest, MKCOL, DELETE of a copy that failed verification)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, unquote, urljoin, urlsplit

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.transfer import checksum as cks
from dtnkit.transfer.client.errors import (
    ChecksumMismatch,
    FatalHttp,
    Redirected,
    Retryable,
    TransferError,
    reason,
)
from dtnkit.transfer.client.options import Options
from dtnkit.transfer.wire import digests as dg
from dtnkit.transfer.wire import multistatus


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


@dataclass(frozen=True)
class Url:
    scheme: str
    host: str
    port: int
    path: str  # percent-encoded, starts with "/"

    @classmethod
    def parse(cls, text: str) -> Url:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadInput(f"URL {text!r}", "is not http(s)://host[:port]/path",
                           "pass e.g. http://127.0.0.1:8080/data/file")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise BadInput(f"URL {text!r}", "has a bad port", "fix the port") from None
        # the query stays in the request target: ?authz=..., a pool's session id, ...
        query = f"?{parts.query}" if parts.query else ""
        return cls(parts.scheme, parts.hostname, port, (parts.path or "/") + query)

    def with_path(self, path: str) -> Url:
        return Url(self.scheme, self.host, self.port, path)

    def child(self, name: str) -> Url:
        path, sep, query = self.path.partition("?")
        base = path if path.endswith("/") else path + "/"
        return self.with_path(base + quote(name, safe="") + sep + query)

    @property
    def name(self) -> str:
        return unquote(self.path.partition("?")[0].rstrip("/").rsplit("/", 1)[-1])

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"


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
    if target.startswith("davs://"):
        target = "https://" + target[len("davs://"):]
    elif target.startswith("dav://"):
        target = "http://" + target[len("dav://"):]
    target = urljoin(str(base), target)
    try:
        url = Url.parse(target)
    except BadInput:
        raise TransferError(what, f"redirect to {target[:200]!r}, not an http(s) URL",
                            "check the server's redirect configuration") from None
    if base.scheme == "https" and url.scheme != "https":
        raise TransferError(what, f"redirect from https down to {target[:200]!r} refused",
                            "configure the server to redirect to https")
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


def open_socket(host: str, port: int, timeout: float | None, rcvbuf: int) -> socket.socket:
    """A TCP connection whose receive buffer is set to *rcvbuf* before the handshake (the
    window scale is agreed then); as :func:`socket.create_connection` otherwise."""
    error: OSError | None = None
    for family, kind, proto, _name, address in socket.getaddrinfo(host, port, 0,
                                                                  socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.settimeout(timeout)
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"cannot resolve {host}")


class RcvbufConnection(http.client.HTTPConnection):
    """HTTP on a socket with a set receive buffer (see :func:`open_socket`)."""

    def __init__(self, host: str, port: int, *, timeout: float, rcvbuf: int) -> None:
        super().__init__(host, port, timeout=timeout)
        self.rcvbuf = rcvbuf

    def connect(self) -> None:
        self.sock = open_socket(self.host, self.port, self.timeout, self.rcvbuf)


class RcvbufTlsConnection(http.client.HTTPSConnection):
    """HTTPS on a socket with a set receive buffer (see :func:`open_socket`)."""

    def __init__(self, host: str, port: int, *, timeout: float, context: ssl.SSLContext,
                 rcvbuf: int) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.tls, self.rcvbuf = context, rcvbuf

    def connect(self) -> None:
        sock = open_socket(self.host, self.port, self.timeout, self.rcvbuf)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


@dataclass
class RemoteInfo:
    size: int
    etag: str | None
    digests: dict[str, bytes]
    is_dir: bool = False
    last_modified: str | None = None


class Session:
    """Connection factory and request helpers for one server."""

    def __init__(self, url: Url, options: Options) -> None:
        self.url = url
        self.options = options
        self.token = options.token
        self._context: ssl.SSLContext | None = None
        if url.scheme == "https":
            if options.insecure:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            else:
                try:
                    ctx = ssl.create_default_context(cafile=options.ca_file)
                except (OSError, ssl.SSLError) as exc:
                    raise BadInput(f"--ca-file {options.ca_file}", f"cannot be loaded ({exc})",
                                   "pass a PEM CA bundle") from None
            self._context = ctx
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
        timeout = self.options.stall_timeout
        # SO_RCVBUF only where the host lets it beat autotuning (autostreams.Limits)
        rcvbuf = self.options.auto.rcvbuf() if self.options.auto is not None else None
        if rcvbuf is not None:
            if self._context is not None:
                return RcvbufTlsConnection(self.url.host, self.url.port, timeout=timeout,
                                           context=self._context, rcvbuf=rcvbuf)
            return RcvbufConnection(self.url.host, self.url.port, timeout=timeout,
                                    rcvbuf=rcvbuf)
        if self._context is not None:
            return http.client.HTTPSConnection(self.url.host, self.url.port, timeout=timeout,
                                               context=self._context)
        return http.client.HTTPConnection(self.url.host, self.url.port, timeout=timeout)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        out = {"User-Agent": "dtnkit-cp"}
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        out.update(extra or {})
        return out

    def request(self, method: str, url: Url, headers: dict[str, str] | None = None,
                body: bytes | None = None,
                conn: http.client.HTTPConnection | None = None
                ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One small request; raises Retryable on connection trouble."""
        own = conn is None
        c = conn or self.connect()
        try:
            c.request(method, url.path, body=body, headers=self.headers(headers))
            r = c.getresponse()
            data = r.read()
            self.note_path(c)
            return r.status, r.headers, data
        except (OSError, http.client.HTTPException) as exc:
            c.close()
            raise Retryable(f"{method} {url}: {exc.__class__.__name__}: {exc}") from exc
        finally:
            if own:
                c.close()

    def with_retries(self, what: str, call: Callable[[], tuple[int, http.client.HTTPMessage,
                                                               bytes]]
                     ) -> tuple[int, http.client.HTTPMessage, bytes]:
        attempt = 0
        while True:
            try:
                status, headers, body = call()
                if status >= 500:
                    raise Retryable(f"{what}: HTTP {status} {reason(body)}")
                return status, headers, body
            except Retryable as exc:
                if attempt >= self.options.retries:
                    raise TransferError(what, f"failed after {attempt + 1} attempts ({exc})",
                                        "check that the server is up and reachable") from None
                time.sleep(self.options.backoff * 2**attempt)
                attempt += 1

    def for_url(self, url: Url) -> Session:
        """A session for *url* reached by a redirect: the token goes only to its own origin
        (the redirect target authorizes the request itself, e.g. with a query)."""
        if same_origin(url, self.url):
            return self
        other = Session(url, self.options)
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
                    raise TransferError(f"HEAD {url}", f"more than {MAX_REDIRECTS} redirects",
                                        "check the server's redirect configuration") from None
                url = follow_redirect(url, moved.location, f"HEAD {url}")
                session = self.for_url(url)

    def head(self, url: Url, want: str | None = None, *, redirects: bool = False) -> RemoteInfo:
        """HEAD *url*; with ``redirects`` a 3xx raises :class:`Redirected` (see resolve)."""
        extra = {"Want-Digest": want_name(want)} if want else {}
        status, headers, body = self.with_retries(
            f"HEAD {url}", lambda: self.request("HEAD", url, extra))
        if redirects and status in REDIRECTS:
            raise Redirected(headers.get("Location"))
        check_status(status, f"HEAD {url}", body)
        digests: dict[str, bytes] = {}
        if headers.get("Digest"):
            try:
                digests = dg.parse_digest(headers["Digest"])
            except ValueError as exc:
                raise TransferError(f"Digest from {url}", f"cannot be parsed ({exc})",
                                    "check the server") from None
        ctype = headers.get("Content-Type", "")
        return RemoteInfo(int(headers.get("Content-Length", "0")), headers.get("ETag"), digests,
                          is_dir=ctype.startswith("text/plain")
                          and headers.get("Accept-Ranges") is None,
                          last_modified=headers.get("Last-Modified"))

    def propfind(self, url: Url) -> list[tuple[Url, bool, int]]:
        """Children of a collection (Depth: 1): ``(url, is_dir, size)`` each."""
        status, _headers, body = self.with_retries(
            f"PROPFIND {url}", lambda: self.request("PROPFIND", url, {"Depth": "1"}))
        check_status(status, f"PROPFIND {url}", body, ok=(207,))
        return [(url.with_path(m.path), m.is_dir, m.size)
                for m in multistatus.parse(body, url.path)]


def want_name(name: str) -> str:
    """The name of *name* in a ``Want-Digest`` request header (RFC 3230)."""
    return cks.REGISTRY[name].rfc3230


def check_status(status: int, what: str, body: bytes, ok: tuple[int, ...] = (200, 206)) -> None:
    if status in ok:
        return
    why = f"HTTP {status}" + (f" ({reason(body)})" if reason(body) else "")
    if status == 401:
        raise FatalHttp(what, f"{why}: not authenticated",
                        "pass a valid --token or set DTNKIT_TOKEN / BEARER_TOKEN")
    if status == 403:
        raise FatalHttp(what, f"{why}: forbidden", "check the token's scope and the path")
    if status == 404:
        raise FatalHttp(what, f"{why}: not found", "check the URL")
    if status in REDIRECTS:
        raise FatalHttp(what, f"{why}: a redirect",
                        "dtnkit cp follows redirects on the HEAD before a download, not on "
                        "each request; copy from the URL the server redirects to")
    raise FatalHttp(what, why, "check the request and the server log")


def answered_digest(headers: dict[str, str], name: str) -> bytes | None:
    """The *name* digest in a response's ``Digest`` header, if it has one that parses."""
    try:
        return dg.parse_digest(headers.get("digest", "")).get(name)
    except ValueError:
        return None


def source_digest(session: Session, url: Url, name: str) -> bytes:
    """The source's whole-file *name* digest (a HEAD with ``Want-Digest``, redirects followed)."""
    _session, _url, info = session.resolve(url, want=name)
    if name not in info.digests:
        offered = ", ".join(info.digests) or "none"
        raise TransferError(f"source digest of {url}", f"the server did not offer {name} "
                            f"(offered: {offered})", "pick another --checksum or --verify none")
    return info.digests[name]


def discard_remote(session: Session, url: Url, what: str, why: str) -> ChecksumMismatch:
    """DELETE a remote file that failed verification (best effort); the error to raise."""
    with contextlib.suppress(DtnkitError, Retryable):
        session.request("DELETE", url)
    return ChecksumMismatch(what, f"{why}; the remote copy was deleted",
                            "retry; if it persists, check both storages")


def status_of(session: Session, method: str, url: Url) -> int | None:
    """Status of a small request (None when the server could not be asked)."""
    try:
        return session.request(method, url)[0]
    except (Retryable, DtnkitError):
        return None


def mkcol(session: Session, url: Url) -> None:
    status, _h, body = session.with_retries(f"MKCOL {url}",
                                            lambda: session.request("MKCOL", url))
    if status not in (201, 405):  # 405: exists already
        check_status(status, f"MKCOL {url}", body, ok=(201,))
