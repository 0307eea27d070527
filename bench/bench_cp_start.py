#!/usr/bin/env python3
"""Start-up of `dtnkit cp`: a 1 KiB copy over loopback, from process start to exit, against
`python -c pass` and curl in the same run.

    .venv/bin/python bench/bench_cp_start.py [--runs 20] [--before REV] [--instructions]

Two `dtnkit serve` on 127.0.0.1 (port 0; one plain HTTP, one TLS with a throwaway CA made by
``tests.support.xrootd.make_pki``, the interop tests' PKI) serve a 1 KiB file from a work
directory in /dev/shm (``dtnkit-cpstart-*``, removed at the end).  Cases, each a fresh
process as from a shell (the venv's console script, bytecode cached as an installed package
has it, ``PYTHONDONTWRITEBYTECODE`` dropped):

  python -c pass       the floor any Python command pays
  curl http / https    `curl -s -o FILE URL` (https: ``--cacert`` the test CA)
  dtnkit cp --help     parsing and help, no transfer modules used
  dtnkit cp http       `dtnkit cp URL FILE` with its defaults (verified adler32, --streams
                       auto), the destination removed before each run
  dtnkit cp https      the same with ``--ca-file`` the test CA

``--before REV`` adds the dtnkit cases once more with the package as it was at git revision
REV (its ``src`` extracted into the work directory and put first on ``PYTHONPATH``, the same
console script and venv), so before and after are measured in one run.

One warm-up run of each, then ``--runs`` rounds; every round runs every case once, the order
reversed every other round, so a burst of load hits all cases alike.  The table gives the
median, min and max of each case and the median's ratio to `python -c pass` and to curl of the
same scheme; the last line says how busy the machine was meanwhile (other processes' CPU).

``--instructions`` also counts the instructions each Python case executes, once, under
valgrind's callgrind (``PYTHONHASHSEED=0``; curl's child processes and the server are not
counted): on a shared machine a figure that load does not change, and its ratio to
`python -c pass`'s count.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support.xrootd import make_pki

from benchlib import CpuWatch, log, out, stop, table

# The installed command, as a user runs it: the venv's console script, by the interpreter
# that runs this bench (make the venv with the distribution's python3, as a site has it).
_SCRIPT = Path(sys.executable).parent / "dtnkit"
DTNKIT = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "dtnkit.cli.main"]
# As installed on a site: bytecode cached (some shells here set PYTHONDONTWRITEBYTECODE).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
SIZE = 1024


def serve(root: Path, *tls: str) -> tuple[subprocess.Popen[str], str]:
    """A `dtnkit serve` of *root* on a kernel-chosen port; its process and base URL."""
    proc = subprocess.Popen([*DTNKIT, "serve", "--root", str(root), "--port", "0",
                             "--anonymous-read", "--quiet", "--format", "json", *tls],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=ENV)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once listening
    if not line:
        stop(proc)
        raise SystemExit(f"dtnkit serve {' '.join(tls)} did not start")
    return proc, str(json.loads(line)["url"])


def run_once(argv: list[str], dst: Path | None, env: dict[str, str] | None = None) -> float:
    if dst is not None:
        dst.unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, env=env or ENV)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): "
                         f"{proc.stderr.decode()[-500:]}")
    if dst is not None and dst.stat().st_size != SIZE:
        raise SystemExit(f"{' '.join(argv)}: {dst} has {dst.stat().st_size} bytes")
    return took


def instructions(argv: list[str], dst: Path | None, env: dict[str, str] | None) -> float:
    """Millions of instructions *argv* executes (callgrind; threads included, children not)."""
    if dst is not None:
        dst.unlink(missing_ok=True)
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *argv], capture_output=True, text=True, check=False,
                          env={**(env or ENV), "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"valgrind {' '.join(argv)} failed: {proc.stderr[-500:]}")
    return int(found.group(1)) / 1e6


def before_tree(rev: str, work: Path) -> dict[str, str]:
    """The environment that runs dtnkit as it was at *rev* (its src first on the path)."""
    repo = Path(__file__).resolve().parent.parent
    tree = work / f"src-{rev}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "src"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return {**ENV, "PYTHONPATH": str(tree / "src")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--before", metavar="REV", default=None,
                        help="also run the dtnkit cases with the package at git revision REV")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions under valgrind (one run per case)")
    args = parser.parse_args()
    for tool in ("curl", "openssl", *(["valgrind"] if args.instructions else [])):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed")
    work = Path(tempfile.mkdtemp(prefix="dtnkit-cpstart-", dir="/dev/shm"))
    servers: list[subprocess.Popen[str]] = []
    try:
        root = work / "root"
        root.mkdir()
        (root / "f").write_bytes(os.urandom(SIZE))
        pki = make_pki(work / "pki")
        http, http_url = serve(root)
        servers.append(http)
        https, https_url = serve(root, "--cert", str(pki.cert), "--key", str(pki.key))
        servers.append(https)
        ca = str(pki.ca_file)
        out_dir = work / "out"
        out_dir.mkdir()
        cases: list[tuple[str, list[str], Path | None, dict[str, str] | None]] = [
            ("python -c pass", [sys.executable, "-c", "pass"], None, None),
            ("curl http", ["curl", "-sS", "-o", str(out_dir / "curl-http"), http_url + "f"],
             out_dir / "curl-http", None),
            ("curl https", ["curl", "-sS", "--cacert", ca, "-o", str(out_dir / "curl-https"),
                            https_url + "f"], out_dir / "curl-https", None),
        ]
        versions: list[tuple[str, dict[str, str] | None]] = [("", None)]
        if args.before:
            versions.append((f" ({args.before})", before_tree(args.before, work)))
        for tag, env in versions:
            cases += [
                (f"dtnkit cp --help{tag}", [*DTNKIT, "cp", "--help"], None, env),
                (f"dtnkit cp http{tag}", [*DTNKIT, "cp", http_url + "f",
                                          str(out_dir / "cp-http")], out_dir / "cp-http", env),
                (f"dtnkit cp https{tag}", [*DTNKIT, "cp", "--ca-file", ca, https_url + "f",
                                           str(out_dir / "cp-https")], out_dir / "cp-https",
                 env),
            ]
        log(f"{len(cases)} cases, 1 warm-up + {args.runs} rounds")
        for _, argv, dst, env in cases:
            run_once(argv, dst, env)  # warm-up: page cache, bytecode
        watch = CpuWatch(lambda: [p.pid for p in servers])
        times: dict[str, list[float]] = {name: [] for name, _, _, _ in cases}
        for i in range(args.runs):
            for name, argv, dst, env in cases if i % 2 == 0 else reversed(cases):
                times[name].append(run_once(argv, dst, env))
        load = watch.report()
        counts: dict[str, float] = {}
        if args.instructions:
            log("instructions (callgrind)")
            for name, argv, dst, env in cases:
                if not name.startswith("curl"):
                    counts[name] = instructions(argv, dst, env)
    finally:
        for proc in servers:
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)
    med = {name: statistics.median(t) for name, t in times.items()}
    base = med["python -c pass"]
    rows = []
    for name, t in times.items():
        scheme = "https" if "https" in name else "http"
        vs_curl = (f"{med[name] / med['curl ' + scheme]:.1f}" if name.startswith("dtnkit cp h")
                   else "")
        row = [name, f"{med[name] * 1e3:.1f}", f"{min(t) * 1e3:.1f}",
               f"{max(t) * 1e3:.1f}", f"{med[name] / base:.2f}", vs_curl]
        if counts:
            row += ([f"{counts[name]:.0f}", f"{counts[name] / counts['python -c pass']:.1f}"]
                    if name in counts else ["", ""])
        rows.append(row)
    out(f"`dtnkit cp` start-up, {SIZE} B over loopback, {args.runs} rounds, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]} ({sys.executable})")
    out()
    table(["case", "median ms", "min ms", "max ms", "x python -c pass", "x curl",
           *(["M instructions", "instructions x pass"] if counts else [])], rows)
    out(load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
