#!/usr/bin/env python3
"""Time to build `dtnkit fleet report` for N = 3, 30, 300 hosts, against loading the
documents alone, in the same run.

    .venv/bin/python bench/bench_fleet_report.py [--runs 3] [--sizes 3,30,300]

The hosts are synthetic, made from one real audit (`dtnkit tune audit --format json` of the
captured 100G host tree tests/fixtures/hosts/dtn-a), varied per host: every third host has
another congestion control, every fifth smaller TCP buffers, every seventh a different MTU;
and a campaign with one pair per two hosts.  Cases, in process (the command's own work, not
Python's start-up), interleaved per run so a burst of load hits all alike:

  load          fleet.load.load_dir: read and check every file
  + compare     and the comparison (compliance grid, values that differ, against a
                reference host)
  + tables      and the tables for people at 80 columns (what `fleet report DIR` prints)
  + page        and the figures and the HTML page written (`-o OUTDIR`)

Prints the median of --runs runs per case and its ratio to `load`.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import CpuWatch, log, out, table

ROOT = Path(__file__).resolve().parents[1]


def real_audit() -> dict[str, Any]:
    from dtnkit.cli.main import main
    from dtnkit.environment import Environment

    stdout = io.StringIO()
    env = Environment(stdout=stdout, stderr=io.StringIO())
    main(["tune", "audit", "--tree", str(ROOT / "tests/fixtures/hosts/dtn-a"), "--format",
          "json"], env)
    doc: dict[str, Any] = json.loads(stdout.getvalue())
    return doc


def varied(doc: dict[str, Any], i: int) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    d["host"] = f"dtn{i:03d}.example.org"
    for f in d["findings"]:
        if f["key"] == "sysctl/net.ipv4.tcp_congestion_control" and i % 3 == 1:
            f["current"], f["status"] = "cubic", "differs"
        elif f["key"] in ("sysctl/net.ipv4.tcp_rmem", "sysctl/net.ipv4.tcp_wmem") and i % 5 == 2:
            f["current"], f["status"] = "4096 87380 6291456", "differs"
        elif f["key"].endswith("/mtu") and i % 7 == 3:
            f["current"], f["status"] = 1500, "differs"
    d["compliant"] = not any(f["status"] in ("differs", "unknown") for f in d["findings"])
    return d


def campaign(names: list[str]) -> dict[str, Any]:
    def result(group: str, k: int) -> dict[str, Any]:
        verdict = ("helps", "neutral", "harmful", "gated")[k % 4]
        ratio = None if verdict == "gated" else (1.3, 1.0, 0.8)[k % 3]
        return {"group": group, "verdict": verdict, "applied": verdict != "gated",
                "ratio": ratio, "margin": 0.04, "baseline_bps": [5e9, 5.1e9],
                "applied_bps": [5e9 * (ratio or 1)] * 2, "why": "synthetic"}

    return {"schema": "dtnkit.campaign/1", "profile": "dtn",
            "groups": ["buffers", "congestion", "rings"], "started": 1.7e9,
            "finished": 1.7e9 + 600, "status": "done", "failure": None,
            "pairs": [{"client": a, "server": b, "nic_bps": 2.5e10,
                       "results": [result(g, k + j) for j, g in
                                   enumerate(("buffers", "congestion", "rings"))]}
                      for k, (a, b) in enumerate(zip(names[::2], names[1::2], strict=False))],
            "restored": names}


def make_dir(base: Path, n: int, doc: dict[str, Any]) -> Path:
    d = base / f"n{n}"
    d.mkdir()
    names = [f"dtn{i:03d}.example.org" for i in range(n)]
    for i, name in enumerate(names):
        (d / f"{name}.audit.json").write_text(json.dumps(varied(doc, i), indent=2))
    (d / "campaign.json").write_text(json.dumps(campaign(names), indent=1))
    return d


def cases(d: Path, outdir: Path) -> dict[str, Callable[[], object]]:
    from dtnkit.cli.fleet import people
    from dtnkit.cli.output import Printer
    from dtnkit.environment import Environment
    from dtnkit.fleet import page
    from dtnkit.fleet.compare import compare
    from dtnkit.fleet.load import load_dir

    ref = "dtn000.example.org"

    def tables() -> None:
        r = compare(load_dir(d), reference=ref)
        people(Printer(Environment(stdout=io.StringIO(), stderr=io.StringIO(),
                                   terminal_width=80)), r)

    def html() -> None:
        page.build(compare(load_dir(d), reference=ref), out=outdir)

    return {"load": lambda: load_dir(d),
            "+ compare": lambda: compare(load_dir(d), reference=ref),
            "+ tables": tables, "+ page": html}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="3,30,300")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    doc = real_audit()
    watch = CpuWatch()
    rows = []
    with tempfile.TemporaryDirectory(prefix="s20r-bench-") as tmp:
        base = Path(tmp)
        for n in sizes:
            d = make_dir(base, n, doc)
            run = cases(d, base / f"out{n}")
            run["+ page"]()  # warm-up: matplotlib's import and font cache
            times: dict[str, list[float]] = {k: [] for k in run}
            for r in range(args.runs):
                for name, fn in run.items():
                    t0 = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t0)
                log(f"N={n} run {r + 1}/{args.runs}")
            base_s = statistics.median(times["load"])
            for name, ts in times.items():
                med = statistics.median(ts)
                rows.append([str(n), name, f"{med * 1000:.1f} ms",
                             f"{min(ts) * 1000:.1f}..{max(ts) * 1000:.1f} ms",
                             f"x{med / base_s:.1f}"])
    out(f"Fleet report of N hosts (one real audit, varied; a campaign of N/2 pairs); "
        f"median of {args.runs} runs")
    out()
    table(["N", "case", "median", "min..max", "vs load"], rows)
    out(watch.report())


if __name__ == "__main__":
    main()
