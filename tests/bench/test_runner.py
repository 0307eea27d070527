"""``python -m bench``: it lists every case with its question, runs one with the options every
case shares, prints one header with the commit and ends with the machine's load, writes the
same into ``--json``, and refuses bad input with one line and nothing created."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.lib import core
from bench.lib.core import Case, case_names, load_case, parser_for, preflight, question
from bench.lib.wan.cells import parse_paths
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]


def bench(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=ROOT,
    )


def test_the_list_names_every_case_file_with_its_question() -> None:
    proc = bench()
    assert proc.returncode == 0
    files = sorted(
        p.stem.replace("_", "-")
        for p in (ROOT / "bench" / "cases").glob("*.py")
        if p.name != "__init__.py"
    )
    assert case_names() == files and len(files) >= 20
    listed = [
        line.split()[0]
        for line in proc.stdout.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    ]
    assert listed == files
    assert all(len(line) <= 80 for line in proc.stdout.splitlines())


@pytest.mark.parametrize("name", case_names())
def test_every_case_declares_a_question_and_its_options(name: str) -> None:
    case, doc = load_case(name)
    assert question(name).endswith("?") and doc.startswith(question(name))
    ap = parser_for(name, case, doc)
    helptext = ap.format_help()
    for shared in ("--rounds", "--quick", "--prefix", "--json", "--order", "--table"):
        assert shared in helptext
    assert ("--base" in helptext) == (case.base != "none")
    args = ap.parse_args(["--base", "main"] if case.base == "required" else [])
    if case.quick is not None:
        case.quick(args)  # the smallest form is a valid one
    assert case.check(args) is None


def test_a_run_prints_the_commit_and_the_load_and_writes_them_as_json(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = bench(
        "checksum",
        "--rounds",
        "1",
        "--size-mib",
        "2",
        "--fallback-mib",
        "1",
        "--table",
        "text",
        "--json",
        str(out),
        "--prefix",
        "hbtest",
    )
    assert proc.returncode == 0, proc.stderr
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"commit {sha[:10]}" in proc.stdout
    last = " ".join(proc.stdout.strip().split("\n\n")[-1].split())  # a wrapped paragraph
    assert last.startswith("_The run took") and "other processes used" in last
    assert all(len(line) <= 80 for line in proc.stdout.splitlines())
    doc = json.loads(out.read_text())
    assert doc["schema"] == "dtnkit.bench/1" and doc["case"] == "checksum"
    assert doc["commit"]["sha"] == sha and doc["base"] is None and doc["exit"] == 0
    assert set(doc["load"]) == {"seconds", "other_cpu_percent", "cpus", "loadavg_end"}
    assert 0 <= doc["load"]["other_cpu_percent"] <= 100 and doc["loadavg_start"] >= 0
    # the header is wrapped at 80 columns, where its command's temporary path puts the breaks
    assert "load average at the start" in " ".join(proc.stdout.split("\n\n")[0].split())
    assert doc["tables"][0]["head"][0] == "MB/s (x memcpy)" and doc["tables"][0]["rows"]


@pytest.mark.parametrize(
    "argv",
    [
        ["nosuch"],
        ["checksum", "--rounds", "0"],
        ["checksum", "--prefix", "Bad;rm -rf"],
        ["checksum", "--json", "/nonexistent/dir/r.json"],
        ["checksum", "--table", "html"],
        ["ab"],  # an A/B case without --base
        ["wan", "--sizes", "0"],
        ["wan", "--paths", "50ms/1gbit@70000"],
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(argv: list[str], tmp_path: Path) -> None:
    before = set(Path("/dev/shm").glob("dtnkit-bench-*")) | set(Path("/tmp").glob("dtnkit-bench-*"))
    proc = bench(*argv, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error:" in proc.stderr.splitlines()[-1]
    assert proc.stdout == ""
    after = set(Path("/dev/shm").glob("dtnkit-bench-*")) | set(Path("/tmp").glob("dtnkit-bench-*"))
    assert after <= before


def test_a_case_that_cannot_run_here_says_why() -> None:
    case = Case(run=lambda b: None, tools=("dtnkit-no-such-tool",), needs_root=True)
    reasons = preflight(case)
    assert "missing dtnkit-no-such-tool" in reasons


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_paths_parse_or_refuse_with_one_message(text: str) -> None:
    try:
        paths = parse_paths(text)
    except argparse.ArgumentTypeError as exc:
        assert str(exc)
    else:
        assert paths and all(576 <= p.mtu <= 65535 and p.rate_bps > 0 for p in paths)


def test_the_options_are_declared_once() -> None:
    """No case file builds a parser of its own: the shared options live in bench/lib."""
    for path in (ROOT / "bench" / "cases").glob("*.py"):
        source = path.read_text()
        assert "ArgumentParser(" not in source, path
        for shared in ("--rounds", "--repeat", "--prefix", "--json", "--base", "--quick"):
            assert f'add_argument("{shared}"' not in source, (path, shared)
    assert core.parser_for.__module__ == "bench.lib.core"
