"""Sending a body on a socket that has a timeout (plain or TLS), its send buffer kept full.

Python waits before every send on a socket with a timeout until the socket is writable, and
TCP calls it writable only once a third of its send buffer is free (``sk_stream_wspace`` at
least half of what is queued).  A body sent in pieces that way keeps the queue at two thirds
of the buffer plus a piece; where the send buffer bounds a stream (untuned ends on a long
path: ``tcp_wmem``'s 4 MiB), that is less in flight.  On a 50 ms / 1 Gbit/s lab path with
untuned ends an upload (pieces of 256 KiB) had 8 % less in flight than a download from
``dtnkit serve`` and took 1.06x its time over plain HTTP, 1.08x over TLS.

:func:`send_all` instead writes each piece at once while the buffer has room (the socket
does not block meanwhile) and waits only when it is full, each wait bounded as the timeout
bounded it: a stall is still a wait that long without room, never a slow body as a whole.
"""

from __future__ import annotations

import math
import select
import socket
import ssl
from collections.abc import Callable

#: A piece of a body: each is counted as it is sent (a TLS socket writes a piece whole).
PIECE = 256 * 1024


def send_all(
    sock: socket.socket,
    data: bytes | bytearray | memoryview,
    *,
    wait: Callable[[], float | None],
    sent: Callable[[int], None] | None = None,
) -> None:
    """Send all of *data* on *sock*, a :data:`PIECE` at a time (*sent* is told each one's
    bytes), waiting only while its send buffer is full, for ``wait()`` seconds at most each
    time (None: no limit; ``wait`` may raise to stop, e.g. at a deadline): TimeoutError
    when a wait ends without room.  The socket's timeout is as it was afterwards."""
    view = memoryview(data).cast("B")
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        at = 0
        while at < len(view):
            try:
                # after a wait, the same piece again: TLS has taken part of it
                n = sock.send(view[at : at + PIECE])
            except (BlockingIOError, ssl.SSLWantWriteError):
                _wait(sock, select.POLLOUT, wait())
                continue
            except ssl.SSLWantReadError:  # TLS reading first (a key update, a ticket)
                _wait(sock, select.POLLIN, wait())
                continue
            if sent is not None:
                sent(n)
            at += n
    finally:
        sock.settimeout(timeout)


def _wait(sock: socket.socket, event: int, seconds: float | None) -> None:
    poller = select.poll()
    poller.register(sock.fileno(), event)
    if not poller.poll(None if seconds is None else max(0, math.ceil(seconds * 1000))):
        raise TimeoutError("timed out")
