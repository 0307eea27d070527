"""A cell's lab: a ``dtnkit lab`` path, a throwaway CA with the lab hosts' names
(``tests.support.xrootd.make_pki``, the interop tests' PKI), the ends tuned with ``dtnkit tune
apply --netns`` (restored after) when the cell says so, and the servers its columns need:
XRootD 5.5.3 (XrdHttp and root://) and ``dtnkit serve`` (TLS, tokens) on src and dst, the
--base tree's ``dtnkit serve`` too, and ``iperf3 -s`` on src.  Every child is stopped by its PID
whatever stops the bench; everything carries the run's prefix (lab names ``PREFIXn``,
namespaces ``dkl-PREFIX*``, work directory ``/dev/shm/dtnkit-bench-PREFIX-*``)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.xrootd import XROOTD_USER, Pki, gfal_python, make_pki, running_xrootd

from bench.lib.procs import Tracked, log
from bench.lib.trees import Tree
from bench.lib.wan.cells import Cell
from bench.lib.wan.tools import SERVERS
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabHost, LabPath

STATE_ROOT = Path("/run/dtnkit/bench-wan")
#: the start of a run's work directory under /dev/shm (its pid file tells a dead run's)
WORK_PREFIX = "dtnkit-bench-"
TOKENS = "rw-token read,write\nro-token read\n"
IPERF3_PORT = 5201  # the lab's src namespace has its own ports: no clash with the host's


@dataclass
class Serve:
    url: str  # https://HOST.NAME.lab:PORT/
    root: Path


@contextlib.contextmanager
def dtnkit_serve(
    host: LabHost,
    hostname: str,
    root: Path,
    pki: Pki,
    work: Path,
    extra: list[str],
    tracked: Tracked,
    tree: Tree | None = None,
) -> Iterator[Serve]:
    """``dtnkit serve`` (TLS, tokens, trusting the CA for its own TPC) in a lab namespace;
    *tree*: the --base tree's."""
    tokens = work / "tokens"
    tokens.write_text(TOKENS)
    tokens.chmod(0o600)
    root.mkdir(parents=True, exist_ok=True)
    head = tree.prefix() if tree is not None else []
    tag = "-base" if tree is not None else ""
    with open(work / f"serve-{host.name}{tag}.log", "w") as errlog:
        proc = host.popen(
            [
                *head,
                sys.executable,
                "-m",
                "dtnkit",
                "serve",
                "--root",
                str(root),
                "--host",
                "0.0.0.0",
                "--port",
                "0",
                "--cert",
                str(pki.cert),
                "--key",
                str(pki.key),
                "--tokens",
                str(tokens),
                "--ca-file",
                str(pki.ca_file),
                "--quiet",
                *extra,
            ],
            stderr=errlog,
        )
    tracked.add(proc)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"https://[^:/\s]+:(\d+)", line)
        if not m:
            raise RuntimeError(
                f"dtnkit serve on {host.name} did not start: {line!r} (exit {proc.poll()})"
            )
        yield Serve(f"https://{hostname}:{m.group(1)}/", root)
    finally:
        tracked.stop(proc)


@contextlib.contextmanager
def iperf3_server(host: LabHost, work: Path, tracked: Tracked) -> Iterator[subprocess.Popen[str]]:
    """``iperf3 -s`` on *host* (port IPERF3_PORT of its namespace), stopped by PID; its log in
    the work directory (so its command line carries the run's prefix)."""
    logfile = work / f"iperf3-{host.name}.log"
    proc = host.popen(
        ["iperf3", "-s", "-p", str(IPERF3_PORT), "--forceflush", "--logfile", str(logfile)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tracked.add(proc)
    try:
        deadline = time.monotonic() + 20
        while "Server listening" not in (text := logfile.read_text() if logfile.exists() else ""):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"iperf3 -s on {host.name} did not start (exit {proc.poll()}): {text[-300:]!r}"
                )
            time.sleep(0.02)  # it announces itself in its log file; bounded
        yield proc
    finally:
        tracked.stop(proc)


def serve_has(option: str, tree: Tree | None = None) -> bool:
    env = tree.env() if tree is not None else None
    helptext = subprocess.run(
        [sys.executable, "-m", "dtnkit", "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    ).stdout
    return option in helptext


def place(src: Path, dest: Path, *, owner: str | None = None) -> None:
    """A hard link of the test file (same tmpfs), owned by XRootD's user when it serves it."""
    with contextlib.suppress(FileNotFoundError):
        dest.unlink()
    os.link(src, dest)
    if owner is not None and os.geteuid() == 0:
        shutil.chown(dest, owner, owner)


def tune(p: LabPath, state_dir: Path, rtt_ms: float) -> None:
    for h in (p.src, p.dst):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "tune",
                "apply",
                "--netns",
                h.netns,
                "--state-dir",
                str(state_dir / h.name),
                "--rtt",
                f"{max(rtt_ms, 1):g}ms",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"tune apply on {h.netns} failed: {proc.stderr.strip()}")
        log(f"tuned {h.netns}")


def untune(p: LabPath, state_dir: Path) -> None:
    for h in (p.src, p.dst):
        if not (state_dir / h.name).exists():
            continue
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "tune",
                "restore",
                "--netns",
                h.netns,
                "--state-dir",
                str(state_dir / h.name),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        log(f"restored {h.netns}: exit {proc.returncode}")


STARTUP = [
    ("`true`", ["true"]),
    ("`python -c pass`", [sys.executable, "-c", "pass"]),
    ('`python -c "import socket, ssl"`', [sys.executable, "-c", "import socket, ssl"]),
    ("`dtnkit cp --help`", [sys.executable, "-m", "dtnkit", "cp", "--help"]),
    ("`curl --version`", ["curl", "--version"]),
]


def startup(host: LabHost, rounds: int = 5) -> str:
    """The start-up line: median wall times of doing (almost) nothing, in *host*'s namespace
    as the clients run (`ip netns exec` included: `true` shows its share), interleaved."""
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for what, argv in STARTUP:
            t0 = time.monotonic()
            host.run(argv, check=True, timeout=60)
            times.setdefault(what, []).append(time.monotonic() - t0)
    return (
        "_Start-up in the dst namespace (median of "
        f"{rounds} wall times, `ip netns exec` included; python is the venv's that runs "
        "cp): "
        + ", ".join(f"{what} {statistics.median(t) * 1000:.0f} ms" for what, t in times.items())
        + "._"
    )


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


class CellLab:
    """One cell's path and servers, for a ``with`` block; ``values`` fills the columns'
    templates, ``dst`` runs them."""

    def __init__(
        self,
        cell: Cell,
        name: str,
        work: Path,
        src_file: Path,
        needs: set[str],
        tracked: Tracked,
        *,
        base: Tree | None = None,
        serve_args: list[str] | None = None,
    ) -> None:
        unknown = needs - set(SERVERS)
        if unknown:
            raise ValueError(f"unknown servers {sorted(unknown)}")
        if base is None and needs & {"serve-src-base", "serve-dst-base"}:
            raise ValueError("columns of the --base tree need --base")
        self.cell, self.name, self.src_file = cell, name, src_file
        self.work = work / name
        self.needs, self.tracked, self.base = needs, tracked, base
        self.serve_args = serve_args or []
        self.values: dict[str, object] = {}
        self.path: LabPath | None = None
        self._stack = contextlib.ExitStack()

    @property
    def dst(self) -> LabHost:
        assert self.path is not None
        return self.path.dst

    def __enter__(self) -> CellLab:
        try:
            self._build()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _build(self) -> None:
        s, cell, need = self._stack, self.cell, self.needs
        self.work.mkdir(mode=0o711)
        old_tmp = tempfile.tempdir
        tempfile.tempdir = str(self.work)  # XRootD's work directories: inside ours, on tmpfs
        s.callback(setattr, tempfile, "tempdir", old_tmp)
        log(f"{cell.label}: building lab {self.name}")
        p = self.path = s.enter_context(
            lab.path(
                self.name,
                state_root=STATE_ROOT,
                rtt_ms=cell.rtt_ms,
                rate_bps=cell.rate_bps,
                mtu=cell.mtu,
            )
        )
        src_name, dst_name = p.hostname(p.src), p.hostname(p.dst)
        pki = make_pki(self.work / "pki", (src_name, dst_name, p.src.address, p.dst.address))
        if cell.tuned:
            s.callback(untune, p, self.work / "tune")
            tune(p, self.work / "tune", cell.rtt_ms)
        file = self.src_file.name
        (self.work / "src").mkdir()
        (self.work / "out").mkdir()
        place(self.src_file, self.work / "src" / file)
        v = self.values
        v.update(
            python=sys.executable,
            ca=pki.ca_file,
            x509=pki.ca_dir,
            gfal_python=gfal_python() or "python3",
            file=file,
            size=cell.size,
            out=self.work / "out",
            src_file=self.work / "src" / file,
            src_addr=p.src.address,
            iperf3_port=IPERF3_PORT,
        )
        if self.base is not None:
            v["base_src"] = self.base.src
        for side, host, hostname in (("src", p.src, src_name), ("dst", p.dst, dst_name)):
            if f"xrootd-{side}" in need:
                x = s.enter_context(running_xrootd(pki, netns=host.netns, host=hostname))
                self.tracked.add(x.process)
                s.callback(self.tracked.forget, x.process)
                v[f"xrootd_{side}"], v[f"xrootd_{side}_root"] = x.url, x.root
                v[f"xroot_{side}"] = x.xroot_url
            # a dtnkit with a TPC allow-list refuses private addresses unless listed
            for tree in (None, self.base):
                key = f"serve-{side}{'-base' if tree else ''}"
                if key not in need:
                    continue
                extra = [*self.serve_args]
                if side == "dst" and serve_has("--tpc-allow", tree):
                    extra += ["--tpc-allow", p.src.address]
                srv = s.enter_context(
                    dtnkit_serve(
                        host, hostname, self.work / key, pki, self.work, extra, self.tracked, tree
                    )
                )
                v[key.replace("-", "_")], v[f"{key.replace('-', '_')}_root"] = srv.url, srv.root
        if "iperf3-src" in need:
            s.enter_context(iperf3_server(p.src, self.work, self.tracked))
        if "xrootd_src" in v:
            root = v["xrootd_src_root"]
            assert isinstance(root, Path)
            place(self.src_file, root / file, owner=XROOTD_USER)
        if "serve_src" in v:
            root = v["serve_src_root"]
            assert isinstance(root, Path)
            place(self.src_file, root / file)
        self.warm()

    def warm(self) -> None:
        """Untimed: the sources' adler32 computed and stored (as on a server that keeps them)."""
        for key in ("xrootd_src", "serve_src"):
            if key in self.values:
                self.dst.run(
                    [
                        "curl",
                        "-sS",
                        "-f",
                        "-I",
                        "--cacert",
                        str(self.values["ca"]),
                        "-H",
                        "Want-Digest: adler32",
                        "-H",
                        "Authorization: Bearer ro-token",
                        f"{self.values[key]}{self.values['file']}",
                    ],
                    check=False,
                    timeout=300,
                )

    def rtt_ms(self) -> float | None:
        assert self.path is not None
        rtt = self.path.measure_rtt(3)
        return rtt["avg_ms"] if rtt else None
