"""The NFQUEUE codec (dtnkit.lab.nfqueue) without a kernel: what the delay stage reads from
the kernel's messages, and that no bytes make it fail."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.host.parsers import netlink
from dtnkit.lab import nfqueue

RECV_BUFSIZE = 1 << 16  # the engine's receive buffer


def packet_msg(queue: int, packet_id: int, length: int | None, *, mark_first: bool) -> bytes:
    """An NFQNL_MSG_PACKET as the kernel sends it: the packet header attribute first (the
    kernel's order), or after a mark attribute (an order the codec must also read)."""
    hdr = netlink.attr(nfqueue.NFQA_PACKET_HDR, struct.pack(">IHB", packet_id, 0x0800, 2))
    mark = netlink.attr(3, struct.pack(">I", 0))  # NFQA_MARK
    attrs = mark + hdr if mark_first else hdr + mark
    if length is not None:
        attrs += netlink.attr(nfqueue.NFQA_CAP_LEN, struct.pack(">I", length))
        attrs += netlink.attr(nfqueue.NFQA_PAYLOAD, b"E")
    return netlink.message(nfqueue.MSG_PACKET, 0, 0, struct.pack(">BBH", 2, 0, queue) + attrs)


def ack_msg(seq: int, errno: int) -> bytes:
    """An NLMSG_ERROR: the negative errno, then the request's header."""
    return netlink.message(
        netlink.NLMSG_ERROR,
        0,
        0,
        struct.pack("=i", -errno) + netlink.HEADER.pack(32, 0x302, 5, seq, 0),
    )


def decoded(
    data: bytes, count_bytes: bool
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    buf = bytearray(RECV_BUFSIZE)
    buf[: len(data)] = data
    packets: list[tuple[int, int, int]] = []
    acks: list[tuple[int, int]] = []
    nfqueue.decode(buf, len(data), count_bytes, packets, acks)
    return packets, acks


MESSAGE = st.one_of(
    st.tuples(
        st.just("packet"),
        st.integers(0, 65535),
        st.integers(0, 2**32 - 1),
        st.integers(1, 65535),
        st.booleans(),
    ),
    st.tuples(st.just("ack"), st.integers(1, 2**31), st.integers(0, 200)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(MESSAGE, max_size=40), st.booleans())
def test_every_packet_and_ack_is_read_in_order(messages: list[tuple], count_bytes: bool) -> None:
    data = b""
    want_packets, want_acks = [], []
    for m in messages:
        if m[0] == "packet":
            _, queue, pid, length, mark_first = m
            data += packet_msg(queue, pid, length if count_bytes else None, mark_first=mark_first)
            want_packets.append((queue, pid, length if count_bytes else 0))
        else:
            _, seq, errno = m
            data += ack_msg(seq, errno)
            want_acks.append((seq, -errno))
    assert decoded(data, count_bytes) == (want_packets, want_acks)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400), st.booleans(), st.integers(0, 3))
def test_any_bytes_are_read_without_an_error(data: bytes, count_bytes: bool, at: int) -> None:
    """Random bytes, also after a valid packet and at the very end of the receive buffer:
    read or skipped, never an exception (the engine's loop must not die on one datagram)."""
    valid = packet_msg(1, 7, 100 if count_bytes else None, mark_first=False)
    as_packet = netlink.message(nfqueue.MSG_PACKET, 0, 0, data)  # a packet of random body
    for blob in (
        data,
        valid + data,
        valid[: at * 8] + data,
        as_packet,
        as_packet[: 16 + at] + data,
    ):
        decoded(blob, count_bytes)
        buf = bytearray(RECV_BUFSIZE)
        buf[RECV_BUFSIZE - len(blob) :] = blob
        start = RECV_BUFSIZE - len(blob)
        view = memoryview(buf)[start:]
        nfqueue.decode(view, len(blob), count_bytes, [], [])


def test_a_verdict_is_one_fixed_message() -> None:
    msg = nfqueue.verdict_msg(1, 0x01020304, nfqueue.NF_DROP, batch=False)
    length, mtype, flags = struct.unpack_from("=IHH", msg)
    assert length == len(msg) == 32 and flags == netlink.NLM_F_REQUEST
    assert mtype == (nfqueue.NFNL_SUBSYS_QUEUE << 8) | nfqueue.NFQNL_MSG_VERDICT
    assert netlink.attributes(msg[20:]) == {
        nfqueue.NFQA_VERDICT_HDR: struct.pack(">II", nfqueue.NF_DROP, 0x01020304)
    }
