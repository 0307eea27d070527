"""nfnetlink_queue, sans I/O: the messages the lab's delay stage exchanges with the kernel.

The delay stage (:mod:`dtnkit.lab.nfqdelay`) binds NFQUEUE queues, reads the kernel's packet
messages and answers with verdicts.  This module builds and reads those messages
(``include/uapi/linux/netfilter/nfnetlink.h``, ``nfnetlink_queue.h``); the netlink framing
they share with every other family is :mod:`dtnkit.host.parsers.netlink`.  pyroute2 has no
nfnetlink_queue support (its nfnetlink package speaks conntrack, nftables and ipset), and the
stage reads tens of thousands of packet messages a second, so :func:`decode` reads the few
fields it needs at their offsets with precompiled structs.

A message is the netlink header, a 4-byte ``nfgenmsg`` (family, version, the queue number
big-endian), then attributes whose values are big-endian.  The message type is the
subsystem (``NFNL_SUBSYS_QUEUE``) in the high byte and the queue message in the low one.
"""

from __future__ import annotations

import socket
import struct

from dtnkit.host.parsers.netlink import (
    ATTR,
    HEADER,
    NLA_TYPE_MASK,
    NLM_F_ACK,
    NLM_F_REQUEST,
    NLMSG_ERROR,
    attr,
    message,
)

NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQNL_MSG_VERDICT_BATCH = 3

NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_PAYLOAD = 10
NFQA_CAP_LEN = 13

NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_CFG_CMD_UNBIND = 2
NFQNL_COPY_META = 1
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_GSO = 1 << 2

NF_DROP = 0
NF_ACCEPT = 1

MSG_PACKET = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET

_NFGEN = struct.Struct(">BBH")  # nfgenmsg: family, version, res_id (the queue number)
_LEN_TYPE = struct.Struct("=IH")  # the first two fields of the netlink header
_BE16 = struct.Struct(">H")
_BE32 = struct.Struct(">I")
_BE32X2 = struct.Struct(">II")
_I32 = struct.Struct("=i")
_VERDICT_LEN = HEADER.size + _NFGEN.size + ATTR.size + _BE32X2.size
_VERDICT_ATTR = ATTR.pack(ATTR.size + _BE32X2.size, NFQA_VERDICT_HDR)
_QUEUE_AT = HEADER.size + 2  # the queue number's offset in a message
_ATTRS_AT = HEADER.size + _NFGEN.size  # the first attribute's offset in a message


def _nfq_msg(msg_type: int, flags: int, seq: int, queue: int, payload: bytes) -> bytes:
    return message(
        (NFNL_SUBSYS_QUEUE << 8) | msg_type,
        flags,
        seq,
        _NFGEN.pack(socket.AF_UNSPEC, 0, queue) + payload,
    )


def verdict_msg(queue: int, packet_id: int, verdict: int, *, batch: bool) -> bytes:
    """A verdict for one packet id, or (batch) for every queued id up to it."""
    return (
        HEADER.pack(
            _VERDICT_LEN,
            (NFNL_SUBSYS_QUEUE << 8) | (NFQNL_MSG_VERDICT_BATCH if batch else NFQNL_MSG_VERDICT),
            NLM_F_REQUEST,
            0,
            0,
        )
        + _NFGEN.pack(socket.AF_UNSPEC, 0, queue)
        + _VERDICT_ATTR
        + _BE32X2.pack(verdict, packet_id)
    )


def bind_msg(queue: int, seq: int, *, copy_mode: int, copy_range: int, maxlen: int) -> bytes:
    """Bind a queue and set copy mode, queue length and the GSO flag in one request."""
    attrs = (
        attr(NFQA_CFG_CMD, struct.pack(">BxH", NFQNL_CFG_CMD_BIND, socket.AF_UNSPEC))
        + attr(NFQA_CFG_PARAMS, struct.pack(">IB", copy_range, copy_mode))
        + attr(NFQA_CFG_QUEUE_MAXLEN, _BE32.pack(maxlen))
        + attr(NFQA_CFG_FLAGS, _BE32.pack(NFQA_CFG_F_GSO))
        + attr(NFQA_CFG_MASK, _BE32.pack(NFQA_CFG_F_GSO))
    )
    return _nfq_msg(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, queue, attrs)


def unbind_msg(queue: int, seq: int) -> bytes:
    attrs = attr(NFQA_CFG_CMD, struct.pack(">BxH", NFQNL_CFG_CMD_UNBIND, socket.AF_UNSPEC))
    return _nfq_msg(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, queue, attrs)


def decode(
    buf: bytes | bytearray,
    n: int,
    count_bytes: bool,
    packets: list[tuple[int, int, int]],
    acks: list[tuple[int, int]],
) -> None:
    """Append the messages of one datagram (``buf[:n]``): each packet as (queue, packet id,
    length) to ``packets`` (length 0 unless ``count_bytes``: copy-meta mode sends none) and
    each error or acknowledgement as (the request's sequence number or 0, negative errno or
    0) to ``acks``.  Reading stops at a message or attribute whose length does not fit, so
    any bytes are read without an error."""
    len_type = _LEN_TYPE.unpack_from
    be16 = _BE16.unpack_from
    be32 = _BE32.unpack_from
    nla = ATTR.unpack_from
    add = packets.append
    off = 0
    while off + HEADER.size <= n:
        mlen, mtype = len_type(buf, off)
        if mlen < HEADER.size or off + mlen > n:
            break
        if mtype == MSG_PACKET:
            pid = -1
            size = 0
            a = off + _ATTRS_AT
            end = off + mlen
            if not count_bytes and a + 12 <= end and nla(buf, a)[1] == NFQA_PACKET_HDR:
                pid = be32(buf, a + 4)[0]  # the kernel puts the header first
            else:
                while a + ATTR.size <= end:
                    alen, atype = nla(buf, a)
                    if alen < ATTR.size or a + alen > end:
                        break
                    atype &= NLA_TYPE_MASK
                    if atype == NFQA_PACKET_HDR and alen >= 8:
                        pid = be32(buf, a + 4)[0]
                    elif atype == NFQA_CAP_LEN and alen >= 8:
                        size = be32(buf, a + 4)[0]
                    elif atype == NFQA_PAYLOAD and not size:
                        size = alen - ATTR.size
                    a += (alen + 3) & ~3
            if pid >= 0:
                add((be16(buf, off + _QUEUE_AT)[0], pid, size))
        elif mtype == NLMSG_ERROR and mlen >= HEADER.size + 4:
            err = _I32.unpack_from(buf, off + HEADER.size)[0]
            # the request's header follows the errno
            seq = HEADER.unpack_from(buf, off + HEADER.size + 4)[3] if mlen >= 36 else 0
            acks.append((seq, err))
        off += (mlen + 3) & ~3
