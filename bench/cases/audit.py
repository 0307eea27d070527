"""How long does dtnkit tune audit take, as an admin runs it, against sysctl -a and Python?

Cases (each a fresh process, as from a shell or Ansible; the venv's console script), after one
warm-up run each that also writes the bytecode cache, interleaved for --rounds rounds:

  python startup      `python -c pass`: the floor any Python CLI pays
  sysctl -a           what an admin types to eyeball settings by hand
  audit (all groups)  `dtnkit tune audit --format json` on this host (twice per round: the
                      A/A noise of the comparisons)
  audit (buffers)     `dtnkit tune audit --group buffers --format json`
  audit (tree dtn-a)  the same on the captured 100G host tree (replayed commands)
  audit (netns)       every group inside a fresh namespace holding one end of a veth pair, so
                      it has one data interface as the host has (root only)
  fasterdata audit    ``fasterdata-tuning.sh --mode audit --target dtn --nocolor``
                      (osg-htc/networking, not shipped with dtnkit: --fasterdata PATH)
  import pyroute2     `python -c "import pyroute2"` (when the test extra installed it): what
                      reading the kernel through pyroute2 would add to the audit before its
                      first message (docs/architecture.md)
  ... (base)          with --base REF: the host (and namespace) audit of the --base tree

The table gives the median, min and max and each median's ratio to python startup; the
comparisons the project holds itself to follow: the namespace audit against the host audit
(at most 1.2), the host audit against fasterdata-tuning.sh's, and this tree against --base,
each with the A/A noise.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.lib import Bench, Case
from bench.lib.stats import Comparison, aa, spread_cells
from bench.lib.trees import REPO

_SCRIPT = Path(sys.executable).parent / "dtnkit"
DTNKIT = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "dtnkit.cli.main"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
HOST = "audit (all groups)"


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fasterdata",
        type=Path,
        default=None,
        help="path of fasterdata-tuning.sh (osg-htc/networking)",
    )


def timed_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, env=env)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 3):  # 3: the audit found settings to change
        raise RuntimeError(
            f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}"
        )
    return took


def netns_pair(b: Bench) -> str | None:
    """A namespace with one veth end (its peer in a second one), removed at the end; None
    when not root."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        return None
    ns = f"{b.prefix}a{secrets.token_hex(3)}"
    for name in (ns, f"{ns}p"):
        subprocess.run(["ip", "netns", "add", name], check=True)
        b.stack.callback(subprocess.run, ["ip", "netns", "del", name], check=False)
    subprocess.run(
        [
            "ip",
            "-n",
            ns,
            "link",
            "add",
            "dkv0",
            "type",
            "veth",
            "peer",
            "name",
            "dkv1",
            "netns",
            f"{ns}p",
        ],
        check=True,
    )
    return ns


def run(b: Bench) -> None:
    audit = [*DTNKIT, "tune", "audit", "--format", "json"]
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "python startup": ([sys.executable, "-c", "pass"], ENV),
        "sysctl -a": (["sysctl", "-a"], ENV),
        HOST: (audit, ENV),
        "audit (buffers)": ([*audit, "--group", "buffers"], ENV),
        "audit (tree dtn-a)": ([*audit, "--tree", str(REPO / "tests/fixtures/hosts/dtn-a")], ENV),
    }
    if importlib.util.find_spec("pyroute2") is not None:
        cases["import pyroute2"] = ([sys.executable, "-c", "import pyroute2"], ENV)
    ns = netns_pair(b)
    if ns:
        cases["audit (netns, veth)"] = ([*audit, "--netns", ns], ENV)
    if b.base is not None:
        base_env = {**ENV, "PYTHONPATH": str(b.base.src)}
        cases[f"{HOST} (base)"] = (audit, base_env)
        if ns:
            cases["audit (netns, veth) (base)"] = ([*audit, "--netns", ns], base_env)
    fd = b.args.fasterdata
    if fd is not None and fd.is_file():
        logs = b.workdir("fasterdata")
        cases["fasterdata audit"] = (
            ["bash", str(fd), "--mode", "audit", "--target", "dtn", "--nocolor"],
            {**ENV, "LOGFILE": f"{logs}/fasterdata.log"},
        )
    elif fd is not None:
        b.log(f"no {fd}: the fasterdata row is left out")
    for argv, env in cases.values():
        subprocess.run(argv, capture_output=True, check=False, env=env)  # caches, .pyc
    watch = b.watch()
    got = b.rounds_of(
        {n: functools.partial(timed_once, *c) for n, c in cases.items()},
        twins=[HOST],
        label="audit",
    )
    b.load_line(watch, "The timed rounds")
    base = got.median("python startup") or float("nan")
    rows = [
        [
            name,
            *spread_cells(got.get(name), 1000, 1),
            f"{(got.median(name) or float('nan')) / base:.2f}",
        ]
        for name in [*cases, aa(HOST)]
    ]
    b.table(
        ["case", "median ms", "min-max ms", "x python"],
        rows,
        title=f"`dtnkit tune audit` wall time, {b.rounds} rounds",
    )
    pairs = [
        ("audit (netns, veth)", HOST, "namespace audit / host audit (target <= 1.2)"),
        (HOST, "fasterdata audit", "host audit / fasterdata-tuning.sh's audit"),
        ("import pyroute2", HOST, "`import pyroute2` / host audit"),
        (HOST, f"{HOST} (base)", f"host audit: this tree / --base {b.args.base}"),
        (
            "audit (netns, veth)",
            "audit (netns, veth) (base)",
            f"namespace audit: this tree / --base {b.args.base}",
        ),
    ]
    rows = []
    for x, y, what in pairs:
        if x in cases and y in cases:
            c: Comparison = b.compare(got, x, y, noise_of=HOST)
            rows.append([what, c.fmt(), c.verdict])
    b.table(["ratio of medians", "ratio (A/A noise)", "verdict"], rows)


CASE = Case(run=run, options=options, rounds=15, base="optional", tools=("sysctl",))
