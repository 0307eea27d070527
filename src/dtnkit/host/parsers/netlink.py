"""Netlink, spoken once for all of dtnkit, sans I/O: message framing and attributes.

Every netlink message dtnkit builds or reads is framed here: the rtnetlink dumps of
:mod:`.rtnetlink`, the ethtool generic-netlink reads of :mod:`.ethtool_nl`, and the NFQUEUE
messages of the lab's delay stage (:mod:`dtnkit.lab.nfqueue`).  Those modules know their
families' messages and attributes; this one knows what all families share
(``include/uapi/linux/netlink.h``), in host byte order:

* a message is a 16-byte ``nlmsghdr`` (:data:`HEADER`: length, type, flags, sequence, port)
  and its body, padded to 4 bytes;
* an attribute is a 4-byte ``nlattr`` (:data:`ATTR`: length, type) and its value, padded to
  4 bytes; a nested attribute's value is attributes;
* an error or acknowledgement is ``NLMSG_ERROR`` with a negative errno (0: an ack), a dump
  ends with ``NLMSG_DONE``.

The socket that carries them is :mod:`dtnkit.host.nlsocket`.  Why not pyroute2: a live
``dtnkit tune audit`` takes 150-180 ms on an idle 2-core host, and ``import pyroute2``
alone takes 170-280 ms (0.7.12 and 0.9.7; the ``pyroute2-minimal`` distribution 135-230 ms),
because its package imports every protocol it has: the audit would be about 2.5 times slower
for microseconds of kernel work (docs/architecture.md has the figures and the commands).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator

from dtnkit.host.parsers import ParseError

#: nlmsghdr: length, type, flags, sequence number, port id
HEADER = struct.Struct("=IHHII")
#: nlattr: length, type
ATTR = struct.Struct("=HH")

NETLINK_ROUTE, NETLINK_NETFILTER, NETLINK_GENERIC = 0, 12, 16
NLMSG_NOOP, NLMSG_ERROR, NLMSG_DONE = 1, 2, 3
NLM_F_REQUEST, NLM_F_MULTI, NLM_F_ACK = 0x1, 0x2, 0x4
NLM_F_DUMP = 0x300  # NLM_F_ROOT | NLM_F_MATCH
NLA_F_NESTED = 0x8000
NLA_TYPE_MASK = 0x3FFF  # without NLA_F_NESTED and NLA_F_NET_BYTEORDER
SOL_NETLINK = 270


class MalformedMessage(ParseError):
    """Bytes that are not the netlink message they should be (truncated, a bad length)."""


# ---- building ---------------------------------------------------------------------------


def attr(kind: int, value: bytes) -> bytes:
    """One attribute, padded to 4 bytes."""
    length = ATTR.size + len(value)
    return ATTR.pack(length, kind) + value + bytes(-length & 3)


def nest(kind: int, value: bytes) -> bytes:
    """A nested attribute (``value``: its attributes)."""
    return attr(kind | NLA_F_NESTED, value)


def message(msg_type: int, flags: int, seq: int, body: bytes) -> bytes:
    """One message: the header (port 0: the kernel fills in ours) and ``body``."""
    return HEADER.pack(HEADER.size + len(body), msg_type, flags, seq, 0) + body


def u32(n: int) -> bytes:
    return n.to_bytes(4, sys.byteorder)


def uint(data: bytes) -> int:
    """An unsigned integer in host byte order (any width)."""
    return int.from_bytes(data, sys.byteorder)


def sint(data: bytes) -> int:
    """A signed integer in host byte order (any width)."""
    return int.from_bytes(data, sys.byteorder, signed=True)


# ---- reading ----------------------------------------------------------------------------


def messages(data: bytes, want: int, what: str = "netlink") -> Iterator[bytes]:
    """The body of each message of type ``want`` in a dump's reply, up to ``NLMSG_DONE``.
    MalformedMessage for truncated bytes; :class:`KernelRefused` for an error message."""
    pos = 0
    while pos + HEADER.size <= len(data):
        length, msg_type = HEADER.unpack_from(data, pos)[:2]
        if length < HEADER.size or pos + length > len(data):
            raise MalformedMessage(f"{what}: truncated message at byte {pos}")
        body = data[pos + HEADER.size : pos + length]
        pos += (length + 3) & ~3
        if msg_type == NLMSG_DONE:
            return
        if msg_type == NLMSG_ERROR:
            raise KernelRefused(-sint(body[:4]) if len(body) >= 4 else 0, what)
        if msg_type == want:
            yield body
    if pos < len(data):
        raise MalformedMessage(f"{what}: {len(data) - pos} stray bytes at the end")


def reply_body(reply: bytes, what: str) -> bytes:
    """The body of the one message of a reply to a plain request (not a dump).
    :class:`KernelRefused` for an error reply; MalformedMessage for anything else that
    holds no data (an ack, ``NLMSG_DONE``, truncated bytes)."""
    if not isinstance(reply, bytes) or len(reply) < HEADER.size:
        raise MalformedMessage(
            f"{what}: short reply ({len(reply) if isinstance(reply, bytes) else 0} bytes)"
        )
    length, msg_type = HEADER.unpack_from(reply)[:2]
    if length < HEADER.size or length > len(reply):
        raise MalformedMessage(f"{what}: truncated message")
    body = reply[HEADER.size : length]
    if msg_type == NLMSG_ERROR:
        if len(body) < 4:
            raise MalformedMessage(f"{what}: truncated error message")
        code = -sint(body[:4])
        if code <= 0:
            raise MalformedMessage(f"{what}: an acknowledgement where data was expected")
        raise KernelRefused(code, what)
    if msg_type == NLMSG_DONE or len(body) < 4:
        raise MalformedMessage(f"{what}: no data in the reply")
    return body


def attributes(data: bytes, what: str = "netlink") -> dict[int, bytes]:
    """Attributes by type (the nested and byte-order flags dropped); the last of a type
    wins."""
    out: dict[int, bytes] = {}
    pos = 0
    while pos + ATTR.size <= len(data):
        length, kind = ATTR.unpack_from(data, pos)
        if length < ATTR.size or pos + length > len(data):
            raise MalformedMessage(f"{what}: truncated attribute at byte {pos}")
        out[kind & NLA_TYPE_MASK] = data[pos + ATTR.size : pos + length]
        pos += (length + 3) & ~3
    return out


def text(data: bytes) -> str:
    """A NUL-terminated string attribute."""
    return data.split(b"\0", 1)[0].decode(errors="replace")


class KernelRefused(ParseError):
    """The kernel answered a request with an error (``errno``): the driver lacks it, the
    device is gone, no permission...  A ParseError too: a reader that cannot use the reply
    asks the tool instead, whichever the reason."""

    def __init__(self, errno: int, what: str = "netlink") -> None:
        super().__init__(f"{what}: the kernel refused the request (errno {errno})")
        self.errno = errno
