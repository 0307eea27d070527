"""Benchmark `dtnkit cp` downloads on loopback: verify modes, sizes, streams, block sizes, peers.

Sections (``--sections``, default all; each prints a markdown table on stdout, progress on
stderr; every time is the best of ``--repeat`` runs, the destination deleted after each run):

main    ``--size`` (1 GiB) on ``--dir`` (tmpfs), ``--streams`` 1/2/4/8 x adler32/crc32c/md5 x
        ``--verify none|sequential|file|block``; checksum-only time; block / none and
        block / max(transfer only, checksum only) (the pipelining optimum).
seed    the seed paper's comparison (block-level vs sequential and vs file-level pipelining):
        from the main table (server has the checksum stored), and measured again with the
        server's digest cache cold (mtime changed before each run, so the source checksum is
        computed during the copy, as in the paper's setting).
sizes   64 MiB .. 8 GiB, adler32 block vs none at 1 and 4 streams.
blocks  ``--block-size`` sweep 1 .. 64 MiB at 1 GiB: adler32 none/block (1, 4 streams), md5 block.
disk    tmpfs vs ``--disk-dir`` (/var/tmp): source pages dropped (fsync + POSIX_FADV_DONTNEED)
        before every run so the server reads from disk; adler32 all modes, plus block with
        ``--verify-level ondisk``.
iperf   iperf3 single stream on 127.0.0.1 (own server, free port) vs dtnkit 1-stream none/block
        and curl from the same dtnkit serve into the file and into /dev/null.
peers   the same file from XRootD 5.5.3 (plain HTTP + root://, ``xrootd.chksum adler32``, the
        file owned by XRootD's user so that it stores the checksum): curl, curl + xrdadler32,
        xrdcp, xrdcp + xrdadler32, xrdcp --cksum adler32:source, gfal-copy -K adler32, rclone
        copyto (on-the-fly webdav remote), dtnkit cp (CLI, --json) from XRootD and from dtnkit
        serve. Wall time of the commands as a user runs them (process start included).
        XRootD is configured here, not with tests.support.xrootd: that harness is TLS-only and
        serves its own data directory, and this needs plain HTTP on the same tmpfs file.

After each section a line says how much CPU other processes took meanwhile (the VM is shared).

The dtnkit server always runs in its own process (``dtnkit serve``); except in the cold seed
table its digest cache is warmed before timing (a server with stored checksums). dtnkit copies
are timed in-process through ``dtnkit.transfer.client.copy.copy`` except in ``peers`` (the CLI with
``--json``).

    .venv/bin/python bench/bench_cp.py                  # everything, about 21 minutes
    .venv/bin/python bench/bench_cp.py --quick          # smoke check, under 2 minutes
    .venv/bin/python bench/bench_cp.py --sections main,seed --streams 1,4 --checksums adler32
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from benchlib import T0, CpuWatch, free_port, log, make_file, out, stop, table
from dtnkit.transfer import checksum as cks
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.options import Options
from dtnkit.transfer.client.session import Session, Url
from dtnkit.transfer.client.verify import Level, Verify

MiB = 2**20
GiB = 2**30
MODES = ("none", "sequential", "file", "block")
SECTIONS = ("main", "seed", "sizes", "blocks", "disk", "iperf", "peers")
REPO = Path(__file__).resolve().parent.parent


def mb_s(size: int, seconds: float) -> str:
    return f"{size / seconds / 1e6:.0f}"


def fmt_size(size: int) -> str:
    return f"{size // GiB} GiB" if size >= GiB and size % GiB == 0 else f"{size // MiB} MiB"


# --------------------------------------------------------------------------- files, processes


def evict(path: Path) -> None:
    """Write the file back and drop its cached pages, so the next read comes from disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_fraction(path: Path) -> float | None:
    """Share of the file's pages in the page cache (``fincore``), None if unknown."""
    try:
        r = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES",
                            str(path)], capture_output=True, text=True, timeout=10)
        return int(r.stdout.split()[0]) / max(1, path.stat().st_size)
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


_TRACKED: dict[int, subprocess.Popen[str] | subprocess.Popen[bytes]] = {}


def wait_port(port: int, proc: subprocess.Popen[bytes] | subprocess.Popen[str],
              timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on port {port} after {timeout} s")



@contextmanager
def dtnkit_server(root: Path) -> Iterator[str]:
    """``dtnkit serve`` on 127.0.0.1 in a child process; yields its URL, stops it after."""
    cmd = [sys.executable, "-m", "dtnkit.cli.main", "serve", "--root", str(root),
           "--host", "127.0.0.1", "--port", "0", "--anonymous-read", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    _TRACKED[proc.pid] = proc
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening on " not in line:
            raise RuntimeError(f"server did not start: {line!r} (exit {proc.poll()})")
        url = line.split("listening on ", 1)[1].split()[0]
        yield url if url.endswith("/") else url + "/"
    finally:
        stop(proc)
        _TRACKED.pop(proc.pid, None)


@contextmanager
def xrootd_server(root: Path, work: Path) -> Iterator[tuple[str, str]]:
    """XRootD 5.5.3 exporting *root*, plain HTTP (XrdHttp) and root://, server-side adler32.

    Yields ``(http_url, root_url)``, both ending in "/". XRootD refuses to run as root, so it
    drops to ``nobody`` (``-R``); *root* must be readable by it.
    """
    admin = work / "xrootd-admin"
    admin.mkdir(parents=True, exist_ok=True)
    nobody = pwd.getpwnam("nobody")
    os.chown(admin, nobody.pw_uid, nobody.pw_gid)
    xport, hport = free_port(), free_port()
    cfg = work / "xrootd.cfg"
    cfg.write_text(f"""all.export /
oss.localroot {root}
all.adminpath {admin}
all.pidpath {admin}
xrd.port {xport}
xrootd.chksum adler32
xrd.protocol XrdHttp:{hport} libXrdHttp.so
http.listingdeny no
""")
    logfile = admin / "xrootd.log"
    proc = subprocess.Popen(["xrootd", "-R", "nobody", "-c", str(cfg), "-l", str(logfile),
                             "-n", "dtnkit-bench"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _TRACKED[proc.pid] = proc
    try:
        wait_port(hport, proc)
        wait_port(xport, proc)
        yield f"http://127.0.0.1:{hport}/", f"root://127.0.0.1:{xport}//"
    finally:
        stop(proc)
        _TRACKED.pop(proc.pid, None)


def warm_digests(url: str, algos: list[str]) -> None:
    """Ask the server for each digest once, so its cache holds them before timing."""
    u = Url.parse(url)
    session = Session(u, Options(retries=0))
    for algo in algos:
        session.head(u, want=cks.canonical(algo))


# --------------------------------------------------------------------------- measurements


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.repeat: int = args.repeat
        self.block = args.block_size * MiB

    def cp(self, url: str, dst: Path, *, streams: int, algo: str, mode: str,
           block: int | None = None, level: str = "inflight") -> float:
        """One ``copy`` download; seconds; the destination is deleted after."""
        opts = Options(streams=streams, block_size=block or self.block, checksum=algo,
                       verify=Verify(mode), level=Level(level), retries=0)
        start = time.perf_counter()
        copy(url, str(dst), opts)
        elapsed = time.perf_counter() - start
        if not stat.S_ISCHR(dst.stat().st_mode):
            dst.unlink()
        return elapsed

    def best(self, runs: dict[str, Callable[[], float]], repeat: int | None = None,
             before: Callable[[], None] | None = None) -> dict[str, float]:
        """Best of *repeat* for each named run; the runs are interleaved, round by round."""
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(repeat or self.repeat):
            for name, run in runs.items():
                if before is not None:
                    before()
                times[name].append(run())
        return {k: min(v) for k, v in times.items()}

    def cks_only(self, path: Path, algo: str, evicted: bool = False,
                 repeat: int | None = None) -> float:
        def run() -> float:
            if evicted:
                evict(path)
            start = time.perf_counter()
            cks.file_checksum(path, algo)
            return time.perf_counter() - start
        return min(run() for _ in range(repeat or self.repeat))


# --------------------------------------------------------------------------- sections


def section_main(b: Bench, url: str, src: Path, dst: Path, results: dict[str, object]) -> None:
    a = b.args
    size = src.stat().st_size
    out(f"### Main: {fmt_size(size)}, files in {a.dir}, {a.block_size} MiB blocks, "
        f"warm server digests, best of {b.repeat}; seconds")
    out()
    rows: list[list[str]] = []
    main: dict[tuple[int, str], dict[str, float]] = {}
    for algo in a.checksums:
        cs = b.cks_only(src, algo)
        for streams in a.streams:
            log(f"main: {algo} {streams} streams")
            t = b.best({m: partial(b.cp, url, dst, streams=streams, algo=algo, mode=m)
                        for m in MODES})
            t["cks"] = cs
            main[(streams, algo)] = t
            opt = max(t["none"], cs)
            rows.append([str(streams), algo, *(f"{t[m]:.2f}" for m in MODES), f"{cs:.2f}",
                         f"{t['block'] / t['none']:.2f}", f"{t['block'] / opt:.2f}",
                         mb_s(size, t["none"]), mb_s(size, t["block"])])
            log(f"  {rows[-1]}")
    rows.sort(key=lambda r: (a.checksums.index(r[1]), int(r[0])))
    table(["streams", "checksum", "none", "sequential", "file", "block", "checksum only",
           "block / none", "block / optimum", "none MB/s", "block MB/s"], rows)
    results["main"] = main
    results["main_size"] = size


def seed_rows(data: dict[tuple[int, str], dict[str, float]],
              algos: list[str]) -> list[list[str]]:
    rows = []
    for (streams, algo), t in sorted(data.items(), key=lambda kv: (algos.index(kv[0][1]),
                                                                   kv[0][0])):
        rows.append([str(streams), algo, f"{t['sequential']:.2f}", f"{t['file']:.2f}",
                     f"{t['block']:.2f}", f"{100 * (1 - t['block'] / t['sequential']):.0f} %",
                     f"{100 * (1 - t['block'] / t['file']):.0f} %"])
    return rows


SEED_HEAD = ["streams", "checksum", "sequential", "file", "block", "block vs sequential",
             "block vs file"]


def section_seed(b: Bench, url: str, src: Path, dst: Path, results: dict[str, object]) -> None:
    a = b.args
    size = src.stat().st_size
    main = results.get("main")
    if isinstance(main, dict) and main:
        main_size = results["main_size"]
        assert isinstance(main_size, int)
        out(f"### Seed comparison, server with stored checksums (from the main table, "
            f"{fmt_size(main_size)}); reduction of "
            f"total time (paper: up to 70 % vs sequential, up to 60 % vs file-level)")
        out()
        table(SEED_HEAD, seed_rows(main, a.checksums))
    # cold: the server computes the source checksum during the copy
    cold: dict[tuple[int, str], dict[str, float]] = {}
    tick = [0]

    def touch() -> None:  # a new mtime: the server's digest cache misses
        tick[0] += 1
        st = src.stat()
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000 * tick[0]))

    for algo in a.seed_checksums:
        for streams in a.seed_streams:
            log(f"seed (cold source digest): {algo} {streams} streams")
            cold[(streams, algo)] = b.best(
                {m: partial(b.cp, url, dst, streams=streams, algo=algo, mode=m)
                 for m in ("none", "sequential", "file", "block")}, before=touch)
            log(f"  {cold[(streams, algo)]}")
    out(f"### Seed comparison, source checksum computed during the copy (server digest cache "
        f"cold: mtime changed before each run), {fmt_size(size)}, {a.dir}, best of {b.repeat}; "
        f"seconds")
    out()
    rows = seed_rows(cold, a.seed_checksums)
    for r, key in zip(rows, sorted(cold, key=lambda k: (a.seed_checksums.index(k[1]), k[0])),
                      strict=True):
        r.insert(2, f"{cold[key]['none']:.2f}")
    table([*SEED_HEAD[:2], "none", *SEED_HEAD[2:]], rows)


def section_sizes(b: Bench, root: Path, url: str, out_dir: Path) -> None:
    a = b.args
    rows = []
    for size_mib in a.sizes:
        size = size_mib * MiB
        free = shutil.disk_usage(root).free
        if free < 2 * size + GiB:
            log(f"sizes: skipping {size_mib} MiB, only {free / GiB:.1f} GiB free in {root}")
            rows.append([fmt_size(size), "-", "skipped: no room", "", "", "", ""])
            continue
        name = f"s{size_mib}"
        src = root / name
        make_file(src, size)
        try:
            warm_digests(url + name, ["adler32"])
            rep = min(b.repeat, 2) if size >= 4 * GiB else b.repeat
            for streams in a.sweep_streams:
                log(f"sizes: {size_mib} MiB, {streams} streams, best of {rep}")
                t = b.best({m: partial(b.cp, url + name, out_dir / name, streams=streams,
                                       algo="adler32", mode=m)
                            for m in ("none", "block")}, repeat=rep)
                rows.append([fmt_size(size), str(streams), f"{t['none']:.2f}",
                             f"{t['block']:.2f}", f"{t['block'] / t['none']:.2f}",
                             mb_s(size, t["none"]), mb_s(size, t["block"])])
                log(f"  {rows[-1]}")
        finally:
            src.unlink()
    out(f"### Sizes: adler32, {a.dir}, {a.block_size} MiB blocks, best of {b.repeat} "
        f"(2 from 4 GiB); seconds")
    out()
    table(["size", "streams", "none", "block", "block / none", "none MB/s", "block MB/s"], rows)


def section_blocks(b: Bench, url: str, src: Path, dst: Path) -> None:
    a = b.args
    size = src.stat().st_size
    md5 = cks.canonical("md5")
    cs = {"adler32": b.cks_only(src, "adler32"), md5: b.cks_only(src, md5)}
    rows = []
    for bs in a.block_sizes:
        runs: dict[str, Callable[[], float]] = {}
        for streams in a.sweep_streams:
            for mode in ("none", "block"):
                runs[f"{streams}-{mode}"] = partial(b.cp, url, dst, streams=streams,
                                                    algo="adler32", mode=mode, block=bs * MiB)
        runs["md5"] = partial(b.cp, url, dst, streams=max(a.sweep_streams), algo=md5,
                              mode="block", block=bs * MiB)
        log(f"blocks: {bs} MiB")
        t = b.best(runs)
        row = [f"{bs} MiB"]
        for streams in a.sweep_streams:
            n, blk = t[f"{streams}-none"], t[f"{streams}-block"]
            row += [f"{n:.2f}", f"{blk:.2f}", f"{blk / n:.2f}",
                    f"{blk / max(n, cs['adler32']):.2f}"]
        s_md5 = max(a.sweep_streams)
        row += [f"{t['md5']:.2f}", f"{t['md5'] / max(t[f'{s_md5}-none'], cs[md5]):.2f}"]
        rows.append(row)
        log(f"  {row}")
    head = ["block size"]
    for streams in a.sweep_streams:
        head += [f"{streams} str none", f"{streams} str block", "block / none",
                 "block / optimum"]
    head += [f"md5 block {max(a.sweep_streams)} str", "md5 block / optimum"]
    out(f"### Block size: adler32 (checksum only {cs['adler32']:.2f} s) and md5 (checksum only "
        f"{cs[md5]:.2f} s), {fmt_size(size)}, {a.dir}, best of {b.repeat}; seconds")
    out()
    table(head, rows)


def section_disk(b: Bench, work: Path, tmpfs_url: str, tmpfs_src: Path, tmpfs_out: Path) -> None:
    a = b.args
    size = tmpfs_src.stat().st_size
    free = shutil.disk_usage(a.disk_dir).free
    if free < 2 * size + 2 * GiB:
        out(f"### Disk: skipped, {free / GiB:.1f} GiB free in {a.disk_dir}")
        return
    base = Path(tempfile.mkdtemp(prefix="dtnkit-bench-", dir=a.disk_dir))
    try:
        root = base / "src"
        root.mkdir()
        dst_dir = base / "dst"
        dst_dir.mkdir()
        src = root / tmpfs_src.name
        make_file(src, size)
        evict(src)
        frac = cached_fraction(src)
        log(f"disk: {src} cached after eviction: "
            f"{'?' if frac is None else f'{100 * frac:.0f} %'}")
        cs_disk = b.cks_only(src, "adler32", evicted=True)
        cs_tmpfs = b.cks_only(tmpfs_src, "adler32")
        rows = []
        with dtnkit_server(root) as url:
            warm_digests(url + src.name, ["adler32"])
            for streams in a.sweep_streams:
                for where, u, s, d, cs in (("tmpfs", tmpfs_url, tmpfs_src, tmpfs_out, cs_tmpfs),
                                           (f"disk ({a.disk_dir})", url + src.name, src,
                                            dst_dir / src.name, cs_disk)):
                    log(f"disk: {where}, {streams} streams")
                    runs: dict[str, Callable[[], float]] = {
                        m: partial(b.cp, u, d, streams=streams, algo="adler32", mode=m)
                        for m in MODES}
                    runs["ondisk"] = partial(b.cp, u, d, streams=streams, algo="adler32",
                                             mode="block", level="ondisk")
                    t = b.best(runs, before=partial(evict, s) if s is src else None)
                    rows.append([where, str(streams), *(f"{t[m]:.2f}" for m in MODES),
                                 f"{t['ondisk']:.2f}", f"{cs:.2f}",
                                 f"{t['block'] / t['none']:.2f}",
                                 f"{t['block'] / max(t['none'], cs):.2f}",
                                 mb_s(size, t["none"]), mb_s(size, t["block"])])
                    log(f"  {rows[-1]}")
        out(f"### tmpfs vs disk: adler32, {fmt_size(size)}, {a.block_size} MiB blocks, best of "
            f"{b.repeat}; on disk the source is written back and dropped from the page cache "
            f"before each run (and before each checksum-only run); the destination is on the "
            f"same filesystem (written to the page cache except for `ondisk`: fsync, drop, "
            f"re-read); seconds")
        out()
        table(["files", "streams", *MODES, "block ondisk", "checksum only", "block / none",
               "block / optimum", "none MB/s", "block MB/s"], rows)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def iperf3(seconds: int) -> float:
    """Single-stream loopback iperf3 (own server on a free port); received bits/s."""
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    _TRACKED[server.pid] = server
    try:
        time.sleep(0.5)
        for attempt in range(5):
            r = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t",
                                str(seconds), "-J"], capture_output=True, text=True,
                               timeout=seconds + 30)
            if r.returncode == 0:
                bps: float = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
                return bps
            time.sleep(0.5 * (attempt + 1))
        raise RuntimeError(f"iperf3 failed: {r.stdout[-300:]} {r.stderr[-300:]}")
    finally:
        stop(server)
        _TRACKED.pop(server.pid, None)


def _curl(url: str, dst: str) -> float:
    start = time.perf_counter()
    subprocess.run(["curl", "-sSf", "-o", dst, url], check=True, timeout=600)
    elapsed = time.perf_counter() - start
    if dst != "/dev/null":
        os.unlink(dst)
    return elapsed


def section_iperf(b: Bench, url: str, src: Path, dst: Path) -> None:
    a = b.args
    size = src.stat().st_size
    log(f"iperf: iperf3 -c 127.0.0.1 -t {a.iperf_seconds} -J")
    bps = max(iperf3(a.iperf_seconds) for _ in range(min(b.repeat, 2)))
    runs: dict[str, Callable[[], float]] = {
        f"dtnkit cp, 1 stream, {m}" + (" adler32" if m == "block" else "") + ", to the file":
        partial(b.cp, url, dst, streams=1, algo="adler32", mode=m) for m in ("none", "block")}
    # the network path alone, as iperf3 measures it (memory to memory), still verified
    for m in ("none", "block"):
        runs[f"dtnkit cp, 1 stream, {m}" + (" adler32" if m == "block" else "")
             + ", to /dev/null"] = partial(b.cp, url, Path("/dev/null"), streams=1,
                                           algo="adler32", mode=m)
    # the same server with a C client: what the server side alone allows
    runs["curl from dtnkit serve, to the file"] = partial(_curl, url, str(dst))
    runs["curl from dtnkit serve, to /dev/null"] = partial(_curl, url, "/dev/null")
    t = b.best(runs)
    ref = bps / 8
    rows = [["iperf3, 1 stream (memory to memory)", f"{bps / 8e6:.0f}", "100 %"]]
    for label, seconds in t.items():
        rate = size / seconds
        rows.append([label, f"{rate / 1e6:.0f}", f"{100 * rate / ref:.0f} %"])
    out(f"### Single stream vs iperf3 on loopback ({fmt_size(size)} file in {a.dir}, best of "
        f"{b.repeat}; iperf3 {a.iperf_seconds} s, best of {min(b.repeat, 2)})")
    out()
    table(["what", "MB/s", "% of iperf3"], rows)


def run_cmds(cmds: list[list[str]], env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    outs = []
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"{c[0]} exit {r.returncode}: {r.stderr.strip()[-300:]}")
        outs.append(r.stdout + r.stderr)
    return time.perf_counter() - start, "\n".join(outs)


def section_peers(b: Bench, work: Path, root: Path, name: str, dtn_url: str,
                  out_dir: Path) -> None:
    """The same file through XRootD 5.5.3 and its usual clients, rclone and dtnkit cp."""
    a = b.args
    src = root / name
    size = src.stat().st_size
    expected = cks.file_checksum(src, "adler32").hex()
    dst = out_dir / f"peer-{name}"
    for p in (work, root):
        p.chmod(0o755)
    # owned by the user XRootD runs as, so that it can store the adler32 it computes in an
    # extended attribute (XrdCks) and answer later requests from it, as dtnkit's cache does
    nobody = pwd.getpwnam("nobody")
    os.chown(src, nobody.pw_uid, nobody.pw_gid)
    env = dict(os.environ, GFAL_PYTHONBIN="/usr/bin/python3", RCLONE_CONFIG="/dev/null")
    dtnkit = [str(Path(sys.executable).with_name("dtnkit"))]
    if not Path(dtnkit[0]).exists():
        dtnkit = [sys.executable, "-m", "dtnkit.cli.main"]
    with xrootd_server(root, work) as (xhttp, xroot):
        # XRootD computes (and, where xattrs work, stores) the adler32 on the first request
        for _ in range(2):
            start = time.perf_counter()
            subprocess.run(["curl", "-sSI", "-H", "Want-Digest: adler32", xhttp + name],
                           capture_output=True, timeout=120)
            log(f"peers: XRootD HEAD Want-Digest adler32: {time.perf_counter() - start:.2f} s")
        xhost = xroot.split("//")[1].rstrip("/")
        peers: list[tuple[str, str, list[list[str]]]] = [
            ("XRootD source adler32 only (HEAD Want-Digest)", "- (the server's checksum)",
             [["curl", "-sSfI", "-o", str(dst), "-H", "Want-Digest: adler32", xhttp + name]]),
            ("curl (XrdHttp)", "nothing", [["curl", "-sSf", "-o", str(dst), xhttp + name]]),
            ("curl (dtnkit serve)", "nothing",
             [["curl", "-sSf", "-o", str(dst), dtn_url + name]]),
            ("curl + xrdadler32", "source adler32 (HEAD Want-Digest), GET, adler32 of the copy",
             [["curl", "-sSfI", "-H", "Want-Digest: adler32", xhttp + name],
              ["curl", "-sSf", "-o", str(dst), xhttp + name], ["xrdadler32", str(dst)]]),
            ("xrdcp (root://)", "nothing", [["xrdcp", "-f", "-s", xroot + name, str(dst)]]),
            ("xrdcp + xrdadler32", "source adler32 (xrdfs query), copy, adler32 of the copy",
             [["xrdfs", xhost, "query", "checksum", "/" + name],
              ["xrdcp", "-f", "-s", xroot + name, str(dst)], ["xrdadler32", str(dst)]]),
            ("xrdcp --cksum adler32:source", "xrdcp's end-to-end check",
             [["xrdcp", "-f", "-s", "--cksum", "adler32:source", xroot + name, str(dst)]]),
            ("gfal-copy -K adler32 (XrdHttp)", "source (Want-Digest) vs adler32 of the copy",
             [["gfal-copy", "-f", "-K", "adler32", xhttp + name, f"file://{dst}"]]),
            ("rclone copyto (webdav, XrdHttp)", "size only (no hash over webdav)",
             [["rclone", "copyto", "-q", f":webdav,url='{xhttp}',vendor=other:{name}",
               str(dst)]]),
            ("rclone copyto (webdav, dtnkit serve)", "size only",
             [["rclone", "copyto", "-q", f":webdav,url='{dtn_url}',vendor=other:{name}",
               str(dst)]]),
        ]
        for streams in a.sweep_streams:
            for mode in ("none", "block"):
                what = "nothing" if mode == "none" else "block adler32, in flight"
                peers.append((f"dtnkit cp {streams} str --verify {mode} (XrdHttp)", what,
                              [[*dtnkit, "cp", xhttp + name, str(dst), "--streams",
                                str(streams), "--verify", mode, "--checksum", "adler32",
                                "--retries", "0", "--json"]]))
        for streams in a.sweep_streams:
            peers.append((f"dtnkit cp {streams} str --verify block (dtnkit serve)",
                          "block adler32, in flight",
                          [[*dtnkit, "cp", dtn_url + name, str(dst), "--streams",
                            str(streams), "--verify", "block", "--checksum", "adler32",
                            "--retries", "0", "--json"]]))
        results: dict[str, tuple[float, str]] = {}
        for _ in range(b.repeat):
            for label, _what, cmds in peers:
                try:
                    t, text = run_cmds(cmds, env)
                    ok = label.startswith("XRootD source") or dst.stat().st_size == size
                    if "xrdadler32" in label:
                        ok = ok and text.count(expected) >= 2
                    note = "" if ok else "WRONG RESULT"
                    if cmds[-1][-1] == "--json":
                        note = f"{json.loads(text.strip().splitlines()[-1])['seconds']:.2f}"
                except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as exc:
                    t, note = float("inf"), f"failed: {exc}"[:120]
                finally:
                    with contextlib.suppress(OSError):
                        dst.unlink()
                log(f"peers: {label}: {t:.2f} s {note}")
                if label not in results or t < results[label][0]:
                    results[label] = (t, note)
    base = results["curl (XrdHttp)"][0]
    rows = []
    for label, what, _cmds in peers:
        t, note = results[label]
        moved = t != float("inf") and not label.startswith("XRootD source")
        rows.append([label, what, f"{t:.2f}" if t != float("inf") else "-",
                     mb_s(size, t) if moved else "-", f"{t / base:.2f}" if moved else "-",
                     note])
    out(f"### Peers: the same {fmt_size(size)} file ({a.dir}) from XRootD 5.5.3 (plain HTTP and "
        f"root://, `xrootd.chksum adler32`) and from dtnkit serve, to {a.dir}; wall time of "
        f"the commands as run from a shell (process start-up included), best of {b.repeat}")
    out()
    table(["client", "verifies", "seconds", "MB/s", "x curl", "note (dtnkit: --json seconds)"],
          rows)


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    strs = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("--sections", type=strs, default=list(SECTIONS),
                    help=f"comma-separated, of {','.join(SECTIONS)}")
    ap.add_argument("--dir", default="/dev/shm", help="where the files live (tmpfs)")
    ap.add_argument("--disk-dir", default="/var/tmp", help="disk filesystem for 'disk'")
    ap.add_argument("--size", type=int, default=1024,
                    help="MiB, file size of main/seed/blocks/disk/iperf/peers")
    ap.add_argument("--sizes", type=ints, default=[64, 256, 1024, 4096, 8192],
                    help="MiB, the size sweep")
    ap.add_argument("--streams", type=ints, default=[1, 2, 4, 8], help="main table")
    ap.add_argument("--sweep-streams", type=ints, default=[1, 4],
                    help="sizes, blocks, disk, seed (cold), peers")
    ap.add_argument("--checksums", type=strs, default=["adler32", "crc32c", "md5"])
    ap.add_argument("--block-size", type=int, default=8, help="MiB")
    ap.add_argument("--block-sizes", type=ints, default=[1, 2, 4, 8, 16, 32, 64], help="MiB")
    ap.add_argument("--repeat", type=int, default=3, help="best of N")
    ap.add_argument("--iperf-seconds", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="smoke check: 256 MiB, 1/4 streams, adler32+md5, one run each")
    args = ap.parse_args()
    if args.quick:
        args.size, args.sizes, args.streams = 256, [64, 256], [1, 4]
        args.checksums, args.block_sizes, args.repeat = ["adler32", "md5"], [4, 16], 1
        args.iperf_seconds = 2
    args.checksums = [cks.canonical(c) for c in args.checksums]
    args.seed_checksums = [c for c in args.checksums if c in ("adler32", "md5")] \
        or args.checksums
    args.seed_streams = args.sweep_streams
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections: {', '.join(sorted(unknown))}")
    return args


def _terminate(signum: int, frame: object) -> None:
    sys.exit(128 + signum)  # run the finally blocks: stop the servers, remove the files


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with "&"
    args = parse_args()
    b = Bench(args)
    base = Path(tempfile.mkdtemp(prefix="dtnkit-bench-", dir=args.dir))
    log(f"sections {','.join(args.sections)} in {base}")
    out(f"`bench/bench_cp.py {' '.join(sys.argv[1:])}`: {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"kernel {os.uname().release}")
    out()
    results: dict[str, object] = {}
    try:
        root = base / "src"
        root.mkdir()
        out_dir = base / "dst"
        out_dir.mkdir()
        name = f"f{args.size}"
        src = root / name
        needs_file = set(args.sections) - {"sizes"}
        with dtnkit_server(root) as url:
            if needs_file:
                make_file(src, args.size * MiB)
                warm_digests(url + name, args.checksums)
            dst = out_dir / name
            sections: dict[str, Callable[[], None]] = {
                "main": partial(section_main, b, url + name, src, dst, results),
                "seed": partial(section_seed, b, url + name, src, dst, results),
                "sizes": partial(section_sizes, b, root, url, out_dir),
                "blocks": partial(section_blocks, b, url + name, src, dst),
                "disk": partial(section_disk, b, base, url + name, src, dst),
                "iperf": partial(section_iperf, b, url + name, src, dst),
                "peers": partial(section_peers, b, base, root, name, url, out_dir),
            }
            for key in SECTIONS:
                if key in args.sections:
                    watch = CpuWatch(lambda: [p.pid for p in _TRACKED.values() if p.poll() is None])
                    sections[key]()
                    if key == "seed":
                        warm_digests(url + name, args.checksums)
                    out(watch.report())
                    out()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    log(f"done in {time.monotonic() - T0:.0f} s")


if __name__ == "__main__":
    main()
