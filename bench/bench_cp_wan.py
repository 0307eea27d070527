"""Benchmark `dtnkit cp` and dtnkit's HTTP-TPC on emulated WAN paths against curl, gfal-copy,
xrdcp and XRootD, and judge the targets of issue 11.

For each lab path (``--paths``, default 50 ms / 1 Gbit/s and 10 ms / 2 Gbit/s) and each state
of the ends (``--ends``: untuned, and tuned with ``dtnkit tune apply --netns`` on both end
namespaces, restored after), the script builds a `dtnkit lab` path and starts, in its
namespaces, over TLS with a throwaway CA (``tests.support.xrootd.make_pki``, the interop tests'
PKI, with the lab hosts' names):

- on ``src``: XRootD 5.5.3 (XrdHttp and root://, without ``nodnr``: the lab's hosts have
  names) and ``dtnkit serve``, both holding the ``--sizes`` test file;
- on ``dst``: XRootD and ``dtnkit serve`` as the active parties of HTTP-TPC pulls.

Clients run on ``dst`` (downloads cross the path from src to dst; uploads go back to src):
verified ``dtnkit cp`` (``--streams auto`` when this dtnkit has it, else 8; one stream; its
default when that is neither), unverified curl, ``gfal-copy -K adler32``, ``xrdcp --cksum
adler32:source``, ``xrdcp -S 8`` (root://), uploads with ``dtnkit cp`` to dtnkit serve, and
HTTP-TPC pulls from XRootD on src into dtnkit serve on dst (verified, adler32) and into XRootD
on dst, at 1 and 8 streams (the COPY request timed inside the namespace); and the path's floor:
``iperf3 -R -P 1``, ``-P 8`` and ``-P`` what ``cp auto`` used, from dst against ``iperf3 -s`` on
src (the data phase; the wall time beside it).  Times are wall times of the commands as a user
runs them (process start included), except TPC and iperf3.  Every round runs every measurement
once, pairs next to each other, the order reversed every other round; the tables give medians
over ``--repeat`` rounds and the ratio of each target pair with met / not met; a target asking
for less than the practical floor (the best iperf3 data phase plus 3 round trips) or the wire
floor says so.  One line per run gives the start-up times of python, cp and curl in the dst
namespace.

Everything it creates carries its prefix (``--prefix``, lab names ``PREFIX0``, ``PREFIX1``
... so namespaces ``dkl-PREFIX*``; the work directory ``/dev/shm/dtnkit-wanbench-*``); on
Ctrl-C, SIGTERM or an error it stops its servers by PID, restores the tuning and removes its
lab paths; at start it removes what a killed run of the same prefix left.

    .venv/bin/python bench/bench_cp_wan.py                       # all paths and ends
    .venv/bin/python bench/bench_cp_wan.py --paths 50ms/1gbit    # one path, untuned and tuned
    .venv/bin/python bench/bench_cp_wan.py --quick               # smoke check, 1-2 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support.xrootd import (
    XROOTD_USER,
    Pki,
    gfal_env,
    make_pki,
    missing,
    missing_gfal2_python,
    missing_xrootd,
    running_xrootd,
)

from benchlib import T0, CpuWatch, log, make_file, out, stop, table
from dtnkit.errors import DtnkitError
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath
from dtnkit.units import parse_ms, parse_rate

MiB = 2**20
REPO = Path(__file__).resolve().parent.parent
STATE_ROOT = Path("/run/dtnkit/bench-wan")
WORK_PREFIX = "dtnkit-wanbench-"
TOKENS = "rw-token read,write\nro-token read\n"
IPERF3_PORT = 5201  # the lab's src namespace has its own ports: no clash with the host's
#: iperf3 -P values measured in every cell: the path's practical floor is the best of them
IPERF3_STREAMS = ("1", "8")
#: measurements a run records beside its own time, named "LABEL SUFFIX": iperf3's wall time
#: (its own time is the data phase) and cp's copy phase (its JSON ``seconds``)
DERIVED = (" wall", " copy phase")
#: round trips before data flows for any HTTPS client: TCP handshake, TLS 1.3, the request
HANDSHAKE_RTTS = 3


# --------------------------------------------------------------------------- what is measured


@dataclass(frozen=True)
class Target:
    """One goal of the issue: ``measured`` / ``baseline`` (median times) at most ``limit``."""

    measured: str
    baseline: str
    limit: float | None  # None: shown for information
    what: str


def cp_streams_flavours() -> tuple[str, str | None]:
    """How this dtnkit picks streams: ('auto' or '8', the default when it is neither 1 nor
    auto, else None)."""
    helptext = subprocess.run([sys.executable, "-m", "dtnkit", "cp", "--help"],
                              capture_output=True, text=True, check=False).stdout
    flat = " ".join(helptext.split())
    m = re.search(r"--streams[^\[]*\[default: ([^;\]]+)", flat)
    default = m.group(1).strip() if m else "1"
    # click checks a given option's value before it misses the arguments
    probe = subprocess.run([sys.executable, "-m", "dtnkit", "cp", "--streams", "auto"],
                           capture_output=True, text=True, check=False)
    many = "8" if "--streams" in probe.stderr else "auto"
    return many, (None if default in ("1", "auto", many) else default)


def targets(many: str, default: str | None) -> list[Target]:
    auto = f"cp {many} XRootD"
    rows = [
        Target(auto, "gfal-copy -K adler32", 0.5, "verified cp vs gfal-copy, from XRootD"),
        Target(f"cp {many} dtnkit", "gfal-copy -K adler32", 0.5,
               "verified cp from dtnkit serve vs gfal-copy from XRootD"),
        Target(auto, "xrdcp -S 8", 0.75, "verified cp vs xrdcp -S 8 (root://)"),
        Target(f"cp {many} dtnkit", "xrdcp -S 8", 0.75,
               "verified cp from dtnkit serve vs xrdcp -S 8"),
        Target("cp 1 XRootD", "curl XRootD", 1.0, "one verified stream vs unverified curl"),
        Target("cp 1 dtnkit", "curl dtnkit", 1.0, "one verified stream vs unverified curl"),
        Target(f"upload {many}", f"cp {many} dtnkit", 1.1, "upload vs download, dtnkit serve"),
        Target("upload 1", "cp 1 dtnkit", 1.1, "upload vs download, one stream"),
        Target("tpc dtnkit 1", "tpc XRootD 1", 1.0, "TPC pull, active dtnkit vs XRootD"),
        Target("tpc dtnkit 8", "tpc XRootD 8", 1.0, "TPC pull, active dtnkit vs XRootD"),
        Target(auto, "xrdcp --cksum adler32:source", None, "verified cp vs verified xrdcp"),
        Target(f"cp {many} dtnkit", "xrdcp --cksum adler32:source", None,
               "verified cp from dtnkit serve vs verified xrdcp"),
        Target("cp 1 XRootD copy phase", "curl XRootD", None,
               "one stream's copy phase (cp's JSON seconds) vs curl's wall time"),
        Target("cp 1 dtnkit copy phase", "curl dtnkit", None,
               "one stream's copy phase (cp's JSON seconds) vs curl's wall time"),
    ]
    if default is not None:
        rows.append(Target(f"cp default({default}) XRootD", "gfal-copy -K adler32", None,
                           "cp with its default streams"))
    if BEFORE:
        for server in ("XRootD", "dtnkit"):
            rows.append(Target(f"cp {many} {server}", f"cp {many} before {server}", None,
                               f"this tree vs --before {BEFORE[0]}"))
            rows.append(Target(f"cp {many} before {server}", "gfal-copy -K adler32", None,
                               f"--before {BEFORE[0]} vs gfal-copy"))
            rows.append(Target(f"cp {many} {server}", f"cp 1 {server}", None,
                               "auto vs one stream"))
            rows.append(Target(f"cp 1 {server}", f"cp 1 before {server}", None,
                               f"one stream: this tree vs --before {BEFORE[0]}"))
            rows.append(Target(f"cp 1 before {server}", f"curl {server}", None,
                               f"one stream, --before {BEFORE[0]}, vs unverified curl"))
        for n in (many, "1"):
            rows.append(Target(f"upload {n} before", f"cp {n} dtnkit", None,
                               f"--before {BEFORE[0]} (client and serve) upload vs download"))
            rows.append(Target(f"upload {n}", f"upload {n} before", None,
                               f"this tree vs --before {BEFORE[0]} (client and serve)"))
    return rows


def order(many: str, default: str | None) -> list[str]:
    """Every measurement of a round, each target pair next to each other."""
    names = ["iperf3 8", f"cp {many} XRootD", "gfal-copy -K adler32", "xrdcp -S 8",
             "xrdcp --cksum adler32:source", f"cp {many} dtnkit", f"upload {many}",
             "iperf3 1", "cp 1 XRootD", "curl XRootD", "cp 1 dtnkit", "curl dtnkit",
             "upload 1", "tpc dtnkit 1", "tpc XRootD 1", "tpc dtnkit 8", "tpc XRootD 8"]
    if many == "auto":  # as many streams as the last `cp auto` used, next to it
        names.insert(names.index("cp auto XRootD") + 1, "iperf3 auto")
    if default is not None:
        names.append(f"cp default({default}) XRootD")
    if BEFORE:  # each next to its pair
        for server in ("XRootD", "dtnkit"):
            names.insert(names.index(f"cp {many} {server}") + 1, f"cp {many} before {server}")
            names.insert(names.index(f"cp 1 {server}") + 1, f"cp 1 before {server}")
        for n in (many, "1"):
            names.insert(names.index(f"upload {n}") + 1, f"upload {n} before")
    return names


def recorded_by(name: str) -> str:
    """The measurement whose run records *name*: itself, or the run a derived figure ("iperf3
    8 wall", "cp 1 XRootD copy phase") comes from."""
    for suffix in DERIVED:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def only(names: list[str], starts: list[str], goals: list[Target]) -> list[str]:
    """The measurements whose names start with one of *starts* (all when none given), with
    the baselines of the targets they are measured in, in the order of *names*; the iperf3
    runs too whenever a time target is measured (the path's floor under every target)."""
    if not starts:
        return names
    keep = {n for n in names if any(n.startswith(s) for s in starts)}
    measured = [g for g in goals if recorded_by(g.measured) in keep]
    keep |= {g.baseline for g in measured}
    if any(g.limit is not None for g in measured):
        keep |= {n for n in names if n.startswith("iperf3 ")}
    picked = [n for n in names if n in keep and n != "iperf3 auto"]
    autos = [i for i, n in enumerate(picked) if n.startswith("cp auto ")]
    if "iperf3 auto" in keep and autos:  # after the first cp auto: it tells the count
        picked.insert(autos[0] + 1, "iperf3 auto")
    return picked


def round_order(names: list[str], k: int) -> list[str]:
    """Round k's order: as listed, reversed every other round (drift hits both sides)."""
    return list(names) if k % 2 == 0 else list(reversed(names))


@dataclass(frozen=True)
class Floor:
    """The practical floor of a cell: what TCP on the path gives any HTTPS client."""

    streams: str  # the iperf3 -P value of the best median data phase
    data_s: float  # that median data phase (end.sum_received.seconds)
    rtt_s: float  # the path's measured idle RTT

    @property
    def seconds(self) -> float:
        return self.data_s + HANDSHAKE_RTTS * self.rtt_s


def iperf3_p(name: str, used: dict[str, list[int]] | None = None) -> str:
    """The -P of an iperf3 measurement: its name's, or for "iperf3 auto" the counts it ran
    with (those `cp auto` used), e.g. "4" or "4/5"."""
    n = name.split()[1]
    if n.isdigit() or not used or not used.get(name):
        return n
    return "/".join(str(x) for x in sorted(set(used[name])))


def practical_floor(times: dict[str, list[float]], rtt_ms: float | None,
                    used: dict[str, list[int]] | None = None) -> Floor | None:
    """The best median iperf3 data phase over the -P values measured (*used*: the -P each
    "iperf3 auto" run took), plus the round trips an HTTPS client pays before data flows;
    None without iperf3 runs or an RTT."""
    medians = [(statistics.median(t), iperf3_p(name, used)) for name, t in times.items()
               if name.startswith("iperf3 ") and recorded_by(name) == name and t]
    if not medians or rtt_ms is None or rtt_ms != rtt_ms:  # nan: ping failed
        return None
    best = min(medians)
    return Floor(best[1], best[0], rtt_ms / 1000)


def verdict(times: dict[str, list[float]], t: Target, floor_s: float | None = None,
            practical: Floor | None = None) -> tuple[str, str]:
    """(ratio, met / not met / -) of a target from the medians of the runs that succeeded.

    ``floor_s``, when given, is the path's wire floor: the file's bits at the path's rate cap,
    before any handshake or slow start, so no tool can finish sooner.  A target that asks for a
    time under it is physics, not software, and the verdict says so with both figures.
    ``practical``, when given, is the higher practical floor (iperf3's best data phase on the
    path plus the handshakes' round trips): a target asking for less is out of reach of any
    HTTPS client on that path, and the verdict says so with how the floor was made.
    """
    a, b = times.get(t.measured, []), times.get(t.baseline, [])
    if not a or not b:
        return "-", "no data"
    ratio = statistics.median(a) / statistics.median(b)
    if t.limit is None:
        return f"{ratio:.2f}", "(information)"
    if ratio <= t.limit:
        return f"{ratio:.2f}", "met"
    asked = t.limit * statistics.median(b)
    if floor_s is not None and asked < floor_s:
        return f"{ratio:.2f}", f"not met: asks {asked:.3f} s < wire floor {floor_s:.3f} s"
    if practical is not None and asked < practical.seconds:
        return f"{ratio:.2f}", (f"not met: asks {asked:.3f} s < practical floor "
                                f"{practical.seconds:.3f} s (iperf3 -P {practical.streams} data "
                                f"phase {practical.data_s:.3f} s + {HANDSHAKE_RTTS} RTT)")
    return f"{ratio:.2f}", "not met"


# --------------------------------------------------------------------------- servers


class Tracked:
    """Children the bench started, stopped by PID whatever happens."""

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen[Any]] = {}

    def add(self, proc: subprocess.Popen[Any]) -> None:
        self.procs[proc.pid] = proc

    def stop(self, proc: subprocess.Popen[Any]) -> None:
        stop(proc)
        self.procs.pop(proc.pid, None)

    def pids(self) -> list[int]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]


TRACKED = Tracked()
SERVE_ARGS: list[str] = []  # --serve-arg, and --tpc-allow for the lab when serve has it
#: --before TREE: a source tree whose `dtnkit cp` runs as "cp N before SERVER", interleaved
BEFORE: list[Path] = []


@dataclass
class Serve:
    url: str  # https://HOST.NAME.lab:PORT/
    root: Path


@contextlib.contextmanager
def dtnkit_serve(host: lab.LabHost, hostname: str, root: Path, pki: Pki, work: Path,
                 extra: list[str], before: bool = False) -> Iterator[Serve]:
    """``dtnkit serve`` (TLS, tokens, trusting the CA for its own TPC) in a lab namespace;
    *before*: the ``--before`` tree's."""
    tokens = work / "tokens"
    tokens.write_text(TOKENS)
    tokens.chmod(0o600)
    root.mkdir(parents=True, exist_ok=True)
    head = ["env", f"PYTHONPATH={BEFORE[0] / 'src'}"] if before else []
    with open(work / f"serve-{host.name}{'-before' if before else ''}.log", "w") as errlog:
        proc = host.popen([*head, sys.executable, "-m", "dtnkit", "serve", "--root", str(root),
                           "--host", "0.0.0.0", "--port", "0", "--cert", str(pki.cert),
                           "--key", str(pki.key), "--tokens", str(tokens),
                           "--ca-file", str(pki.ca_file), "--quiet", *extra, *SERVE_ARGS],
                          stderr=errlog)
    TRACKED.add(proc)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"https://[^:/\s]+:(\d+)", line)
        if not m:
            raise RuntimeError(f"dtnkit serve on {host.name} did not start: {line!r} "
                               f"(exit {proc.poll()})")
        yield Serve(f"https://{hostname}:{m.group(1)}/", root)
    finally:
        TRACKED.stop(proc)


@contextlib.contextmanager
def iperf3_server(host: lab.LabHost, work: Path) -> Iterator[subprocess.Popen[str]]:
    """``iperf3 -s`` on *host* (port IPERF3_PORT of its namespace), stopped by PID; its log in
    the work directory (so its command line carries the run's prefix)."""
    logfile = work / f"iperf3-{host.name}.log"
    proc = host.popen(["iperf3", "-s", "-p", str(IPERF3_PORT), "--forceflush",
                       "--logfile", str(logfile)], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
    TRACKED.add(proc)
    try:
        deadline = time.monotonic() + 20
        while "Server listening" not in (text := logfile.read_text()
                                         if logfile.exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"iperf3 -s on {host.name} did not start (exit "
                                   f"{proc.poll()}): {text[-300:]!r}")
            time.sleep(0.02)  # it announces itself in its log file; bounded
        yield proc
    finally:
        TRACKED.stop(proc)


def serve_has(option: str) -> bool:
    helptext = subprocess.run([sys.executable, "-m", "dtnkit", "serve", "--help"],
                              capture_output=True, text=True, check=False).stdout
    return option in helptext


def place(src: Path, dest: Path, *, owner: str | None = None) -> None:
    """A hard link of the test file (same tmpfs), owned by XRootD's user when it serves it."""
    with contextlib.suppress(FileNotFoundError):
        dest.unlink()
    os.link(src, dest)
    if owner is not None and os.geteuid() == 0:
        shutil.chown(dest, owner, owner)


# --------------------------------------------------------------------------- one configuration


@dataclass
class Config:
    rtt_ms: float
    rate_bps: int
    tuned: bool
    size: int

    @property
    def label(self) -> str:
        return (f"{self.rtt_ms:g} ms / {self.rate_bps / 1e9:g} Gbit/s, ends "
                f"{'tuned' if self.tuned else 'untuned'}, {self.size // MiB} MiB")


@dataclass
class Results:
    times: dict[str, list[float]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    #: the -P each "iperf3 auto" run took (the streams the last `cp auto` used)
    used: dict[str, list[int]] = field(default_factory=dict)


TPC_SCRIPT = """
import sys, time
from dtnkit.transfer.client.tpc import request_copy
dst, src, token, streams, ca = sys.argv[1:6]
t0 = time.monotonic()
res = request_copy(dst, source=src, token=token or None, streams=int(streams), timeout=600,
                   checksum="adler32", ca_file=ca)
elapsed = time.monotonic() - t0
print("ELAPSED", elapsed, "OK" if res.ok else "FAIL", res.final)
"""


class Run:
    """The measurements of one configuration, on a built path with its servers."""

    def __init__(self, p: LabPath, cfg: Config, pki: Pki, work: Path, name: str,
                 xsrc_url: str, xsrc_root_url: str, dsrc: Serve, xdst_url: str, xdst_root: Path,
                 ddst: Serve, many: str, default: str | None,
                 dsrc_before: Serve | None = None) -> None:
        self.p, self.cfg, self.pki, self.work, self.name = p, cfg, pki, work, name
        self.xsrc_url, self.xsrc_root_url, self.dsrc = xsrc_url, xsrc_root_url, dsrc
        self.xdst_url, self.xdst_root, self.ddst = xdst_url, xdst_root, ddst
        self.many, self.default = many, default
        self.dsrc_before = dsrc_before  # the --before tree's serve on src (uploads)
        self.out = work / "out"
        self.out.mkdir(exist_ok=True)
        self.env = gfal_env(pki, None)
        #: figures the last measurement recorded beside its time (see DERIVED)
        self.side: dict[str, float] = {}
        self.auto_used: int | None = None  # streams the last `cp auto` (this tree) used

    def dtnkit_cp(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "dtnkit", "cp", "--ca-file", str(self.pki.ca_file),
                "--checksum", "adler32", "--token", "rw-token", *args]

    def streams(self, n: str) -> list[str]:
        return [] if n.startswith("default") else ["--streams", n]

    def command(self, label: str) -> tuple[list[str], Path, Callable[[], None]]:
        """argv run on dst, the file it should leave, and how to clean up after it."""
        name, dest = self.name, self.out / self.name
        x, d = self.xsrc_url + name, self.dsrc.url + name

        def rm_dest() -> None:
            with contextlib.suppress(FileNotFoundError):
                dest.unlink()

        up = self.dsrc.root / "up.bin"

        def rm_up() -> None:
            with contextlib.suppress(FileNotFoundError):
                up.unlink()

        kind, _, rest = label.partition(" ")
        if kind == "cp":
            n, _, server = rest.rpartition(" ")
            src = x if server == "XRootD" else d
            n = n.split("(")[1].rstrip(")") if n.startswith("default") else n
            before = n.endswith(" before")
            n = n.removesuffix(" before")
            argv = self.dtnkit_cp(*([] if label.startswith("cp default") else
                                    ["--streams", n]), src, str(dest))
            if before:
                argv = ["env", f"PYTHONPATH={BEFORE[0] / 'src'}", *argv]
            else:  # the same work; the summary as JSON on stdout instead of a line on stderr
                argv[argv.index("cp") + 1:argv.index("cp") + 1] = ["--format", "json"]
            return argv, dest, rm_dest
        if kind == "upload":
            n, _, before_ = rest.partition(" ")
            if before_:  # the --before tree's client into the --before tree's serve
                assert self.dsrc_before is not None
                old = self.dsrc_before.root / "up.bin"

                def rm_old() -> None:
                    with contextlib.suppress(FileNotFoundError):
                        old.unlink()

                return (["env", f"PYTHONPATH={BEFORE[0] / 'src'}",
                         *self.dtnkit_cp("--streams", n, str(self.work / "src" / name),
                                         self.dsrc_before.url + "up.bin")], old, rm_old)
            return (self.dtnkit_cp("--streams", rest, str(self.work / "src" / name),
                                   self.dsrc.url + "up.bin"), up, rm_up)
        if label == "gfal-copy -K adler32":
            env = [f"{k}={self.env[k]}" for k in ("X509_CERT_DIR", "GFAL_PYTHONBIN")]
            return (["env", *env, "gfal-copy", "-f", "-K", "adler32", x, f"file://{dest}"],
                    dest, rm_dest)
        if label == "xrdcp -S 8":
            return (["xrdcp", "-f", "-s", "-S", "8", f"{self.xsrc_root_url}/{name}", str(dest)],
                    dest, rm_dest)
        if label == "xrdcp --cksum adler32:source":
            return (["xrdcp", "-f", "-s", "--cksum", "adler32:source",
                     f"{self.xsrc_root_url}/{name}", str(dest)], dest, rm_dest)
        if kind == "curl":
            src = x if rest == "XRootD" else d
            return (["curl", "-sS", "-f", "--cacert", str(self.pki.ca_file), "-H",
                     "Authorization: Bearer ro-token", "-o", str(dest), src], dest, rm_dest)
        raise ValueError(label)

    def tpc(self, label: str) -> float:
        _, active, streams = label.split()
        if active == "dtnkit":
            dst_url, token, dest = self.ddst.url + "tpc.bin", "rw-token", self.ddst.root / "tpc.bin"
        else:
            dst_url, token, dest = self.xdst_url + "tpc.bin", "", self.xdst_root / "tpc.bin"
        try:
            proc = self.p.dst.run([sys.executable, "-c", TPC_SCRIPT, dst_url,
                                   self.xsrc_url + self.name, token, streams,
                                   str(self.pki.ca_file)], check=False, timeout=900)
            m = re.search(r"ELAPSED (\S+) (OK|FAIL) ?(.*)", proc.stdout)
            if not m or m.group(2) != "OK":
                raise RuntimeError((m.group(3) if m else proc.stderr.strip()[-300:]) or "?")
            size = dest.stat().st_size
            if size != self.cfg.size:
                raise RuntimeError(f"destination has {size} bytes")
            return float(m.group(1))
        finally:
            with contextlib.suppress(FileNotFoundError):
                dest.unlink()

    def iperf3(self, label: str) -> float:
        """The data phase of ``iperf3 -R -P N -n SIZE`` from dst against src's server (src
        sends, as in a download); its wall time beside it."""
        streams = label.split()[1]
        if streams == "auto":
            if self.auto_used is None:
                raise RuntimeError("no `cp auto` has told how many streams it used yet")
            streams = str(self.auto_used)
        t0 = time.monotonic()
        proc = self.p.dst.run(["iperf3", "-c", self.p.src.address, "-p", str(IPERF3_PORT),
                               "-R", "-P", streams, "-n", str(self.cfg.size), "--json"],
                              check=False, timeout=300)
        wall = time.monotonic() - t0
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = {}
        if proc.returncode != 0 or "error" in doc or "end" not in doc:
            raise RuntimeError(f"exit {proc.returncode}: "
                               f"{doc.get('error') or (proc.stderr or proc.stdout)[-300:]}")
        got = doc["end"].get("sum_received", {})
        if int(got.get("bytes", 0)) < self.cfg.size:
            raise RuntimeError(f"iperf3 received {got.get('bytes')} bytes")
        self.side[f"{label} wall"] = wall
        return float(got["seconds"])

    def measure(self, label: str) -> float:
        self.side = {}
        if label.startswith("tpc "):
            return self.tpc(label)
        if label.startswith("iperf3 "):
            return self.iperf3(label)
        argv, dest, clean = self.command(label)
        try:
            t0 = time.monotonic()
            proc = self.p.dst.run(argv, check=False, timeout=900)
            elapsed = time.monotonic() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"exit {proc.returncode}: "
                                   f"{(proc.stderr or proc.stdout).strip()[-300:]}")
            size = dest.stat().st_size if dest.exists() else -1
            if size != self.cfg.size:
                raise RuntimeError(f"{dest.name} has {size} bytes, not {self.cfg.size}")
            if "--format" in argv:
                doc = json.loads(proc.stdout)
                if label.startswith("cp 1 "):
                    self.side[f"{label} copy phase"] = float(doc["seconds"])
                if label.startswith("cp auto "):
                    self.auto_used = int(doc["streams"])
            return elapsed
        finally:
            clean()


def warm(run: Run) -> None:
    """Untimed: the sources' adler32 computed and stored (as on a server that keeps them)."""
    for url in (run.xsrc_url, run.dsrc.url):
        run.p.dst.run(["curl", "-sS", "-f", "-I", "--cacert", str(run.pki.ca_file), "-H",
                       "Want-Digest: adler32", "-H", "Authorization: Bearer ro-token",
                       url + run.name], check=False, timeout=300)


def tune(p: LabPath, state_dir: Path, rtt_ms: float) -> None:
    for h in (p.src, p.dst):
        proc = subprocess.run([sys.executable, "-m", "dtnkit", "tune", "apply", "--netns",
                               h.netns, "--state-dir", str(state_dir / h.name), "--rtt",
                               f"{max(rtt_ms, 1):g}ms", "--format", "json"],
                              capture_output=True, text=True, check=False, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"tune apply on {h.netns} failed: {proc.stderr.strip()}")
        log(f"tuned {h.netns}")


def untune(p: LabPath, state_dir: Path) -> None:
    for h in (p.src, p.dst):
        if not (state_dir / h.name).exists():
            continue
        proc = subprocess.run([sys.executable, "-m", "dtnkit", "tune", "restore", "--netns",
                               h.netns, "--state-dir", str(state_dir / h.name)],
                              capture_output=True, text=True, check=False, timeout=300)
        log(f"restored {h.netns}: exit {proc.returncode}")


STARTUP = [("`true`", ["true"]), ("`python -c pass`", [sys.executable, "-c", "pass"]),
           ("`python -c \"import socket, ssl\"`", [sys.executable, "-c", "import socket, ssl"]),
           ("`dtnkit cp --help`", [sys.executable, "-m", "dtnkit", "cp", "--help"]),
           ("`curl --version`", ["curl", "--version"])]


def startup(host: lab.LabHost, rounds: int = 5) -> str:
    """The start-up line: median wall times of doing (almost) nothing, in *host*'s namespace
    as the clients run (`ip netns exec` included: `true` shows its share), interleaved."""
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for what, argv in STARTUP:
            t0 = time.monotonic()
            host.run(argv, check=True, timeout=60)
            times.setdefault(what, []).append(time.monotonic() - t0)
    return ("_Start-up in the dst namespace (median of "
            f"{rounds} wall times, `ip netns exec` included; python is the venv's that runs "
            "cp): " + ", ".join(f"{what} {statistics.median(t) * 1000:.0f} ms"
                                for what, t in times.items()) + "._")


def run_config(cfg: Config, lab_name: str, work: Path, repeat: int, many: str,
               default: str | None, src_file: Path, starts: list[str] | None = None,
               first: bool = False) -> Results:
    res = Results()
    cwork = work / lab_name
    cwork.mkdir(mode=0o711)
    tempfile.tempdir = str(cwork)  # XRootD's work directories: inside ours, on tmpfs
    log(f"{cfg.label}: building lab {lab_name}")
    with contextlib.ExitStack() as stack:
        p = stack.enter_context(lab.path(lab_name, state_root=STATE_ROOT, rtt_ms=cfg.rtt_ms,
                                         rate_bps=cfg.rate_bps))
        src_name, dst_name = p.hostname(p.src), p.hostname(p.dst)
        pki = make_pki(cwork / "pki", (src_name, dst_name, p.src.address, p.dst.address))
        tune_state = cwork / "tune"
        if cfg.tuned:
            stack.callback(untune, p, tune_state)
            tune(p, tune_state, cfg.rtt_ms)
        xsrc = stack.enter_context(running_xrootd(pki, netns=p.src.netns, host=src_name))
        xdst = stack.enter_context(running_xrootd(pki, netns=p.dst.netns, host=dst_name))
        for x in (xsrc, xdst):
            TRACKED.add(x.process)
        # a dtnkit with a TPC allow-list refuses private addresses unless listed
        allow = ["--tpc-allow", p.src.address] if serve_has("--tpc-allow") else []
        dsrc = stack.enter_context(dtnkit_serve(p.src, src_name, cwork / "serve-src", pki,
                                                cwork, []))
        ddst = stack.enter_context(dtnkit_serve(p.dst, dst_name, cwork / "serve-dst", pki,
                                                cwork, allow))
        dsrc_before = stack.enter_context(dtnkit_serve(
            p.src, src_name, cwork / "serve-src-before", pki, cwork, [], before=True)) \
            if BEFORE else None
        names = only(order(many, default), starts or [], targets(many, default))
        if any(n.startswith("iperf3 ") for n in names):
            stack.enter_context(iperf3_server(p.src, cwork))
        if first:  # once per run, above the tables
            out(startup(p.dst))
            out()
        (cwork / "src").mkdir()
        name = src_file.name
        place(src_file, cwork / "src" / name)
        place(src_file, xsrc.root / name, owner=XROOTD_USER)
        place(src_file, dsrc.root / name)
        run = Run(p, cfg, pki, cwork, name, xsrc.url, xsrc.xroot_url, dsrc, xdst.url, xdst.root,
                  ddst, many, default, dsrc_before)
        warm(run)
        watch = CpuWatch(TRACKED.pids)
        for k in range(repeat):
            for label in round_order(names, k):
                try:
                    t = run.measure(label)
                    res.times.setdefault(label, []).append(t)
                    if label == "iperf3 auto" and run.auto_used is not None:
                        res.used.setdefault(label, []).append(run.auto_used)
                    for name, side in run.side.items():
                        res.times.setdefault(name, []).append(side)
                    log(f"round {k + 1}/{repeat} {label}: {t:.2f} s" + "".join(
                        f", {name.removeprefix(label).strip()} {side:.2f} s"
                        for name, side in run.side.items()))
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                    res.failures.setdefault(label, []).append(str(exc))
                    log(f"round {k + 1}/{repeat} {label}: FAILED {exc}")
        report(cfg, res, names, many, default, p, repeat)
        out(watch.report())
        out()
        for x in (xsrc, xdst):
            TRACKED.procs.pop(x.process.pid, None)
    return res


def report(cfg: Config, res: Results, names: list[str], many: str, default: str | None,
           p: LabPath, repeat: int) -> None:
    rtt = p.measure_rtt(3)
    out(f"### {cfg.label}")
    out()
    out(f"Lab path: `dtnkit lab` {p.state.backend}, measured idle RTT "
        f"{rtt['avg_ms'] if rtt else float('nan'):.1f} ms; {repeat} rounds, medians.")
    out()
    rows = []
    for label in [x for n in names for x in (n, *(n + d for d in DERIVED))]:
        if label not in names and label not in res.times:
            continue
        t = res.times.get(label, [])
        fails = len(res.failures.get(label, []))
        med = statistics.median(t) if t else float("nan")
        rate = f"{cfg.size * 8 / med / 1e6:.0f}" if t else "-"
        rows.append([label, f"{med:.2f}" if t else "-", rate,
                     " ".join(f"{x:.2f}" for x in t), str(fails) if fails else ""])
    table(["measurement", "median s", "Mbit/s", "runs (s)", "failed"], rows)
    trows = []
    floor_s = cfg.size * 8 / cfg.rate_bps
    practical = practical_floor(res.times, rtt["avg_ms"] if rtt else None, res.used)
    for goal in targets(many, default):
        if recorded_by(goal.measured) not in names or goal.baseline not in names:
            continue  # left out by --only
        ratio, ok = verdict(res.times, goal, floor_s, practical)
        limit = f"<= {goal.limit:g}" if goal.limit is not None else ""
        trows.append([f"{goal.measured} / {goal.baseline}", goal.what, ratio, limit, ok])
    if trows:  # none under --only iperf3
        table(["ratio (median times)", "what", "ratio", "target", "verdict"], trows)
    out(f"_Wire floor: {cfg.size // MiB} MiB at {cfg.rate_bps / 1e9:g} Gbit/s = {floor_s:.2f} s "
        "(no handshake, no slow start): no tool can finish sooner._")
    out()
    out(floor_line(res.times, practical, res.used))
    out()
    for label, errs in res.failures.items():
        out(f"- {label} failed: {errs[0][:200]}")
    if res.failures:
        out()


def floor_line(times: dict[str, list[float]], practical: Floor | None,
               used: dict[str, list[int]] | None = None) -> str:
    """How the practical floor was made, or why there is none."""
    if practical is None:
        return ("_Practical floor: none (no iperf3 run succeeded in this cell, or no RTT); "
                "`--only iperf3` or any time target measures it._")
    each = ", ".join(f"-P {iperf3_p(name, used)}"
                     f"{' (as cp auto)' if name == 'iperf3 auto' else ''} "
                     f"{statistics.median(t):.2f} s"
                     for name, t in times.items()
                     if name.startswith("iperf3 ") and recorded_by(name) == name and t)
    return (f"_Practical floor: {practical.seconds:.2f} s = iperf3 -P {practical.streams} data "
            f"phase {practical.data_s:.2f} s (the best median of {each}; "
            "`iperf3 -c SRC -R -P N -n SIZE` from dst, src sends) + "
            f"{HANDSHAKE_RTTS} x RTT {practical.rtt_s * 1000:.1f} ms (TCP handshake, TLS 1.3, "
            "the request): what TCP on this path gives any HTTPS client, start-up not "
            "counted._")


# --------------------------------------------------------------------------- cleanup, main


def clean_leftovers(prefix: str) -> None:
    """What a killed run of this prefix left: its lab paths, its dead runs' work dirs."""
    removed = lab.down_all(state_root=STATE_ROOT, prefix=prefix)
    if removed:
        log(f"removed leftovers of an earlier run: {' '.join(removed)}")
    for d in Path("/dev/shm").glob(f"{WORK_PREFIX}{prefix}-*"):
        with contextlib.suppress(OSError, ValueError):
            pid = int((d / "pid").read_text())
            if not Path(f"/proc/{pid}").exists():
                shutil.rmtree(d, ignore_errors=True)


def preflight() -> list[str]:
    reasons = [r for r in (missing_xrootd(),
                           missing("curl", "xrdcp", "gfal-copy", "iptables", "iperf3"),
                           missing_gfal2_python()) if r]
    if os.geteuid() != 0:
        reasons.append("needs root (lab namespaces)")
    return reasons


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--paths", default="50ms/1gbit,10ms/2gbit",
                    help="comma-separated RTT/RATE lab paths")
    ap.add_argument("--ends", default="untuned,tuned", help="untuned, tuned or both")
    ap.add_argument("--sizes", default="256", help="MiB, comma-separated (e.g. 256,1024)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds (medians over them)")
    ap.add_argument("--prefix", default="b11w",
                    help="start of the lab names (namespaces dkl-PREFIX*); at most 8 "
                         "lower-case letters and digits")
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="one more argument for every `dtnkit serve` (repeatable)")
    ap.add_argument("--only", default="",
                    help="comma-separated starts of measurement names to run (e.g. upload: "
                         "the uploads and the downloads they are judged against, and the "
                         "iperf3 floor runs, as for every time target; iperf3: those alone)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke check: first path, untuned, 64 MiB, one round")
    ap.add_argument("--before", type=Path, default=None,
                    help="a source tree (e.g. from `git archive`) whose `dtnkit cp` runs as "
                         "'cp N before SERVER' next to this tree's, interleaved")
    args = ap.parse_args(argv)
    try:
        args.paths = [(parse_ms(r), parse_rate(b))
                      for r, b in (x.split("/", 1) for x in args.paths.split(",") if x)]
    except (ValueError, DtnkitError) as exc:
        ap.error(f"--paths: give RTT/RATE, e.g. 50ms/1gbit ({exc})")
    args.ends = [e for e in args.ends.split(",") if e]
    args.only = [o.strip() for o in args.only.split(",") if o.strip()]
    if set(args.ends) - {"untuned", "tuned"}:
        ap.error("--ends takes untuned, tuned")
    args.sizes = [int(s) * MiB for s in args.sizes.split(",") if s]
    if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", args.prefix):
        ap.error("--prefix: 1-8 lower-case letters and digits, starting with a letter")
    if args.quick:
        args.paths, args.ends, args.sizes, args.repeat = args.paths[:1], ["untuned"], \
            [64 * MiB], 1
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    return args


def _terminate(signum: int, frame: object) -> None:
    sys.exit(128 + signum)  # run the finally blocks: servers, tuning, lab paths, files


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with "&"
    args = parse_args(argv)
    reasons = preflight()
    if reasons:
        print(f"bench_cp_wan: cannot run here: {'; '.join(reasons)}", file=sys.stderr)
        return 2
    clean_leftovers(args.prefix)
    many, default = cp_streams_flavours()
    SERVE_ARGS.extend(args.serve_arg)
    if args.before is not None:
        if not (args.before / "src" / "dtnkit" / "__init__.py").is_file():
            print(f"bench_cp_wan: --before {args.before}: no src/dtnkit there",
                  file=sys.stderr)
            return 2
        BEFORE.append(args.before.resolve())
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{args.prefix}-", dir="/dev/shm"))
    work.chmod(0o711)  # XRootD's user walks through it to its own work directory
    (work / "pid").write_text(str(os.getpid()))
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    out(f"`bench/bench_cp_wan.py {' '.join(sys.argv[1:] if argv is None else argv)}`: "
        f"{time.strftime('%Y-%m-%d %H:%M')}, commit {commit or '?'}, {os.cpu_count()} CPUs, "
        f"kernel {os.uname().release}; dtnkit cp streams: {many}"
        f"{f', default {default}' if default else ''}")
    out()
    log(f"work in {work}; labs {args.prefix}0.. under {STATE_ROOT}")
    n = 0
    try:
        for size in args.sizes:
            src_file = work / f"f{size // MiB}m.bin"
            make_file(src_file, size)
            for rtt_ms, rate in args.paths:
                for ends in args.ends:
                    cfg = Config(rtt_ms, rate, ends == "tuned", size)
                    run_config(cfg, f"{args.prefix}{n}", work, args.repeat, many, default,
                               src_file, args.only, first=n == 0)
                    n += 1
            src_file.unlink()
    finally:
        for pid in TRACKED.pids():
            TRACKED.stop(TRACKED.procs[pid])
        lab.down_all(state_root=STATE_ROOT, prefix=args.prefix)
        shutil.rmtree(work, ignore_errors=True)
        log(f"done in {time.monotonic() - T0:.0f} s; cleaned up")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("bench_cp_wan: interrupted", file=sys.stderr)
        sys.exit(130)
