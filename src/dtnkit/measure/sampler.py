"""The sampler that runs beside every probe.

While a probe runs, :class:`Sampler` reads every ``interval_s`` seconds, in a daemon thread:

* ``/proc/stat`` (global: the whole machine, whatever the namespace): per-CPU utilisation and
  context switches;
* ``/proc/net/snmp`` and ``/proc/net/netstat`` of the host's namespace: TCP segments sent and
  retransmitted, and the TcpExt counters that tell real loss from reordering (on veth and
  through the lab's delay stage many retransmits are spurious: the receiver reports them back
  as duplicates with DSACK);
* ``/proc/net/dev`` of the namespace: receive drops and errors per interface;
* ``ss -tinO FILTER`` in the namespace: tcp_info of the probe's own sockets.

Each sample holds the rates over the interval since the reading before (each source is timed
on its own, so a slow ``ss`` does not skew the /proc rates).  A source that cannot be read or
parsed leaves its part of the sample ``None`` (flows: ``[]``) and adds a line to the sample's
``errors``; the thread never raises into the caller.

All reads go through a private, read-only copy of the given :class:`Host` with its own command
cache, emptied before every reading, so the sampler neither sees stale cached output nor clears
the cache of the Host the caller is using from another thread.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from dtnkit.host.host import Host
from dtnkit.host.runner import SubprocessRunner
from dtnkit.measure.parsers import parse_net_dev, parse_proc_stat, parse_snmp, parse_ss_tin
from dtnkit.measure.schedule import ticks

__all__ = ["Sampler", "summarize"]

# TcpExt counters kept per sample: sample key -> counter name(s), first present wins
TCPEXT = {
    "lost_retrans": ("TCPLostRetransmit",),
    "timeouts": ("TCPTimeouts",),
    "dsack_undo": ("TCPDSACKUndo",),
    "sack_reorder": ("TCPSACKReorder",),
    "spurious_rtos": ("TCPSpuriousRTOs",),
    # segments the receiver reported as duplicates: retransmits that were not needed
    "dsack_recv_segs": ("TCPDSACKRecvSegs", "TCPDSACKRecv"),
}
CPU_PCT_KEYS = ("user", "nice", "system", "irq", "softirq", "iowait", "idle", "steal")
# a flow that moved fewer bytes than this over an interval is idle (e.g. iperf3's control
# connection): it is left out of the RTT figures of summarize()
ACTIVE_BYTES = 16384
SS_TIMEOUT_S = 10.0


@dataclass
class Reading:
    """Raw, parsed sources at one moment; ``times`` holds when each source was read."""

    t: float
    data: dict[str, Any] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class Sampler:
    """Samples a host (or namespace) beside a probe; use as a context manager."""

    def __init__(
        self,
        host: Host,
        *,
        interval_s: float = 5.0,
        ss_filter: Sequence[str] = (),
        ifaces: Sequence[str] | None = None,
        on_sample: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s!r}")
        runner = host.runner
        if isinstance(runner, SubprocessRunner):
            runner = SubprocessRunner(timeout=min(runner.timeout, SS_TIMEOUT_S))
        self.host = Host(root=host.root, netns=host.netns, runner=runner, read_only=True)
        self.interval_s = float(interval_s)
        self.ss_filter = tuple(ss_filter)
        self.ifaces = tuple(ifaces) if ifaces is not None else None
        # called with each new sample, from the sampler's thread (progress); never raises
        self.on_sample = on_sample
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._prev: Reading | None = None
        self._base: Reading | None = None  # the reading before _prev
        self._initial: Reading | None = None  # taken at __enter__ (its errors go in sample 1)
        self._flow_bytes: dict[tuple[str, str], int] = {}
        self._flow_bytes_base: dict[tuple[str, str], int] = {}

    # ---- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Sampler:
        self.samples = []
        self._stop.clear()
        self._t0 = time.monotonic()
        self._prev = self._initial = self.read(flows=False)
        self._base = None
        self._flow_bytes, self._flow_bytes_base = {}, {}
        self._thread = threading.Thread(target=self._loop, name="dtnkit-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._step(final=True)

    # ---- the thread --------------------------------------------------------------------------
    def _loop(self) -> None:
        for _ in ticks(self._stop, self._t0, self.interval_s):
            self._step()

    def _step(self, *, final: bool = False) -> None:
        """Take one reading and append (or, at the end, maybe replace) a sample; never raises."""
        try:
            cur = self.read()
            prev = self._prev
            if prev is None:  # not entered: nothing to take deltas against
                return
            short = cur.t - prev.t < self.interval_s / 4
            if final and short and self.samples and self._base is not None:
                # the tail is too short for good rates: widen the last sample to cover it
                self._flow_bytes = self._flow_bytes_base
                self.samples[-1] = self._sample(self._base, cur)
                self._prev = cur
                return
            self._flow_bytes_base = dict(self._flow_bytes)
            self.samples.append(self._sample(prev, cur))
            self._base, self._prev = prev, cur
        except Exception as exc:  # a bug here must not stop the probe
            self.samples.append(
                _empty_sample(
                    time.monotonic() - self._t0, [f"sampler: {type(exc).__name__}: {exc}"]
                )
            )
            return
        if self.on_sample is not None:
            with contextlib.suppress(Exception):  # reporting progress must never stop a probe
                self.on_sample(self.samples[-1])

    # ---- reading -----------------------------------------------------------------------------
    def read(self, *, flows: bool = True) -> Reading:
        """Read every source once (errors are recorded in the reading, never raised)."""
        self.host.refresh()
        reading = Reading(time.monotonic())
        self._source(reading, "stat", lambda: parse_proc_stat(self._file("/proc/stat")))
        self._source(reading, "snmp", lambda: parse_snmp(self._file("/proc/net/snmp")))
        self._source(reading, "netstat", lambda: parse_snmp(self._file("/proc/net/netstat")))
        self._source(reading, "dev", lambda: parse_net_dev(self._file("/proc/net/dev")))
        if flows:
            self._source(reading, "ss", self._ss)
        reading.t = time.monotonic()
        return reading

    def _source(self, reading: Reading, name: str, fn: Callable[[], Any]) -> None:
        start = time.monotonic()
        try:
            reading.data[name] = fn()
        except Exception as exc:
            reading.errors.append(f"{name}: {exc}")
            return
        reading.times[name] = (start + time.monotonic()) / 2

    def _file(self, path: str) -> str:
        text = self.host.read(path)
        if text is None:
            raise OSError(f"cannot read {path} ({self.host.label})")
        return text

    def _ss(self) -> list[dict[str, Any]]:
        argv = ["ss", "-tinO", *self.ss_filter]
        res = self.host.query(argv)
        if not res.ok:
            raise OSError(res.message())
        return parse_ss_tin(res.stdout)

    # ---- one sample --------------------------------------------------------------------------
    def _sample(self, a: Reading, b: Reading) -> dict[str, Any]:
        errors = (a.errors if a is self._initial else []) + b.errors
        sample = _empty_sample(b.t - self._t0, errors)
        sample["dt_s"] = b.t - a.t
        if "stat" in a.data and "stat" in b.data:
            dt = b.times["stat"] - a.times["stat"]
            sample["cpu"] = cpu_delta(a.data["stat"], b.data["stat"])
            if dt > 0:
                sample["ctx_switches_per_s"] = (
                    max(0, b.data["stat"]["ctxt"] - a.data["stat"]["ctxt"]) / dt
                )
        if "snmp" in a.data and "snmp" in b.data:
            try:
                sample["tcp"] = tcp_delta(a, b)
            except KeyError as exc:
                sample["errors"].append(f"snmp: no counter {exc}")
        if "dev" in a.data and "dev" in b.data:
            sample["nic"] = self._nic(a, b, sample["errors"])
        if "ss" in b.data:
            sample["flows"] = self._flows(b.data["ss"])
        return sample

    def _nic(self, a: Reading, b: Reading, errors: list[str]) -> dict[str, dict[str, float]]:
        dt = b.times["dev"] - a.times["dev"]
        old, new = a.data["dev"], b.data["dev"]
        names = list(self.ifaces) if self.ifaces is not None else [n for n in new if n != "lo"]
        out: dict[str, dict[str, float]] = {}
        for name in names:
            if name not in new or name not in old:
                errors.append(f"dev: no interface {name!r} in /proc/net/dev")
                continue
            d = {k: max(0, new[name].get(k, 0) - old[name].get(k, 0)) for k in new[name]}
            out[name] = {
                "rx_drops": d.get("rx_drop", 0),
                "rx_errors": d.get("rx_errs", 0),
                "tx_drops": d.get("tx_drop", 0),
                "rx_drops_per_s": _rate(d.get("rx_drop", 0), dt),
                "rx_errors_per_s": _rate(d.get("rx_errs", 0), dt),
                "tx_drops_per_s": _rate(d.get("tx_drop", 0), dt),
                "rx_bps": _rate(8 * d.get("rx_bytes", 0), dt),
                "tx_bps": _rate(8 * d.get("tx_bytes", 0), dt),
            }
        return out

    def _flows(self, flows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The flows of this reading, each marked ``active`` when it moved data since the last."""
        seen: dict[tuple[str, str], int] = {}
        out = []
        for flow in flows:
            key = (str(flow.get("local")), str(flow.get("peer")))
            moved = int(flow.get("bytes_acked") or 0) + int(flow.get("bytes_received") or 0)
            seen[key] = moved
            out.append({**flow, "active": moved - self._flow_bytes.get(key, 0) >= ACTIVE_BYTES})
        self._flow_bytes = seen
        return out


# ---- pure computations -------------------------------------------------------------------
def _rate(delta: float, dt: float) -> float:
    return delta / dt if dt > 0 else 0.0


def _empty_sample(t_s: float, errors: list[str]) -> dict[str, Any]:
    return {
        "t_s": t_s,
        "dt_s": None,
        "cpu": None,
        "ctx_switches_per_s": None,
        "tcp": None,
        "nic": None,
        "flows": [],
        "errors": list(errors),
    }


def cpu_pct(old: dict[str, int], new: dict[str, int]) -> dict[str, float] | None:
    """Percent of one CPU's time (or of all CPUs') in each state between two /proc/stat rows.

    ``guest``/``guest_nice`` are already inside ``user``/``nice`` and are not added again;
    ``busy`` is everything but ``idle`` and ``iowait``.  None when no time passed.
    """
    d = {k: max(0, new.get(k, 0) - old.get(k, 0)) for k in CPU_PCT_KEYS}
    total = sum(d.values())
    if total <= 0:
        return None
    pct = {k: 100.0 * v / total for k, v in d.items()}
    pct["busy"] = 100.0 - pct["idle"] - pct["iowait"]
    return pct


def cpu_delta(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The ``cpu`` part of a sample from two parsed /proc/stat readings."""
    all_pct = cpu_pct(old["cpus"]["cpu"], new["cpus"]["cpu"])
    if all_pct is None:
        return None
    per_cpu: dict[str, dict[str, float]] = {}
    for name, row in new["cpus"].items():
        if name == "cpu" or name not in old["cpus"]:
            continue
        pct = cpu_pct(old["cpus"][name], row)
        if pct is not None:
            per_cpu[name] = pct
    rows = list(per_cpu.values()) or [all_pct]
    return {
        "all": all_pct,
        "per_cpu": per_cpu,
        "max_softirq_pct": max(r["softirq"] for r in rows),
        "max_busy_pct": max(r["busy"] for r in rows),
    }


def tcp_delta(a: Reading, b: Reading) -> dict[str, Any]:
    """The ``tcp`` part of a sample: Tcp (snmp) and TcpExt (netstat) counters over the interval.

    ``retrans_share`` is retransmitted segments over all segments sent.  Linux leaves
    retransmissions out of OutSegs (as RFC 1213 says; it counts new data and control segments:
    in the real captures OutSegs grows with TCPOrigDataSent, not with RetransSegs), so all sent
    is OutSegs + RetransSegs.  None when nothing was sent.
    """
    dt = b.times["snmp"] - a.times["snmp"]
    old, new = a.data["snmp"]["Tcp"], b.data["snmp"]["Tcp"]
    out_segs = max(0, new["OutSegs"] - old["OutSegs"])
    retrans = max(0, new["RetransSegs"] - old["RetransSegs"])
    tcp: dict[str, Any] = {
        "out_segs": out_segs,
        "retrans_segs": retrans,
        "out_segs_per_s": _rate(out_segs, dt),
        "retrans_segs_per_s": _rate(retrans, dt),
        "retrans_share": retrans / (out_segs + retrans) if out_segs + retrans else None,
    }
    ext_old = (a.data.get("netstat") or {}).get("TcpExt")
    ext_new = (b.data.get("netstat") or {}).get("TcpExt")
    ndt = b.times.get("netstat", 0.0) - a.times.get("netstat", 0.0)
    for key, names in TCPEXT.items():
        count: int | None = None
        if ext_old is not None and ext_new is not None:
            name = next((n for n in names if n in ext_old and n in ext_new), None)
            if name is not None:
                count = max(0, ext_new[name] - ext_old[name])
        tcp[key] = count
        tcp[f"{key}_per_s"] = None if count is None else _rate(count, ndt)
    return tcp


def summarize(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One dict of figures over a run's samples (missing data -> None).

    ``retrans_share`` is over the whole run: retransmitted segments over all segments sent
    (OutSegs + RetransSegs, see :func:`tcp_delta`).
    ``spurious_retrans_hint`` is True when the receiver reported back as duplicates (DSACK,
    ``TCPDSACKRecvSegs``) at least half as many segments as were retransmitted: those
    retransmits were caused by reordering or a spurious timeout, not loss, and the DSACK undo /
    SACK reorder / spurious RTO counts (``dsack_undo_total`` ...) say which.  The RTT figures
    are over flows that moved data in the interval (``active``), or all flows when none did.
    """
    out: dict[str, Any] = {"samples": len(samples)}
    cpus = [s["cpu"] for s in samples if s.get("cpu")]
    weights = [(s.get("dt_s") or 0.0) for s in samples if s.get("cpu")]
    out["cpu_busy_pct_max"] = max((c["max_busy_pct"] for c in cpus), default=None)
    out["softirq_pct_max"] = max((c["max_softirq_pct"] for c in cpus), default=None)
    out["cpu_all_busy_pct_mean"] = _wmean([c["all"]["busy"] for c in cpus], weights)
    out["iowait_pct_mean"] = _wmean([c["all"]["iowait"] for c in cpus], weights)
    ctx = [
        (s["ctx_switches_per_s"], s.get("dt_s") or 0.0)
        for s in samples
        if s.get("ctx_switches_per_s") is not None
    ]
    out["ctx_switches_per_s_mean"] = _wmean([v for v, _ in ctx], [w for _, w in ctx])

    tcps = [(s["tcp"], s.get("dt_s") or 0.0) for s in samples if s.get("tcp")]
    seconds = sum(w for _, w in tcps)
    sent = sum(t["out_segs"] for t, _ in tcps)
    retrans = sum(t["retrans_segs"] for t, _ in tcps)
    out["out_segs_total"] = sent if tcps else None
    out["retrans_segs_total"] = retrans if tcps else None
    out["retrans_segs_per_s_mean"] = retrans / seconds if tcps and seconds > 0 else None
    out["retrans_share"] = retrans / (sent + retrans) if sent + retrans else None
    for key in TCPEXT:
        values = [t.get(key) for t, _ in tcps if t.get(key) is not None]
        out[f"{key}_total"] = sum(values) if values else None
    dsack = out["dsack_recv_segs_total"]
    out["spurious_retrans_hint"] = bool(retrans and dsack is not None and 2 * dsack >= retrans)

    nics = [s["nic"] for s in samples if s.get("nic") is not None]
    out["nic_rx_drops_total"] = (
        sum(d["rx_drops"] for n in nics for d in n.values()) if nics else None
    )
    out["nic_rx_errors_total"] = (
        sum(d["rx_errors"] for n in nics for d in n.values()) if nics else None
    )

    # the busiest interface's send rate (evidence of an interface at its line rate or cap)
    tx: dict[str, list[tuple[float, float]]] = {}
    for smp in samples:
        for name, d in (smp.get("nic") or {}).items():
            tx.setdefault(name, []).append((d.get("tx_bps") or 0.0, smp.get("dt_s") or 0.0))
    means = {name: _wmean([v for v, _ in vs], [w for _, w in vs]) or 0.0 for name, vs in tx.items()}
    busiest = max(means, key=lambda name: means[name], default=None)
    out["nic_tx_dev"] = busiest
    out["nic_tx_bps_mean"] = means[busiest] if busiest is not None else None
    out["nic_tx_bps_max"] = max(v for v, _ in tx[busiest]) if busiest is not None else None

    flows = [f for s in samples for f in s.get("flows") or []]
    out["flows_max"] = max((len(s.get("flows") or []) for s in samples), default=0)

    def fmax(key: str, default: float | None) -> float | None:
        values = [f[key] for f in flows if f.get(key) is not None]
        return max(values) if values else default

    zero = 0.0 if flows else None  # ss leaves out rwnd_limited/sndbuf_limited when zero
    out["rwnd_limited_pct_max"] = fmax("rwnd_limited_pct", zero)
    out["sndbuf_limited_pct_max"] = fmax("sndbuf_limited_pct", zero)
    out["cwnd_max"] = fmax("cwnd", None)
    out["delivery_rate_bps_max"] = fmax("delivery_rate_bps", None)
    active = [f for f in flows if f.get("active")] or flows
    rtts = [float(f["rtt_ms"]) for f in active if f.get("rtt_ms") is not None]
    out["rtt_ms_min"] = min(rtts) if rtts else None
    out["rtt_ms_mean"] = sum(rtts) / len(rtts) if rtts else None
    out["errors"] = sum(len(s.get("errors") or []) for s in samples)
    return out


def _wmean(values: list[float], weights: list[float]) -> float | None:
    if not values:
        return None
    total = sum(weights)
    if total <= 0:
        return sum(values) / len(values)
    return sum(v * w for v, w in zip(values, weights, strict=True)) / total
