"""dev/test.sh runs the suite on pytest-xdist workers (`-n N --dist loadgroup`): the tests that
share a module-scoped fixture of the suite's own run on one worker, which makes the fixture
once (tests/conftest.py), and the other tests go to any worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
INNER = """
import os
import pytest

@pytest.fixture(scope="module")
def shared():
    with open(os.environ["GROUPS_LOG"], "a") as f:
        f.write("made " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return 1

@pytest.mark.parametrize("i", range(8))
def test_shares(shared, i):
    with open(os.environ["GROUPS_LOG"], "a") as f:
        f.write("shares " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("i", range(8))
def test_alone(i):
    with open(os.environ["GROUPS_LOG"], "a") as f:
        f.write("alone " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_tests_sharing_a_module_fixture_run_on_one_worker_which_makes_it_once(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_inner_groups.py").write_text(INNER)
    log = tmp_path / "log"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(tmp_path / "test_inner_groups.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GROUPS_LOG": str(log), "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line.split() for line in log.read_text().splitlines()]
    made = [w for what, w in lines if what == "made"]
    sharing = {w for what, w in lines if what == "shares"}
    assert len(made) == 1, f"the module fixture was made on {made}"
    assert sharing == set(made), (sharing, made)
    assert sum(what == "shares" for what, _ in lines) == 8
    assert sum(what == "alone" for what, _ in lines) == 8
