"""How long does dtnkit cp take to start, against python -c "import socket, ssl" and curl?

A 1 KiB copy over loopback, from process start to exit: two ``dtnkit serve`` on 127.0.0.1 (one
plain HTTP, one TLS with a throwaway CA made by ``tests.support.xrootd.make_pki``) serve a 1 KiB
file from a work directory in /dev/shm.  Cases, each a fresh process as from a shell (the venv's
console script, bytecode cached as an installed package has it):

  python -c pass             the floor any Python command pays
  python -c "import socket, ssl"   what any Python HTTPS client imports
  ... + click, http.client         what a click command speaking HTTP/1.1 through the
                             standard library imports before any code of its own (the
                             least the start-up figure can be with dtnkit's parts)
  curl http / https          `curl -s -o FILE URL` (https: ``--cacert`` the test CA)
  dtnkit cp --help           parsing and help, no transfer modules used
  dtnkit cp http / https     `dtnkit cp URL FILE` with its defaults (verified adler32,
                             --streams auto), the destination removed before each run

``--base REF`` adds the dtnkit cases once more with the --base tree (its ``src`` first on
``PYTHONPATH``, the same console script and venv), and a table of this tree / base with the
noise of ``dtnkit cp http``'s A/A rounds.  One warm-up run of each, then --rounds rounds,
interleaved; median, min and max of each case and the median's ratio to `python -c pass`, to
`python -c "import socket, ssl"` (the start-up figure: what any Python HTTPS client imports;
the aim is 1.5 at most) and to curl of the same scheme.  ``--instructions`` also counts the
instructions each Python case executes, once, under valgrind's callgrind
(``PYTHONHASHSEED=0``): a figure load does not change.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.support.xrootd import make_pki

from bench.lib import Bench, Case
from bench.lib.stats import aa

# The installed command, as a user runs it: the venv's console script, by the interpreter
# that runs this bench (make the venv with the distribution's python3, as a site has it).
_SCRIPT = Path(sys.executable).parent / "dtnkit"
DTNKIT = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "dtnkit.cli.main"]
# As installed on a site: bytecode cached (some shells here set PYTHONDONTWRITEBYTECODE).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
SIZE = 1024
#: the start-up figure's denominator: what any Python HTTPS client imports
IMPORTS_CODE = "import socket, ssl"
#: what dtnkit cp's parts import before any code of its own: click and http.client
PARTS_CODE = "import socket, ssl, click, http.client"


def python_c(code: str) -> str:
    """The name of the case that runs ``python -c CODE``, as a user types it."""
    return f'python -c "{code}"' if " " in code else f"python -c {code}"


IMPORTS, PARTS = python_c(IMPORTS_CODE), python_c(PARTS_CODE)


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions under valgrind (one run per case)",
    )


def quick(args: argparse.Namespace) -> None:
    args.rounds = 2  # the A/A noise needs a second round


def run_once(argv: list[str], dst: Path | None, env: dict[str, str]) -> float:
    if dst is not None:
        dst.unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, env=env)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}"
        )
    if dst is not None and dst.stat().st_size != SIZE:
        raise RuntimeError(f"{' '.join(argv)}: {dst} has {dst.stat().st_size} bytes")
    return took


def instructions(argv: list[str], dst: Path | None, env: dict[str, str]) -> float:
    """Millions of instructions *argv* executes (callgrind; threads included, children not)."""
    if dst is not None:
        dst.unlink(missing_ok=True)
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind {' '.join(argv)} failed: {proc.stderr[-500:]}")
    return int(found.group(1)) / 1e6


def serve(b: Bench, root: Path, *tls: str) -> str:
    """A `dtnkit serve` of *root* on a kernel-chosen port; its base URL."""
    proc = b.tracked.add(
        subprocess.Popen(
            [
                *DTNKIT,
                "serve",
                "--root",
                str(root),
                "--port",
                "0",
                "--anonymous-read",
                "--quiet",
                "--format",
                "json",
                *tls,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=ENV,
        )
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once listening
    if not line:
        raise RuntimeError(f"dtnkit serve {' '.join(tls)} did not start")
    return str(json.loads(line)["url"])


def run(b: Bench) -> None:
    if (
        b.args.instructions
        and subprocess.run(["which", "valgrind"], capture_output=True, check=False).returncode
    ):
        raise RuntimeError("--instructions needs valgrind")
    work = b.workdir()
    root, out = work / "root", work / "out"
    root.mkdir()
    out.mkdir()
    (root / "f").write_bytes(os.urandom(SIZE))
    pki = make_pki(work / "pki")
    http = serve(b, root)
    https = serve(b, root, "--cert", str(pki.cert), "--key", str(pki.key))
    ca = str(pki.ca_file)
    Cmd = tuple[list[str], Path | None, dict[str, str]]
    cases: dict[str, Cmd] = {
        **{
            python_c(code): ([sys.executable, "-c", code], None, ENV)
            for code in ("pass", IMPORTS_CODE, PARTS_CODE)
        },
        "curl http": (
            ["curl", "-sS", "-o", str(out / "curl-http"), http + "f"],
            out / "curl-http",
            ENV,
        ),
        "curl https": (
            ["curl", "-sS", "--cacert", ca, "-o", str(out / "curl-https"), https + "f"],
            out / "curl-https",
            ENV,
        ),
    }
    trees = [("", ENV), *([(" (base)", {**ENV, "PYTHONPATH": str(b.base.src)})] if b.base else [])]
    for tag, env in trees:
        cases[f"dtnkit cp --help{tag}"] = ([*DTNKIT, "cp", "--help"], None, env)
        cases[f"dtnkit cp http{tag}"] = (
            [*DTNKIT, "cp", http + "f", str(out / "cp-http")],
            out / "cp-http",
            env,
        )
        cases[f"dtnkit cp https{tag}"] = (
            [*DTNKIT, "cp", "--ca-file", ca, https + "f", str(out / "cp-https")],
            out / "cp-https",
            env,
        )
    for argv, dst, env in cases.values():
        run_once(argv, dst, env)  # warm-up: page cache, bytecode
    watch = b.watch()
    got = b.rounds_of(
        {name: functools.partial(run_once, *c) for name, c in cases.items()},
        twins=["dtnkit cp http"],
        label="start-up",
    )
    b.load_line(watch, "The timed rounds")
    counts = {
        name: instructions(*c)
        for name, c in cases.items()
        if b.args.instructions and not name.startswith("curl")
    }
    med = {name: statistics.median(got.get(name)) for name in cases}
    floor = med[IMPORTS]
    rows = []
    for name in [*cases, aa("dtnkit cp http")]:
        t = got.get(name)
        m = statistics.median(t)
        scheme = "https" if "https" in name else "http"
        row = [
            name,
            f"{m * 1e3:.1f}",
            f"{min(t) * 1e3:.1f}",
            f"{max(t) * 1e3:.1f}",
            f"{m / med['python -c pass']:.2f}",
            f"{m / floor:.2f}",
            f"{m / med['curl ' + scheme]:.1f}" if name.startswith("dtnkit cp h") else "",
        ]
        if counts:
            row += (
                [f"{counts[name]:.0f}", f"{counts[name] / counts[IMPORTS]:.2f}"]
                if name in counts
                else ["", ""]
            )
        rows.append(row)
    b.table(
        [
            "case",
            "median ms",
            "min ms",
            "max ms",
            "x python -c pass",
            "x socket, ssl",
            "x curl",
            *(["M instructions", "instructions x socket, ssl"] if counts else []),
        ],
        rows,
        title=f"`dtnkit cp` start-up, {SIZE} B over loopback, {b.rounds} rounds",
    )
    if b.base:
        rows = []
        for name in ("dtnkit cp --help", "dtnkit cp http", "dtnkit cp https"):
            c = b.compare(got, name, f"{name} (base)", noise_of="dtnkit cp http")
            rows.append([name, c.fmt(), c.rounds.fmt() if c.rounds else "-", c.verdict])
        b.table(
            ["case", "this / base (A/A noise)", "per round [min-max]", "verdict"],
            rows,
            title=f"This tree / --base {b.base.ref}",
        )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=20,
    base="optional",
    tools=("curl", "openssl"),
    quick_help="two rounds",
)
