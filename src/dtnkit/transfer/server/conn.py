"""Connections of ``dtnkit serve``: one selector thread, a bounded pool of worker threads.

The selector thread owns the listening socket and every connection that is not being served:
it accepts, runs TLS handshakes (non-blocking), reads request heads until the blank line, and
parks kept-alive connections between requests.  A complete head is handed to a worker, which
reads the body, answers (blocking calls that release the GIL: ``sendfile``, ``recv_into``,
hashing) and hands the connection back, or closes it.  So an idle or slow connection costs a
registered descriptor and a small object, never a thread.

Limits (:class:`ConnLimits`): a connection cap derived from the descriptor limit (beyond it a
new connection gets ``503`` and is closed at once), a cap per client address (an IPv4 address, an
IPv6 /64: one client cannot take every slot), a deadline for the whole request head (from
the first byte of a request, or from accept), an idle keep-alive timeout, and accept back-off
when the process is out of descriptors (EMFILE/ENFILE), with one log line per episode.
:meth:`Hub.stop_accepting` and :meth:`Hub.wait_idle` drain; :meth:`Hub.cut` ends the rest.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import ipaddress
import os
import queue
import resource
import selectors
import socket
import ssl
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from dtnkit.transfer.server import http11

HEAD_TIMEOUT = 20.0  # seconds for a whole request head (or a TLS handshake and the head)
IDLE_TIMEOUT = 60.0  # seconds a kept-alive connection may wait for its next request
IO_TIMEOUT = 300.0  # seconds a worker waits for one receive or send of a body
WORKERS = 512  # requests served at once; more heads wait for a worker
MIN_BODY_RATE = 1024  # bytes/s a request body must keep up, over each RATE_WINDOW ...
RATE_WINDOW = 30.0  # ... seconds (curl's --low-speed-limit / --low-speed-time, server side)
RECV = 65536
SWEEP = 0.25  # seconds between deadline checks
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 1.0
REFUSING = 64  # connections given a last answer, read until they close (beyond: closed at once)
OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
PER_CLIENT_SHARE = 8  # by default one client address may hold 1/8 of the connection cap ...
PER_CLIENT_FLOOR = 64  # ... but at least this many (at most half of a small cap)
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: 52\r\n\r\n"
    b"server: too many connections open; retry in a while\n"
)
CLIENT_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: 68\r\n\r\n"
    b"server: too many connections open from your address; close some first\n"
)
TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\nContent-Length: 48\r\n\r\n"
    b"request: the request head did not arrive in time\n"
)

Log = Callable[[str, bool], None]  # (line, force)


@dataclass(frozen=True)
class ConnLimits:
    max_connections: int
    #: connections one client address (IPv4 address, IPv6 /64) may hold; None: derived
    #: from max_connections (:func:`per_client_default`)
    max_per_client: int | None = None
    head_timeout: float = HEAD_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    io_timeout: float = IO_TIMEOUT
    workers: int = WORKERS
    body_min_rate: int = MIN_BODY_RATE
    rate_window: float = RATE_WINDOW

    @property
    def per_client(self) -> int:
        """Connections one client address may hold."""
        if self.max_per_client is not None:
            return min(self.max_per_client, self.max_connections)
        return per_client_default(self.max_connections)


def per_client_default(cap: int) -> int:
    """One eighth of the connection cap, at least 64 (room for a many-stream client) but
    never more than half of it (so one client never has them all), and at least 1."""
    return max(1, cap // PER_CLIENT_SHARE, min(PER_CLIENT_FLOOR, cap // 2))


def client_key(peer: str) -> str:
    """What the per-client limit counts by: an IPv4 address (also IPv4-mapped IPv6), or the
    /64 prefix of an IPv6 address (one host gets a whole /64 and may use any address in it)."""
    if ":" not in peer:
        return peer
    try:
        address = ipaddress.IPv6Address(peer.split("%", 1)[0])
    except ValueError:
        return peer
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))


class Pace:
    """A request body must keep coming: at least ``body_min_rate`` bytes/s over each
    ``rate_window`` seconds, so a client that trickles a body cannot hold a worker for long
    (the head has its own deadline; a body may be terabytes, so it gets a rate, not a time)."""

    def __init__(self, limits: ConnLimits, *, whole_within: float | None = None) -> None:
        self.limits = limits
        self.start = time.monotonic()
        self.got = 0
        #: a small body must arrive whole by then (its rate alone would let 30 bytes take
        #: 30 s a window, window after window); None: only the rate counts
        self.whole_within = whole_within
        self.deadline = None if whole_within is None else self.start + whole_within

    def left(self) -> float | None:
        """Seconds until the whole body must have arrived (None: no such deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def add(self, n: int) -> None:
        """Count *n* bytes received; raise TimeoutError when the window closed too slow."""
        self.got += n
        now = time.monotonic()
        if self.deadline is not None and now > self.deadline:
            raise TimeoutError(f"a small body did not arrive within {self.whole_within:g} s")
        took = now - self.start
        if took >= self.limits.rate_window:
            if self.got < self.limits.body_min_rate * took:
                raise TimeoutError(
                    f"the body came at {self.got / took:.0f} B/s over "
                    f"{took:.0f} s (less than {self.limits.body_min_rate} B/s)"
                )
            self.start, self.got = now, 0


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (where allowed); return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 2**20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft if soft != resource.RLIM_INFINITY else target
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return soft
    return target


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 16


def derive_cap(soft: int, in_use: int, workers: int = WORKERS) -> int:
    """Connections allowed under a descriptor limit *soft* with *in_use* already open.

    A reserve stays for the files and outgoing connections requests open: three per worker
    plus 64, at most a quarter of the limit.
    """
    reserve = min(soft // 4, 3 * workers + 64)
    return max(8, soft - in_use - reserve)


class Conn:
    """One client connection and the bytes read from it that are not yet consumed."""

    __slots__ = (
        "__weakref__",
        "buf",
        "deadline",
        "error",
        "fresh",
        "handshaking",
        "head_len",
        "key",
        "peer",
        "scanner",
        "sock",
    )

    def __init__(self, sock: socket.socket, peer: str, deadline: float, key: str = "") -> None:
        self.sock = sock
        self.peer = peer
        self.key = key  # the client it counts against (client_key(peer)); "" once released
        self.buf = bytearray()
        self.deadline = deadline
        self.fresh = True  # no request served on it yet
        self.handshaking = False
        self.head_len = 0  # bytes of buf that are the complete head (set before dispatch)
        self.error: http11.BadRequest | None = None  # the head cannot be read
        self.scanner = http11.HeadScanner()  # where the head being received ends


#: serve(conn) -> keep the connection open for another request
Serve = Callable[[Conn], bool]


class Hub:
    def __init__(
        self,
        listener: socket.socket,
        tls: ssl.SSLContext | None,
        limits: ConnLimits,
        serve: Serve,
        log: Log,
        close: Callable[[socket.socket], None],
    ) -> None:
        self.listener = listener
        self.tls = tls
        self.limits = limits
        self.serve = serve
        self.log = log
        self.close_conn = close
        self.sel = selectors.DefaultSelector()
        self.idle: dict[int, Conn] = {}  # fd -> parked or reading its head (selector thread)
        self.busy: set[Conn] = set()  # being served by a worker (under cond)
        self.cond = threading.Condition()
        self.back: collections.deque[tuple[Conn, bool]] = collections.deque()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.jobs: queue.SimpleQueue[Conn | None] = queue.SimpleQueue()
        self.workers: list[threading.Thread] = []
        self.waiting = 0
        self.idle_workers = 0
        self.stopping = False
        self.ended = False
        self.backoff = 0.0
        self.resume_at = 0.0
        self.short_of_fds = False
        self.at_cap = False
        self.refused = 0
        #: open connections per client (client_key), under cond; released once per Conn
        self.per_client: collections.Counter[str] = collections.Counter()
        self.refused_clients = 0  # connections refused by the per-client limit
        self.clients_at_limit: set[str] = set()  # told in the log (until they drop below)
        self.refusing: dict[socket.socket, float] = {}  # answered (503, 408): read to close
        listener.setblocking(False)
        self.sel.register(listener, selectors.EVENT_READ, None)
        self.sel.register(self.wake_r, selectors.EVENT_READ, self.wake_r)
        self.thread = threading.Thread(target=self._run, daemon=True, name="dtnkit-serve")

    # --- outside the selector thread ------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def count(self) -> int:
        with self.cond:
            return len(self.idle) + len(self.busy)

    def stop_accepting(self) -> None:
        """Close the listening socket and idle connections; requests in progress go on."""
        self.stopping = True
        self._wake()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in progress (True) or *timeout* passes (False)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def cut(self, timeout: float) -> None:
        """Cut the connections still served, end the workers and the selector thread."""
        self.stopping = True
        self.ended = True
        with self.cond:
            busy = list(self.busy)
        for conn in busy:
            # The base-class method: SSLSocket.shutdown would tear down its state under the
            # feet of the worker reading from it.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
        self._wake()
        deadline = time.monotonic() + timeout
        self.thread.join(max(0.0, deadline - time.monotonic()))
        for _ in self.workers:
            self.jobs.put(None)
        for thread in list(self.workers):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self.wake_w.send(b"x")

    # --- workers ------------------------------------------------------------------------------

    def _submit(self, conn: Conn) -> None:
        with self.cond:
            self.busy.add(conn)
            self.waiting += 1
            spawn = self.waiting > self.idle_workers and len(self.workers) < self.limits.workers
            if spawn:
                thread = threading.Thread(
                    target=self._work, daemon=True, name="dtnkit-serve-worker"
                )
                self.workers.append(thread)
        if spawn:
            thread.start()
        self.jobs.put(conn)

    def _work(self) -> None:
        while True:
            with self.cond:
                self.idle_workers += 1
            conn = self.jobs.get()
            with self.cond:
                self.idle_workers -= 1
                self.waiting -= 1
            if conn is None:
                return
            keep = False
            try:
                keep = self.serve(conn) and not self.stopping
            except Exception:  # a bug: report it here, never to the client
                self.log("internal error:\n" + traceback.format_exc(), True)
            if not keep:
                self.close_conn(conn.sock)
            with self.cond:
                self.busy.discard(conn)
                if not keep:
                    self._release(conn)
                if keep:
                    self.back.append((conn, True))
                self.cond.notify_all()
            if keep:
                self._wake()

    # --- the selector thread ------------------------------------------------------------------

    def _run(self) -> None:
        next_sweep = time.monotonic() + SWEEP
        listening = True
        try:
            while not self.ended:
                timeout = max(0.0, min(next_sweep - time.monotonic(), SWEEP))
                for key, _mask in self.sel.select(timeout):
                    if key.fileobj is self.listener:
                        self._accept()
                    elif key.data is self.refusing:
                        self._refused_readable(key.fileobj)  # type: ignore[arg-type]
                    elif key.data is self.wake_r:
                        with contextlib.suppress(OSError):
                            while self.wake_r.recv(4096):
                                pass
                    else:
                        try:
                            self._readable(key.data)
                        except Exception:  # a bug: drop this connection, keep serving
                            self.log("internal error:\n" + traceback.format_exc(), True)
                            self._drop(key.data)
                self._returns()
                now = time.monotonic()
                if self.stopping and listening:
                    listening = False
                    self._unlisten()
                    for conn in list(self.idle.values()):
                        self._drop(conn)
                if listening and self.backoff and now >= self.resume_at:
                    self.sel.register(self.listener, selectors.EVENT_READ, None)
                    self.resume_at = float("inf")
                    self._accept()
                if now >= next_sweep:
                    next_sweep = now + SWEEP
                    self._sweep(now)
        finally:
            if listening:
                self._unlisten()
            for conn in list(self.idle.values()):
                self._drop(conn)
            for sock in list(self.refusing):
                self._unrefuse(sock)
            self.sel.close()
            self.wake_r.close()
            self.wake_w.close()

    def _unlisten(self) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.listener)
        self.listener.close()

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, address = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in OUT_OF_FDS:
                    self._back_off(exc)
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR):
                    continue
                self._back_off(exc)  # unexpected: never spin on it either
                return
            self.backoff = 0.0
            self.short_of_fds = False
            peer = str(address[0])
            if len(self.idle) + len(self.busy) >= self.limits.max_connections:
                self._refuse(sock)
                continue
            self.at_cap = False
            key = client_key(peer)
            with self.cond:
                held = self.per_client[key]
                if held < self.limits.per_client:
                    self.per_client[key] = held + 1
            if held >= self.limits.per_client:
                self._refuse_client(sock, key)
                continue
            self._admit(sock, peer, key)

    def _release(self, conn: Conn) -> None:
        """Count *conn* no longer against its client (once; call with cond held)."""
        key, conn.key = conn.key, ""
        if not key:
            return
        left = self.per_client[key] - 1
        if left > 0:
            self.per_client[key] = left
        else:
            del self.per_client[key]
        if left < self.limits.per_client:
            self.clients_at_limit.discard(key)

    def _refuse_client(self, sock: socket.socket, key: str) -> None:
        self.refused_clients += 1
        with self.cond:
            told = key in self.clients_at_limit
            self.clients_at_limit.add(key)
        if not told and len(self.clients_at_limit) <= REFUSING:
            self.log(
                f"dtnkit serve: client {key} holds {self.limits.per_client} connections "
                "(the per-client limit); refusing its new ones with 503",
                True,
            )
        try:
            sock.setblocking(False)
            sock.send(CLIENT_REFUSAL)
        except OSError:
            sock.close()
            return
        self._linger(sock)

    def _back_off(self, exc: OSError) -> None:
        if not self.short_of_fds:
            self.short_of_fds = True
            self.log(
                f"dtnkit serve: cannot accept connections: {exc.strerror} "
                f"({errno.errorcode.get(exc.errno or 0, '?')}) with "
                f"{len(self.idle) + len(self.busy)} open; pausing accepts and retrying "
                f"up to every {BACKOFF_MAX:g} s",
                True,
            )
        self.backoff = min(BACKOFF_MAX, self.backoff * 2) if self.backoff else BACKOFF_FIRST
        self.resume_at = time.monotonic() + self.backoff
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.listener)

    def _refuse(self, sock: socket.socket) -> None:
        self.refused += 1
        if not self.at_cap:
            self.at_cap = True
            self.log(
                f"dtnkit serve: {self.limits.max_connections} connections open (the cap); "
                "refusing new ones with 503 until some close",
                True,
            )
        try:
            sock.setblocking(False)
            sock.send(REFUSAL)
        except OSError:
            sock.close()
            return
        self._linger(sock)

    def _linger(self, sock: socket.socket) -> None:
        """Close after a last answer (503, 408) without destroying it: shut our side, then
        read what the client still sends until it closes (at most a second).  Closing with
        its bytes unread would reset the connection, and the client's kernel could drop the
        answer before the client reads it."""
        try:
            socket.socket.shutdown(sock, socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        if len(self.refusing) >= REFUSING:
            sock.close()
            return
        self.refusing[sock] = time.monotonic() + 1.0
        self.sel.register(sock, selectors.EVENT_READ, self.refusing)

    def _refused_readable(self, sock: socket.socket) -> None:
        try:
            if sock.recv(RECV):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self._unrefuse(sock)

    def _unrefuse(self, sock: socket.socket) -> None:
        self.refusing.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(sock)
        sock.close()

    def _admit(self, sock: socket.socket, peer: str, key: str) -> None:
        now = time.monotonic()
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = Conn(sock, peer, now + self.limits.head_timeout, key)
        if self.tls is not None:
            try:
                conn.sock = self.tls.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False
                )
            except (OSError, ssl.SSLError) as exc:
                self.log(f"{peer} TLS handshake failed: {exc.__class__.__name__}: {exc}", False)
                sock.close()
                with self.cond:
                    self._release(conn)
                return
            conn.handshaking = True
        with self.cond:
            self.idle[conn.sock.fileno()] = conn
        self.sel.register(conn.sock, selectors.EVENT_READ, conn)
        if not conn.handshaking:  # the head is often there already: one select round less
            self._readable(conn)

    def _readable(self, conn: Conn) -> None:
        sock = conn.sock
        if conn.handshaking:
            assert isinstance(sock, ssl.SSLSocket)
            try:
                sock.do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except (OSError, ssl.SSLError) as exc:
                self.log(
                    f"{conn.peer} TLS handshake failed: {exc.__class__.__name__}: {exc}", False
                )
                self._drop(conn)
                return
            conn.handshaking = False
        try:
            data = sock.recv(RECV)
            if isinstance(sock, ssl.SSLSocket):
                while sock.pending():
                    data += sock.recv(RECV)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except (OSError, ssl.SSLError):
            self._drop(conn)
            return
        if not data:
            self._drop(conn)
            return
        if not conn.buf and not conn.fresh:  # the first byte of the next request
            conn.deadline = time.monotonic() + self.limits.head_timeout
        conn.buf += data
        self._check(conn)

    def _check(self, conn: Conn) -> None:
        try:
            end = conn.scanner.end(conn.buf)
        except http11.BadRequest as exc:
            conn.error = exc
            end = len(conn.buf)
        if end is None:
            return
        conn.head_len = end
        self.sel.unregister(conn.sock)
        with self.cond:
            del self.idle[conn.sock.fileno()]
        self._submit(conn)

    def _returns(self) -> None:
        while True:
            with self.cond:
                if not self.back:
                    return
                conn, _keep = self.back.popleft()
            if self.stopping:
                self.close_conn(conn.sock)
                with self.cond:
                    self._release(conn)
                continue
            conn.fresh = False
            conn.error = None
            conn.head_len = 0
            conn.scanner = http11.HeadScanner()
            try:
                conn.sock.setblocking(False)
            except OSError:
                self.close_conn(conn.sock)
                with self.cond:
                    self._release(conn)
                continue
            now = time.monotonic()
            conn.deadline = now + (
                self.limits.head_timeout if conn.buf else self.limits.idle_timeout
            )
            with self.cond:
                self.idle[conn.sock.fileno()] = conn
            self.sel.register(conn.sock, selectors.EVENT_READ, conn)
            if conn.buf:  # a pipelined request
                self._check(conn)
            elif isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                self._readable(conn)

    def _sweep(self, now: float) -> None:
        for sock in [s for s, deadline in self.refusing.items() if deadline <= now]:
            self._unrefuse(sock)
        for conn in [c for c in self.idle.values() if c.deadline <= now]:
            if conn.buf or (conn.fresh and conn.handshaking):
                self.log(
                    f"{conn.peer} request head not complete within "
                    f"{self.limits.head_timeout:g} s: closed",
                    False,
                )
                if conn.buf and not conn.handshaking:
                    try:
                        conn.sock.send(TIMEOUT)
                    except (OSError, ssl.SSLError):
                        pass
                    else:
                        self._forget(conn)
                        self._linger(conn.sock)
                        continue
            self._drop(conn)

    def _forget(self, conn: Conn) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
        with self.cond:
            self.idle.pop(conn.sock.fileno(), None)
            self._release(conn)

    def _drop(self, conn: Conn) -> None:
        self._forget(conn)
        conn.sock.close()
