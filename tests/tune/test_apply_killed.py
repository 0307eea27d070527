"""An apply killed with SIGKILL half-way, then run again: the baseline of record (`last`) stays
the one taken before the killed apply's first write, so `tune restore` gives back the state
from before both; the second run's snapshot of the half-tuned host is kept and `tune list`
marks both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import Netns
from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns, pytest.mark.needs_ethtool]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    out = json.loads(got.out) if got.out.strip().startswith(("{", "[")) else got.out
    return code, out, got.err


def blocking_ethtool(bin_dir: Path, fifo: Path) -> None:
    """An `ethtool` first on PATH: a change (`-K`) says so on ``fifo`` and then hangs, so the
    apply can be killed right there; every read runs the real ethtool."""
    bin_dir.mkdir()
    os.mkfifo(fifo)
    script = bin_dir / "ethtool"
    script.write_text(f"""#!/bin/sh
if [ "$1" = "-K" ]; then
    echo "changing $*" > {fifo}
    exec sleep 600
fi
exec /usr/sbin/ethtool "$@"
""")
    script.chmod(0o755)


def test_apply_killed_half_way_then_run_again_restores_to_the_first_baseline(
    netns: Netns, state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    netns.set_sysctl("net.ipv4.tcp_rmem", "4096 99999 7777777")
    netns.run("ip", "link", "set", "dkv0", "txqueuelen", "777")
    netns.run("ethtool", "-K", "dkv1", "gro", "off")  # apply's offload step will turn it on
    before = netns.state()

    fifo = tmp_path / "changing"
    blocking_ethtool(tmp_path / "bin", fifo)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "tune",
            "apply",
            "--netns",
            netns.name,
            "--state-dir",
            str(state_dir),
            "--format",
            "json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        with open(fifo) as fh:  # blocks until the apply runs its first ethtool -K
            assert fh.readline().startswith("changing -K ")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # dtnkit, its namespace helper, the hung ethtool
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    half = netns.state()
    assert half != before  # the sysctls and txqueuelen were written, gro not
    assert netns.sysctl("net.ipv4.tcp_rmem") != "4096\t99999\t7777777"

    code, rows, _err = run(
        capsys, "tune", "list", "--state-dir", str(state_dir), "--format", "json"
    )
    [first] = rows
    assert first["last_baseline"] is True
    assert first["incomplete"] and "did not finish" in first["incomplete"]

    # run again: it finishes the job; its own snapshot is of the half-tuned namespace
    code, out, err = run(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    assert out["baseline"] == first["id"]  # the baseline of record, and what undo restores
    assert out["half_tuned_snapshot"] and out["half_tuned_snapshot"] != first["id"]
    assert first["id"] in out["undo"]

    code, rows, _err = run(
        capsys, "tune", "list", "--state-dir", str(state_dir), "--format", "json"
    )
    by_id = {r["id"]: r for r in rows}
    assert by_id[first["id"]]["last_baseline"] is True
    assert by_id[first["id"]]["incomplete"] is None  # the second run finished the job
    second = by_id[out["half_tuned_snapshot"]]
    assert second["last_baseline"] is False
    assert second["incomplete"].startswith("half-tuned")

    code, text, _err = run(capsys, "tune", "list", "--state-dir", str(state_dir))
    assert "(half-tuned)" in text

    code, out, err = run(
        capsys,
        "tune",
        "restore",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    assert out["snapshot"] == first["id"]
    assert netns.state() == before
