"""The first request of a download: what the file is, learnt from the request that starts
moving it.

A HEAD before the GET costs a round trip, and a HEAD on its own connection costs the TCP and
TLS handshakes as well (three round trips on TLS 1.3 before the first byte, where curl needs
one).  So a download opens one connection, decides its streams on it (``--streams auto``: the
handshake gave the kernel its first RTT sample), and then:

- one stream: ``GET`` of the whole file with ``Want-Digest`` when the source's digest is
  needed.  The ``200`` gives the size (``Content-Length``), the ETag and often the digest
  (XRootD 5.5.3 answers ``Digest`` on a GET; ``dtnkit serve`` does when it has the file's
  digest cached), and its body is the stream's first run of blocks: no HEAD, no second
  connection, and a digest request only when the answer carried none (asked beside the
  transfer, :mod:`~dtnkit.transfer.client.download`);
- several streams: a ``HEAD`` on that same connection (the size is needed to cut the file
  into spans before any range is asked: XRootD 5.5.3 answers a range past the end or an
  open-ended ``bytes=0-`` with a wrong ``Content-Length``), which then carries the first
  stream's ``GET``.

Redirects are followed on the request itself (a dCache door or an XRootD redirector),
through :meth:`~dtnkit.transfer.client.session.Session.for_url` (the token only to its own
origin; a server's TPC session checks each hop against its allow-list).
"""

from __future__ import annotations

import contextlib
import http.client
import re
import time
from dataclasses import dataclass

from dtnkit.transfer.client.errors import BadAnswer, Retryable, TransferError, reason
from dtnkit.transfer.client.options import Options
from dtnkit.transfer.client.session import (
    MAX_REDIRECTS,
    REDIRECTS,
    RemoteInfo,
    Session,
    Url,
    check_status,
    fatal_transport,
    follow_redirect,
    info_of,
    want_name,
)
from dtnkit.transfer.client.streams import settle_streams


@dataclass
class Opened:
    """A source file opened by its first request: where it is (after redirects), what it is,
    the keep-alive connection that asked (the first stream's), and for a one-stream ``GET``
    the ``200`` whose body (the whole file, unread) is the first stream's first run."""

    session: Session
    url: Url
    info: RemoteInfo
    conn: http.client.HTTPConnection
    response: http.client.HTTPResponse | None

    def close(self) -> None:
        """Drop the connection (an unread body with it); safe to call twice."""
        with contextlib.suppress(OSError):
            self.conn.close()


def whole(headers: http.client.HTTPMessage) -> bool:
    """A ``206`` to a request without a Range that still carries the whole file (some
    servers answer so): ``Content-Range: bytes 0-(n-1)/n`` and n bytes."""
    m = re.fullmatch(r"bytes 0-(\d{1,19})/(\d{1,19})", headers.get("Content-Range", "").strip())
    return (m is not None and int(m.group(1)) + 1 == int(m.group(2))
            and headers.get("Content-Length", "").strip() == m.group(2))


def starts_alone(options: Options) -> bool:
    """Whether the download starts with one stream: ``--streams 1``, or ``--streams auto``
    starting one and adding the others only when it is bound by its window
    (:attr:`~dtnkit.transfer.client.autostreams.Decision.grow`): then its first request is
    the ``GET`` of the whole file, and the others take parts of it from its end."""
    decision = options.auto.decision if options.auto is not None else None
    return options.streams == 1 or (decision is not None and decision.grow)


def open_source(session: Session, url: Url, options: Options, want: str | None) -> Opened:
    """Open *url* for a download (see the module's docstring); *want* is the checksum whose
    source digest the copy needs (asked with ``Want-Digest`` on the GET), or None.  The
    streams are settled (``options.streams``) before the request is chosen."""
    hops = 0
    while True:
        conn = session.connect()
        try:
            opened = _ask(session, url, options, want, conn)
        except BaseException:
            conn.close()
            raise
        if isinstance(opened, Opened):
            return opened
        conn.close()
        hops += 1
        method = "GET" if starts_alone(options) else "HEAD"
        if hops > MAX_REDIRECTS:
            raise TransferError(f"{method} {url}", f"more than {MAX_REDIRECTS} redirects",
                                "check the server's redirect configuration")
        url = follow_redirect(url, opened, f"{method} {url}")
        session = session.for_url(url)


def _ask(session: Session, url: Url, options: Options, want: str | None,
         conn: http.client.HTTPConnection) -> Opened | str:
    """The first request on *conn*, with the session's retries: the opened file, or the
    Location of a redirect ("" when it has none)."""
    attempt = 0
    while True:
        what = f"{'GET' if starts_alone(options) else 'HEAD'} {url}"
        try:
            if conn.sock is None:
                conn.connect()
            session.note_path(conn)
            settle_streams(options, session)  # --streams auto: on this handshake's RTT
            single = starts_alone(options)
            what = f"{'GET' if single else 'HEAD'} {url}"
            extra = {"Want-Digest": want_name(want)} if want and single else {}
            conn.request("GET" if single else "HEAD", url.path,
                         headers=session.headers(extra))
            r = conn.getresponse()
            if r.status != 200 and not (r.status == 206 and whole(r.headers)):
                body = r.read(64 * 1024)
                if r.status >= 500 and extra:
                    # XRootD 5.5.3 answers 500 to a GET with Want-Digest when it cannot
                    # compute that checksum (not configured; no such file): ask again
                    # without; the digest request beside the transfer says what is wrong
                    want = None
                    if not r.isclosed():
                        conn.close()  # the rest of a long error body: start afresh
                    continue
                if r.status >= 500:
                    raise Retryable(f"{what}: HTTP {r.status} {reason(body)}")
                if r.status == 206:
                    raise BadAnswer(what, f"Content-Range {r.getheader('Content-Range')!r} is "
                                    "not the whole file, which was asked for", "check the server")
                if r.status in REDIRECTS:
                    return r.getheader("Location") or ""
                check_status(r.status, what, body, ok=(200,))
            info = info_of(r.headers, what, url, options)
            if not single:
                r.read()
            return Opened(session, url, info, conn, r if single else None)
        except (Retryable, OSError, http.client.HTTPException) as exc:
            conn.close()
            fatal = fatal_transport(exc, what)
            if fatal is not None:
                raise fatal from None
            if attempt >= options.retries:
                raise TransferError(what, f"failed after {attempt + 1} attempts ({exc})",
                                    "check that the server is up and reachable") from None
            time.sleep(options.backoff * 2**attempt)
            attempt += 1
