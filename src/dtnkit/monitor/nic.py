"""NIC: drop and error counters per interface that node_exporter 1.5 does not split out.

node_exporter's ``node_network_receive_drop_total`` is rx_dropped + rx_missed_errors (and
``..._errs_total``, ``..._fifo_total`` exist); it does not show the ring overruns alone
(``rx_missed_errors``: the NIC had no descriptor, raise the ring), the CRC and length errors
(cabling, MTU) or rx_over_errors without ``--collector.netdev.enable-detailed-metrics``.
In a namespace node_exporter cannot see, the totals are exported too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, Metric

from dtnkit.monitor.base import View

SPLIT: tuple[tuple[str, str, str], ...] = (
    (
        "dtnkit_nic_receive_missed",
        "Packets the NIC dropped for want of a ring descriptor "
        "(rx_missed_errors): raise the RX ring or spread the interrupts.",
        "rx_missed_errors",
    ),
    ("dtnkit_nic_receive_over_errors", "Receive FIFO overruns (rx_over_errors).", "rx_over_errors"),
    (
        "dtnkit_nic_receive_crc_errors",
        "Frames with a bad CRC (rx_crc_errors): cabling or optics.",
        "rx_crc_errors",
    ),
    (
        "dtnkit_nic_receive_length_errors",
        "Frames of a bad length (rx_length_errors): often an MTU mismatch.",
        "rx_length_errors",
    ),
)
TOTALS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "dtnkit_nic_receive_drops",
        "Received packets dropped (rx_dropped + rx_missed_errors; "
        "node_network_receive_drop_total outside a namespace).",
        ("rx_dropped", "rx_missed_errors"),
    ),
    (
        "dtnkit_nic_receive_errors",
        "Receive errors (rx_errors; node_network_receive_errs_total outside a namespace).",
        ("rx_errors",),
    ),
    ("dtnkit_nic_transmit_drops", "Packets dropped on transmit (tx_dropped).", ("tx_dropped",)),
    ("dtnkit_nic_transmit_errors", "Transmit errors (tx_errors).", ("tx_errors",)),
)


def _counter(stats: Path, name: str) -> int:
    try:
        return int((stats / name).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0  # a counter the driver does not keep


class NicCollector:
    name = "nic"

    def collect(self, view: View) -> Iterator[Metric]:
        devices = sorted(
            p.name
            for p in view.sys_class_net.iterdir()
            if p.name != "lo" and (p / "statistics").is_dir()
        )
        table = SPLIT + TOTALS if view.foreign else SPLIT
        for metric, text, fields in (
            (m, t, f if isinstance(f, tuple) else (f,)) for m, t, f in table
        ):
            family = CounterMetricFamily(metric, text, labels=["device"])
            for dev in devices:
                stats = view.sys_class_net / dev / "statistics"
                family.add_metric([dev], float(sum(_counter(stats, f) for f in fields)))
            yield family
