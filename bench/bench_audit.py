#!/usr/bin/env python3
"""Wall time of `dtnkit tune audit`, as an admin runs it, against baselines in the same run.

    .venv/bin/python bench/bench_audit.py [--runs 15]

Cases (each a fresh process, as from a shell or Ansible):
  python startup     `python -c pass`: the floor any Python CLI pays
  sysctl -a          what an admin types to eyeball settings by hand
  audit (all)        `dtnkit tune audit --format json` on this host, every group
  audit (buffers)    `dtnkit tune audit --group buffers --format json`
  audit (tree dtn-a) the same on the captured 100G host tree (replayed commands)
  audit (netns)      every group inside a fresh namespace with a veth pair (root only)

Prints the median, min and max of --runs runs (after one warm-up run that also writes the
bytecode cache, as an installed package has) and the ratio of each median to python startup.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DTNKIT = [sys.executable, "-m", "dtnkit.cli.main"]


# As installed on a site: bytecode cached (some shells here set PYTHONDONTWRITEBYTECODE).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: Sequence[str], runs: int) -> list[float]:
    subprocess.run(argv, capture_output=True, check=False, env=ENV)  # warm caches, write .pyc
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, check=False, env=ENV)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 3):
            raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): "
                             f"{proc.stderr.decode()[-500:]}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

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
        ns = f"dkbench{uuid.uuid4().hex[:6]}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "-n", ns, "link", "add", "dkv0", "type", "veth", "peer", "name",
                        "dkv1"], check=True)
        cases.append(("audit (netns, veth)", [*DTNKIT, "tune", "audit", "--netns", ns,
                                              "--format", "json"]))
    try:
        results = [(name, timed(argv, args.runs)) for name, argv in cases]
    finally:
        if ns:
            subprocess.run(["ip", "netns", "del", ns], check=False)

    base = statistics.median(results[0][1])
    print(f"dtnkit tune audit wall time, {args.runs} runs each, "
          f"{os.cpu_count()} CPUs, kernel {os.uname().release}")
    print(f"{'case':<22} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x python':>9}")
    for name, times in results:
        med = statistics.median(times)
        print(f"{name:<22} {med * 1000:>10.1f} {min(times) * 1000:>8.1f} "
              f"{max(times) * 1000:>8.1f} {med / base:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
