"""The sampler of a lab path: what a sweep samples beside a point's tool, cheaply enough
for short sampling intervals: files only, no command per sample.  (A probe's sampler,
:mod:`dtnkit.measure.sampler`, reads one host through its :class:`~dtnkit.host.host.Host`,
per-flow state included; both parse the same /proc files with :mod:`.parsers`.)

A lab namespace's counters are read through ``/proc/PID/net/...`` of a process living in
it (an *anchor*: a server, or a ``sleep`` the runner starts there), so one sample is a few
file reads:

- throughput: the receiving hosts' link device bytes (``/proc/PID/net/dev``), per interval;
- per origin CPU: a callable per origin (cgroup accounting, or the CPU time of the server's
  process group from ``/proc/PID/stat``), per interval and in total;
- softirq and context switches: ``/proc/stat`` (the whole machine: softirq time is not per
  namespace), and ``/proc/softirqs`` NET_RX/NET_TX counts;
- retransmits: ``/proc/PID/net/snmp`` and ``netstat`` of the sending namespaces, at the
  start and the end (RetransSegs less TCPDSACKRecvSegs: segments the receiver reported as
  duplicates were not lost);
- NIC drops: ``/proc/PID/net/dev`` rx/tx drops of every lab namespace, start to end;
- the delay stage's stats document, every interval (:mod:`dtnkit.lab.fidelity`).

The thread never raises into the runner: a source that fails is recorded in ``errors``.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from dtnkit.measure.parsers import parse_net_dev, parse_proc_stat, parse_snmp
from dtnkit.measure.schedule import ticks

CpuReader = Callable[[], float | None]
USER_HZ = 100  # /proc/PID/stat and /proc/stat count in clock ticks of 1/100 s on Linux


def read_net_dev(pid: int) -> dict[str, dict[str, int]]:
    return parse_net_dev(Path(f"/proc/{pid}/net/dev").read_text())


def read_tcp(pid: int) -> tuple[int, int | None]:
    """(RetransSegs, TCPDSACKRecvSegs or None) of the namespace PID lives in."""
    snmp = parse_snmp(Path(f"/proc/{pid}/net/snmp").read_text())
    retrans = int(snmp["Tcp"]["RetransSegs"])
    dsack: int | None = None
    with contextlib.suppress(OSError, KeyError, ValueError):
        ext = parse_snmp(Path(f"/proc/{pid}/net/netstat").read_text())["TcpExt"]
        value = ext.get("TCPDSACKRecvSegs", ext.get("TCPDSACKRecv"))
        dsack = int(value) if value is not None else None
    return retrans, dsack


def group_cpu_seconds(pgid: int) -> float | None:
    """CPU seconds (user + system, the live threads) of every process in group ``pgid``."""
    total = 0
    found = False
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            rest = stat.rpartition(")")[2].split()
            # after the comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt
            # cmajflt utime stime ...
            if len(rest) > 12 and rest[2] == str(pgid):
                total += int(rest[11]) + int(rest[12])
                found = True
    return total / USER_HZ if found else None


def cgroup_cpu_seconds(path: str) -> float | None:
    """CPU seconds of everything that ran in cgroup ``path`` (v1 cpuacct.usage, v2
    cpu.stat usage_usec); None when it cannot be read."""
    base = Path(path)
    with contextlib.suppress(OSError, ValueError):
        return int((base / "cpuacct.usage").read_text()) / 1e9
    with contextlib.suppress(OSError, ValueError):
        for line in (base / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    return None


def _softirq_counts() -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/softirqs").read_text().splitlines()[1:]:
            name, _, values = line.partition(":")
            if name.strip() in ("NET_RX", "NET_TX"):
                out[name.strip().lower()] = sum(int(v) for v in values.split())
    return out


def idle_percent(old: Mapping[str, int], new: Mapping[str, int]) -> float | None:
    """Share of the machine's CPU time idle (idle + iowait) between two ``/proc/stat``
    ``cpu`` lines (parsed), in percent; None when no time passed."""
    fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    delta = {k: max(0, int(new.get(k, 0)) - int(old.get(k, 0))) for k in fields}
    total = sum(delta.values())
    if total <= 0:
        return None
    return round(100.0 * (delta["idle"] + delta["iowait"]) / total, 1)


def _stat() -> dict[str, Any]:
    return parse_proc_stat(Path("/proc/stat").read_text())


@dataclass
class Window:
    """What was sampled over one point."""

    samples: list[tuple[float, float]] = field(default_factory=list)  # (t_s, bit/s)
    series: dict[str, list[float | None]] = field(default_factory=dict)
    cpu_seconds: list[float] = field(default_factory=list)  # per origin
    softirq: dict[str, dict[str, float]] = field(default_factory=dict)
    ctxt: int | None = None
    retransmits: int | None = None
    retransmits_note: str = ""
    nic_drops: dict[str, dict[str, int]] = field(default_factory=dict)
    emulator_docs: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)


#: per sample: the machine's idle share (idle + iowait) over that sample
IDLE_SERIES = "idle_pct.machine"


def sample_starts(times: Iterable[float]) -> Iterator[float]:
    """Where each sample's span begins: a sample taken at *t* holds what happened since the
    one before it (since 0.0, the start of sampling, for the first)."""
    prev = 0.0
    for t in times:
        yield prev
        prev = t


#: a window earlier than the latest is taken only when it holds this share more bytes
#: (sampled rates vary a little from sample to sample).  It is also the most a kept latest
#: window can miss of the data, so the most the point's throughput can read low: at 1.05 a
#: 3 s test whose exit came 0.125 s after its data kept a window 0.125 s off (4 % low)
DENSER = 1.01


def data_window(
    samples: Sequence[tuple[float, float]], latest_from: float, seconds: float
) -> tuple[float, float]:
    """(from, until) of a transfer known to last *seconds* and to have begun at or before
    *latest_from*: the window of that length, starting no later, that holds the most of the
    sampled bytes (each sample's spread evenly over it).  The latest such window unless an
    earlier one holds :data:`DENSER` times its bytes; set-up before the data holds none, so
    a window reaching into it never holds more than the transfer's own.  iperf3's exit, from
    which *latest_from* is counted back, can come seconds after its data on a loaded
    machine: counted back from it alone, a 1 s test's window held only the idle samples
    after the data, and the point read 0 bit/s."""
    spans = [
        (prev, t, bps)
        for prev, (t, bps) in zip(sample_starts(t for t, _ in samples), samples, strict=True)
        if t > prev and math.isfinite(bps) and bps > 0
    ]
    ends = [t for _, t, _ in spans]
    before = list(itertools.accumulate((bps * (t - prev) for prev, t, bps in spans), initial=0.0))

    def upto(x: float) -> float:  # the bits sampled up to time x
        i = bisect.bisect_left(ends, x)  # spans[:i] end before x, spans[i] at or after
        if i == len(spans):
            return before[i]
        prev, _, bps = spans[i]
        return before[i] + bps * max(0.0, x - prev)

    def held(start: float) -> float:
        return upto(start + seconds) - upto(start)

    edges = {b for prev, t, _ in spans for b in (prev, t)}
    starts = sorted(
        {s for b in edges for s in (b, b - seconds) if 0.0 <= s < latest_from}, reverse=True
    )
    latest = held(latest_from)
    best = max(starts, key=held, default=latest_from)  # the latest of equals: sorted so
    if held(best) > latest * DENSER:
        return best, best + seconds
    return latest_from, latest_from + seconds


def measured_idle_percent(
    w: Window, measure_from_s: float | None, measure_until_s: float | None = None
) -> float | None:
    """The machine's idle share over the transfer itself: the samples that began at or
    after the tool's set-up ended, weighted by their length (the rule of the stored point's
    ``measured_samples``), else over the whole point.  iperf3 connecting 128 streams at
    100 ms waits 13 s, nearly idle, before its test: over the whole point the machine reads
    quieter than it was while the data moved."""
    whole = w.softirq.get("machine", {}).get("idle_percent")
    if measure_from_s is None:
        return whole
    until = math.inf if measure_until_s is None else measure_until_s
    times = [t for t, _ in w.samples]
    kept = [
        (t - prev, v)
        for prev, t, v in zip(
            sample_starts(times), times, w.series.get(IDLE_SERIES, []), strict=False
        )
        if measure_from_s <= prev < until and v is not None and t > prev
    ]
    weight = sum(dt for dt, _ in kept)
    return round(sum(dt * v for dt, v in kept) / weight, 1) if weight > 0 else whole


class PointSampler:
    """Samples one point; a context manager around the tool's run."""

    def __init__(
        self,
        *,
        interval_s: float,
        receivers: Sequence[int],
        device: str,
        senders: Sequence[int],
        namespaces: Mapping[str, int],
        origins_cpu: Sequence[CpuReader],
        emulator: Callable[[], dict[str, Any] | None] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.receivers = list(receivers)  # anchor PIDs of the receiving hosts
        self.device = device
        self.senders = list(senders)  # anchor PIDs of the sending hosts
        self.namespaces = dict(namespaces)  # host name -> anchor PID (NIC drops)
        self.origins_cpu = list(origins_cpu)
        self.emulator = emulator
        self.window = Window()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    # ---- readings ----
    def _rx_bytes(self) -> int:
        total = 0
        for pid in self.receivers:
            total += read_net_dev(pid)[self.device]["rx_bytes"]
        return total

    def received_bytes(self) -> int | None:
        """Bytes received so far on the receiving hosts' link (None: unreadable); a tool
        may ask it from its own threads to see when data starts to flow."""
        try:
            return self._rx_bytes()
        except (OSError, KeyError, ValueError):
            return None

    def _cpu(self) -> list[float | None]:
        out: list[float | None] = []
        for read in self.origins_cpu:
            try:
                out.append(read())
            except Exception:  # a reader that fails leaves a gap, never stops the point
                out.append(None)
        return out

    def _tcp(self) -> tuple[int, int | None] | None:
        try:
            retrans, dsack_sum = 0, 0
            dsack_known = True
            for pid in self.senders:
                r, d = read_tcp(pid)
                retrans += r
                if d is None:
                    dsack_known = False
                else:
                    dsack_sum += d
            return retrans, dsack_sum if dsack_known else None
        except (OSError, KeyError, ValueError) as exc:
            self.window.errors.append(f"tcp counters: {exc}")
            return None

    def _drops(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for name, pid in self.namespaces.items():
            try:
                dev = read_net_dev(pid)
            except (OSError, ValueError) as exc:
                self.window.errors.append(f"net/dev of {name}: {exc}")
                continue
            out[name] = {
                "rx_dropped": sum(d.get("rx_drop", 0) for k, d in dev.items() if k != "lo"),
                "tx_dropped": sum(d.get("tx_drop", 0) for k, d in dev.items() if k != "lo"),
            }
        return out

    def _emulator_doc(self) -> None:
        if self.emulator is None:
            return
        with contextlib.suppress(Exception):
            doc = self.emulator()
            docs = self.window.emulator_docs
            if doc and (not docs or doc.get("updated") != docs[-1].get("updated")):
                docs.append(doc)

    # ---- the context manager ----
    def __enter__(self) -> PointSampler:
        self._start_stat = _stat()
        self._start_softirqs = _softirq_counts()
        self._start_tcp = self._tcp()
        self._start_drops = self._drops()
        self._start_cpu = self._cpu()
        self._emulator_doc()
        self._t0 = time.monotonic()
        self._prev_t = self._t0
        self._prev_rx = self._safe_rx()
        self._prev_cpu = list(self._start_cpu)
        self._prev_stat = self._start_stat
        self._thread = threading.Thread(target=self._loop, name="dtnkit-sweep-sampler", daemon=True)
        self._thread.start()
        return self

    def _safe_rx(self) -> int | None:
        try:
            return self._rx_bytes()
        except (OSError, KeyError, ValueError) as exc:
            self.window.errors.append(f"throughput: {exc}")
            return None

    def _loop(self) -> None:
        for _ in ticks(self._stop, self._t0, self.interval_s):
            self._tick()

    def _tick(self, *, final: bool = False) -> None:
        try:
            now = time.monotonic()
            dt = now - self._prev_t
            if final and dt < self.interval_s / 4 and self.window.samples:
                return  # a sliver at the end: its rate would be noise
            rx = self._safe_rx()
            bps = (
                (rx - self._prev_rx) * 8 / dt
                if rx is not None and self._prev_rx is not None and dt > 0
                else float("nan")
            )
            self.window.samples.append((round(now - self._t0, 6), bps))
            cpu = self._cpu()
            for i, (a, b) in enumerate(zip(self._prev_cpu, cpu, strict=True)):
                value = (b - a) / dt if a is not None and b is not None and dt > 0 else None
                self.window.series.setdefault(f"cpu_cores.{i}", []).append(value)
            stat = _stat()
            old, new = self._prev_stat["cpus"]["cpu"], stat["cpus"]["cpu"]
            total = sum(
                max(0, new.get(k, 0) - old.get(k, 0))
                for k in ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
            )
            soft = max(0, new.get("softirq", 0) - old.get("softirq", 0))
            self.window.series.setdefault(IDLE_SERIES, []).append(idle_percent(old, new))
            self.window.series.setdefault("softirq_pct.machine", []).append(
                100.0 * soft / total if total else None
            )
            ctxt = max(0, int(stat.get("ctxt", 0)) - int(self._prev_stat.get("ctxt", 0)))
            self.window.series.setdefault("ctxt_per_s", []).append(ctxt / dt if dt > 0 else None)
            self._prev_t, self._prev_rx, self._prev_cpu, self._prev_stat = now, rx, cpu, stat
            self._emulator_doc()
        except Exception as exc:  # the sampler must never stop a point
            self.window.errors.append(f"sampler: {type(exc).__name__}: {exc}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc_type is not None and not issubclass(exc_type, Exception):
            return  # Ctrl-C: nothing is stored, no need to read more
        self._tick(final=True)
        w = self.window
        w.elapsed_s = time.monotonic() - self._t0
        end_cpu = self._cpu()
        w.cpu_seconds = [
            b - a if a is not None and b is not None else float("nan")
            for a, b in zip(self._start_cpu, end_cpu, strict=True)
        ]
        stat = _stat()
        old, new = self._start_stat["cpus"]["cpu"], stat["cpus"]["cpu"]
        soft_s = max(0, new.get("softirq", 0) - old.get("softirq", 0)) / USER_HZ
        ncpu = max(1, len(stat["cpus"]) - 1)
        counts = _softirq_counts()
        idle = idle_percent(old, new)
        w.softirq = {
            "machine": {
                "seconds": soft_s,
                **({"idle_percent": idle} if idle is not None else {}),
                "percent": 100.0 * soft_s / (w.elapsed_s * ncpu) if w.elapsed_s > 0 else 0.0,
                **{f"{k}_count": float(counts[k] - self._start_softirqs.get(k, 0)) for k in counts},
            }
        }
        w.ctxt = max(0, int(stat.get("ctxt", 0)) - int(self._start_stat.get("ctxt", 0)))
        end_tcp = self._tcp()
        if self._start_tcp is not None and end_tcp is not None:
            retrans = max(0, end_tcp[0] - self._start_tcp[0])
            if end_tcp[1] is not None and self._start_tcp[1] is not None:
                dsack = max(0, end_tcp[1] - self._start_tcp[1])
                w.retransmits = max(0, retrans - dsack)
                w.retransmits_note = (
                    f"RetransSegs {retrans} less TCPDSACKRecvSegs {dsack} in the sending namespaces"
                )
            else:
                w.retransmits = retrans
                w.retransmits_note = (
                    f"RetransSegs {retrans} in the sending namespaces "
                    "(no DSACK counter: not corrected)"
                )
        end_drops = self._drops()
        w.nic_drops = {
            name: {k: max(0, v - self._start_drops.get(name, {}).get(k, 0)) for k, v in d.items()}
            for name, d in end_drops.items()
        }
