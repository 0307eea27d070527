"""Many clients at once: does ``dtnkit serve`` keep up with XRootD 5.5.3 under load?

50 clients (``curl`` processes, so that the client side costs the same C code for both
servers), each doing 5 GETs of one 64 MiB file over HTTPS on one keep-alive connection,
against ``dtnkit serve`` (a child process, anonymous read) and XRootD 5.5.3 (XrdHttp, no
traces, the same certificate), in interleaved rounds (the order alternates).  Per round and
server: throughput (bytes of every GET / the round's wall time) and the latencies of the
250 GETs (curl's ``time_total``), their median and p99; at the end a table of medians over
the rounds with the ratio to XRootD from the same run, and the server's CPU seconds.

    .venv/bin/python bench/bench_serve_load.py --rounds 4

The machine is shared: the header notes the load average; read the ratios, not the figures.
"""

from __future__ import annotations

import argparse
import math
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.support.xrootd import XROOTD_USER, free_port, wait_https

from benchlib import log, make_file, out, proc_cpu, table
from dtnkit.sweep import servers

MiB = 2**20


@dataclass
class Target:
    name: str
    url: str
    pid: int
    runs: list[tuple[float, list[float]]] = field(default_factory=list)  # (bytes/s, latencies)
    cpu: float = 0.0


@contextmanager
def dtnkit_server(root: Path, pki: servers.Pki, work: Path) -> Iterator[Target]:
    port = free_port()
    logf = open(work / "dtnkit.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "dtnkit", "serve", "--root", str(root),
                             "--port", str(port), "--cert", str(pki.cert), "--key",
                             str(pki.key), "--anonymous-read", "--quiet"],
                            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)
    try:
        wait_https(port, pki.ca_file, time.monotonic() + 30, alive=proc, what="dtnkit serve")
        yield Target("dtnkit serve", f"https://127.0.0.1:{port}/", proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
        logf.close()


@contextmanager
def xrootd_server(root: Path, pki: servers.Pki, work: Path) -> Iterator[Target]:
    xwork = work / "xrootd"
    xwork.mkdir()
    (xwork / "admin").mkdir()
    own = xwork / "pki"  # XRootD (not root) must read its key
    shutil.copytree(pki.dir, own, symlinks=True)
    own_pki = servers.Pki(own, own / pki.ca_file.name, own / pki.ca_dir.name,
                          own / pki.cert.name, own / pki.key.name)
    port, http_port = free_port(), free_port()
    cfg = xwork / "xrootd.cfg"
    cfg.write_text(servers.xrootd_config(xwork, root, own_pki, port, http_port))
    argv = ["xrootd", "-c", str(cfg), "-l", str(xwork / "xrootd.log"), "-n", "hsload"]
    if os.geteuid() == 0:
        ent = pwd.getpwnam(XROOTD_USER)
        for dirpath, _dirs, files in os.walk(xwork):
            os.chown(dirpath, ent.pw_uid, ent.pw_gid)
            for f in files:
                os.chown(os.path.join(dirpath, f), ent.pw_uid, ent.pw_gid)
        argv += ["-R", XROOTD_USER]
    proc = subprocess.Popen(argv, cwd=xwork, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_https(http_port, pki.ca_file, time.monotonic() + 30, alive=proc, what="xrootd")
        yield Target("XRootD 5.5.3", f"https://127.0.0.1:{http_port}/", proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def one_round(target: Target, ca: Path, clients: int, gets: int, size: int) -> None:
    """*clients* curl processes at once, *gets* GETs each on one connection."""
    url = target.url + "f.bin"
    argv = ["curl", "-s", "--cacert", str(ca), "-w", "%{http_code} %{size_download} "
            "%{time_total}\\n"]
    for _ in range(gets):
        argv += ["-o", "/dev/null", url]
    cpu0 = proc_cpu(target.pid)
    t0 = time.monotonic()
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(clients)]
    outs = [p.communicate() for p in procs]
    wall = time.monotonic() - t0
    target.cpu += proc_cpu(target.pid) - cpu0
    latencies = []
    for (text, err), p in zip(outs, procs, strict=True):
        lines = text.split()
        rows = [lines[i:i + 3] for i in range(0, len(lines), 3)]
        if p.returncode != 0 or len(rows) != gets or any(
                r[0] != "200" or int(r[1]) != size for r in rows):
            raise SystemExit(f"{target.name}: a client failed: exit {p.returncode} "
                             f"{text!r} {err[-300:]!r}")
        latencies += [float(r[2]) for r in rows]
    rate = clients * gets * size / wall
    target.runs.append((rate, latencies))
    log(f"{target.name}: {rate / 1e9:.2f} GB/s, p50 {statistics.median(latencies):.2f} s, "
        f"p99 {p99(latencies):.2f} s (wall {wall:.1f} s)")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--gets", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--only", choices=("dtnkit", "xrootd"), default=None,
                    help="one server alone (profiling)")
    args = ap.parse_args()
    size = args.size_mib * MiB
    with tempfile.TemporaryDirectory(prefix="hsload-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # XRootD runs as its own user and must reach its directory
        pki = servers.make_pki(work / "pki")
        droot, xroot = work / "droot", work / "xroot"
        droot.mkdir()
        xroot.mkdir()
        make_file(droot / "f.bin", size)
        os.link(droot / "f.bin", xroot / "f.bin")
        if os.geteuid() == 0:
            ent = pwd.getpwnam(XROOTD_USER)
            os.chown(xroot, ent.pw_uid, ent.pw_gid)
        load = Path("/proc/loadavg").read_text().split()[:3]
        with dtnkit_server(droot, pki, work) as dk, xrootd_server(xroot, pki, work) as xrd:
            targets = [t for t in (dk, xrd)
                       if args.only is None or t.name.lower().startswith(args.only)]
            for t in targets:  # warm both: the page cache, TLS session setup
                one_round(t, pki.ca_file, 4, 1, size)
                t.runs.clear()
                t.cpu = 0.0
            for r in range(args.rounds):
                for t in targets if r % 2 == 0 else targets[::-1]:
                    one_round(t, pki.ca_file, args.clients, args.gets, size)
        load_end = Path("/proc/loadavg").read_text().split()[:3]
    out(f"{args.clients} clients x {args.gets} GETs of {args.size_mib} MiB over HTTPS "
        f"(curl, keep-alive), {args.rounds} interleaved rounds; {os.cpu_count()} CPUs, "
        f"load average {' '.join(load)} at the start, {' '.join(load_end)} at the end")
    out()
    base = next((t for t in targets if t.name.startswith("XRootD")), None)

    def med(t: Target, i: int) -> float:
        if i == 0:
            return statistics.median(r[0] for r in t.runs)
        return statistics.median(p99(r[1]) if i == 2 else statistics.median(r[1])
                                 for r in t.runs)

    rows = []
    for t in targets:
        rates = [r[0] / 1e9 for r in t.runs]
        nines = [p99(r[1]) for r in t.runs]
        ratio = (f"{med(t, 0) / med(base, 0):.2f}x / {med(t, 2) / med(base, 2):.2f}x"
                 if base is not None else "-")
        rows.append([t.name, f"{med(t, 0) / 1e9:.2f} ({min(rates):.2f}-{max(rates):.2f})",
                     f"{med(t, 1):.2f}", f"{med(t, 2):.2f} ({min(nines):.2f}-{max(nines):.2f})",
                     f"{t.cpu / len(t.runs):.1f}", ratio])
    table(["server", "GB/s median (range)", "latency p50 s", "p99 s median (range)",
           "server CPU s/round", "vs XRootD: GB/s / p99"], rows)


if __name__ == "__main__":
    main()
