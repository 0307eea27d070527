"""How long does dtnkit fleet report take for 3, 30 and 300 hosts, against loading the files?

The hosts are synthetic, made from one real audit (``dtnkit tune audit --format json`` of the
captured 100G host tree tests/fixtures/hosts/dtn-a), varied per host: every third host has
another congestion control, every fifth smaller TCP buffers, every seventh a different MTU;
and a campaign with one pair per two hosts.  Cases, in process (the command's own work, not
Python's start-up), interleaved:

  load          fleet.load.load_dir: read and check every file
  + compare     and the comparison (compliance grid, values that differ, a reference host)
  + tables      and the tables for people at 80 columns (what `fleet report DIR` prints)
  + page        and the figures and the HTML page written (`-o OUTDIR`)
"""

from __future__ import annotations

import argparse
import copy
import functools
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.lib import Bench, Case
from bench.lib.loopback import ints
from bench.lib.stats import spread_cells
from bench.lib.trees import REPO


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sizes",
        type=ints,
        default=[3, 30, 300],
        help="host counts, comma-separated (default 3,30,300)",
    )


def quick(args: argparse.Namespace) -> None:
    args.sizes = [3, 30]


def real_audit() -> dict[str, Any]:
    from dtnkit.cli.main import main
    from dtnkit.environment import Environment

    stdout = io.StringIO()
    main(
        ["tune", "audit", "--tree", str(REPO / "tests/fixtures/hosts/dtn-a"), "--format", "json"],
        Environment(stdout=stdout, stderr=io.StringIO()),
    )
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
        return {
            "group": group,
            "verdict": verdict,
            "applied": verdict != "gated",
            "ratio": ratio,
            "margin": 0.04,
            "baseline_bps": [5e9, 5.1e9],
            "applied_bps": [5e9 * (ratio or 1)] * 2,
            "why": "synthetic",
        }

    return {
        "schema": "dtnkit.campaign/1",
        "profile": "dtn",
        "groups": ["buffers", "congestion", "rings"],
        "started": 1.7e9,
        "finished": 1.7e9 + 600,
        "status": "done",
        "failure": None,
        "pairs": [
            {
                "client": a,
                "server": b,
                "nic_bps": 2.5e10,
                "results": [
                    result(g, k + j) for j, g in enumerate(("buffers", "congestion", "rings"))
                ],
            }
            for k, (a, b) in enumerate(zip(names[::2], names[1::2], strict=False))
        ],
        "restored": names,
    }


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
        people(
            Printer(Environment(stdout=io.StringIO(), stderr=io.StringIO(), terminal_width=80)),
            compare(load_dir(d), reference=ref),
        )

    def html() -> None:
        page.build(compare(load_dir(d), reference=ref), out=outdir)

    return {
        "load": lambda: load_dir(d),
        "+ compare": lambda: compare(load_dir(d), reference=ref),
        "+ tables": tables,
        "+ page": html,
    }


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(b: Bench) -> None:
    doc = real_audit()
    base = b.workdir(where="/tmp")
    rows = []
    for n in b.args.sizes:
        d = make_dir(base, n, doc)
        fns = cases(d, base / f"out{n}")
        fns["+ page"]()  # warm-up: matplotlib's import and font cache
        got = b.rounds_of({k: functools.partial(timed, f) for k, f in fns.items()}, label=f"N={n}")
        load = got.median("load") or float("nan")
        for name in fns:
            rows.append(
                [
                    str(n),
                    name,
                    *spread_cells(got.get(name), 1000, 1),
                    f"x{(got.median(name) or float('nan')) / load:.1f}",
                ]
            )
    b.table(
        ["N", "case", "median ms", "min-max ms", "vs load"],
        rows,
        title=f"Fleet report of N hosts (one real audit, varied; a campaign of N/2 "
        f"pairs); {b.rounds} rounds",
    )


CASE = Case(run=run, options=options, quick=quick, rounds=3, quick_help="3 and 30 hosts")
