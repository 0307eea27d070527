"""The kernel's ``struct tcp_info`` (linux/tcp.h), sans I/O: the bytes ``getsockopt(IPPROTO_TCP,
TCP_INFO)`` returned in, the fields a client reads out.

The layout only grows at its end, so a shorter answer (an older kernel) still holds the
fields before its end; a field past it is None."""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: Eight ``__u8`` (state, ca_state, retransmits, probes, backoff, options, the two wscale
#: nibbles, the app-limited bits), then ``__u32`` rto, ato, snd_mss, rcv_mss, unacked, sacked,
#: lost, retrans, fackets, last_data_sent, last_ack_sent, last_data_recv, last_ack_recv, pmtu,
#: rcv_ssthresh, rtt (microseconds: the kernel's smoothed RTT), rttvar: every kernel since 2.6.
PREFIX = struct.Struct("=8B17I")
RTT = 8 + 15
#: ... on to ``tcpi_bytes_received`` (kernel 4.1+): ``__u32`` snd_ssthresh, snd_cwnd, advmss,
#: reordering, rcv_rtt, rcv_space, total_retrans, then ``__u64`` pacing_rate, max_pacing_rate,
#: bytes_acked, bytes_received.
BYTES = struct.Struct("=8B24I4Q")
CWND, TOTAL_RETRANS, ACKED, RECEIVED = 8 + 18, 8 + 23, 8 + 24 + 2, 8 + 24 + 3
#: Bytes to ask the kernel for: the longest layout read here.
SIZE = BYTES.size


@dataclass(frozen=True, slots=True)
class TcpInfo:
    """What a connection's ``tcp_info`` says (None: the kernel's layout ends before it)."""

    rtt_s: float | None  # the smoothed round-trip time (None also before any sample)
    cwnd: int | None  # the congestion window, in segments
    retransmits: int | None  # segments retransmitted over the connection's life
    bytes_acked: int | None  # bytes sent and acknowledged by the peer
    bytes_received: int | None  # bytes received in order


def parse(raw: bytes) -> TcpInfo | None:
    """The fields of *raw* (None when it is shorter than the oldest layout)."""
    if len(raw) < PREFIX.size:
        return None
    rtt_us = PREFIX.unpack_from(raw)[RTT]
    rtt = rtt_us / 1e6 if rtt_us > 0 else None
    if len(raw) < BYTES.size:
        return TcpInfo(rtt, None, None, None, None)
    f = BYTES.unpack_from(raw)
    return TcpInfo(rtt, int(f[CWND]), int(f[TOTAL_RETRANS]), int(f[ACKED]), int(f[RECEIVED]))
