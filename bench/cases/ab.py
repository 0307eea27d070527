"""Does this tree behave exactly like --base and run no slower (cp on loopback, tune audit)?

Through the CLI only (the trees' internal modules may differ, so nothing here imports dtnkit):
each tree runs as ``python -m dtnkit`` with ``PYTHONPATH=<tree>/src`` and its state (journals,
state dir, results database) in a private temporary directory.

cp      each tree's own ``dtnkit serve`` on 127.0.0.1 (root in /dev/shm, a token file for
        uploads, its digest cache warmed for adler32 and md5), the same --size MiB random file
        (hard-linked into both roots), then that tree's ``dtnkit cp --json --retries 0``
        downloading and uploading: per direction streams 1 and 4 x verify none and block with
        adler32 and md5 (``--matrix full`` adds verify none x md5; --copies TEXT picks some).
        Figures: cp's own ``seconds`` (without start-up), the process's wall time, and CPU
        seconds of the cp process plus its server meanwhile (less disturbed by other
        processes than wall time).
audit   ``dtnkit tune audit --format json`` on the captured trees (the fixtures of the base
        tree, so both read the same input) and on this host (all groups, buffers): wall time
        of a fresh process after a warm-up run, CPU seconds, and ``main([...])`` in-process in
        a small driver (the median of --inproc-calls calls after a warm-up call).

Each configuration runs in both trees, interleaved (--order), for --rounds (cp) or
--audit-runs (audit) rounds; each ratio is this / base of the same round; tables give the
median ratio with its min-max, and the A/A noise (the first copy's and each audit's this-tree
twin).  Checks (a difference is a failure, listed at the end, exit 1): the audits print
byte-identical JSON and exit alike (a live-host case whose output varies between two runs of
the same tree is reported as not comparable); every first-round copy is byte-identical to the
source, later rounds check the size; cp's JSON summaries agree apart from ``seconds`` and
``rate_bps``.
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import functools
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.lib import Bench, Case
from bench.lib.machine import proc_cpu
from bench.lib.procs import listening_url, make_file
from bench.lib.stats import Samples, Spread, aa
from bench.lib.trees import Tree

MiB = 2**20
TOKEN = "dtnkit-bench-ab-token"
AUDIT_OK = (0, 3)  # 3: the audit found settings to change


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", choices=("cp", "audit"), default=None)
    p.add_argument("--size", type=int, default=1024, help="MiB, cp's file (default 1024)")
    p.add_argument(
        "--matrix",
        choices=("reduced", "full"),
        default="reduced",
        help="cp configurations (default reduced: 12; full: 16)",
    )
    p.add_argument(
        "--copies",
        action="append",
        default=[],
        metavar="TEXT",
        help="only the copies whose name contains TEXT (repeatable), e.g. 'upload 4 str none'",
    )
    p.add_argument(
        "--audit-runs",
        type=int,
        default=15,
        help="fresh-process audit runs per case and tree (default 15)",
    )
    p.add_argument(
        "--inproc-rounds",
        type=int,
        default=5,
        help="in-process driver processes per case and tree (default 5)",
    )
    p.add_argument(
        "--inproc-calls",
        type=int,
        default=20,
        help="timed main() calls per driver process (default 20)",
    )
    p.add_argument("--dir", default="/dev/shm", help="where cp's files live (tmpfs)")


def quick(args: argparse.Namespace) -> None:
    args.rounds, args.size, args.audit_runs = 2, 64, 2
    args.inproc_rounds, args.inproc_calls = 1, 2
    args.copies = args.copies or ["download 1 str none", "upload 4 str block adler32"]


def check(args: argparse.Namespace) -> str | None:
    if min(args.size, args.audit_runs, args.inproc_rounds, args.inproc_calls) < 1:
        return "counts and sizes must be at least 1"
    return None


def fmt_ratio(values: list[float]) -> str:
    s = Spread.of(values)
    return s.fmt(3) if s else "-"


def children_cpu() -> float:
    """CPU seconds of the waited-for children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


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
    return [
        CpConfig(d, s, v, a)
        for d in ("download", "upload")
        for v in ("none", "block")
        for a in ("adler32", "md5")
        for s in (1, 4)
        if not (matrix == "reduced" and a == "md5" and v == "none")
    ]


@dataclass
class CpRun:
    seconds: float  # cp's own figure
    wall: float
    cpu: float  # the cp process's and its server's CPU seconds
    summary: dict[str, object]


class CpBench:
    def __init__(
        self, b: Bench, trees: tuple[Tree, Tree], states: dict[str, Path], failures: list[str]
    ) -> None:
        self.b, self.trees, self.states, self.failures = b, trees, states, failures
        self.base = b.workdir("cp", where=b.args.dir)
        self.name = f"f{b.args.size}"
        self.src = self.base / "source" / self.name
        self.servers: dict[str, tuple[str, subprocess.Popen[str]]] = {}
        self.roots = {t.label: self.base / f"root-{t.label}" for t in trees}
        self.dsts = {t.label: self.base / f"dst-{t.label}" for t in trees}

    def start(self) -> None:
        self.src.parent.mkdir()
        make_file(self.src, self.b.args.size * MiB)
        tokens = self.base / "tokens"
        tokens.write_text(f"{TOKEN} read,write\n")
        tokens.chmod(0o600)
        for t in self.trees:
            self.roots[t.label].mkdir()
            self.dsts[t.label].mkdir()
            os.link(self.src, self.roots[t.label] / self.name)  # the same bytes, no 2nd copy
            proc = self.b.tracked.add(
                subprocess.Popen(
                    t.dtnkit(
                        "serve",
                        "--root",
                        str(self.roots[t.label]),
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--tokens",
                        str(tokens),
                        "--anonymous-read",
                        "--quiet",
                    ),
                    stdout=subprocess.PIPE,
                    text=True,
                    env=t.env(self.states[t.label]),
                )
            )
            assert proc.stdout is not None
            self.servers[t.label] = (listening_url(proc.stdout.readline()), proc)
            for algo in ("adler32", "md5"):
                warm(self.servers[t.label][0], self.name, algo)

    def run(self, tree: Tree, c: CpConfig, check: bool) -> CpRun:
        url, server = self.servers[tree.label]
        if c.direction == "download":
            src, dst = url + self.name, self.dsts[tree.label] / self.name
            target = str(dst)
        else:
            src, dst = str(self.src), self.roots[tree.label] / f"up-{self.name}"
            target = url + dst.name
        argv = tree.dtnkit(
            "cp",
            src,
            target,
            "--streams",
            str(c.streams),
            "--verify",
            c.verify,
            "--checksum",
            c.checksum,
            "--retries",
            "0",
            "--json",
            "--token",
            TOKEN,
        )
        cpu = children_cpu() + proc_cpu(server.pid)
        start = time.perf_counter()
        r = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            env=tree.env(self.states[tree.label]),
        )
        wall = time.perf_counter() - start
        cpu = children_cpu() + proc_cpu(server.pid) - cpu
        try:
            if r.returncode != 0:
                raise RuntimeError(
                    f"{tree.label}: {c.name}: exit {r.returncode}: {r.stderr.strip()[-500:]}"
                )
            # the same text in both trees but for where this tree's copy went
            line = r.stdout.strip().splitlines()[-1]
            for mine, neutral in ((url, "URL/"), (str(self.dsts[tree.label]), "DST")):
                line = line.replace(json.dumps(mine)[1:-1], neutral)
            summary = json.loads(line)
            size = dst.stat().st_size
            if size != self.src.stat().st_size:
                self.failures.append(f"cp {c.name} ({tree.label}): copy has {size} bytes")
            elif check and not filecmp.cmp(self.src, dst, shallow=False):
                self.failures.append(f"cp {c.name} ({tree.label}): copy differs from the source")
            return CpRun(float(summary["seconds"]), wall, cpu, summary)
        finally:
            with contextlib.suppress(OSError):
                dst.unlink()

    def section(self) -> None:
        b, a = self.b, self.b.args
        configs = [
            c
            for c in cp_configs(a.matrix)
            if not a.copies or any(want in c.name for want in a.copies)
        ]
        if not configs:
            raise RuntimeError(f"no copy matches --copies {a.copies}")
        self.start()
        for t in self.trees:
            self.run(t, CpConfig("download", 1, "none", "adler32"), check=False)  # warm-up
        watch = b.watch()
        before, after = (t.label for t in self.trees)
        rows, bests, all_s, all_cpu = [], [], [], []
        for i, c in enumerate(configs):
            runs: dict[str, list[CpRun]] = {before: [], after: [], aa(after): []}

            def one(
                t: Tree, key: str, c: CpConfig = c, runs: dict[str, list[CpRun]] = runs
            ) -> float:
                run = self.run(t, c, check=not runs[key])
                runs[key].append(run)
                return run.seconds

            measures = {
                before: functools.partial(one, self.trees[0], before),
                after: functools.partial(one, self.trees[1], after),
            }
            if i == 0:  # the A/A noise of the machine for copies
                measures[aa(after)] = functools.partial(one, self.trees[1], aa(after))
            got = b.rounds_of(measures, label=c.name)
            strip = [
                {x: v for x, v in r.summary.items() if x not in ("seconds", "rate_bps")}
                for r in (*runs[before], *runs[after])
            ]
            other = next((s for s in strip if s != strip[0]), None)
            if other is not None:
                diff = {
                    x: (strip[0].get(x), other.get(x))
                    for x in {*strip[0], *other}
                    if strip[0].get(x) != other.get(x)
                }
                self.failures.append(f"cp {c.name}: --json summaries differ: {diff}")
            walls, cpus = Samples(), Samples()
            for label, rs in runs.items():
                for j, r in enumerate(rs[: b.rounds]):
                    walls.add(label, j, r.wall)
                    cpus.add(label, j, r.cpu)
            noise = b.compare(got, after, before, noise_of=after).fmt() if i == 0 else ""
            bs, as_ = got.get(before), got.get(after)
            rows.append(
                [
                    c.name,
                    f"{statistics.median(bs):.2f}",
                    f"{statistics.median(as_):.2f}",
                    fmt_ratio(got.paired(after, before)),
                    noise,
                    f"{min(as_) / min(bs):.3f}",
                    fmt_ratio(walls.paired(after, before)),
                    f"{statistics.median(cpus.get(before)):.2f}",
                    f"{statistics.median(cpus.get(after)):.2f}",
                    fmt_ratio(cpus.paired(after, before)),
                ]
            )
            bests.append(min(as_) / min(bs))
            all_s += got.paired(after, before)
            all_cpu += cpus.paired(after, before)
        b.table(
            [
                "copy",
                "base s",
                "this s",
                "ratio",
                "ratio (A/A noise)",
                "best ratio",
                "wall ratio",
                "base CPU s",
                "this CPU s",
                "CPU ratio",
            ],
            rows,
            title=f"cp: {a.size} MiB on {a.dir} over loopback, {b.rounds} rounds "
            "interleaved, warm server digests; seconds (median), this / base "
            "(median [min-max] of the per-round ratios) and best / best",
        )
        b.note(
            f"Over all copies: per-round ratios of cp's seconds {fmt_ratio(all_s)}, of CPU "
            f"{fmt_ratio(all_cpu)}; geometric mean of the best ratios "
            f'{statistics.geometric_mean(bests):.3f}.  "s" is the copy as cp reports it; '
            '"wall" the cp process with start-up; "CPU" user + system of the cp '
            "process and its server during it."
        )
        b.load_line(watch, "The cp section")


def warm(url: str, name: str, algo: str) -> None:
    """HEAD with Want-Digest, so the server's digest cache holds it."""
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    try:
        conn.request("HEAD", f"/{name}", headers={"Want-Digest": algo})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200 or not resp.getheader("Digest"):
            raise RuntimeError(f"HEAD Want-Digest {algo}: {resp.status}")
    finally:
        conn.close()


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
    cases = [
        (f"tree {h}", ["tune", "audit", "--tree", str(fixtures / h), "--format", "json"], True)
        for h in sorted(p.name for p in fixtures.iterdir() if p.is_dir())
    ]
    return [
        *cases,
        ("this host, all groups", ["tune", "audit", "--format", "json"], False),
        ("this host, buffers", ["tune", "audit", "--group", "buffers", "--format", "json"], False),
    ]


def first_difference(before: bytes, after: bytes) -> str:
    bl = before.decode(errors="replace").splitlines()
    al = after.decode(errors="replace").splitlines()
    for i, (x, y) in enumerate(zip(bl, al, strict=False)):
        if x != y:
            return f"line {i + 1}: base {x[:80]!r}, this {y[:80]!r}"
    return f"one ends at line {min(len(bl), len(al)) + 1}"


def section_audit(
    b: Bench, trees: tuple[Tree, Tree], states: dict[str, Path], failures: list[str]
) -> None:
    a = b.args

    def cli(t: Tree, argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
        cpu, start = children_cpu(), time.perf_counter()
        r = subprocess.run(
            t.dtnkit(*argv),
            capture_output=True,
            env=t.env(states[t.label]),
            timeout=600,
            check=False,
        )
        return time.perf_counter() - start, children_cpu() - cpu, r

    cases = audit_cases(trees[0].root / "tests" / "fixtures" / "hosts")
    watch = b.watch()
    comparable: dict[str, str] = {}
    for name, argv, deterministic in cases:  # identical outputs first (and the warm-up)
        outs = {t.label: cli(t, argv)[2] for t in trees}
        for t in trees:
            if outs[t.label].returncode not in AUDIT_OK:
                raise RuntimeError(
                    f"audit {name} ({t.label}) failed: {outs[t.label].stderr.decode()[-500:]}"
                )
        x, y = (outs[t.label] for t in trees)
        if x.stdout == y.stdout and x.returncode == y.returncode:
            comparable[name] = "identical"
        elif not deterministic and cli(trees[0], argv)[2].stdout != x.stdout:
            comparable[name] = "varies between runs, not compared"
        else:
            comparable[name] = "DIFFERENT"
            failures.append(
                f"audit {name}: output differs (exit {x.returncode} vs "
                f"{y.returncode}); {first_difference(x.stdout, y.stdout)}"
            )
    rows = []
    before, after = (t.label for t in trees)
    for name, argv, _det in cases:
        cpu = Samples()

        def wall(t: Tree, key: str, argv: list[str] = argv, cpu: Samples = cpu) -> float:
            w, c, _r = cli(t, argv)
            cpu.add(key, len(cpu.get(key)), c)
            return w

        got = b.rounds_of(
            {
                before: functools.partial(wall, trees[0], before),
                after: functools.partial(wall, trees[1], after),
                aa(after): functools.partial(wall, trees[1], aa(after)),
            },
            rounds=a.audit_runs,
            label=f"audit {name}",
        )

        def inproc(t: Tree, argv: list[str] = argv) -> float:
            r = subprocess.run(
                [sys.executable, "-c", DRIVER, json.dumps(argv), str(a.inproc_calls)],
                capture_output=True,
                text=True,
                env=t.env(states[t.label]),
                timeout=600,
                check=False,
            )
            if r.returncode != 0:
                raise RuntimeError(f"in-process audit ({t.label}): {(r.stdout + r.stderr)[-800:]}")
            return float(statistics.median(json.loads(r.stdout)["times"]))

        ip = b.rounds_of(
            {t.label: functools.partial(inproc, t) for t in trees},
            rounds=a.inproc_rounds,
            label=f"audit {name} in-process",
        )
        rows.append(
            [
                name,
                comparable[name],
                f"{(got.median(before) or 0) * 1e3:.0f}",
                f"{(got.median(after) or 0) * 1e3:.0f}",
                b.compare(got, after, before, noise_of=after).fmt(),
                fmt_ratio(got.paired(after, before)),
                fmt_ratio(cpu.paired(after, before)),
                f"{(ip.median(before) or 0) * 1e3:.1f}",
                f"{(ip.median(after) or 0) * 1e3:.1f}",
                fmt_ratio(ip.paired(after, before)),
            ]
        )
    b.table(
        [
            "case",
            "output",
            "base ms",
            "this ms",
            "ratio (A/A noise)",
            "wall ratio",
            "CPU ratio",
            "base in-proc ms",
            "this in-proc ms",
            "in-proc ratio",
        ],
        rows,
        title=f"tune audit --format json: a fresh process ({a.audit_runs} runs "
        f"interleaved, after a warm-up) and in-process main() ({a.inproc_rounds} "
        f"driver processes per tree, each the median of {a.inproc_calls} calls); "
        "this / base, median [min-max] of the paired ratios",
    )
    b.load_line(watch, "The audit section")


def run(b: Bench) -> int:
    assert b.base is not None
    trees = (b.base, b.this)
    b.this.check_import()
    state = b.workdir("state", where="/tmp")
    states = {t.label: state / t.label for t in trees}
    failures: list[str] = []
    if b.args.only in (None, "audit"):
        section_audit(b, trees, states, failures)
    if b.args.only in (None, "cp"):
        CpBench(b, trees, states, failures).section()
    b.result.doc["failures"] = failures
    if failures:
        b.heading("FAILURES (the trees behave differently)")
        for f in failures:
            b.out(f"- {f}")
        b.out()
    return 1 if failures else 0


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    check=check,
    rounds=3,
    base="required",
    quick_help="64 MiB, two copies, two rounds; two audit runs",
)
