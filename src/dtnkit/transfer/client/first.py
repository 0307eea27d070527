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

The streams are decided as soon as the first connection's TCP handshake is over (it gave
the kernel its first RTT sample), before its TLS handshake, and the other starting streams'
connections are opened right then, each in a thread of its own (:class:`Spare`): their TCP
and TLS handshakes overlap the first one's TLS and ``HEAD`` instead of following them, so
they are ready (or nearly) when the size is known and the spans are cut.  A plan that starts
one stream alone while others may join (``--streams auto`` without the path's rate) opens one
too, for the first stream to join: it joins without its TCP and TLS handshakes, and only
starts its slow start (an unused one is closed when the file is done).

The streams are the run's :class:`~dtnkit.transfer.client.policy.StreamPolicy`'s
(:class:`~dtnkit.transfer.client.policy.StreamPlan`, kept with the opened file for the
transfer).

Redirects are followed on the request itself (a dCache door or an XRootD redirector),
through :meth:`~dtnkit.transfer.client.session.Session.for_url` (the token only to its own
origin; a server's TPC session checks each hop against its allow-list).
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import threading
from dataclasses import dataclass, field

from dtnkit.transfer.client.errors import BadAnswer, Retryable, TransferError, reason
from dtnkit.transfer.client.pace import PacedHTTPConnection, PacedHTTPSConnection
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.request import CopyRun
from dtnkit.transfer.client.session import (
    MAX_REDIRECTS,
    REDIRECTS,
    RemoteInfo,
    Session,
    Url,
    check_status,
    follow_redirect,
    info_of,
    want_name,
)


class Spare:
    """A connection to the first request's server being opened in a thread of its own (TCP
    and TLS handshakes), for a stream that starts once the spans are cut.  A handshake that
    fails leaves the connection closed: the stream connects again when it asks, with its
    retries (:class:`~dtnkit.transfer.client.engine.StreamEngine`)."""

    def __init__(self, session: Session) -> None:
        self.conn = session.connect()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._dropped = False
        threading.Thread(target=self._open, name="dtnkit-preconnect", daemon=True).start()

    def _open(self) -> None:
        try:
            self.conn.connect()
        except (OSError, http.client.HTTPException):
            self.conn.close()
        finally:
            with self._lock:
                self._done.set()
                if self._dropped:
                    self.conn.close()

    def take(self) -> http.client.HTTPConnection:
        """The connection, once its handshakes are over (open, or closed after a failure)."""
        self._done.wait()
        return self.conn

    def close(self) -> None:
        """Drop it, now or as soon as its handshakes end; safe to call twice."""
        with self._lock:
            self._dropped = True
            if self._done.is_set():
                with contextlib.suppress(OSError):
                    self.conn.close()


@dataclass(slots=True)
class Opened:
    """A source file opened by its first request: where it is (after redirects), what it is,
    the streams of its transfer, the keep-alive connection that asked (the first stream's),
    and for a one-stream ``GET`` the ``200`` whose body (the whole file, unread) is the first
    stream's first run."""

    session: Session
    url: Url
    info: RemoteInfo
    plan: StreamPlan
    conn: http.client.HTTPConnection
    response: http.client.HTTPResponse | None
    #: the other streams' connections, opened while the first request was asked (taken by
    #: the streams that start with the first one; those left are closed with it)
    spares: list[Spare] = field(default_factory=list)

    def close(self) -> None:
        """Drop the connection (an unread body with it) and the spares left; safe to call
        twice."""
        with contextlib.suppress(OSError):
            self.conn.close()
        for spare in self.spares:
            spare.close()


def whole(headers: http.client.HTTPMessage) -> bool:
    """A ``206`` to a request without a Range that still carries the whole file (some
    servers answer so): ``Content-Range: bytes 0-(n-1)/n`` and n bytes."""
    m = re.fullmatch(r"bytes 0-(\d{1,19})/(\d{1,19})", headers.get("Content-Range", "").strip())
    return (
        m is not None
        and int(m.group(1)) + 1 == int(m.group(2))
        and headers.get("Content-Length", "").strip() == m.group(2)
    )


def ready(plan: StreamPlan) -> int:
    """Connections opened beside the first request: one for each other starting stream,
    and for a stream that starts alone while others may join (``--streams auto`` without
    the path's rate) one for the first to join, so that it joins without its handshakes."""
    if not plan.alone:
        return plan.start - 1
    return 1 if plan.grow and plan.most > 1 else 0


class _Asking:
    """The first request's decisions, made once: the streams (on the first connection),
    and with *spares* (a list to fill, once) the other starting streams' connections
    beginning their handshakes, beside the first one's TLS and first request."""

    def __init__(self, session: Session, run: CopyRun, spares: list[Spare] | None) -> None:
        self.session, self.run, self.spares = session, run, spares
        self.plan: StreamPlan | None = None

    def decide(self) -> StreamPlan:
        if self.plan is None:
            self.plan = self.run.streams.plan(self.session)
            self.run.mark("streams decided", streams=self.plan.most, start=self.plan.start)
            if self.spares is not None and not self.spares:
                self.spares.extend(Spare(self.session) for _ in range(ready(self.plan)))
        return self.plan

    def on_tcp(self, sock: socket.socket) -> None:
        """:meth:`decide` once the first connection's TCP handshake is over, before TLS: a
        round trip earlier, on the RTT of the SYN alone."""
        self.session.note_socket(sock)
        self.decide()

    def alone(self) -> bool:
        """Whether the first request is the ``GET`` of the whole file (before the decision:
        whether the policy has one stream so far)."""
        if self.plan is not None:
            return self.plan.alone
        return (self.run.streams.fixed_streams or 1) == 1


def open_source(
    session: Session, url: Url, run: CopyRun, want: str | None, spans: bool = True
) -> Opened:
    """Open *url* for a download (see the module's docstring); *want* is the checksum whose
    source digest the copy needs (asked with ``Want-Digest`` on the GET), or None.  The
    streams are decided (the run's policy) before the request is chosen.  *spans*: several
    streams will each receive a span (not a ``GET`` per block, as an ordered digest needs),
    so the other streams' connections are opened beside the ``HEAD`` (:class:`Spare`)."""
    hops = 0
    while True:
        spares: list[Spare] = []
        asking = _Asking(session, run, spares if spans else None)
        conn = session.connect()
        if isinstance(conn, (PacedHTTPConnection, PacedHTTPSConnection)):
            conn.on_tcp = asking.on_tcp
        try:
            opened = _ask(session, url, run, want, conn, asking)
        except BaseException:
            conn.close()
            for spare in spares:
                spare.close()
            raise
        if isinstance(conn, (PacedHTTPConnection, PacedHTTPSConnection)):
            conn.on_tcp = None  # decided: a reconnection later has nothing to do
        if isinstance(opened, Opened):
            return opened
        conn.close()
        for spare in spares:
            spare.close()
        hops += 1
        method = "GET" if asking.alone() else "HEAD"
        if hops > MAX_REDIRECTS:
            raise TransferError(
                f"{method} {url}",
                f"more than {MAX_REDIRECTS} redirects",
                "check the server's redirect configuration",
            )
        url = follow_redirect(url, opened, f"{method} {url}")
        session = session.for_url(url)


def _ask(
    session: Session,
    url: Url,
    run: CopyRun,
    want: str | None,
    conn: http.client.HTTPConnection,
    asking: _Asking,
) -> Opened | str:
    """The first request on *conn*, with the run's retries: the opened file, or the Location
    of a redirect ("" when it has none)."""

    def what() -> str:
        return f"{'GET' if asking.alone() else 'HEAD'} {url}"

    def once() -> Opened | str:
        nonlocal want
        while True:
            if conn.sock is None:
                conn.connect()
            session.note_path(conn)
            plan = asking.decide()  # when not done at its TCP handshake
            single = plan.alone
            extra = {"Want-Digest": want_name(want)} if want and single else {}
            method = "GET" if single else "HEAD"
            conn.request(method, url.path, headers=session.headers(extra))
            run.mark(f"{method} sent", connection=getattr(conn, "timeline_index", None))
            r = conn.getresponse()
            run.mark(f"{method} answered", connection=getattr(conn, "timeline_index", None))
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
                    raise Retryable(f"{what()}: HTTP {r.status} {reason(body)}")
                if r.status == 206:
                    raise BadAnswer(
                        what(),
                        f"Content-Range {r.getheader('Content-Range')!r} "
                        "is not the whole file, which was asked for",
                        "check the server",
                    )
                if r.status in REDIRECTS:
                    return r.getheader("Location") or ""
                check_status(r.status, what(), body, ok=(200,))
            info = info_of(r.headers, what(), url, run.request.block_size)
            if not single:
                r.read()
            return Opened(
                session, url, info, plan, conn, r if single else None, list(asking.spares or [])
            )

    return run.request.retry.call(what, once, cleanup=conn.close)
