"""softnet: the per-CPU backlog counters node_exporter 1.5 leaves out.

node_exporter exports /proc/net/softnet_stat's processed, dropped and time-squeeze columns
(``node_softnet_dropped_total``, ``node_softnet_times_squeezed_total``); dtnkit adds the
flow-limit drops, the packets steered here by RPS and the backlog length.  In a namespace
node_exporter cannot see (the file is the host's, whatever the namespace), drops and squeezes
are exported too.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from dtnkit.monitor.base import View


def parse(text: str) -> list[list[int]]:
    """One row of integers per CPU (hex columns); the CPU id is column 13 when the kernel
    prints it (4.x+), else the row's index."""
    rows = []
    for index, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
        cols = [int(c, 16) for c in line.split()]
        cpu = cols[12] if len(cols) >= 13 else index
        cols = (cols + [0] * 13)[:13]
        cols[12] = cpu
        rows.append(cols)
    return rows


class SoftnetCollector:
    name = "softnet"

    def collect(self, view: View) -> Iterator[Metric]:
        rows = parse((view.proc_net / "softnet_stat").read_text())
        families: list[tuple[CounterMetricFamily | GaugeMetricFamily, int]] = [
            (
                CounterMetricFamily(
                    "dtnkit_softnet_flow_limit_drops",
                    "Packets dropped by the flow limit (softnet_stat column 11).",
                    labels=["cpu"],
                ),
                10,
            ),
            (
                CounterMetricFamily(
                    "dtnkit_softnet_rps_received",
                    "Packets steered to this CPU by RPS (column 10).",
                    labels=["cpu"],
                ),
                9,
            ),
            (
                GaugeMetricFamily(
                    "dtnkit_softnet_backlog_packets",
                    "Packets in the CPU's input backlog (column 12).",
                    labels=["cpu"],
                ),
                11,
            ),
        ]
        if view.foreign:
            families += [
                (
                    CounterMetricFamily(
                        "dtnkit_softnet_drops",
                        "Packets dropped: netdev_max_backlog exceeded (column 2; "
                        "node_softnet_dropped_total outside a namespace).",
                        labels=["cpu"],
                    ),
                    1,
                ),
                (
                    CounterMetricFamily(
                        "dtnkit_softnet_times_squeezed",
                        "NET_RX runs that ran out of budget (column 3; "
                        "node_softnet_times_squeezed_total outside a namespace).",
                        labels=["cpu"],
                    ),
                    2,
                ),
            ]
        for family, col in families:
            for row in rows:
                family.add_metric([str(row[12])], float(row[col]))
            yield family
