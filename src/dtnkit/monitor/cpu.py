"""CPU: network softirq runs per CPU.

node_exporter exports the softirq share of CPU time (``node_cpu_seconds_total{mode=
"softirq"}``) and context switches (``node_context_switches_total``) by default, so dtnkit
does not; it adds what 1.5 leaves out (``--collector.stat.softirq`` is off and the
per-CPU softirqs collector came in 1.6): NET_RX and NET_TX runs per CPU from /proc/softirqs,
which show the CPU that takes a NIC's receive work.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from dtnkit.monitor.base import View

VECTORS = ("NET_RX", "NET_TX")


def parse(text: str) -> dict[str, list[int]]:
    """{vector: [count per CPU]} from /proc/softirqs."""
    lines = text.splitlines()
    cpus = len(lines[0].split()) if lines else 0
    out: dict[str, list[int]] = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        values = [int(v) for v in rest.split()[:cpus]]
        out[name.strip()] = values
    return out


class CpuCollector:
    name = "cpu"

    def collect(self, view: View) -> Iterator[Metric]:
        table = parse((view.proc / "softirqs").read_text())
        family = CounterMetricFamily(
            "dtnkit_cpu_net_softirqs",
            "Network softirq runs per CPU (/proc/softirqs).",
            labels=["cpu", "vector"],
        )
        for vector in VECTORS:
            for cpu, count in enumerate(table.get(vector, [])):
                family.add_metric([str(cpu), vector.lower()], float(count))
        yield family
