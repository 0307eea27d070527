"""TCP: the counters that tell a spurious retransmission from a real one.

node_exporter exports ``node_netstat_Tcp_OutSegs`` and ``node_netstat_Tcp_RetransSegs``
(from /proc/net/snmp) by default but not the TcpExt DSACK and undo counters (they need
``--collector.netstat.fields``).  A DSACK received means the peer got a segment twice: that
retransmission was not needed.  The honest retransmit rate (the rules' recording rule) is
(retransmitted - DSACKed) / (sent + retransmitted).  In a namespace node_exporter cannot
see, the base counters are exported too, under dtnkit's names.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from dtnkit.monitor.base import View, read_table

# (metric, help, TcpExt fields summed)
EXT: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "dtnkit_tcp_dsacks_received",
        "DSACKs received: the peer got a segment twice (a "
        "spurious retransmission), in order or out of order (TcpExt TCPDSACKRecv + "
        "TCPDSACKOfoRecv).",
        ("TCPDSACKRecv", "TCPDSACKOfoRecv"),
    ),
    (
        "dtnkit_tcp_spurious_rtos",
        "Retransmission timeouts found spurious by F-RTO (TcpExt TCPSpuriousRTOs).",
        ("TCPSpuriousRTOs",),
    ),
    (
        "dtnkit_tcp_undos",
        "Congestion-window reductions undone because the loss was "
        "spurious (TcpExt TCPFullUndo + TCPPartialUndo + TCPDSACKUndo + TCPLossUndo).",
        ("TCPFullUndo", "TCPPartialUndo", "TCPDSACKUndo", "TCPLossUndo"),
    ),
    (
        "dtnkit_tcp_fast_retransmits",
        "Fast retransmissions (TcpExt TCPFastRetrans).",
        ("TCPFastRetrans",),
    ),
    (
        "dtnkit_tcp_slow_start_retransmits",
        "Retransmissions in slow start (TcpExt TCPSlowStartRetrans).",
        ("TCPSlowStartRetrans",),
    ),
    (
        "dtnkit_tcp_lost_retransmits",
        "Retransmissions lost again (TcpExt TCPLostRetransmit).",
        ("TCPLostRetransmit",),
    ),
)
# exported only for a namespace node_exporter cannot see (node_netstat_Tcp_* elsewhere)
BASE: tuple[tuple[str, str, str], ...] = (
    (
        "dtnkit_tcp_segments_sent",
        "TCP segments sent, retransmissions excluded (Tcp OutSegs; "
        "node_netstat_Tcp_OutSegs outside a namespace).",
        "OutSegs",
    ),
    (
        "dtnkit_tcp_segments_retransmitted",
        "TCP segments retransmitted (Tcp RetransSegs; "
        "node_netstat_Tcp_RetransSegs outside a namespace).",
        "RetransSegs",
    ),
)


class TcpCollector:
    name = "tcp"

    def collect(self, view: View) -> Iterator[Metric]:
        ext = read_table(view.proc_net / "netstat", "TcpExt")
        if not ext:
            raise OSError(f"no TcpExt counters in {view.proc_net / 'netstat'}")
        for metric, text, fields in EXT:
            family = CounterMetricFamily(metric, text)
            family.add_metric([], float(sum(ext.get(f, 0) for f in fields)))
            yield family
        if view.foreign:
            snmp = read_table(view.proc_net / "snmp", "Tcp")
            for metric, text, field in BASE:
                family = CounterMetricFamily(metric, text)
                family.add_metric([], float(snmp[field]))
                yield family
