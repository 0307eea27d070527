#!/usr/bin/env python3
"""Wall time of `dtnkit tune audit`, as an admin runs it, against baselines in the same run.

    .venv/bin/python bench/bench_audit.py [--runs 15] [--fasterdata PATH] [--before REV]

Cases (each a fresh process, as from a shell or Ansible), interleaved: each run goes through
every case once, so a burst of load on the machine hits all cases alike:
  python startup     `python -c pass`: the floor any Python CLI pays
  sysctl -a          what an admin types to eyeball settings by hand
  audit (all)        `dtnkit tune audit --format json` on this host, every group
  audit (buffers)    `dtnkit tune audit --group buffers --format json`
  audit (tree dtn-a) the same on the captured 100G host tree (replayed commands)
  audit (netns)      every group inside a fresh namespace holding one end of a veth pair
                     (the other end in a second namespace), so it has one data interface as
                     the host has (root only)
  fasterdata audit   fasterdata-tuning.sh --mode audit --target dtn --nocolor (osg-htc/networking,
                     not shipped with dtnkit: give its path with --fasterdata; row skipped
                     when absent; its log goes to a temporary directory).  Its text audit:
                     its --json audit takes 30-40 s here, which would flatter dtnkit.
  audit (all) @REV   with --before REV: the all-groups audit of the package as it was at git
                     revision REV (its `src` from `git archive`, first on PYTHONPATH), run by
                     the same console script in the same rounds: a before/after pair that saw
                     the same load (and the namespace audit of REV, when root)

Prints the median, min and max of --runs runs (after one warm-up run that also writes the
bytecode cache, as an installed package has), the ratio of each median to python startup, and
the two ratios the project holds itself to: the namespace audit against the host audit (at
most 1.2), and the host audit against fasterdata-tuning.sh's audit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The installed command, as an admin runs it: the venv's console script (no runpy), run by the
# interpreter that runs this bench (make the venv with the distribution's python3, as
# dev/bootstrap.sh does: a site runs that one).
_SCRIPT = Path(sys.executable).parent / "dtnkit"
DTNKIT = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "dtnkit.cli.main"]


# As installed on a site: bytecode cached (some shells here set PYTHONDONTWRITEBYTECODE).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def warm(argv: Sequence[str]) -> None:
    subprocess.run(argv, capture_output=True, check=False, env=ENV)  # caches, .pyc


def timed_once(argv: Sequence[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, env=env)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): "
                         f"{proc.stderr.decode()[-500:]}")
    return took


def before_tree(rev: str, work: Path) -> dict[str, str]:
    """The environment that runs dtnkit as it was at *rev* (its src first on the path)."""
    tree = work / f"src-{rev}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {**ENV, "PYTHONPATH": str(tree / "src")}
    where = subprocess.run([sys.executable, "-c", "import dtnkit; print(dtnkit.__file__)"],
                           capture_output=True, text=True, check=True, env=env).stdout
    if not where.startswith(str(tree)):
        raise SystemExit(f"dtnkit at {rev} is not the one imported: {where}")
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--fasterdata", type=Path, default=None,
                        help="path of fasterdata-tuning.sh (osg-htc/networking)")
    parser.add_argument("--before", metavar="REV", default=None,
                        help="also run the host audit with the package at git revision REV")
    parser.add_argument("--netns-prefix", default="dkbench",
                        help="start of the name of the namespace the bench makes")
    args = parser.parse_args()
    logs = tempfile.TemporaryDirectory(prefix="dkbench-fd")

    cases: list[tuple[str, list[str]]] = [
        ("python startup", [sys.executable, "-c", "pass"]),
        ("sysctl -a", ["sysctl", "-a"]),
        ("audit (all groups)", [*DTNKIT, "tune", "audit", "--format", "json"]),
        ("audit (buffers)", [*DTNKIT, "tune", "audit", "--group", "buffers", "--format", "json"]),
        ("audit (tree dtn-a)", [*DTNKIT, "tune", "audit", "--tree",
                                str(ROOT / "tests/fixtures/hosts/dtn-a"), "--format", "json"]),
    ]
    ns = None
    if os.geteuid() == 0 and shutil.which("ip"):
        # one veth end in the audited namespace, its peer in a second one: one data
        # interface (and lo), as the host has, so both audits run the same per-device commands
        ns = f"{args.netns_prefix}{uuid.uuid4().hex[:6]}"
        peer_ns = f"{ns}p"
        for name in (ns, peer_ns):
            subprocess.run(["ip", "netns", "add", name], check=True)
        subprocess.run(["ip", "-n", ns, "link", "add", "dkv0", "type", "veth", "peer", "name",
                        "dkv1", "netns", peer_ns], check=True)
        cases.append(("audit (netns, veth)", [*DTNKIT, "tune", "audit", "--netns", ns,
                                              "--format", "json"]))
    envs = {name: ENV for name, _ in cases}
    if args.before:
        before = f"audit (all) @{args.before[:7]}"
        cases.insert(3, (before, cases[2][1]))
        envs[before] = before_tree(args.before, Path(logs.name))
        if ns:  # the namespace audit of REV too, right after this one's
            ns_before = f"audit (netns) @{args.before[:7]}"
            cases.append((ns_before, cases[-1][1]))
            envs[ns_before] = envs[before]
    if args.fasterdata and args.fasterdata.is_file():
        cases.append(("fasterdata audit", ["bash", str(args.fasterdata), "--mode", "audit",
                                           "--target", "dtn", "--nocolor"]))
        envs["fasterdata audit"] = {**ENV, "LOGFILE": f"{logs.name}/fasterdata.log"}
    elif args.fasterdata:
        print(f"no {args.fasterdata}: fasterdata row skipped", file=sys.stderr)
    runs: dict[str, list[float]] = {name: [] for name, _ in cases}
    try:
        for _, argv in cases:
            warm(argv)
        for _ in range(args.runs):
            for name, argv in cases:
                runs[name].append(timed_once(argv, envs[name]))
    finally:
        if ns:
            for name in (ns, f"{ns}p"):
                subprocess.run(["ip", "netns", "del", name], check=False)
        logs.cleanup()
    results = list(runs.items())

    base = statistics.median(results[0][1])
    print(f"dtnkit tune audit wall time, {args.runs} runs each, "
          f"{os.cpu_count()} CPUs, kernel {os.uname().release}")
    print(f"{'case':<22} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x python':>9}")
    for name, times in results:
        med = statistics.median(times)
        print(f"{name:<22} {med * 1000:>10.1f} {min(times) * 1000:>8.1f} "
              f"{max(times) * 1000:>8.1f} {med / base:>9.2f}")
    medians = {name: statistics.median(t) for name, t in results}
    host = medians["audit (all groups)"]
    if "audit (netns, veth)" in medians:
        print(f"netns audit / host audit: {medians['audit (netns, veth)'] / host:.2f} "
              "(target <= 1.2)")
    if "fasterdata audit" in medians:
        print(f"host audit / fasterdata-tuning.sh audit: {host / medians['fasterdata audit']:.2f}")
    if args.before:
        then = medians[f"audit (all) @{args.before[:7]}"]
        print(f"host audit / the same at {args.before[:7]}: {host / then:.2f}")
        if "fasterdata audit" in medians:
            print(f"host audit at {args.before[:7]} / fasterdata-tuning.sh audit: "
                  f"{then / medians['fasterdata audit']:.2f}")
        ns_then = medians.get(f"audit (netns) @{args.before[:7]}")
        if ns_then is not None:
            print(f"netns audit at {args.before[:7]} / host audit at {args.before[:7]}: "
                  f"{ns_then / then:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
