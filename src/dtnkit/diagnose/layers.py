"""Name the layer that binds: ordered checks over probe results, stopping at the first.

Order: NIC line rate -> host network stack -> path -> storage -> application.  The network
checks bind only when the network is the slowest thing measured; when storage is slower, they
say so and the storage check decides.  Pure: results in, verdict out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from dtnkit.errors import ExitStatus
from dtnkit.measure.result import ProbeResult


class Layer(enum.StrEnum):
    NIC = "nic"
    HOST_NETWORK = "host-network"
    PATH = "path"
    STORAGE = "storage"
    APPLICATION = "application"
    NONE = "none"


# exit status of `dtnkit diagnose` for each verdict (docs/cli.md)
EXIT = {Layer.NONE: ExitStatus.OK, Layer.NIC: ExitStatus.BINDS_NIC,
        Layer.HOST_NETWORK: ExitStatus.BINDS_HOST_NETWORK, Layer.PATH: ExitStatus.BINDS_PATH,
        Layer.STORAGE: ExitStatus.BINDS_STORAGE, Layer.APPLICATION: ExitStatus.BINDS_APPLICATION}

WINDOW_LIMITED_PCT = 10.0  # rwnd_limited or sndbuf_limited share of the flow's busy time
SOFTIRQ_SATURATED_PCT = 90.0
LINE_RATE_SHARE = 0.9


@dataclass
class Check:
    layer: Layer
    checked: str
    found: str
    binds: bool | None  # None: not checked (an earlier layer binds, or no data)
    next_step: str = ""
    groups: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"layer": str(self.layer), "checked": self.checked, "found": self.found,
                "binds": self.binds, "next": self.next_step, "groups": self.groups,
                "evidence": self.evidence}


@dataclass
class Diagnosis:
    checks: list[Check]
    results: dict[str, ProbeResult]

    @property
    def verdict(self) -> Check | None:
        return next((c for c in self.checks if c.binds), None)

    @property
    def layer(self) -> Layer:
        v = self.verdict
        return v.layer if v else Layer.NONE

    def as_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "schema": "dtnkit.diagnosis/1",
            "verdict": {"layer": str(self.layer), "summary": v.found if v else
                        "no layer binds on the figures measured",
                        "groups": v.groups if v else [], "next": v.next_step if v else
                        "measure end to end (--e2e) to see what the transfer meets",
                        "evidence": v.evidence if v else {}},
            "checks": [c.as_dict() for c in self.checks],
            "results": {k: r.as_dict(with_raw=False) for k, r in self.results.items()},
        }


def _g(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e9:.2f} Gbit/s"


def diagnose(net: ProbeResult | None, *, link_bps: float | None = None,
             disk: ProbeResult | None = None, e2e: ProbeResult | None = None) -> Diagnosis:
    T = net.summary["throughput_bps"] if net else None
    D = disk.summary["throughput_bps"] if disk else None
    E = e2e.summary["throughput_bps"] if e2e else None
    s = net.summary if net else {}
    checks: list[Check] = []

    # does the network set the pace at all?
    net_binds = T is not None and (D is None or T <= 1.25 * D) and (E is None or E >= 0.7 * T)
    slower = "" if T is None or net_binds else (
        f"the network ({_g(T)}) is faster than "
        + (f"storage ({_g(D)})" if D is not None and D < T else f"the transfer ({_g(E)})"))

    # 1. NIC line rate
    if T is None:
        checks.append(Check(Layer.NIC, "iperf3 rate vs link speed", "no network probe", None))
    elif link_bps and LINE_RATE_SHARE * link_bps <= T and net_binds:
        checks.append(Check(
            Layer.NIC, "iperf3 rate vs link speed",
            f"NIC-bound: iperf3 {_g(T)} is {T / link_bps:.0%} of the {_g(link_bps)} link",
            True, "a faster NIC or more NICs; host tuning will not raise this and buffer "
            "tuning may hurt (do not apply buffers or pacing here)",
            evidence={"throughput_bps": T, "link_bps": link_bps}))
    else:
        share = f"{T / link_bps:.0%} of the {_g(link_bps)} link" if link_bps else \
            "link speed unknown"
        checks.append(Check(Layer.NIC, "iperf3 rate vs link speed",
                            f"not at line rate: {_g(T)} ({share})" + (f"; {slower}" if slower
                                                                       else ""), False,
                            evidence={"throughput_bps": T, "link_bps": link_bps}))

    # 2. host network stack: window- or CPU-limited flows
    if T is not None and not any(c.binds for c in checks):
        rwnd = s.get("sampler_rwnd_limited_pct_max") or 0.0
        sndbuf = s.get("sampler_sndbuf_limited_pct_max") or 0.0
        softirq = s.get("sampler_softirq_pct_max") or 0.0
        rtt = s.get("rtt_ms_mean")
        ev = {"rwnd_limited_pct_max": rwnd, "sndbuf_limited_pct_max": sndbuf,
              "softirq_pct_max": softirq, "rtt_ms_mean": rtt,
              "snd_cwnd_bytes_max": s.get("snd_cwnd_bytes_max"), "throughput_bps": T}
        if net_binds and max(rwnd, sndbuf) >= WINDOW_LIMITED_PCT:
            which = "receive window" if rwnd >= sndbuf else "send buffer"
            checks.append(Check(
                Layer.HOST_NETWORK, "flow limits from tcp_info (ss -ti) and softirq load",
                f"host-network-bound: flows are limited by the {which} "
                f"(rwnd_limited {rwnd:.0f}%, sndbuf_limited {sndbuf:.0f}% of the time) at "
                f"{_g(T)} with RTT {rtt or 0:.1f} ms: buffers are below the path's "
                "bandwidth-delay product", True,
                "tune buffers on both ends: dtnkit tune apply --group buffers --rtt "
                f"{max(1, round(rtt or 100))}ms (then pacing)", ["buffers", "pacing"], ev))
        elif net_binds and softirq >= SOFTIRQ_SATURATED_PCT:
            checks.append(Check(
                Layer.HOST_NETWORK, "flow limits from tcp_info (ss -ti) and softirq load",
                f"host-network-bound: one core is {softirq:.0f}% in softirq at {_g(T)}", True,
                "spread and lighten packet work: tune rings, offloads and pacing; check IRQ "
                "affinity (dtnkit tune audit --group checks)", ["rings", "offloads", "pacing"],
                ev))
        else:
            checks.append(Check(
                Layer.HOST_NETWORK, "flow limits from tcp_info (ss -ti) and softirq load",
                f"not window- or CPU-limited (rwnd_limited {rwnd:.0f}%, sndbuf_limited "
                f"{sndbuf:.0f}%, softirq max {softirq:.0f}%)", False, evidence=ev))

    # 3. path
    if T is not None and not any(c.binds for c in checks):
        retr = s.get("retransmits", 0)
        rtt_min, rtt_mean = s.get("rtt_ms_min"), s.get("rtt_ms_mean")
        ev = {"retransmits": retr, "retrans_share": s.get("sampler_retrans_share"),
              "rtt_ms_min": rtt_min,
              "rtt_ms_mean": rtt_mean, "spurious_retrans_hint":
              s.get("sampler_spurious_retrans_hint"), "throughput_bps": T}
        if net_binds:
            queueing = (f", RTT {rtt_min:.1f} -> {rtt_mean:.1f} ms under load"
                        if rtt_min and rtt_mean else "")
            checks.append(Check(
                Layer.PATH, "what limits flows that are neither window- nor CPU-limited",
                f"path-bound: congestion control holds the flows at {_g(T)} below line rate "
                f"with {retr} retransmits{queueing}: the bottleneck is on the path", True,
                "host tuning will not raise this: test the path (perfSONAR), look for a rate "
                "cap, policer or loss; keep the host as it is", [], ev))
        else:
            checks.append(Check(Layer.PATH, "retransmits and loss on the path",
                                f"does not bind: {slower}", False, evidence=ev))

    # 4. storage
    if not any(c.binds for c in checks):
        if D is None:
            checks.append(Check(Layer.STORAGE, "fio read rate vs network and end to end",
                                "no storage probe (--path)", None))
        else:
            ev = {"disk_read_bps": D, "network_bps": T, "e2e_bps": E,
                  "disk_write_bps": (disk.summary.get("write_bps") or 0) * 8 if disk else None}
            binds = (T is None or D < 0.8 * T) and (E is None or 0.7 * D <= E <= 1.25 * D)
            found = (f"storage-bound: fio reads at {_g(D)}" +
                     (f", the network runs at {_g(T)}" if T else "") +
                     (f" and end to end moves {_g(E)}" if E else "") +
                     ": host network tuning will not change end-to-end throughput")
            checks.append(Check(
                Layer.STORAGE, "fio read rate vs network and end to end",
                found if binds else f"does not bind: fio reads at {_g(D)}", binds,
                "faster storage or more of it (striping, more disks, NVMe), or tune the file "
                "system; leave the network settings as they are" if binds else "", [], ev))

    # 5. application
    if not any(c.binds for c in checks):
        if E is None:
            checks.append(Check(Layer.APPLICATION, "end to end vs network and storage",
                                "no end-to-end probe (--e2e)", None))
        else:
            floor = min(x for x in (T, D) if x is not None) if (T or D) else None
            binds = floor is not None and 0.5 * floor > E
            checks.append(Check(
                Layer.APPLICATION, "end to end vs network and storage",
                (f"application-bound: the transfer moves {_g(E)}, well below network "
                 f"{_g(T)} and storage {_g(D)}") if binds else
                f"does not bind: end to end {_g(E)}", binds,
                "look at the transfer tool: streams, block size, checksums, TLS" if binds else "",
                [], {"e2e_bps": E, "network_bps": T, "disk_read_bps": D}))
    results = {k: r for k, r in (("net", net), ("disk", disk), ("e2e", e2e)) if r is not None}
    return Diagnosis(checks, results)
