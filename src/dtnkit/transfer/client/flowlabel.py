"""The IPv6 flow label of a connection this host opens (uploads, pushes, downloads): the
SciTags layout (:func:`dtnkit.transfer.wire.scitags.flow_label`) set through the kernel's
flow-label manager (``IPV6_FLOWLABEL_MGR`` then ``IPV6_FLOWINFO_SEND``, ``<linux/in6.h>``).

Only packets this socket sends carry it; an accepted socket (a server's answers) keeps the
kernel's automatic label whatever is asked, which is what flowd-go's eBPF marker is for.
A label the kernel refuses (``EPERM``, ``ERANGE`` with ``flowlabel_state_ranges``) is not an
error: the connection goes out unlabelled and :data:`COUNTS` says so.
"""

from __future__ import annotations

import errno
import secrets
import socket
import struct
import threading

IPV6_FLOWLABEL_MGR = 32
IPV6_FLOWINFO_SEND = 33
IPV6_FL_A_GET = 0
IPV6_FL_F_CREATE = 1
IPV6_FL_S_ANY = 255  # shared with any socket: a label can be reused at once (EXCL: minutes)


class Counts:
    """Connections labelled and those whose label the kernel refused."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.labelled = 0
        self.refused = 0

    def add(self, ok: bool) -> None:
        with self.lock:
            if ok:
                self.labelled += 1
            else:
                self.refused += 1


COUNTS = Counts()


def request(address: str, label: int) -> bytes:
    """``struct in6_flowlabel_req`` asking for *label* towards *address*."""
    return struct.pack(
        "=16sIBBHHHI",
        socket.inet_pton(socket.AF_INET6, address),
        socket.htonl(label),
        IPV6_FL_A_GET,
        IPV6_FL_S_ANY,
        IPV6_FL_F_CREATE,
        0,
        0,
        0,
    )


def label_for(tag: int) -> int | None:
    """A label for a new flow of *tag* (fresh entropy); None when the tag's experiment does
    not fit the label."""
    from dtnkit.transfer.wire.scitags import flow_label  # a copy without a tag never loads it

    try:
        return flow_label(tag, secrets.randbelow(32))
    except ValueError:
        return None


def prepare(sock: socket.socket, address: tuple[object, ...], tag: int) -> tuple[object, ...]:
    """Register a label for *tag* on IPv6 *sock* and return the address to connect to (with
    the label as its flowinfo); *address* unchanged when the kernel refuses or the socket is
    not IPv6."""
    if sock.family != socket.AF_INET6 or len(address) < 4:
        return address
    label = label_for(tag)
    if label is None:
        return address
    host = str(address[0])
    try:
        try:
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWLABEL_MGR, request(host, label))
        except OSError as exc:
            if exc.errno != errno.ERANGE or label < 0x80000:
                raise
            # net.ipv6.flowlabel_state_ranges=1 keeps 0x80000 and up for the kernel: the
            # same tag with the top entropy bit clear
            label &= 0x7FFFF
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWLABEL_MGR, request(host, label))
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO_SEND, 1)
    except OSError as exc:
        if exc.errno not in (
            errno.EPERM,
            errno.ERANGE,
            errno.EINVAL,
            errno.ENOPROTOOPT,
            errno.EEXIST,
        ):
            raise
        COUNTS.add(False)
        return address
    COUNTS.add(True)
    return (host, address[1], label, address[3])
