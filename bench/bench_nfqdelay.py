#!/usr/bin/env python3
"""Accuracy and throughput of the NFQUEUE delay stage (dtnkit.lab.nfqdelay), root only.

    .venv/bin/python bench/bench_nfqdelay.py [--time 10] [--no-cap]

Builds src <-> path <-> dst namespaces (dknfq<hex>-src/-path/-dst, veth, 10.250.77.0/30 and
10.250.77.4/30), with the engine running in the path namespace and two NFQUEUE FORWARD rules,
and measures, against baselines in the same run:

  baseline        the same path without NFQUEUE rules: idle RTT, iperf3 throughput
  RTT 10..200 ms  `ping -c 50 -i 0.01` at each configured RTT (changed in place by SIGHUP);
                  target: avg within +1.5 ms of configured, mdev < 0.5 ms; then again with
                  --spin-ms 2 (busy-poll before due packets instead of sleeping)
  throughput      iperf3 -t TIME at 50 ms RTT, no cap, tcp_rmem/wmem `4096 131072 268435456` in
                  both ends; target >= 5 Gbit/s with the engine within one core
  capped          the same behind htb 2 Gbit/s + bfifo (one BDP) on path's egress (--no-cap skips)
  loss            1 % on the forward queue, UDP iperf3: engine drops vs a 4-sigma binomial bound,
                  and the receiver's lost count vs the engine's drops

Everything it starts is stopped by PID and every namespace deleted, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC_IP, PATH_SRC_IP, PATH_DST_IP, DST_IP = "10.250.77.1", "10.250.77.2", "10.250.77.5", \
    "10.250.77.6"
TCP_MEM = "4096 131072 268435456"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path])}


def run(*argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)


def stop_pid(proc: subprocess.Popen[Any], timeout: float = 5.0) -> int | None:
    """SIGTERM, then SIGKILL; returns the exit status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


class WanPath:
    """Three namespaces in a row; the middle one forwards (and queues to the engine)."""

    def __init__(self) -> None:
        self.prefix = f"dknfq{secrets.token_hex(3)}"
        self.src, self.mid, self.dst = (f"{self.prefix}-{n}" for n in ("src", "path", "dst"))
        self.tmp = Path(f"/tmp/{self.prefix}")
        self.config = self.tmp / "nfqdelay.json"
        self.stats = self.tmp / "nfqdelay-stats.json"
        self.engine: subprocess.Popen[bytes] | None = None
        self.log = self.tmp / "nfqdelay.log"

    def ns(self, ns: str, *argv: str, check: bool = True,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return run("ip", "netns", "exec", ns, *argv, check=check, timeout=timeout)

    def create(self) -> None:
        self.tmp.mkdir(mode=0o700)
        for ns in (self.src, self.mid, self.dst):
            run("ip", "netns", "add", ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", self.src, "link", "add", "s0", "type", "veth", "peer", "name", "p0",
            "netns", self.mid)
        run("ip", "-n", self.mid, "link", "add", "p1", "type", "veth", "peer", "name", "d0",
            "netns", self.dst)
        for ns, dev, addr in ((self.src, "s0", SRC_IP), (self.mid, "p0", PATH_SRC_IP),
                              (self.mid, "p1", PATH_DST_IP), (self.dst, "d0", DST_IP)):
            run("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
        run("ip", "-n", self.src, "route", "add", "default", "via", PATH_SRC_IP)
        run("ip", "-n", self.dst, "route", "add", "default", "via", PATH_DST_IP)
        self.ns(self.mid, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for ns in (self.src, self.dst):
            self.ns(ns, "sysctl", "-qw", f"net.ipv4.tcp_rmem={TCP_MEM}",
                    f"net.ipv4.tcp_wmem={TCP_MEM}")

    def rules(self, action: str) -> None:
        """-A or -D the two NFQUEUE rules: queue 0 forward (src->dst), queue 1 reverse."""
        for dev, q in (("p0", "0"), ("p1", "1")):
            self.ns(self.mid, "iptables", "-w", action, "FORWARD", "-i", dev, "-j", "NFQUEUE",
                    "--queue-num", q)

    def cap(self, rate_bit: int | None, bdp_bytes: int = 0) -> None:
        for dev in ("p0", "p1"):
            run("tc", "-n", self.mid, "qdisc", "del", "dev", dev, "root", check=False)
            if rate_bit is None:
                continue
            burst = max(rate_bit // 8 // 1000, 2 * 65536)  # rate x 1 ms, at least 2 GSO
            run("tc", "-n", self.mid, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
                "default", "1")
            run("tc", "-n", self.mid, "class", "add", "dev", dev, "parent", "1:", "classid",
                "1:1", "htb", "rate", f"{rate_bit}bit", "ceil", f"{rate_bit}bit", "burst",
                str(burst), "cburst", str(burst))
            run("tc", "-n", self.mid, "qdisc", "add", "dev", dev, "parent", "1:1", "bfifo",
                "limit", str(max(bdp_bytes, 4 * 65536)))

    def write_config(self, one_way_ms: float, loss: float = 0.0, seed: int = 1) -> None:
        doc = {"queues": {"0": {"delay_ms": one_way_ms, "loss": loss},
                          "1": {"delay_ms": one_way_ms, "loss": 0.0}}, "seed": seed}
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.config)

    def start_engine(self, one_way_ms: float, loss: float = 0.0, *extra: str) -> None:
        self.write_config(one_way_ms, loss)
        self.stats.unlink(missing_ok=True)
        with self.log.open("wb") as log:
            self.engine = subprocess.Popen(
                ["ip", "netns", "exec", self.mid, sys.executable, "-m", "dtnkit.lab.nfqdelay",
                 "--config", str(self.config), "--stats", str(self.stats), *extra],
                stdout=log, stderr=subprocess.STDOUT, env=ENV)
        deadline = time.monotonic() + 10
        while not self.stats.exists():
            if self.engine.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"engine did not start: {self.log.read_text()[-500:]}")
            time.sleep(0.02)  # waiting for the readiness file, bounded

    def stats_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.stats.read_text())
        return doc

    def set_path(self, one_way_ms: float, loss: float = 0.0) -> None:
        """Change delay/loss in place (SIGHUP) and wait until the engine reports it."""
        assert self.engine is not None
        self.write_config(one_way_ms, loss)
        self.engine.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                q = self.stats_doc()["config"]["queues"]["0"]
                if q["delay_ms"] == one_way_ms and q["loss"] == loss:
                    return
            time.sleep(0.02)  # polling the engine's report, bounded
        raise SystemExit("engine did not take the new config")

    def stop_engine(self) -> int | None:
        status = stop_pid(self.engine) if self.engine is not None else None
        self.engine = None
        return status

    def delete(self) -> None:
        for ns in (self.src, self.mid, self.dst):
            run("ip", "netns", "del", ns, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)


def ping(path: WanPath, count: int = 50, interval: str = "0.01") -> dict[str, float]:
    out = path.ns(path.src, "ping", "-q", "-n", "-c", str(count), "-i", interval, "-W", "2",
                  DST_IP, check=False).stdout
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", out)
    sent = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    if not m or not sent:
        raise SystemExit(f"ping failed: {out[-300:]}")
    return {"min": float(m[1]), "avg": float(m[2]), "max": float(m[3]), "mdev": float(m[4]),
            "sent": int(sent[1]), "received": int(sent[2])}


def iperf(path: WanPath, seconds: int, *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run iperf3 (server in dst, client in src); sample the engine's stats meanwhile."""
    server = subprocess.Popen(["ip", "netns", "exec", path.dst, "iperf3", "-s", "-1", "-B",
                               DST_IP], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 5
        while ":5201" not in path.ns(path.dst, "ss", "-ltnH").stdout:
            if time.monotonic() > deadline:
                raise SystemExit("iperf3 server did not start")
            time.sleep(0.02)  # waiting for the listener, bounded
        client = subprocess.Popen(["ip", "netns", "exec", path.src, "iperf3", "-c", DST_IP,
                                   "-t", str(seconds), "-J", *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            while client.poll() is None:
                time.sleep(0.5)
                if path.engine is not None:
                    with contextlib.suppress(OSError, ValueError):
                        samples.append(path.stats_doc())
            out, err = client.communicate(timeout=30)
        finally:
            stop_pid(client)
        doc: dict[str, Any] = json.loads(out or "{}")
        if "end" not in doc:
            raise SystemExit(f"iperf3 failed: {doc.get('error') or err[-300:]}")
        return doc, samples
    finally:
        stop_pid(server)


def engine_load(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Average CPU over the run (cpu_seconds delta / wall), worst interval, lateness."""
    busy = [s for s in samples if s.get("lateness_ms", {}).get("count")]
    if len(samples) < 2:
        return {"cpu_avg": float("nan"), "cpu_max": float("nan"), "late_p99": float("nan"),
                "late_max": float("nan")}
    first, last = samples[0], samples[-1]
    wall = last["updated"] - first["updated"]
    return {
        "cpu_avg": (last["cpu_seconds"] - first["cpu_seconds"]) / wall * 100 if wall else 0.0,
        "cpu_max": max(s["cpu_percent"] for s in samples),
        "user_avg": sum(s["cpu_user_percent"] for s in samples) / len(samples),
        "late_p99": max((s["lateness_ms"]["p99"] for s in busy), default=float("nan")),
        "late_p50": sorted(s["lateness_ms"]["p50"] for s in busy)[len(busy) // 2]
        if busy else float("nan"),
        "late_max": max((s["lateness_ms"]["max"] for s in busy), default=float("nan")),
        "kernel_drops": sum((q.get("kernel") or {}).get("queue_dropped", 0)
                            + (q.get("kernel") or {}).get("user_dropped", 0)
                            for q in last["queues"].values()),
    }


def udp_rcvbuf_errors(path: WanPath) -> int:
    """Datagrams the receiver itself dropped (socket buffer full), from dst's /proc/net/snmp."""
    lines = [ln.split() for ln in path.ns(path.dst, "cat", "/proc/net/snmp").stdout.splitlines()
             if ln.startswith("Udp:")]
    return int(dict(zip(lines[0], lines[1], strict=True))["RcvbufErrors"])


def gbit(doc: dict[str, Any]) -> float:
    return float(doc["end"]["sum_received"]["bits_per_second"]) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", type=int, default=10, help="iperf3 seconds (default 10)")
    parser.add_argument("--no-cap", action="store_true", help="skip the 2 Gbit/s capped run")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces, iptables)")
    missing = [t for t in ("ip", "iptables", "ping", "iperf3", "tc", "ss") if not shutil.which(t)]
    if missing:
        raise SystemExit(f"missing tools: {', '.join(missing)} "
                         "(apt-get install -y iptables iperf3 iputils-ping)")

    load_start = Path("/proc/loadavg").read_text().split()[0]  # other work skews timing
    cc = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    rows: list[tuple[str, str, str, str, str]] = []
    notes: list[str] = []
    path = WanPath()
    try:
        path.create()
        # ---- baseline: no NFQUEUE, no delay ----
        base_ping = ping(path)
        base_tp, _ = iperf(path, args.time)
        rows.append(("baseline RTT (no NFQUEUE)", "0", f"{base_ping['avg']:.3f} ms",
                     f"mdev {base_ping['mdev']:.3f}", ""))
        rows.append(("baseline iperf3 (no NFQUEUE)", "0",
                     f"{gbit(base_tp):.2f} Gbit/s", "", ""))

        # ---- RTT accuracy, delay changed in place; then the same with --spin-ms 2 ----
        path.rules("-A")
        for spin in ("0", "2"):
            path.start_engine(5.0, 0.0, "--spin-ms", spin)
            for rtt in (10, 50, 100, 200):
                path.set_path(rtt / 2)
                p = ping(path)
                late = path.stats_doc()["lateness_ms"]
                err = p["avg"] - rtt
                ok = 0 <= err <= 1.5 and p["mdev"] < 0.5 and p["received"] == p["sent"]
                rows.append((f"idle RTT {rtt} ms" + (f", --spin-ms {spin}" if spin != "0" else ""),
                             f"{rtt}", f"{p['avg']:.3f} ms (min {p['min']:.3f} max "
                             f"{p['max']:.3f})",
                             f"{err:+.3f} ms, mdev {p['mdev']:.3f}, engine CPU "
                             f"{path.stats_doc()['cpu_percent']:.0f}%, lateness p50 "
                             f"{late['p50']} max {late['max']}",
                             "ok" if ok else "MISS"))
            if spin == "0":
                path.stop_engine()

        # ---- throughput at 50 ms, no cap (engine with its default: no spinning) ----
        path.stop_engine()
        path.start_engine(25.0)
        doc, samples = iperf(path, args.time)
        load = engine_load(samples)
        tp = gbit(doc)
        retr = doc["end"]["sum_sent"].get("retransmits", 0)
        rows.append(("iperf3 50 ms, no cap", "50", f"{tp:.2f} Gbit/s ({tp / gbit(base_tp):.2f}x "
                     "baseline)",
                     f"engine CPU avg {load['cpu_avg']:.0f}% max {load['cpu_max']:.0f}% "
                     f"(user {load['user_avg']:.0f}%), retr {retr}",
                     "ok" if tp >= 5 and load["cpu_max"] <= 100 else "MISS"))
        notes.append(f"50 ms run: release lateness p50 {load['late_p50']:.3f} ms, worst-interval "
                     f"p99 {load['late_p99']:.3f} ms, max {load['late_max']:.3f} ms; kernel "
                     f"queue/user drops {load['kernel_drops']}")

        # ---- the same behind a 2 Gbit/s htb cap ----
        if not args.no_cap:
            rate = 2 * 10**9
            path.cap(rate, bdp_bytes=rate // 8 * 50 // 1000)
            doc, samples = iperf(path, args.time)
            load = engine_load(samples)
            tp = gbit(doc)
            rows.append(("iperf3 50 ms, htb 2 Gbit/s", "50", f"{tp:.2f} Gbit/s",
                         f"engine CPU avg {load['cpu_avg']:.0f}%, lateness p99 "
                         f"{load['late_p99']:.3f} ms", "ok" if tp >= 1.7 else "MISS"))
            path.cap(None)

        # ---- loss: 1 % on the forward queue, UDP so every datagram is one packet ----
        path.set_path(5.0, loss=0.01)
        before = path.stats_doc()["queues"]["0"]
        rcvbuf_before = udp_rcvbuf_errors(path)
        doc, _ = iperf(path, 5, "-u", "-b", "200M", "-l", "1400")
        rcvbuf = udp_rcvbuf_errors(path) - rcvbuf_before
        time.sleep(0.7)  # the final stats interval
        after = path.stats_doc()["queues"]["0"]
        n = after["packets"] - before["packets"]
        dropped = after["dropped_loss"] - before["dropped_loss"]
        sigma = math.sqrt(n * 0.01 * 0.99)
        lost = doc["end"]["sum"].get("lost_packets", -1)
        ok = abs(dropped - n * 0.01) <= 4 * sigma
        rows.append(("loss 1% (queue 0, UDP)", "1%",
                     f"{dropped}/{n} = {dropped / n * 100:.3f}%",
                     f"expect {n * 0.01:.0f} ± {4 * sigma:.0f} (4σ); iperf3 lost {lost} "
                     f"(engine {dropped}, receiver buffer {rcvbuf})",
                     "ok" if ok else "MISS"))
        path.set_path(5.0)
        status = path.stop_engine()
        final = read_final(path)
        rows.append(("engine stop (SIGTERM)", "", f"exit {status}",
                     f"held at exit {final}", "ok" if status == 0 else "MISS"))
    finally:
        path.stop_engine()
        path.delete()

    print(f"dtnkit.lab.nfqdelay, {os.cpu_count()} CPUs, kernel {os.uname().release}, "
          f"iperf3 -t {args.time}, {cc}; load average at start {load_start}")
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    head = ("case", "configured", "measured", "detail", "target")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    for row in (head, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    for note in notes:
        print(note)
    return 0 if all(r[4] != "MISS" for r in rows) else 1


def read_final(path: WanPath) -> int:
    """Packets held when the engine exited (its final stats); 0 when it released them all."""
    doc = path.stats_doc()
    return sum(int(q["held_now"]) for q in doc["queues"].values()) if not doc["running"] else -1


if __name__ == "__main__":
    raise SystemExit(main())
