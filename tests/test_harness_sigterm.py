"""A test run ended by SIGTERM (a CI time limit, `timeout`, `kill`) still tears down: the
namespace a running test made is removed, as after Ctrl-C (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tests.support import polling

ROOT = Path(__file__).parents[1]
INNER = """
import os, signal, subprocess

def test_holds_a_namespace():
    name = os.environ["S20T_NS"]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        print("READY", flush=True)
        signal.pause()
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
"""

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]


def test_sigterm_runs_the_running_tests_teardown(tmp_path: Path) -> None:
    (tmp_path / "test_inner_run.py").write_text(INNER)
    name = f"sigt{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(tmp_path / "test_inner_run.py"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "S20T_NS": name, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "READY" in line:
                break
        assert Path(f"/run/netns/{name}").exists(), "".join(lines)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0]
        left = Path(f"/run/netns/{name}").exists()  # before this test's own clean-up below
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in rest or "signal 15" in rest, rest[-2000:]
    assert not left, "the inner test's finally did not run: its namespace is left"


INNER_PARALLEL = """
import os, signal, subprocess
import pytest

@pytest.mark.parametrize("i", [0, 1])
def test_holds_a_namespace(i):
    name = os.environ["S20T_NS"] + str(i)
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        signal.pause()
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
"""


def test_sigterm_to_an_xdist_run_tears_down_every_workers_test(tmp_path: Path) -> None:
    """dev/test.sh runs most of the suite on pytest-xdist workers: SIGTERM to the run (the
    controller) still removes what the test running on each worker made (xdist stops its
    workers, and each stops as at Ctrl-C)."""
    (tmp_path / "test_inner_run.py").write_text(INNER_PARALLEL)
    name = f"sigx{uuid.uuid4().hex[:8]}"
    made = [Path(f"/run/netns/{name}{i}") for i in (0, 1)]
    proc = subprocess.Popen(
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
            "2",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(tmp_path / "test_inner_run.py"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "S20T_NS": name, "PYTHONPATH": str(ROOT)},
    )
    try:
        polling.until("both workers' namespaces", lambda: all(p.exists() for p in made), 120)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=90)[0]
        left = [p.name for p in made if p.exists()]  # before this test's own clean-up below
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in made:
            subprocess.run(["ip", "netns", "del", p.name], capture_output=True, check=False)
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in rest or "signal 15" in rest, rest[-2000:]
    assert not left, f"a worker's test did not tear down: {left} left\n{rest[-2000:]}"
