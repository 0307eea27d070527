"""Name the layer that binds: ordered checks over probe results, stopping at the first.

Order: NIC line rate -> host network stack -> path -> storage -> application.  The network
checks bind only when the network is the slowest thing measured; when storage is slower, they
say so and the storage check decides.  The host-network and path checks read the sampler:
with fewer than MIN_SAMPLES samples of the network probe they are not decided and the verdict
is ``inconclusive``, never a layer.  Pure: results in, verdict out.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dtnkit.errors import ExitStatus
from dtnkit.measure.result import ProbeResult
from dtnkit.units import format_rate


class Layer(enum.StrEnum):
    NIC = "nic"
    HOST_NETWORK = "host-network"
    PATH = "path"
    STORAGE = "storage"
    APPLICATION = "application"
    NONE = "none"
    INCONCLUSIVE = "inconclusive"  # too few samples to name a layer


# exit status of `dtnkit diagnose` for each verdict (docs/reference.md)
EXIT = {
    Layer.NONE: ExitStatus.OK,
    Layer.NIC: ExitStatus.BINDS_NIC,
    Layer.HOST_NETWORK: ExitStatus.BINDS_HOST_NETWORK,
    Layer.PATH: ExitStatus.BINDS_PATH,
    Layer.STORAGE: ExitStatus.BINDS_STORAGE,
    Layer.APPLICATION: ExitStatus.BINDS_APPLICATION,
    Layer.INCONCLUSIVE: ExitStatus.INCONCLUSIVE,
}

MIN_SAMPLES = 5  # sampler samples of the network probe the flow-limit checks need

WINDOW_LIMITED_PCT = 10.0  # rwnd_limited or sndbuf_limited share of the flow's busy time
SOFTIRQ_SATURATED_PCT = 90.0
LINE_RATE_SHARE = 0.9


@dataclass
class LayerCheck:
    layer: Layer
    checked: str
    found: str
    binds: bool | None  # None: not checked (an earlier layer binds, or no data)
    next_step: str = ""
    groups: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "layer": str(self.layer),
            "checked": self.checked,
            "found": self.found,
            "binds": self.binds,
            "next": self.next_step,
            "groups": self.groups,
            "evidence": self.evidence,
        }


@dataclass
class Diagnosis:
    checks: list[LayerCheck]
    results: dict[str, ProbeResult]
    # why no layer can be named (too few samples), with the next step; "" when decided
    inconclusive: str = ""
    rerun: str = ""

    @property
    def verdict(self) -> LayerCheck | None:
        return next((c for c in self.checks if c.binds), None)

    @property
    def layer(self) -> Layer:
        v = self.verdict
        return v.layer if v else Layer.INCONCLUSIVE if self.inconclusive else Layer.NONE

    def as_dict(self) -> dict[str, Any]:
        v = self.verdict
        if v is None and self.inconclusive:
            summary, nxt = self.inconclusive, self.rerun
        else:
            summary = v.found if v else "no layer binds on the figures measured"
            nxt = v.next_step if v else "measure end to end (--e2e) to see what the transfer meets"
        net = self.results.get("net")
        return {
            "schema": "dtnkit.diagnosis/1",
            "verdict": {
                "layer": str(self.layer),
                "summary": summary,
                "groups": v.groups if v else [],
                "next": nxt,
                "evidence": v.evidence if v else {},
                "samples": net.summary.get("sampler_samples") if net else None,
                "min_samples": MIN_SAMPLES,
            },
            "checks": [c.as_dict() for c in self.checks],
            "results": {k: r.as_dict(with_raw=False) for k, r in self.results.items()},
        }


def _g(bps: float | None) -> str:
    return format_rate(bps)


def tune_hint(args: str, ends: Sequence[str], *, peer_too: bool = True) -> str:
    """``dtnkit tune apply ARGS`` once per end, each with the options in force there
    (``--netns``, ``--state-dir``); one end only: say the peer needs it too."""
    cmds = [" ".join(x for x in ("dtnkit tune apply", args, opts) if x) for opts in ends or [""]]
    text = " and ".join(f"`{c}`" for c in cmds)
    if len(cmds) == 1 and peer_too:
        text += " (here, and the same on the peer)"
    return text


def diagnose(
    net: ProbeResult | None,
    *,
    link_bps: float | None = None,
    disk: ProbeResult | None = None,
    e2e: ProbeResult | None = None,
    cap_bps: float | None = None,
    cap_kind: str = "",
    dev: str | None = None,
    ends: Sequence[str] = ("",),
    rtt_ms: float | None = None,
) -> Diagnosis:
    """``link_bps``: the egress interface's speed; ``cap_bps``: a shaper on it (``cap_kind``
    tbf/htb) when one is lower; ``ends``: the options of each end to tune, for the hints
    (the first is this host); ``rtt_ms``: the RTT the user gave (--rtt), which the hints
    carry instead of the one measured."""
    T = net.summary["throughput_bps"] if net else None
    D = disk.summary["throughput_bps"] if disk else None
    E = e2e.summary["throughput_bps"] if e2e else None
    s = net.summary if net else {}
    checks: list[LayerCheck] = []
    # every probe run by the registry has sampler_samples; a result without one is not judged
    n_samples = int(s.get("sampler_samples") or 0)
    undersampled = net is not None and "sampler_samples" in s and n_samples < MIN_SAMPLES
    here = ends[0] if ends else ""
    line = min(r for r in (link_bps, cap_bps) if r) if (link_bps or cap_bps) else None
    iface = dev or "the interface"
    line_text = (
        f"{iface}'s {_g(line)} {cap_kind} cap (link {_g(link_bps)})"
        if cap_bps and line == cap_bps
        else f"the {_g(line)} link"
    )

    # does the network set the pace at all?
    net_binds = T is not None and (D is None or T <= 1.25 * D) and (E is None or E >= 0.7 * T)
    slower = (
        ""
        if T is None or net_binds
        else (
            f"the network ({_g(T)}) is faster than "
            + (f"storage ({_g(D)})" if D is not None and D < T else f"the transfer ({_g(E)})")
        )
    )

    # 1. NIC line rate
    if T is None:
        checks.append(LayerCheck(Layer.NIC, "iperf3 rate vs link speed", "no network probe", None))
    else:
        peer = net.spec.get("peer") if net else None
        experiment_cmd = " ".join(
            x
            for x in (
                "dtnkit experiment --groups buffers,congestion",
                f"--peer {peer}" if peer else "",
                "--both-ends" if len(ends) > 1 else "",
                here,
                f"--rtt {rtt_ms:g}ms" if rtt_ms else "",
            )
            if x
        )
        # what the interface puts on the wire (headers included, as a NIC or shaper counts)
        tx = s.get("sampler_nic_tx_bps_mean") if s.get("sampler_nic_tx_dev") == dev else None
        ev = {
            "throughput_bps": T,
            "link_bps": link_bps,
            "cap_bps": cap_bps,
            "cap_kind": cap_kind or None,
            "line_rate_bps": line,
            "dev": dev,
            "egress_tx_bps_mean": tx,
            "egress_tx_bps_max": s.get("sampler_nic_tx_bps_max") if tx else None,
        }
        if line and LINE_RATE_SHARE * line <= max(T, tx or 0.0) and net_binds:
            sends = f"; {iface} sends {_g(tx)} ({tx / line:.0%} of it)" if tx else ""
            checks.append(
                LayerCheck(
                    Layer.NIC,
                    "iperf3 rate vs the egress interface's line rate",
                    f"NIC-bound: iperf3 {_g(T)} is {T / line:.0%} of {line_text}{sends}",
                    True,
                    "a faster NIC or more NICs; host tuning will not raise this and buffer "
                    "tuning may hurt (do not apply buffers or pacing here; an experiment shows "
                    f"it: `{experiment_cmd}`)",
                    evidence=ev,
                )
            )
        else:
            share = f"{T / line:.0%} of {line_text}" if line else "link speed unknown"
            found = f"not at line rate: {_g(T)} ({share})" + (f"; {slower}" if slower else "")
            checks.append(
                LayerCheck(
                    Layer.NIC,
                    "iperf3 rate vs the egress interface's line rate",
                    found,
                    False,
                    evidence=ev,
                )
            )

    def not_decided(layer: Layer, checked: str, ev: dict[str, Any]) -> LayerCheck:
        return LayerCheck(
            layer,
            checked,
            f"not decided: the network probe has {n_samples} sampler "
            f"sample(s), {MIN_SAMPLES} needed",
            None,
            evidence=ev,
        )

    # 2. host network stack: window- or CPU-limited flows
    if T is not None and not any(c.binds for c in checks):
        rwnd = s.get("sampler_rwnd_limited_pct_max") or 0.0
        sndbuf = s.get("sampler_sndbuf_limited_pct_max") or 0.0
        softirq = s.get("sampler_softirq_pct_max") or 0.0
        rtt = s.get("rtt_ms_mean")
        ev = {
            "rwnd_limited_pct_max": rwnd,
            "sndbuf_limited_pct_max": sndbuf,
            "softirq_pct_max": softirq,
            "rtt_ms_mean": rtt,
            "snd_cwnd_bytes_max": s.get("snd_cwnd_bytes_max"),
            "throughput_bps": T,
        }
        if net_binds and undersampled:
            checks.append(
                not_decided(
                    Layer.HOST_NETWORK, "flow limits from tcp_info (ss -ti) and softirq load", ev
                )
            )
        elif net_binds and max(rwnd, sndbuf) >= WINDOW_LIMITED_PCT:
            which = "receive window" if rwnd >= sndbuf else "send buffer"
            checks.append(
                LayerCheck(
                    Layer.HOST_NETWORK,
                    "flow limits from tcp_info (ss -ti) and softirq load",
                    f"host-network-bound: flows are limited by the {which} "
                    f"(rwnd_limited {rwnd:.0f}%, sndbuf_limited {sndbuf:.0f}% of the time) at "
                    f"{_g(T)} with RTT {rtt or 0:.1f} ms: buffers are below the path's "
                    "bandwidth-delay product",
                    True,
                    "tune buffers on both ends: "
                    + tune_hint(
                        f"--group buffers --rtt {rtt_ms:g}ms"
                        if rtt_ms
                        else f"--group buffers --rtt {max(1, round(rtt or 100))}ms",
                        ends,
                    )
                    + " (then pacing)",
                    ["buffers", "pacing"],
                    ev,
                )
            )
        elif net_binds and softirq >= SOFTIRQ_SATURATED_PCT:
            checks.append(
                LayerCheck(
                    Layer.HOST_NETWORK,
                    "flow limits from tcp_info (ss -ti) and softirq load",
                    f"host-network-bound: one core is {softirq:.0f}% in softirq at {_g(T)}",
                    True,
                    "spread and lighten packet work: tune rings, offloads and pacing; check IRQ "
                    "affinity ("
                    + " ".join(
                        x
                        for x in (
                            "dtnkit tune audit --group checks",
                            here,
                            f"--rtt {rtt_ms:g}ms" if rtt_ms else "",
                        )
                        if x
                    )
                    + ")",
                    ["rings", "offloads", "pacing"],
                    ev,
                )
            )
        else:
            checks.append(
                LayerCheck(
                    Layer.HOST_NETWORK,
                    "flow limits from tcp_info (ss -ti) and softirq load",
                    f"not window- or CPU-limited (rwnd_limited {rwnd:.0f}%, sndbuf_limited "
                    f"{sndbuf:.0f}%, softirq max {softirq:.0f}%)",
                    False,
                    evidence=ev,
                )
            )

    # 3. path
    if T is not None and not any(c.binds for c in checks):
        retr = s.get("retransmits", 0)
        rtt_min, rtt_mean = s.get("rtt_ms_min"), s.get("rtt_ms_mean")
        ev = {
            "retransmits": retr,
            "retrans_share": s.get("sampler_retrans_share"),
            "rtt_ms_min": rtt_min,
            "rtt_ms_mean": rtt_mean,
            "spurious_retrans_hint": s.get("sampler_spurious_retrans_hint"),
            "throughput_bps": T,
        }
        if net_binds and undersampled:
            checks.append(
                not_decided(
                    Layer.PATH, "what limits flows that are neither window- nor CPU-limited", ev
                )
            )
        elif net_binds:
            queueing = (
                f", RTT {rtt_min:.1f} -> {rtt_mean:.1f} ms under load"
                if rtt_min and rtt_mean
                else ""
            )
            checks.append(
                LayerCheck(
                    Layer.PATH,
                    "what limits flows that are neither window- nor CPU-limited",
                    f"path-bound: congestion control holds the flows at {_g(T)} below line rate "
                    f"with {retr} retransmits{queueing}: the bottleneck is on the path",
                    True,
                    "host tuning will not raise this: test the path (perfSONAR), look for a rate "
                    "cap, policer or loss; keep the host as it is",
                    [],
                    ev,
                )
            )
        else:
            checks.append(
                LayerCheck(
                    Layer.PATH,
                    "retransmits and loss on the path",
                    f"does not bind: {slower}",
                    False,
                    evidence=ev,
                )
            )

    # 4. storage
    if not any(c.binds for c in checks):
        if D is None:
            checks.append(
                LayerCheck(
                    Layer.STORAGE,
                    "fio read rate vs network and end to end",
                    "no storage probe (--path)",
                    None,
                )
            )
        else:
            ev = {
                "disk_read_bps": D,
                "network_bps": T,
                "e2e_bps": E,
                "disk_write_bps": disk.summary.get("write_bps") if disk else None,
            }
            binds = (T is None or D < 0.8 * T) and (E is None or 0.7 * D <= E <= 1.25 * D)
            found = (
                f"storage-bound: fio reads at {_g(D)}"
                + (f", the network runs at {_g(T)}" if T else "")
                + (f" and end to end moves {_g(E)}" if E else "")
                + ": host network tuning will not change end-to-end throughput"
            )
            checks.append(
                LayerCheck(
                    Layer.STORAGE,
                    "fio read rate vs network and end to end",
                    found if binds else f"does not bind: fio reads at {_g(D)}",
                    binds,
                    "faster storage or more of it (striping, more disks, NVMe), or tune the file "
                    "system; leave the network settings as they are"
                    if binds
                    else "",
                    [],
                    ev,
                )
            )

    # 5. application
    if not any(c.binds for c in checks):
        if E is None:
            checks.append(
                LayerCheck(
                    Layer.APPLICATION,
                    "end to end vs network and storage",
                    "no end-to-end probe (--e2e)",
                    None,
                )
            )
        else:
            floor = min(x for x in (T, D) if x is not None) if (T or D) else None
            binds = floor is not None and 0.5 * floor > E
            checks.append(
                LayerCheck(
                    Layer.APPLICATION,
                    "end to end vs network and storage",
                    (
                        f"application-bound: the transfer moves {_g(E)}, well below network "
                        f"{_g(T)} and storage {_g(D)}"
                    )
                    if binds
                    else f"does not bind: end to end {_g(E)}",
                    binds,
                    "look at the transfer tool: streams, block size, checksums, TLS"
                    if binds
                    else "",
                    [],
                    {"e2e_bps": E, "network_bps": T, "disk_read_bps": D},
                )
            )
    results = {k: r for k, r in (("net", net), ("disk", disk), ("e2e", e2e)) if r is not None}
    why = rerun = ""
    if (
        undersampled
        and not any(c.binds for c in checks)
        and any(c.binds is None and c.found.startswith("not decided") for c in checks)
    ):
        spec = net.spec if net else {}
        duration = float(spec.get("duration_s") or 10)
        interval = float(spec.get("interval_s") or 5)
        why = (
            f"inconclusive: the network probe has {n_samples} sampler sample(s) "
            f"({duration:g} s sampled every {interval:g} s), {MIN_SAMPLES} are needed "
            "to tell a window- or CPU-limited host from a path bottleneck"
        )
        rerun = (
            f"run again with --duration {max(duration, MIN_SAMPLES * interval):g} or "
            f"--interval {duration / MIN_SAMPLES:g} (or leave --interval out: it follows "
            "the duration)"
        )
    return Diagnosis(checks, results, why, rerun)
