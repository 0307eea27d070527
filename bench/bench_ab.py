#!/usr/bin/env python3
"""A/B benchmark of two dtnkit source trees, interleaved in one run, through the CLI only.

    .venv/bin/python bench/bench_ab.py                       # e43fe03 vs this checkout
    .venv/bin/python bench/bench_ab.py --before e43fe03 --after /path/to/tree --rounds 3
    .venv/bin/python bench/bench_ab.py --only audit --audit-runs 15
    .venv/bin/python bench/bench_ab.py --size 256 --rounds 3  # quicker

Made for issue 9 (a redesign with behaviour unchanged): the two trees' internal modules differ,
so nothing here imports dtnkit. Each tree runs as ``python -m dtnkit ...`` with this
interpreter and ``PYTHONPATH=<tree>/src`` (checked: ``dtnkit.__file__`` must be under that
``src``), so both use the same Python and the same third-party packages.

``--before`` is a directory holding ``src/dtnkit`` or a git revision of this repository
(materialised with ``git worktree add --detach`` in a temporary directory, removed at the end);
``--after`` a directory (default: this checkout).

Sections (markdown tables on stdout, progress on stderr):

cp      each tree's own ``dtnkit serve`` on 127.0.0.1 (free port, root in a /dev/shm temporary
        directory, a token file for uploads, digest cache warmed with HEAD + Want-Digest for
        adler32 and md5), the same ``--size`` MiB random file (hard-linked into both roots),
        then that tree's ``dtnkit cp --json --retries 0`` downloading and uploading. Reduced
        matrix (12; ``--matrix full`` for all 16): per direction streams 1 and 4 x verify none
        and verify block with adler32 and with md5 (verify none ignores the checksum, so full
        only repeats it). About 6 minutes at 1 GiB and 3 rounds on the loaded 2-core VM, under
        2 minutes at 256 MiB.
        Figures: cp's own ``seconds`` (the copy, without interpreter start-up), the process's
        wall time, and CPU seconds (user + system) of the cp process plus its server meanwhile,
        which other processes on a shared machine disturb much less than wall time.
audit   ``dtnkit tune audit --format json`` on the captured trees ``dtn-a`` and ``dtn-b``
        (``--tree``, the fixtures of the before tree, so both trees read the same input) and on
        this host (all groups, ``--group buffers``): wall time of a fresh process (after one
        warm-up run that writes the bytecode cache, as bench_audit.py does) and its CPU
        seconds (user + system, its own subprocesses included), and in-process
        time of ``dtnkit.cli.main.main([...])`` (stdout captured) in a small driver run once
        per round in each tree: the median of ``--inproc-calls`` calls after one warm-up call.

Order: round by round, each configuration runs in both trees, the tree going first
alternating from one configuration and one round to the next. Each ratio is after / before of
the same round (paired); tables give the median ratio and its min-max over the rounds, next to
each tree's median, and for cp also best after / best before (load from other processes only
adds time, so the best of the rounds is the least disturbed figure).

Checks (a difference is a failure: listed at the end, exit status 1): the audit
commands print byte-identical JSON and exit alike in both trees (a live-host case whose output
varies between two runs of the same tree is reported as not comparable, not as a failure);
every first-round copy is byte-identical to the source, later rounds check the size; cp's JSON
summaries agree apart from ``seconds`` and ``rate_bps``.

Only loopback; every server is stopped by its PID on exit (Ctrl-C and SIGTERM included), and
temporary directories and the temporary worktree are removed.
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import T0, CpuWatch, free_port, log, out, proc_cpu, stop, table

REPO = Path(__file__).resolve().parent.parent
MiB = 2**20
TOKEN = "dtnkit-bench-ab-token"
AUDIT_OK = (0, 3)  # 3: the audit found settings to change


# --------------------------------------------------------------------------- trees


@dataclass
class Tree:
    label: str  # "before" / "after"
    root: Path
    describe: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def src(self) -> Path:
        return self.root / "src"

    def dtnkit(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "dtnkit", *args]


def git(*args: str, cwd: Path = REPO) -> str:
    r = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def describe(path: Path) -> str:
    try:
        head = git("rev-parse", "--short", "HEAD", cwd=path)
        dirty = git("status", "--porcelain", "--", "src", cwd=path)
    except SystemExit:
        return str(path)
    return f"{path} at {head}{' + uncommitted changes in src/' if dirty else ''}"


@contextmanager
def materialise(spec: str) -> Iterator[tuple[Path, str]]:
    """A directory holding src/dtnkit as is, else a git revision checked out in a temporary
    worktree that is removed (and pruned) on the way out."""
    path = Path(spec)
    if (path / "src" / "dtnkit").is_dir():
        yield path.resolve(), describe(path.resolve())
        return
    rev = git("rev-parse", "--verify", f"{spec}^{{commit}}")
    tmp = Path(tempfile.mkdtemp(prefix="dtnkit-ab-before-"))
    wt = tmp / "tree"
    git("worktree", "add", "--detach", "--quiet", str(wt), rev)
    try:
        yield wt, f"{spec} ({rev[:10]}, temporary worktree)"
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(wt)],
                       capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True,
                       check=False)


def tree_env(tree: Tree, state: Path) -> dict[str, str]:
    """This environment, with the tree's src first on the path, bytecode written (as an
    installed package has it), and dtnkit's state (upload journals, state dir, results
    database) in a private temporary directory."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "DTNKIT_TOKEN",
                        "BEARER_TOKEN")}
    env["PYTHONPATH"] = str(tree.src)
    env["XDG_STATE_HOME"] = str(state / "xdg")
    env["DTNKIT_STATE_DIR"] = str(state / "state")
    env["DTNKIT_DB"] = str(state / "results.sqlite")
    env["DTNKIT_LAB_STATE"] = str(state / "lab")
    return env


def check_import(tree: Tree) -> None:
    r = subprocess.run([sys.executable, "-c", "import dtnkit; print(dtnkit.__file__)"],
                       capture_output=True, text=True, env=tree.env, check=False)
    where = Path(r.stdout.strip()).resolve() if r.returncode == 0 else None
    if where is None or not where.is_relative_to(tree.src.resolve()):
        raise SystemExit(f"{tree.label}: dtnkit imports from {where or r.stderr.strip()}, "
                         f"not from {tree.src} (an editable install that wins over "
                         f"PYTHONPATH?)")


# --------------------------------------------------------------------------- statistics


def fmt_ratio(ratios: Sequence[float]) -> str:
    if not ratios:
        return "-"
    return (f"{statistics.median(ratios):.3f} "
            f"[{min(ratios):.3f}-{max(ratios):.3f}]")


def paired(before: Sequence[float], after: Sequence[float]) -> list[float]:
    return [a / b for b, a in zip(before, after, strict=True) if b > 0]


def order(i: int, trees: tuple[Tree, Tree]) -> tuple[Tree, Tree]:
    """Who goes first alternates with every run."""
    return trees if i % 2 == 0 else (trees[1], trees[0])


def children_cpu() -> float:
    """CPU seconds of the waited-for children so far: the difference around one
    ``subprocess.run`` is that process's CPU (the servers are not waited for until the end)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# --------------------------------------------------------------------------- servers



@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@contextmanager
def dtnkit_server(tree: Tree, root: Path, tokens: Path, logfile: Path) -> Iterator[Server]:
    """The tree's own ``dtnkit serve`` on 127.0.0.1 in a child process, stopped after."""
    for _attempt in range(3):  # the free port may be taken between the probe and the bind
        port = free_port()
        with open(logfile, "ab") as err:
            proc = subprocess.Popen(
                tree.dtnkit("serve", "--root", str(root), "--host", "127.0.0.1", "--port",
                            str(port), "--tokens", str(tokens), "--anonymous-read", "--quiet"),
                stdout=subprocess.DEVNULL, stderr=err, env=tree.env)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and proc.poll() is None:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
            if proc.poll() is None and time.monotonic() < deadline:
                yield Server(proc, port)
                return
        finally:
            stop(proc)
    raise RuntimeError(f"{tree.label}: dtnkit serve did not start; see {logfile}:\n"
                       f"{logfile.read_text()[-800:]}")


def warm_digests(server: Server, name: str, algos: Sequence[str]) -> None:
    """HEAD with Want-Digest per algorithm, so the server's digest cache holds them."""
    for algo in algos:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        try:
            conn.request("HEAD", f"/{name}", headers={"Want-Digest": algo})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200 or not resp.getheader("Digest"):
                raise RuntimeError(f"HEAD Want-Digest {algo}: {resp.status}, "
                                   f"Digest {resp.getheader('Digest')!r}")
        finally:
            conn.close()


# --------------------------------------------------------------------------- cp


@dataclass(frozen=True)
class CpConfig:
    direction: str  # "download" / "upload"
    streams: int
    verify: str
    checksum: str

    @property
    def name(self) -> str:
        return f"{self.direction} {self.streams} str {self.verify} {self.checksum}"


def cp_configs(matrix: str) -> list[CpConfig]:
    """full: direction x streams 1, 4 x verify none, block x adler32, md5 (16); reduced (12):
    without verify none x md5, which is verify none x adler32 again (none ignores the
    checksum)."""
    configs = []
    for direction in ("download", "upload"):
        for verify in ("none", "block"):
            for algo in ("adler32", "md5"):
                for streams in (1, 4):
                    if matrix == "reduced" and algo == "md5" and verify == "none":
                        continue
                    configs.append(CpConfig(direction, streams, verify, algo))
    return configs


@dataclass
class CpRun:
    seconds: float  # cp's own figure
    wall: float
    cpu: float  # the cp process's and its server's CPU seconds
    summary: dict[str, object]


class CpBench:
    def __init__(self, args: argparse.Namespace, trees: tuple[Tree, Tree], base: Path,
                 failures: list[str]) -> None:
        self.args = args
        self.trees = trees
        self.base = base
        self.failures = failures
        self.name = f"f{args.size}"
        self.src = base / "source" / self.name
        self.servers: dict[str, Server] = {}
        self.roots = {t.label: base / f"root-{t.label}" for t in trees}
        self.dsts = {t.label: base / f"dst-{t.label}" for t in trees}

    def make_source(self) -> None:
        self.src.parent.mkdir()
        chunk = os.urandom(16 * MiB)
        left = self.args.size * MiB
        with open(self.src, "wb") as f:
            while left:
                n = min(left, len(chunk))
                f.write(chunk[:n])
                left -= n
        self.src.chmod(0o644)
        for t in self.trees:
            self.roots[t.label].mkdir()
            self.dsts[t.label].mkdir()
            os.link(self.src, self.roots[t.label] / self.name)  # the same bytes, no 2nd copy

    def run(self, tree: Tree, c: CpConfig, check: bool) -> CpRun:
        server = self.servers[tree.label]
        if c.direction == "download":
            src, dst = server.url + self.name, self.dsts[tree.label] / self.name
        else:
            src, dst = str(self.src), self.roots[tree.label] / f"up-{self.name}"
        target = str(dst) if c.direction == "download" else server.url + dst.name
        argv = tree.dtnkit("cp", src, target, "--streams", str(c.streams), "--verify",
                           c.verify, "--checksum", c.checksum, "--retries", "0", "--json",
                           "--token", TOKEN)
        cpu = children_cpu() + proc_cpu(server.proc.pid)
        start = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, env=tree.env, timeout=1800,
                           check=False)
        wall = time.perf_counter() - start
        cpu = children_cpu() + proc_cpu(server.proc.pid) - cpu
        try:
            if r.returncode != 0:
                raise RuntimeError(f"{tree.label}: {c.name}: exit {r.returncode}: "
                                   f"{r.stderr.strip()[-500:]}")
            # the same text in both trees but for where this tree's copy went
            line = r.stdout.strip().splitlines()[-1]
            for mine, neutral in ((server.url, "URL/"), (str(self.dsts[tree.label]), "DST")):
                line = line.replace(json.dumps(mine)[1:-1], neutral)
            summary = json.loads(line)
            if not isinstance(summary, dict):
                raise RuntimeError(f"{tree.label}: {c.name}: --json printed {r.stdout!r}")
            size = dst.stat().st_size
            if size != self.src.stat().st_size:
                self.failures.append(f"cp {c.name} ({tree.label}): copy has {size} bytes")
            elif check and not filecmp.cmp(self.src, dst, shallow=False):
                self.failures.append(f"cp {c.name} ({tree.label}): copy differs from the "
                                     f"source")
            return CpRun(float(summary["seconds"]), wall, cpu, summary)
        finally:
            with contextlib.suppress(OSError):
                dst.unlink()

    def section(self, stack: ExitStack) -> None:
        a = self.args
        configs = [c for c in cp_configs(a.matrix)
                   if not a.copies or any(want in c.name for want in a.copies)]
        if not configs:
            raise SystemExit(f"bench_ab: no copy matches --copies {a.copies}")
        log(f"cp: writing the {a.size} MiB source in {self.base}")
        self.make_source()
        tokens = self.base / "tokens"
        tokens.write_text(f"{TOKEN} read,write\n")
        tokens.chmod(0o600)
        for t in self.trees:
            self.servers[t.label] = stack.enter_context(
                dtnkit_server(t, self.roots[t.label], tokens, self.base / f"serve-{t.label}.log"))
            log(f"cp: {t.label} server pid {self.servers[t.label].proc.pid} on "
                f"{self.servers[t.label].url}")
        for t in self.trees:
            warm_digests(self.servers[t.label], self.name, sorted({c.checksum for c in configs}))
            self.run(t, CpConfig("download", 1, "none", "adler32"), check=False)  # warm-up
        watch = CpuWatch(lambda: [s.proc.pid for s in self.servers.values()])
        runs: dict[tuple[CpConfig, str], list[CpRun]] = {(c, t.label): [] for c in configs
                                                         for t in self.trees}
        for rnd in range(a.rounds):
            for ci, c in enumerate(configs):
                for t in order(rnd + ci, self.trees):
                    run = self.run(t, c, check=rnd == 0)
                    runs[(c, t.label)].append(run)
                    log(f"cp round {rnd + 1}/{a.rounds} {t.label:6} {c.name}: "
                        f"{run.seconds:.2f} s (wall {run.wall:.2f} s)")
        before, after = (t.label for t in self.trees)
        rows = []
        bests: list[float] = []
        all_s: list[float] = []
        all_cpu: list[float] = []
        for c in configs:
            b, af = runs[(c, before)], runs[(c, after)]
            sb, sa = [r.summary for r in b], [r.summary for r in af]
            volatile = ("seconds", "rate_bps")
            strip = [{k: v for k, v in s.items() if k not in volatile} for s in (*sb, *sa)]
            other = next((s for s in strip if s != strip[0]), None)
            if other is not None:
                diff = {k: (strip[0].get(k), other.get(k)) for k in {*strip[0], *other}
                        if strip[0].get(k) != other.get(k)}
                self.failures.append(f"cp {c.name}: --json summaries differ (key: before "
                                     f"first round, the first that differs): {diff}")
            bs, as_ = [r.seconds for r in b], [r.seconds for r in af]
            bw, aw = [r.wall for r in b], [r.wall for r in af]
            bc, ac = [r.cpu for r in b], [r.cpu for r in af]
            rows.append([c.name, f"{statistics.median(bs):.2f}", f"{statistics.median(as_):.2f}",
                         fmt_ratio(paired(bs, as_)), f"{min(as_) / min(bs):.3f}",
                         fmt_ratio(paired(bw, aw)), f"{statistics.median(bc):.2f}",
                         f"{statistics.median(ac):.2f}", fmt_ratio(paired(bc, ac))])
            bests.append(min(as_) / min(bs))
            all_s.extend(paired(bs, as_))
            all_cpu.extend(paired(bc, ac))
        out(f"### cp: {a.size} MiB on {a.dir} over loopback, {a.rounds} rounds interleaved, "
            f"8 MiB blocks, warm server digests; seconds (median of the rounds), after / before "
            f"(median [min-max] of the per-round ratios) and best after / best before")
        out()
        table(["copy", "before s", "after s", "ratio", "best ratio", "wall ratio",
               "before CPU s", "after CPU s", "CPU ratio"], rows)
        out(f"Over all copies: per-round ratios of cp's seconds {fmt_ratio(all_s)}, of CPU "
            f"{fmt_ratio(all_cpu)}; geometric mean of the best ratios "
            f"{statistics.geometric_mean(bests):.3f}. \"s\" is the copy as cp reports it "
            f"(--json seconds); \"wall\" the cp process, with interpreter start-up and "
            f"imports; \"CPU\" the user + system seconds of the cp process and of its server "
            f"during it (start-up included; less disturbed by other processes than wall time "
            f"on a shared machine).")
        out()
        out(watch.report())
        out()


# --------------------------------------------------------------------------- audit


DRIVER = r"""
import contextlib, io, json, sys, time
from dtnkit.cli.main import main
argv, n = json.loads(sys.argv[1]), int(sys.argv[2])
real, times, text = sys.stdout, [], ""
for i in range(n + 1):
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        start = time.perf_counter()
        rc = main(argv)
        elapsed = time.perf_counter() - start
    if rc not in (0, 3):
        real.write(json.dumps({"rc": rc, "stderr": err.getvalue()[-500:]}))
        sys.exit(1)
    if i:
        times.append(elapsed)
    text = buf.getvalue()
real.write(json.dumps({"rc": rc, "times": times, "chars": len(text)}))
"""


def audit_cases(fixtures: Path) -> list[tuple[str, list[str], bool]]:
    """(name, dtnkit argv, deterministic output expected)."""
    cases: list[tuple[str, list[str], bool]] = []
    for host in sorted(p.name for p in fixtures.iterdir() if p.is_dir()):
        cases.append((f"tree {host}", ["tune", "audit", "--tree", str(fixtures / host),
                                       "--format", "json"], True))
    cases.append(("this host, all groups", ["tune", "audit", "--format", "json"], False))
    cases.append(("this host, buffers", ["tune", "audit", "--group", "buffers", "--format",
                                         "json"], False))
    return cases


def first_difference(before: bytes, after: bytes) -> str:
    """Where two outputs part: the first differing line of each."""
    bl, al = before.decode(errors="replace").splitlines(), after.decode(errors="replace")\
        .splitlines()
    for i, (x, y) in enumerate(zip(bl, al, strict=False)):
        if x != y:
            return f"line {i + 1}: before {x[:80]!r}, after {y[:80]!r}"
    return f"one ends at line {min(len(bl), len(al)) + 1}"


def run_cli(tree: Tree, argv: list[str]
            ) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """(wall seconds, CPU seconds, result) of one fresh ``dtnkit`` process."""
    cpu = children_cpu()
    start = time.perf_counter()
    r = subprocess.run(tree.dtnkit(*argv), capture_output=True, env=tree.env, timeout=600,
                       check=False)
    return time.perf_counter() - start, children_cpu() - cpu, r


def section_audit(args: argparse.Namespace, trees: tuple[Tree, Tree],
                  failures: list[str]) -> None:
    fixtures = trees[0].root / "tests" / "fixtures" / "hosts"
    cases = audit_cases(fixtures)
    watch = CpuWatch()
    comparable: dict[str, str] = {}
    # identical outputs first (this run is also the warm-up that writes the bytecode)
    for name, argv, deterministic in cases:
        got = {t.label: run_cli(t, argv)[2] for t in trees}
        for t in trees:
            if got[t.label].returncode not in AUDIT_OK:
                raise SystemExit(f"audit {name} ({t.label}) failed "
                                 f"({got[t.label].returncode}): "
                                 f"{got[t.label].stderr.decode()[-500:]}")
        b, a = (got[t.label] for t in trees)
        same = b.stdout == a.stdout and b.returncode == a.returncode
        if same:
            comparable[name] = "identical"
        elif not deterministic and run_cli(trees[0], argv)[2].stdout != b.stdout:
            comparable[name] = "varies between runs, not compared"
        else:
            comparable[name] = "DIFFERENT"
            failures.append(f"audit {name}: output differs (exit {b.returncode} vs "
                            f"{a.returncode}, {len(b.stdout)} vs {len(a.stdout)} bytes); "
                            f"{first_difference(b.stdout, a.stdout)}")
        log(f"audit {name}: outputs {comparable[name]}")
    rows = []
    all_wall: list[float] = []
    all_cpu: list[float] = []
    all_inproc: list[float] = []
    n = args.audit_runs
    for name, argv, _det in cases:
        wall: dict[str, list[float]] = {t.label: [] for t in trees}
        cpu: dict[str, list[float]] = {t.label: [] for t in trees}
        for i in range(n):
            for t in order(i, trees):
                w, c, _r = run_cli(t, argv)
                wall[t.label].append(w)
                cpu[t.label].append(c)
        inproc: dict[str, list[float]] = {t.label: [] for t in trees}
        for i in range(args.inproc_rounds):
            for t in order(i, trees):
                r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(argv),
                                    str(args.inproc_calls)], capture_output=True, text=True,
                                   env=t.env, timeout=600, check=False)
                if r.returncode != 0:
                    raise SystemExit(f"in-process audit {name} ({t.label}): "
                                     f"{(r.stdout + r.stderr)[-800:]}")
                inproc[t.label].append(statistics.median(json.loads(r.stdout)["times"]))
        bw, aw = (wall[t.label] for t in trees)
        bc, ac = (cpu[t.label] for t in trees)
        bi, ai = (inproc[t.label] for t in trees)
        all_wall.extend(paired(bw, aw))
        all_cpu.extend(paired(bc, ac))
        all_inproc.extend(paired(bi, ai))
        log(f"audit {name}: wall {statistics.median(bw) * 1e3:.0f} / "
            f"{statistics.median(aw) * 1e3:.0f} ms, in-process "
            f"{statistics.median(bi) * 1e3:.1f} / {statistics.median(ai) * 1e3:.1f} ms")
        rows.append([name, comparable[name], f"{statistics.median(bw) * 1e3:.0f}",
                     f"{statistics.median(aw) * 1e3:.0f}", fmt_ratio(paired(bw, aw)),
                     fmt_ratio(paired(bc, ac)),
                     f"{statistics.median(bi) * 1e3:.1f}", f"{statistics.median(ai) * 1e3:.1f}",
                     fmt_ratio(paired(bi, ai))])
    out(f"### tune audit --format json: wall time of a fresh process ({n} runs interleaved, "
        f"after a warm-up) and in-process main() ({args.inproc_rounds} driver processes per "
        f"tree, each the median of {args.inproc_calls} calls after a warm-up call); ms "
        f"(median) and after / before (median [min-max] of the paired ratios)")
    out()
    table(["case", "output", "before ms", "after ms", "wall ratio", "CPU ratio",
           "before in-proc ms", "after in-proc ms", "in-proc ratio"], rows)
    out(f"Over all cases: paired wall ratios {fmt_ratio(all_wall)}, CPU (user + system of the "
        f"process) {fmt_ratio(all_cpu)}, in-process {fmt_ratio(all_inproc)}.")
    out()
    out(watch.report())
    out()


# --------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join((__doc__ or "").splitlines()[1:]))
    ap.add_argument("--before", default="e43fe03",
                    help="directory with src/dtnkit, or a git revision (default e43fe03)")
    ap.add_argument("--after", type=Path, default=REPO,
                    help="directory with src/dtnkit (default: this checkout)")
    ap.add_argument("--rounds", type=int, default=3, help="cp rounds (default 3)")
    ap.add_argument("--size", type=int, default=1024, help="MiB, cp file size (default 1024)")
    ap.add_argument("--only", choices=("cp", "audit"), default=None)
    ap.add_argument("--matrix", choices=("reduced", "full"), default="reduced",
                    help="cp configurations (default reduced: 12; full: 16)")
    ap.add_argument("--copies", action="append", default=[], metavar="TEXT",
                    help="only the copies whose name contains TEXT (repeatable), e.g. "
                         "'upload 4 str none'")
    ap.add_argument("--audit-runs", type=int, default=15,
                    help="fresh-process audit runs per case and tree (default 15)")
    ap.add_argument("--inproc-rounds", type=int, default=5,
                    help="in-process driver processes per case and tree (default 5)")
    ap.add_argument("--inproc-calls", type=int, default=20,
                    help="timed main() calls per driver process (default 20)")
    ap.add_argument("--dir", default="/dev/shm", help="where cp's files live (tmpfs)")
    args = ap.parse_args()
    if min(args.rounds, args.size, args.audit_runs, args.inproc_rounds,
           args.inproc_calls) < 1:
        ap.error("counts and sizes must be at least 1")
    return args


def _terminate(signum: int, frame: object) -> None:
    sys.exit(128 + signum)  # run the finally blocks: stop the servers, remove the files


def main() -> int:
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with "&"
    args = parse_args()
    failures: list[str] = []
    with ExitStack() as stack:
        state = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dtnkit-ab-")))
        before_root, before_desc = stack.enter_context(materialise(args.before))
        after_root = args.after.resolve()
        if not (after_root / "src" / "dtnkit").is_dir():
            raise SystemExit(f"--after {after_root}: no src/dtnkit there")
        trees = (Tree("before", before_root, before_desc),
                 Tree("after", after_root, describe(after_root)))
        for t in trees:
            t.env = tree_env(t, state / t.label)
            check_import(t)
        out(f"`bench/bench_ab.py {' '.join(sys.argv[1:])}`: {time.strftime('%Y-%m-%d %H:%M')}, "
            f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, kernel "
            f"{os.uname().release}")
        out()
        for t in trees:
            out(f"- {t.label}: {t.describe}")
        out()
        if args.only in (None, "audit"):
            section_audit(args, trees, failures)
        if args.only in (None, "cp"):
            base = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="dtnkit-ab-cp-", dir=args.dir)))
            CpBench(args, trees, base, failures).section(stack)
    if failures:
        out("### FAILURES (the trees behave differently)")
        out()
        for f in failures:
            out(f"- {f}")
        out()
    log(f"done in {time.monotonic() - T0:.0f} s, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the servers are stopped and the files removed by now
        log("interrupted")
        raise SystemExit(130) from None
