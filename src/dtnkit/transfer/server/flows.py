"""The data flows of a running server: SciTags marking (the tag of each request, fireflies)
and what the mover's metrics count (active transfers and streams, bytes, rates).

A *stream* is one request that moves a body (GET, PUT, a COPY's control connection); a
*transfer* is the set of streams of one client on one path (the parallel ranges of one file).
Bytes are the kernel's own counts (``TCP_INFO`` ``tcpi_bytes_acked`` and
``tcpi_bytes_received`` of the connection, from the request's start), so a scrape sees a
``sendfile`` in progress and the data path is never touched.

Fireflies (:mod:`dtnkit.transfer.wire.scitags`): a request with a tag (its ``SciTag``
header, else the server's ``--scitag``) sends ``start`` when its first body byte moves and
``end`` with the byte counts when it is over, to each ``--firefly-dest`` (``origin[:PORT]``
is the flow's peer, as XRootD's ``xrootd.pmark ffdest origin``).  Sending never blocks (a
non-blocking UDP socket); a send that fails is counted, not raised.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import queue
import socket
import struct
import termios
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dtnkit.errors import BadInput
from dtnkit.host.parsers import is_uint
from dtnkit.transfer.wire import scitags

#: ``struct tcp_info`` (linux/tcp.h) up to ``tcpi_bytes_received``: eight ``__u8``, 24
#: ``__u32`` (rto ... total_retrans), then ``__u64`` pacing_rate, max_pacing_rate,
#: bytes_acked, bytes_received (kernel 4.1+).
TCP_INFO = struct.Struct("=8B24I4Q")
ACKED, RECEIVED = 8 + 24 + 2, 8 + 24 + 3
#: ... and on to ``tcpi_bytes_retrans`` (kernel 4.19+): ``__u32`` segs_out, segs_in,
#: notsent_bytes, min_rtt, data_segs_in, data_segs_out, ``__u64`` delivery_rate, busy_time,
#: rwnd_limited, sndbuf_limited, ``__u32`` delivered, delivered_ce, ``__u64`` bytes_sent,
#: bytes_retrans.
TCP_INFO_SENT = struct.Struct("=8B24I4Q6IQ3Q2I2Q")
NOTSENT, BYTES_SENT, BYTES_RETRANS = 8 + 24 + 4 + 2, 8 + 24 + 4 + 6 + 4 + 2, 8 + 24 + 4 + 6 + 4 + 3

#: Methods whose requests are data streams.
STREAM_METHODS = frozenset({"GET", "PUT", "COPY"})


def tcp_bytes(sock: socket.socket) -> tuple[int, int]:
    """(bytes written, bytes received) of a TCP socket, as the kernel counts them; (0, 0)
    where unknown.  Written is what the application handed to the socket: sent once
    (``bytes_sent - bytes_retrans``) or still queued (``notsent_bytes``); on kernels before
    4.19, what the peer acknowledged (``bytes_acked``)."""
    option = getattr(socket, "TCP_INFO", None)
    if option is None:
        return 0, 0
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, option, TCP_INFO_SENT.size)
    except (OSError, ValueError):
        return 0, 0
    if len(raw) >= TCP_INFO_SENT.size:
        f = TCP_INFO_SENT.unpack(raw)
        written = int(f[BYTES_SENT]) - int(f[BYTES_RETRANS]) + int(f[NOTSENT])
        return written, int(f[RECEIVED])
    if len(raw) < TCP_INFO.size:
        return 0, 0
    fields = TCP_INFO.unpack(raw[: TCP_INFO.size])
    return int(fields[ACKED]), int(fields[RECEIVED])


def queued(sock: socket.socket) -> int:
    """Bytes received by the kernel and not yet read from *sock* (``FIONREAD``)."""
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except (OSError, ValueError):
        return 0
    return int(struct.unpack("i", raw)[0])


#: how many times the baseline's two reads are repeated while segments land between them
BASELINE_TRIES = 8


def baseline(sock: socket.socket, buffered: int) -> tuple[int, int]:
    """(written, received) of *sock* before a request's body: the kernel's counts, less what
    arrived past the request's head (read with it, ``buffered``, or still in the kernel's
    queue).  The count and the queue are two reads: a segment landing between them is in
    one and not the other (an upload's count was 221 bytes over), so they are read again
    until the count holds still across the queue's read."""
    for _ in range(BASELINE_TRIES):
        written, received = tcp_bytes(sock)
        waiting = queued(sock)
        if tcp_bytes(sock)[1] == received:
            break
    return written, max(0, received - buffered - waiting)


def unmapped(address: str) -> str:
    """``::ffff:192.0.2.1`` as ``192.0.2.1``; other addresses unchanged (scope dropped)."""
    address = address.split("%", 1)[0]
    return address[7:] if address.lower().startswith("::ffff:") and "." in address else address


@dataclass(frozen=True)
class Destination:
    """Where fireflies go: a resolved address, or the flow's peer (``origin``) on *port*."""

    port: int
    host: str | None = None  # None: the flow's peer
    family: int = socket.AF_INET

    @classmethod
    def parse(cls, text: str) -> Destination:
        """``origin``, ``origin:PORT``, ``HOST``, ``HOST:PORT`` or ``[V6]:PORT`` (port
        10514 by default); the host resolved now (BadInput when it does not resolve)."""
        value = text.strip()
        what = f"--firefly-dest {value[:100]}"
        host, port_text = value, ""
        if value.startswith("["):
            host, bracket, rest = value[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                raise BadInput(what, "is not HOST:PORT", "pass e.g. [2001:db8::1]:10514")
            port_text = rest[1:]
        elif value.count(":") == 1:
            host, _, port_text = value.partition(":")
        if port_text:
            if not is_uint(port_text) or not 1 <= int(port_text) <= 65535:
                raise BadInput(
                    what,
                    f"port {port_text[:10]!r} is not 1-65535",
                    "pass e.g. collector.example.org:10514",
                )
            port = int(port_text)
        else:
            port = scitags.FIREFLY_PORT
        if not host:
            raise BadInput(what, "has no host", "pass origin, HOST or HOST:PORT")
        if host == "origin":
            return cls(port)
        try:
            infos = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)
        except (OSError, UnicodeError) as exc:
            raise BadInput(
                what,
                f"does not resolve ({exc})",
                "pass a collector's address or a name this host resolves",
            ) from None
        family, _t, _p, _n, sockaddr = infos[0]
        return cls(port, str(sockaddr[0]), int(family))


@dataclass(frozen=True)
class Marking:
    """How the server marks flows: its default tag and where fireflies go."""

    default: int | None = None  # the tag of requests without a (valid) SciTag header
    destinations: tuple[Destination, ...] = ()
    hostname: str = field(default_factory=socket.gethostname)

    @property
    def fireflies(self) -> bool:
        return bool(self.destinations)


def request_tag(headers: object, method: str) -> tuple[int | None, bool]:
    """The tag a request asks for (``SciTag``; for a COPY also ``TransferHeaderSciTag`` when
    there is no ``SciTag``, as StoRM and dCache read them) and whether a header was there
    but unusable (non-numeric, out of range, repeated: ignored, as XRootD ignores a bad
    ``scitag.flow``)."""
    get_all = getattr(headers, "get_all", None)
    if get_all is None:
        return None, False
    values = list(get_all(scitags.HEADER) or [])
    if not values and method == "COPY":
        values = list(get_all("TransferHeaderSciTag") or [])
    try:
        return scitags.header_tag([str(v) for v in values]), False
    except ValueError:
        return None, True


#: Fireflies waiting for the sender thread; more are dropped (and counted as errors).
QUEUE = 4096


class Fireflies:
    """Fireflies, built and sent by one thread of their own from a bounded queue: a request
    only queues what it saw (a few microseconds); the thread sends on non-blocking UDP
    sockets (one per address family).  A full queue or a failed send is counted in
    :attr:`errors`, never raised."""

    def __init__(self, marking: Marking) -> None:
        self.marking = marking
        self.sent = 0
        self.errors = 0
        self.lock = threading.Lock()
        self._socks: dict[int, socket.socket] = {}
        self._queue: queue.Queue[tuple[Callable[[], dict[str, object]], str] | None] = queue.Queue(
            QUEUE
        )
        self._thread: threading.Thread | None = None

    def post(self, build: Callable[[], dict[str, object]], peer: str) -> None:
        """Queue the firefly *build* makes (in the sender thread) for the destinations
        (``origin``: *peer*)."""
        with self.lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fireflies", daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait((build, peer))
        except queue.Full:
            with self.lock:
                self.errors += len(self.marking.destinations)

    def _sock(self, family: int) -> socket.socket:
        sock = self._socks.get(family)
        if sock is None:
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
            self._socks[family] = sock
        return sock

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                build, peer = item
                self.send(build(), peer)
            except Exception:  # never let one datagram stop the sender
                with self.lock:
                    self.errors += 1
            finally:
                self._queue.task_done()

    def send(self, doc: dict[str, object], peer: str) -> None:
        """Send *doc* now, from the calling thread."""
        payload = scitags.datagram(doc, self.marking.hostname, time.time())
        for dest in self.marking.destinations:
            host = dest.host if dest.host is not None else peer
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            try:
                self._sock(family).sendto(payload, (host, dest.port))
                ok = True
            except OSError:
                ok = False
            with self.lock:
                if ok:
                    self.sent += 1
                else:
                    self.errors += 1

    def flush(self) -> None:
        """Wait until every queued firefly was sent (or failed)."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(5.0)
        for sock in self._socks.values():
            sock.close()
        self._socks.clear()


class ServedStream:
    """One data request in progress (or just over)."""

    def __init__(
        self,
        sock: socket.socket,
        method: str,
        peer: str,
        path: str,
        tag: int | None,
        buffered: int = 0,
    ) -> None:
        self.sock = sock
        self.method = method
        self.peer = peer
        self.path = path
        self.tag = tag
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.acked0, self.received0 = baseline(sock, buffered)
        self.flow: scitags.Flow | None = None
        self.started = False  # the first body byte moved (a start firefly was due)
        self.final: tuple[int, int] | None = None

    def moved(self) -> tuple[int, int]:
        """(bytes sent, bytes received) since the request began."""
        if self.final is not None:
            return self.final
        acked, received = tcp_bytes(self.sock)
        return max(0, acked - self.acked0), max(0, received - self.received0)


def flow_of(sock: socket.socket) -> scitags.Flow | None:
    try:
        local, peer = sock.getsockname(), sock.getpeername()
    except (OSError, ValueError):
        return None
    return scitags.Flow(
        unmapped(str(local[0])), int(local[1]), unmapped(str(peer[0])), int(peer[1])
    )


class Flows:
    """The server's streams and marking: what ``/metrics`` reads and fireflies are sent
    from."""

    def __init__(
        self,
        marking: Marking | None = None,
        capacity: float | None = None,
        link_rate: Callable[[str], float | None] | None = None,
    ) -> None:
        self.marking = marking or Marking()
        self.fireflies = Fireflies(self.marking)
        self.capacity = capacity  # bytes/s (--capacity), or None: the link's speed
        self.link_rate = link_rate  # bytes/s of the link towards an address, or None
        self._link_cache: dict[str, float | None] = {}
        self.lock = threading.Lock()
        self.active: set[ServedStream] = set()
        self.done_sent = 0
        self.done_received = 0
        self.streams_total = 0
        self.tagged_total = 0
        self.rejected_tags = 0

    def tag_for(self, headers: object, method: str) -> int | None:
        """The tag of a request: its header's, else the server's default (bad headers
        counted)."""
        value, rejected = request_tag(headers, method)
        if rejected:
            with self.lock:
                self.rejected_tags += 1
        return value if value is not None else self.marking.default

    def begin(
        self,
        sock: socket.socket,
        method: str,
        peer: str,
        path: str,
        tag: int | None,
        buffered: int = 0,
    ) -> ServedStream:
        """A data request begins; *buffered*: bytes already read past its head."""
        stream = ServedStream(sock, method, peer, path, tag, buffered)
        with self.lock:
            self.active.add(stream)
        return stream

    def first_byte(self, stream: ServedStream) -> None:
        """The stream's first body byte is moving: the start firefly."""
        if stream.started:
            return
        stream.started = True
        if stream.tag is None or not self.marking.fireflies:
            return
        stream.flow = flow_of(stream.sock)
        if stream.flow is not None:
            self.fireflies.post(
                functools.partial(
                    scitags.firefly, "start", stream.flow, stream.tag, start=stream.wall0
                ),
                stream.flow.dst_ip,
            )

    def end(self, stream: ServedStream) -> None:
        sent, received = stream.moved()
        stream.final = (sent, received)
        with self.lock:
            self.active.discard(stream)
            self.done_sent += sent
            self.done_received += received
            if stream.started:  # a body moved (not a refusal, not a 404)
                self.streams_total += 1
                if stream.tag is not None:
                    self.tagged_total += 1
        if stream.started and stream.tag is not None and stream.flow is not None:
            self.fireflies.post(
                functools.partial(
                    scitags.firefly,
                    "end",
                    stream.flow,
                    stream.tag,
                    start=stream.wall0,
                    end=time.time(),
                    received=received,
                    sent=sent,
                ),
                stream.flow.dst_ip,
            )

    def capacity_for(self, streams: Iterable[ServedStream]) -> float | None:
        """Bytes/s the streams share: --capacity, else the speed of the link towards the
        first stream's peer (cached per peer)."""
        if self.capacity is not None:
            return self.capacity
        if self.link_rate is None:
            return None
        for stream in streams:
            if stream.peer not in self._link_cache:
                rate = None
                with contextlib.suppress(Exception):
                    rate = self.link_rate(stream.peer)
                self._link_cache[stream.peer] = rate
            return self._link_cache[stream.peer]
        return None

    def close(self) -> None:
        self.fireflies.close()
