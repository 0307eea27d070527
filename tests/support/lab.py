"""Lab-path helpers for tests and bench scripts: buffers on the end hosts, one iperf3 run.

They lived on ``LabPath`` once; production code never used them, and calling the network
probe from the lab made ``lab`` and ``measure`` import each other.
"""

from __future__ import annotations

from dtnkit.host.host import Host
from dtnkit.lab.path import LabPath, lab_peers
from dtnkit.measure.probes.net import NetSpec
from dtnkit.measure.registry import run_probe
from dtnkit.measure.tool import Context


def set_tcp_buffers(p: LabPath, value: str) -> None:
    """Set tcp_rmem and tcp_wmem (e.g. ``"4096 131072 4194304"``) on every end host, through
    the Host seam (a write inside each host's namespace)."""
    for h in p.hosts:
        host = Host.live(h.netns)
        for key in ("tcp_rmem", "tcp_wmem"):
            host.write(f"/proc/sys/net/ipv4/{key}", value)


def goodput_bps(p: LabPath, *, seconds: int = 8, streams: int = 1) -> float:
    """One iperf3 run from the first src to the first dst host (the network probe)."""
    spec = NetSpec(f"{p.name}/{p.dst.name}", streams=streams, duration_s=seconds)
    result = run_probe(Host.live(p.src.netns), spec,
                       context=Context(lab_peers=lab_peers(p.state_root)))
    return float(result.summary["throughput_bps"])
