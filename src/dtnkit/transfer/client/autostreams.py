"""``--streams auto``: how many TCP streams fill the path, from what this host knows.

One TCP stream moves at most one window per round trip.  The window a stream can reach is
bounded by the socket buffers both ends allow (Linux autotuning grows a socket's buffer up to
``net.ipv4.tcp_rmem``/``tcp_wmem``'s third value; ``SO_RCVBUF``/``SO_SNDBUF`` set by hand are
capped by ``net.core.rmem_max``/``wmem_max`` and turn autotuning off), and the kernel keeps
part of each buffer for its own bookkeeping: a receiver advertises half of its buffer
(``tcp_adv_win_scale`` 1, the default; kernels since 6.6 measure that share per connection,
about half again for GSO traffic), a sender has about three quarters of its buffer in flight
(the rest is the skbs' overhead and data not sent yet), so

    streams = ceil(rate x RTT / window),
    window = min(receive buffer / 2, send buffer x 3/4)

with the RTT measured by the kernel on the first connection (``TCP_INFO``), the rate given
(``--rate``) or, failing that, the link speed of the interface the server is reached through
(an upper bound of the path), and the buffers read from this host.  The far end's buffers are
not known: they are taken to be this host's (two untuned Linux hosts have the same defaults).
The result is capped (:data:`CAP`) and never below one; every input is kept in the
:class:`StreamsDecision` so that ``dtnkit cp`` can say what it chose and why.

A recommended-streams table measured by a sweep (``dtnkit sweep analyze --save-streams``,
:mod:`.streamtable`) takes the formula's place: the row for the measured RTT gives the count
(at most :data:`TABLE_CAP`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from dtnkit.host.host import Host
from dtnkit.transfer.client.streamtable import nearest_row
from dtnkit.units import counted

#: Most streams ``auto`` chooses: beyond this, more streams mostly add loss and memory.
CAP = 16
#: Most streams when the rate is not the path's but the link's (an upper bound) or assumed:
#: the path's real rate may be a tenth of it, and streams that all leave slow start into a
#: queue of one bandwidth-delay product lose together.  On a 50 ms / 1 Gbit/s lab path with
#: 10 Gbit/s veths, 16 streams took 1.1-2.2x the time of 8 for 256 MiB (docs/benchmarks.md).
#: They all start together: on that path, untuned ends (3 MiB windows), 8 at once took
#: 0.95-0.97x the time of 4 that started and let 4 more join once they were bound by their
#: windows, and on a 50 ms / 5 Gbit/s path with jumbo frames 0.83-0.84x (each stream's
#: window takes some 8 round trips to grow, so the joiners came 0.6 s late), though they
#: retransmitted 17-20 % of their segments on the 1 Gbit/s path where 4 did 9-12 %
#: (docs/transfer.md).
UNKNOWN_PATH_CAP = 8
#: Most streams a sweep's table may choose (as ``--streams N``).
TABLE_CAP = 256
#: Share of a receiving socket's buffer it advertises as its window (tcp_adv_win_scale = 1;
#: kernels since 6.6 advertise more, 0.77 of tcp_rmem's third value measured on 6.18 with
#: iperf3 on a 50 ms lab path, so this is the lower bound).
WINDOW_SHARE = 0.5
#: Share of a sending socket's buffer that is in flight when the buffer, not the path or
#: the far end's window, holds the stream: one iperf3 stream on a 50 ms / 5 Gbit/s lab path
#: (BBR, kernel 6.18, a receiver with 32 MiB) moved 0.85 of tcp_wmem's third value per
#: round trip with 4 MiB and 0.76 with 1 MiB.  (Half, as for a receiver, took four untuned
#: senders' 14 MB per round trip for 160 % of their windows.)
SEND_SHARE = 0.75
#: Rate assumed when neither --rate nor a link speed is known (a DTN's common NIC).
ASSUMED_RATE = 10 * 10**9
#: A stream whose window carries this much per round trip starts alone when the rate is
#: only an upper bound (the link's, or assumed): the others join once it shows it is bound
#: by its window (:class:`StreamsDecision` ``grow``).  On a 50 ms / 1 Gbit/s lab path behind
#: 10 Gbit/s veths, tuned ends (32 MiB windows), the two streams the link rate asked for took
#: 1.1-1.2x the time of one: BBR flows leaving startup together into a one-BDP queue lose
#: more, and the second stream's set-up costs round trips (docs/benchmarks.md).  Below it
#: (untuned ends: 3 MiB windows carry 503 Mbit/s at 50 ms) one stream is window-bound on any
#: path a DTN has, and waiting for it to show that would only delay the others.
SOLO_RATE = 10**9


@dataclass(frozen=True, slots=True)
class BufferLimits:
    """The socket buffer limits of a host, in bytes (third values of the tcp_*mem triples and
    the caps on SO_RCVBUF/SO_SNDBUF)."""

    tcp_rmem_max: int
    tcp_wmem_max: int
    rmem_max: int
    wmem_max: int

    @property
    def receive_window(self) -> int:
        """Bytes a receiving socket can advertise: autotuning's share of tcp_rmem's third
        value, or all of SO_RCVBUF's cap when dtnkit sets it (:meth:`rcvbuf_to_set`; the
        kernel doubles a SO_RCVBUF value for its bookkeeping)."""
        return max(int(self.tcp_rmem_max * WINDOW_SHARE), self.rcvbuf_to_set() or 0)

    @property
    def send_window(self) -> int:
        """Bytes a sending socket can have in flight (:data:`SEND_SHARE` of tcp_wmem's
        third value, the most autotuning grows its buffer to)."""
        return int(self.tcp_wmem_max * SEND_SHARE)

    @property
    def window(self) -> int:
        """Bytes one stream can have in flight: the smaller of the two."""
        return max(1, min(self.receive_window, self.send_window))

    def rcvbuf_to_set(self) -> int | None:
        """SO_RCVBUF for a receiving socket, or None to leave autotuning on.  Setting it
        turns autotuning off, so only when its cap (net.core.rmem_max) gives a larger window
        than autotuning reaches (half of tcp_rmem's third value)."""
        return self.rmem_max if self.rmem_max > self.tcp_rmem_max * WINDOW_SHARE else None


def parse_limits(
    tcp_rmem: str | None, tcp_wmem: str | None, rmem_max: str | None, wmem_max: str | None
) -> BufferLimits | None:
    """:class:`BufferLimits` from the text of the four sysctl files; None when one is missing or
    malformed."""
    try:
        triples = [(text or "").split() for text in (tcp_rmem, tcp_wmem)]
        if any(len(t) != 3 for t in triples):
            return None
        values = [
            int(triples[0][2]),
            int(triples[1][2]),
            int((rmem_max or "").strip()),
            int((wmem_max or "").strip()),
        ]
    except ValueError:
        return None
    if any(v <= 0 for v in values):
        return None
    return BufferLimits(*values)


def streams_for(rate_bps: float, rtt_s: float, window_bytes: int, cap: int = CAP) -> int:
    """``ceil(rate x RTT / window)`` streams (rate in bit/s, RTT in s, window in bytes),
    at least 1 and at most *cap*."""
    if not (rate_bps > 0 and rtt_s >= 0 and window_bytes > 0):
        raise ValueError(f"rate {rate_bps}, RTT {rtt_s} and window {window_bytes} must be positive")
    bdp = rate_bps / 8 * rtt_s
    # a window that exactly fills the path needs no second stream: round off float noise
    need = math.ceil(round(bdp / window_bytes, 9))
    return max(1, min(cap, need))


@dataclass(frozen=True, slots=True)
class StreamsDecision:
    """What ``--streams auto`` chose and from what."""

    streams: int
    rtt_s: float | None
    rate_bps: float
    rate_from: str  # "--rate", "link DEV", "assumed"
    window_bytes: int | None
    reason: str
    #: start one stream and add the others only when it is bound by its window (the rate is
    #: an upper bound and one window already carries :data:`SOLO_RATE`); else all start
    grow: bool = False
    #: the decision in one short line (``reason`` says why in full)
    brief: str = ""

    def short(self) -> str:
        """The decision for one line of a terminal; the full reason is :attr:`reason`."""
        return self.brief or self.reason

    def as_dict(self) -> dict[str, object]:
        return {
            "streams": self.streams,
            "rtt_ms": None if self.rtt_s is None else round(self.rtt_s * 1e3, 3),
            "rate_bps": self.rate_bps,
            "rate_from": self.rate_from,
            "window_bytes": self.window_bytes,
            "reason": self.reason,
            "grow": self.grow,
            "start": 1 if self.grow else self.streams,
        }


def show_rate(bps: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


def show_bytes(n: float) -> str:
    """``4 MiB``, ``1.5 GiB``, ``0.986 MiB`` (not ``1.01e+03 KiB``: from 999.5 KiB up the
    next unit)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale * 999.5 / 1024:
            return f"{n / scale:.3g} {unit}"
    return f"{n / 2**10:.3g} KiB"


def decide(
    rtt_s: float | None,
    rate_bps: float,
    rate_from: str,
    limits: BufferLimits | None,
    cap: int = CAP,
) -> StreamsDecision:
    """The number of streams, with the reason in words."""
    if rtt_s is None:
        return StreamsDecision(
            1,
            None,
            rate_bps,
            rate_from,
            None,
            "1 stream: the round-trip time could not be measured (no TCP_INFO)",
        )
    if limits is None:
        return StreamsDecision(
            1,
            rtt_s,
            rate_bps,
            rate_from,
            None,
            "1 stream: the socket buffer limits of this host could not be read",
        )
    window = limits.window
    if rate_from != "--rate":
        cap = min(cap, UNKNOWN_PATH_CAP)
    n = streams_for(rate_bps, rtt_s, window, cap)
    bdp = rate_bps / 8 * rtt_s
    capped = n == cap and math.ceil(round(bdp / window, 9)) > cap
    reason = (
        f"{counted(n, 'stream')}: rate {show_rate(rate_bps)} ({rate_from}) x "
        f"RTT {rtt_s * 1e3:.3g} ms = {show_bytes(bdp)} in flight, window "
        f"{show_bytes(window)} per stream (receive {limits.receive_window}, send "
        f"{limits.send_window} bytes: half of tcp_rmem max {limits.tcp_rmem_max}, "
        f"3/4 of tcp_wmem max {limits.tcp_wmem_max}; rmem_max {limits.rmem_max})"
        + (f", capped at {cap}" if capped else "")
        + (
            " (the rate is not the path's: give --rate for more)"
            if capped and rate_from != "--rate"
            else ""
        )
    )
    grow = n > 1 and rate_from != "--rate" and rtt_s > 0 and window * 8 / rtt_s >= SOLO_RATE
    if grow:
        reason += (
            f"; one stream starts: its window carries {window * 8 / rtt_s / 1e9:.3g} "
            "Gbit/s and the rate is only an upper bound, so the others join when it "
            "is bound by its window"
        )
    # one line of a terminal: the cap and the rate's source are in -v
    brief = (f"1 of up to {n} streams" if grow else counted(n, "stream")) + (
        f": {show_rate(rate_bps)} x {rtt_s * 1e3:.3g} ms / {show_bytes(window)} window"
    )
    return StreamsDecision(n, rtt_s, rate_bps, rate_from, window, reason, grow, brief)


def from_table(
    table: Sequence[tuple[float, int]],
    source: str,
    rtt_s: float | None,
    rate_bps: float,
    rate_from: str,
    cap: int = TABLE_CAP,
) -> StreamsDecision | None:
    """The decision a sweep's streams table makes for the measured RTT (None without one)."""
    if rtt_s is None or not table:
        return None
    row_rtt, streams = nearest_row(table, rtt_s * 1e3)
    n = max(1, min(cap, streams))
    return StreamsDecision(
        n,
        rtt_s,
        rate_bps,
        rate_from,
        None,
        f"{counted(n, 'stream')}: the streams table {source} (its row "
        f"for {row_rtt:g} ms, the nearest to the measured RTT "
        f"{rtt_s * 1e3:.3g} ms)" + (f", capped at {cap}" if n < streams else ""),
        brief=f"{counted(n, 'stream')}: the streams table's row for {row_rtt:g} ms",
    )


_SYSCTLS = (
    "/proc/sys/net/ipv4/tcp_rmem",
    "/proc/sys/net/ipv4/tcp_wmem",
    "/proc/sys/net/core/rmem_max",
    "/proc/sys/net/core/wmem_max",
)


def host_limits(host: Host) -> BufferLimits | None:
    """This host's socket buffer limits (of the network namespace *host* reads)."""
    return parse_limits(*(host.read(path) for path in _SYSCTLS))


def link_rate(host: Host, address: str) -> tuple[float, str] | None:
    """The link speed of the interface *address* is reached through, in bit/s, and where it
    came from; None when the kernel does not know it (loopback, some virtual devices)."""
    res = host.query(["ip", "-j", "route", "get", address])
    if not res.ok:
        return None
    try:
        routes = json.loads(res.stdout)
        dev = str(routes[0]["dev"])
    except (ValueError, LookupError, TypeError):
        return None
    if "/" in dev or dev.startswith("."):
        return None
    text = host.read(f"/sys/class/net/{dev}/speed")
    try:
        mbit = int((text or "").strip())
    except ValueError:
        return None
    return (mbit * 10**6, f"link speed of {dev}") if mbit > 0 else None
