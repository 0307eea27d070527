"""The netlink socket: each request's reply from the kernel, and ethtool's one ioctl.

The messages are framed by :mod:`dtnkit.host.parsers.netlink`.  The namespace helper
(:mod:`dtnkit.host.nsserve`) imports this in a ``python -I -S`` process too: nothing here
needs more than the standard library's built-in modules.
"""

from __future__ import annotations

import _socket  # not socket: no enum classes to build in the namespace helper
import array
import fcntl
import sys
from collections.abc import Sequence

from dtnkit.host.parsers.netlink import HEADER, NLM_F_MULTI, NLMSG_DONE, NLMSG_ERROR

_AF_NETLINK, _SOCK_RAW = 16, 3


def exchange(proto: int, requests: Sequence[bytes], timeout: float) -> list[bytes] | None:
    """Each request's reply on one netlink socket of protocol ``proto``: its messages (each
    padded to 4 bytes) up to ``NLMSG_DONE``, ``NLMSG_ERROR`` or a message that is not part
    of a dump (no ``NLM_F_MULTI``: the one reply to a plain request); None when the socket
    fails.  The socket belongs to this process's network namespace."""
    try:
        sock = _socket.socket(_AF_NETLINK, _SOCK_RAW, proto)
    except OSError:
        return None
    out = []
    try:
        sock.settimeout(timeout)
        for request in requests:
            seq = HEADER.unpack_from(request)[3]
            parts: list[bytes] = []
            done = False
            sock.sendto(request, (0, 0))
            while not done:
                data = sock.recv(1 << 16)
                if not data:
                    return None
                pos = 0
                while pos + HEADER.size <= len(data):
                    length, msg_type, flags, got = HEADER.unpack_from(data, pos)[:4]
                    if length < HEADER.size:
                        return None
                    step = (length + 3) & ~3
                    if got == seq:
                        part = data[pos : pos + step]
                        parts.append(part + bytes(step - len(part)))
                        done = (
                            done or msg_type in (NLMSG_ERROR, NLMSG_DONE) or not flags & NLM_F_MULTI
                        )
                    pos += step
            out.append(b"".join(parts))
    except OSError:
        return None
    finally:
        sock.close()
    return out


# ---- ethtool's ioctl --------------------------------------------------------------------

SIOCETHTOOL = 0x8946


def ethtool_ioctl(device: str, request: bytes) -> bytes | int:
    """The ``SIOCETHTOOL`` ioctl on ``device`` with ``request`` (a struct whose first word is
    the ethtool command): the struct as the kernel filled it, or the errno.  ethtool 6.1 still
    reads the driver (``-i``) this way, not over netlink."""
    buf = array.array("B", request)
    try:
        sock = _socket.socket(2, 2, 0)  # AF_INET, SOCK_DGRAM: any socket takes the ioctl
    except OSError as exc:
        return exc.errno or -1
    try:  # struct ifreq: the name in 16 bytes, then a pointer to the struct
        ifr = (
            device.encode()[:15].ljust(16, b"\0")
            + buf.buffer_info()[0].to_bytes(8, sys.byteorder)
            + bytes(16)
        )
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifr)
    except OSError as exc:
        return exc.errno or -1
    finally:
        sock.close()
    return buf.tobytes()
