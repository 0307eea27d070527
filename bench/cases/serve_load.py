"""Many clients at once: does dtnkit serve keep up with XRootD 5.5.3 under load?

--clients ``curl`` processes (so the client side costs the same C code for both servers), each
doing --gets GETs of one --size-mib file over HTTPS on one keep-alive connection, against
``dtnkit serve`` (a child process, anonymous read) and XRootD 5.5.3 (XrdHttp, no traces, the
same certificate), in interleaved rounds.  Per round and server: throughput (bytes of every
GET / the round's wall time), the p99 of the GETs' latencies (curl's ``time_total``) and the
server's CPU seconds.  The table gives medians with their range and the ratios to XRootD of
the same rounds.  Needs root (XRootD drops to its own user), curl and xrootd.
"""

from __future__ import annotations

import argparse
import math
import os
import pwd
import shutil
import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port
from tests.support.xrootd import XROOTD_USER, wait_https

from bench.lib import Bench, Case
from bench.lib.machine import proc_cpu
from bench.lib.procs import make_file
from bench.lib.stats import spread_cells
from dtnkit.sweep import servers

MiB = 2**20


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--clients", type=int, default=50, help="curl clients at once (default 50)")
    p.add_argument("--gets", type=int, default=5, help="GETs per client (default 5)")
    p.add_argument("--size-mib", type=int, default=64, help="the file, MiB (default 64)")


def quick(args: argparse.Namespace) -> None:
    args.rounds, args.clients, args.gets, args.size_mib = 1, 4, 2, 8


@contextmanager
def dtnkit_serve(b: Bench, root: Path, pki: servers.Pki) -> Iterator[tuple[str, int]]:
    port = free_port()
    proc = b.tracked.add(
        subprocess.Popen(
            b.this.dtnkit(
                "serve",
                "--root",
                str(root),
                "--port",
                str(port),
                "--cert",
                str(pki.cert),
                "--key",
                str(pki.key),
                "--anonymous-read",
                "--quiet",
            ),
            env=b.this.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    try:
        wait_https(port, pki.ca_file, time.monotonic() + 30, alive=proc, what="dtnkit serve")
        yield f"https://127.0.0.1:{port}/", proc.pid
    finally:
        b.tracked.stop(proc)


@contextmanager
def xrootd(b: Bench, root: Path, pki: servers.Pki, work: Path) -> Iterator[tuple[str, int]]:
    xwork = work / "xrootd"
    (xwork / "admin").mkdir(parents=True)
    own = xwork / "pki"  # XRootD (not root) must read its key
    shutil.copytree(pki.dir, own, symlinks=True)
    own_pki = servers.Pki(
        own, own / pki.ca_file.name, own / pki.ca_dir.name, own / pki.cert.name, own / pki.key.name
    )
    port, http_port = free_port(), free_port()
    cfg = xwork / "xrootd.cfg"
    cfg.write_text(servers.xrootd_config(xwork, root, own_pki, port, http_port))
    ent = pwd.getpwnam(XROOTD_USER)
    for dirpath, _dirs, files in os.walk(xwork):
        os.chown(dirpath, ent.pw_uid, ent.pw_gid)
        for f in files:
            os.chown(os.path.join(dirpath, f), ent.pw_uid, ent.pw_gid)
    proc = b.tracked.add(
        subprocess.Popen(
            [
                "xrootd",
                "-c",
                str(cfg),
                "-l",
                str(xwork / "xrootd.log"),
                "-n",
                f"{b.prefix}load",
                "-R",
                XROOTD_USER,
            ],
            cwd=xwork,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    try:
        wait_https(http_port, pki.ca_file, time.monotonic() + 30, alive=proc, what="xrootd")
        yield f"https://127.0.0.1:{http_port}/", proc.pid
    finally:
        b.tracked.stop(proc)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def one_round(
    url: str, pid: int, ca: Path, clients: int, gets: int, size: int
) -> tuple[float, dict[str, float]]:
    """*clients* curl processes at once, *gets* GETs each on one connection: GB/s, with the
    p99 latency and the server's CPU seconds beside it."""
    argv = [
        "curl",
        "-s",
        "--cacert",
        str(ca),
        "-w",
        "%{http_code} %{size_download} %{time_total}\\n",
    ]
    for _ in range(gets):
        argv += ["-o", "/dev/null", url + "f.bin"]
    cpu0, t0 = proc_cpu(pid), time.monotonic()
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(clients)
    ]
    outs = [p.communicate() for p in procs]
    wall = time.monotonic() - t0
    latencies = []
    for (text, err), p in zip(outs, procs, strict=True):
        words = text.split()
        rows = [words[i : i + 3] for i in range(0, len(words), 3)]
        if (
            p.returncode != 0
            or len(rows) != gets
            or any(r[0] != "200" or int(r[1]) != size for r in rows)
        ):
            raise RuntimeError(f"a client failed: exit {p.returncode} {text!r} {err[-300:]!r}")
        latencies += [float(r[2]) for r in rows]
    return clients * gets * size / wall / 1e9, {"p99": p99(latencies), "cpu": proc_cpu(pid) - cpu0}


def run(b: Bench) -> int | None:
    a = b.args
    size = a.size_mib * MiB
    work = b.workdir(where="/tmp", mode=0o755)  # XRootD runs as its own user
    pki = servers.make_pki(work / "pki")
    droot, xroot = work / "droot", work / "xroot"
    droot.mkdir()
    xroot.mkdir()
    make_file(droot / "f.bin", size)
    os.link(droot / "f.bin", xroot / "f.bin")
    ent = pwd.getpwnam(XROOTD_USER)
    os.chown(xroot, ent.pw_uid, ent.pw_gid)
    watch = b.watch()
    with dtnkit_serve(b, droot, pki) as (durl, dpid), xrootd(b, xroot, pki, work) as (xurl, xpid):

        def measure(url: str, pid: int) -> tuple[float, dict[str, float]]:
            return one_round(url, pid, pki.ca_file, a.clients, a.gets, size)

        for url, pid in ((durl, dpid), (xurl, xpid)):  # warm both: page cache, TLS set-up
            one_round(url, pid, pki.ca_file, 4, 1, size)
        got = b.rounds_of(
            {
                "dtnkit": lambda: side("dtnkit", measure(durl, dpid)),
                "XRootD": lambda: side("XRootD", measure(xurl, xpid)),
            }
        )
    rows = []
    for name, label in (("dtnkit", "dtnkit serve"), ("XRootD", "XRootD 5.5.3")):
        rates, nines = got.get(name), got.get(f"{name} p99")
        cpu = statistics.median(got.get(f"{name} cpu"))
        rows.append([label, *spread_cells(rates), *spread_cells(nines), f"{cpu:.1f}"])
    b.table(
        ["server", "GB/s", "(range)", "p99 s", "(range)", "server CPU s/round"],
        rows,
        title=f"{a.clients} clients x {a.gets} GETs of {a.size_mib} MiB over HTTPS "
        "(curl, keep-alive), medians of interleaved rounds",
    )
    rate = b.compare(got, "dtnkit", "XRootD")
    p99_ratio = got.paired("dtnkit p99", "XRootD p99")
    b.table(
        ["dtnkit / XRootD", "ratio"],
        [
            ["throughput", rate.fmt()],
            ["p99 latency", f"{statistics.median(p99_ratio):.2f}" if p99_ratio else "-"],
        ],
    )
    b.load_line(watch)
    return None


def side(name: str, got: tuple[float, dict[str, float]]) -> tuple[float, dict[str, float]]:
    """A round's value with its side figures named for the server ("dtnkit p99", ...)."""
    value, extra = got
    return value, {f"{name} {k}": v for k, v in extra.items()}


CASE = Case(
    run=run, options=options, quick=quick, rounds=4, needs_root=True, tools=("curl", "xrootd")
)
