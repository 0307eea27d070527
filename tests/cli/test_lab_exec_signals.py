"""`dtnkit lab exec LAB END -- CMD` passes SIGINT, SIGTERM and SIGHUP to CMD and waits for
it, as `ip netns exec` and `sudo` do: CMD cleans up (an interrupted `cp` writes its resume
journal) and its exit status is the command's."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]

# short sleeps in the foreground, not `sleep 30 & wait`: a signal that reaches dash after
# `echo ready` but before it blocks in `wait` ran the trap only when the sleep ended (30 s in
# a loaded CI run); after a foreground sleep the trap runs within 0.1 s either way
TRAP = "trap 'echo cleaned; exit 3' INT TERM HUP; echo ready; while :; do sleep 0.1; done"


def _dtnkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dtnkit", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    name = f"lxs{secrets.token_hex(3)}"
    env = {**os.environ, "DTNKIT_LAB_STATE": str(tmp_path / "lab")}
    up = _dtnkit("lab", "up", name, "--rtt", "2ms", env=env)
    assert up.returncode == 0, up.stderr
    try:
        yield name, env
    finally:
        down = _dtnkit("lab", "down", name, env=env)
        assert down.returncode == 0, down.stderr


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"]
)
def test_a_signal_reaches_the_command_which_exits_as_it_chooses(
    lab: tuple[str, dict[str, str]], signum: signal.Signals
) -> None:
    name, env = lab
    proc = subprocess.Popen(
        [sys.executable, "-m", "dtnkit", "lab", "exec", name, "dst", "--", "sh", "-c", TRAP],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"  # the command runs, its trap is set
        proc.send_signal(signum)  # to dtnkit only, as `kill` or a supervisor would
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out.strip() == "cleaned"
    assert proc.returncode == 3, err
    assert "Traceback" not in err


def test_a_command_killed_by_a_signal_gives_128_plus_its_number(
    lab: tuple[str, dict[str, str]],
) -> None:
    name, env = lab
    run = _dtnkit("lab", "exec", name, "src", "--", "sh", "-c", "kill -KILL $$", env=env)
    assert run.returncode == 128 + signal.SIGKILL, run.stderr
