"""The minimum rate and the overall deadline of every client connection.

A server that trickles (one byte a second) never trips a stall timeout, which only bounds
each wait for bytes.  Every connection the client opens (:meth:`Session.connect
<dtnkit.transfer.client.session.Session.connect>`: downloads, uploads, relays, listings,
HEADs, and the server's own TPC pulls, which use this client) wraps its socket in a
:class:`PacedSocket` that counts the bytes moved:

* **minimum rate** (curl's ``--speed-limit`` / ``--speed-time``): when fewer than
  ``low_speed_limit`` bytes a second moved over ``low_speed_time`` seconds, the connection
  fails with :class:`TooSlow` (a stall: the block is retried on a new connection, then the
  copy fails, keeping what it has for a rerun).  The window opens at the first byte moved
  in a direction (a new request, its answer), so the time a server thinks before answering
  (a checksum of a large file) is governed by the stall timeout alone.
* **deadline**: no socket operation starts or waits past ``CopyRequest.deadline`` seconds
  after the copy began (:attr:`CopyRun.started`); :class:`DeadlinePassed` is not retried.
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from dtnkit.transfer import sending
from dtnkit.transfer.client import flowlabel
from dtnkit.transfer.client.errors import DeadlinePassed, TooSlow
from dtnkit.transfer.client.request import CopyRun

_monotonic = time.monotonic


def deadline_left(run: CopyRun, now: float | None = None) -> float | None:
    """Seconds left before the deadline (None without one); DeadlinePassed when none are."""
    at = run.deadline_at()
    if at is None:
        return None
    left = at - (time.monotonic() if now is None else now)
    if left <= 0:
        raise DeadlinePassed(f"the --deadline of {run.request.deadline:g} s passed")
    return left


def socket_timeout(run: CopyRun, *, strict: bool = True) -> float:
    """The timeout of a socket operation: the stall timeout, cut short by the deadline
    (DeadlinePassed when it has passed, unless not *strict*: then a tiny timeout)."""
    try:
        left = deadline_left(run)
    except DeadlinePassed:
        if strict:
            raise
        left = 0.001
    stall = run.request.stall_timeout
    return stall if left is None else min(stall, left)


class PacedSocket:
    """A connected socket (plain or TLS) whose sends and receives are counted against the
    minimum rate and the deadline; everything else is the socket's own."""

    def __init__(
        self, sock: socket.socket, run: CopyRun, on_close: Callable[[], None] | None = None
    ) -> None:
        self._sock = sock
        self._run = run
        self._on_close = on_close  # told once, before the socket closes
        self._deadline = run.request.deadline is not None
        self._limit = run.request.low_speed_limit
        self._time = run.request.low_speed_time
        self._sending: bool | None = None
        self._start: float | None = None  # when the window opened (first byte of it)
        self._moved = 0
        self.received = 0  # bytes received so far, as each receive returns them

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def _before(self, sending: bool) -> None:
        if sending is not self._sending:  # a new request or its answer: a new window
            self._sending, self._start, self._moved = sending, None, 0
        if self._deadline:
            self._sock.settimeout(socket_timeout(self._run))

    def _after(self, n: int) -> None:
        now = time.monotonic()
        if self._start is None:
            self._start = now
        self._moved += n
        if now - self._start >= self._time:
            self._window_ends(now)

    def _window_ends(self, now: float) -> None:
        """``low_speed_time`` has passed since the window opened: too slow, or a new one."""
        limit = self._limit
        elapsed = now - (self._start or now)
        if limit and self._moved < limit * elapsed:
            raise TooSlow(
                f"{self._moved} bytes in {elapsed:.1f} s, below --low-speed-limit "
                f"{limit} B/s over --low-speed-time "
                f"{self._time:g} s"
            )
        self._start, self._moved = now, 0

    def _timed_out(self, exc: OSError) -> OSError:
        try:
            deadline_left(self._run)
        except DeadlinePassed as passed:
            return passed
        return exc

    def _paced(self, sending: bool, call: Callable[[], Any]) -> Any:
        """One socket call, timed out by the deadline and counted against the minimum rate."""
        self._before(sending)
        try:
            got = call()
        except TimeoutError as exc:
            raise self._timed_out(exc) from None
        self._after(len(got) if isinstance(got, bytes) else int(got))
        return got

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        # a body arrives here one TLS record (16 KiB) a call: what _paced does, inline (no
        # closure, no second call), as it costs CPU beside the transfer
        if self._sending is not False or self._deadline:
            self._before(False)
        try:
            n: int = self._sock.recv_into(buffer, nbytes, flags)
        except TimeoutError as exc:
            raise self._timed_out(exc) from None
        self.received += n
        now = _monotonic()
        if self._start is None:
            self._start = now
        self._moved += n
        if now - self._start >= self._time:
            self._window_ends(now)
        return n

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data: bytes = self._paced(False, lambda: self._sock.recv(bufsize, flags))
        self.received += len(data)
        return data

    def send(self, data: Any, flags: int = 0) -> int:
        n: int = self._paced(True, lambda: self._sock.send(data, flags))
        return n

    def sendall(self, data: Any, flags: int = 0) -> None:
        """All of *data*, its send buffer kept full (:func:`~dtnkit.transfer.sending.send_all`),
        each piece counted and the deadline checked after it; each wait for room lasts the
        stall timeout at most, cut by the deadline.  No *flags* (a TLS socket takes none)."""
        if flags:
            raise ValueError("sendall() flags are not taken here")
        self._before(True)
        try:
            sending.send_all(
                self._sock, data, wait=lambda: socket_timeout(self._run), sent=self._sent
            )
        except TimeoutError as exc:
            raise self._timed_out(exc) from None

    def _sent(self, n: int) -> None:
        self._after(n)
        if self._deadline:
            deadline_left(self._run)  # DeadlinePassed once it has

    def makefile(self, mode: str = "r", buffering: int | None = None, **_kw: Any) -> Any:
        """A binary file over this socket (what http.client reads answers from), so that
        its reads are counted too."""
        raw = socket.SocketIO(self, "rb" if "r" in mode else "wb")  # type: ignore[arg-type]
        self._sock._io_refs += 1  # type: ignore[attr-defined]  # as socket.makefile does
        if buffering == 0:
            return raw
        size = io.DEFAULT_BUFFER_SIZE if buffering in (None, -1) else buffering
        return io.BufferedReader(raw, size) if "r" in mode else io.BufferedWriter(raw, size)

    def close(self) -> None:
        told, self._on_close = self._on_close, None
        if told is not None:
            told()
        self._sock.close()


def open_socket(
    host: str,
    port: int,
    timeout: float | None,
    rcvbuf: int | None = None,
    scitag: int | None = None,
) -> socket.socket:
    """A TCP connection to *host* (a name or an address), as
    :func:`socket.create_connection`, with TCP_NODELAY; its receive buffer set to *rcvbuf*
    before the handshake when given (the window scale is agreed then); over IPv6 with the
    SciTags flow label of *scitag* when given (:mod:`~dtnkit.transfer.client.flowlabel`)."""
    error: OSError | None = None
    for family, kind, proto, _name, address in socket.getaddrinfo(
        lookup_name(host), port, 0, socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        try:
            if rcvbuf is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.settimeout(timeout)
            if scitag is not None and family == socket.AF_INET6:
                sock.connect(flowlabel.prepare(sock, address, scitag))
            else:
                sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"cannot resolve {host}")


def lookup_name(host: str) -> str | bytes:
    """*host* as the resolver and TLS take it: an ASCII name (or address) as its bytes, which
    they use as they are; another name as text, which they encode (IDNA, a codec loaded
    then)."""
    return host.encode("ascii") if host.isascii() else host


class PacedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection on a :class:`PacedSocket`: to *address* when given (the one a
    server's third-party copy checked, whatever the name resolves to now), else to the
    host's name; its receive buffer set to *rcvbuf* when given (:func:`open_socket`)."""

    def __init__(
        self,
        host: str,
        port: int,
        run: CopyRun,
        *,
        rcvbuf: int | None = None,
        address: str | None = None,
        on_tcp: Callable[[socket.socket], None] | None = None,
    ) -> None:
        super().__init__(host, port, timeout=socket_timeout(run, strict=False))
        self.run = run
        self.rcvbuf = rcvbuf
        self.address = address
        self.on_tcp = on_tcp  # called with the TCP socket once its handshake is over
        self.timeline_index: int | None = None  # its number in the copy's timeline

    def connect(self) -> None:
        self.timeout = socket_timeout(self.run)
        timeline = self.run.timeline
        self.timeline_index = timeline.connection() if timeline is not None else None
        sock = open_socket(
            self.address or self.host, self.port, self.timeout, self.rcvbuf, self.run.request.scitag
        )
        try:
            self.run.mark("tcp", connection=self.timeline_index)
            if self.on_tcp is not None:
                self.on_tcp(sock)
        except BaseException:
            sock.close()
            raise
        last = None
        if timeline is not None and self.timeline_index is not None:
            timeline.sample(self.timeline_index, sock)
            last = functools.partial(timeline.last, self.timeline_index)
        self.sock = PacedSocket(sock, self.run, last)


class PacedHTTPSConnection(http.client.HTTPSConnection):
    """The same over TLS; the certificate is checked for the host's name."""

    def __init__(
        self,
        host: str,
        port: int,
        run: CopyRun,
        context: ssl.SSLContext,
        *,
        rcvbuf: int | None = None,
        address: str | None = None,
        on_tcp: Callable[[socket.socket], None] | None = None,
    ) -> None:
        super().__init__(host, port, timeout=socket_timeout(run, strict=False), context=context)
        self.run = run
        self.tls = context
        self.rcvbuf = rcvbuf
        self.address = address
        # called with the TCP socket once its handshake is over, before the TLS handshake
        # (the round-trip time is known then: ``--streams auto`` decides one round trip
        # earlier, and the other streams' handshakes overlap this one's TLS)
        self.on_tcp = on_tcp
        self.timeline_index: int | None = None  # its number in the copy's timeline

    def connect(self) -> None:
        self.timeout = socket_timeout(self.run)
        timeline = self.run.timeline
        self.timeline_index = timeline.connection() if timeline is not None else None
        sock = open_socket(
            self.address or self.host, self.port, self.timeout, self.rcvbuf, self.run.request.scitag
        )
        try:
            self.run.mark("tcp", connection=self.timeline_index)
            if self.on_tcp is not None:
                self.on_tcp(sock)
            tls_sock = self.tls.wrap_socket(sock, server_hostname=lookup_name(self.host))
        except BaseException:
            sock.close()
            raise
        last = None
        if timeline is not None and self.timeline_index is not None:
            timeline.mark("tls", connection=self.timeline_index)
            timeline.sample(self.timeline_index, tls_sock)
            last = functools.partial(timeline.last, self.timeline_index)
        self.sock = PacedSocket(tls_sock, self.run, last)
