"""`dtnkit fleet campaign gate|judge|server`: the steps of a fleet campaign the dtn.dtnkit
modules run through the CLI (src/dtnkit/diagnose/campaign.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Netns, taken

from dtnkit.cli.main import main
from dtnkit.diagnose.experiment import judge
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

DTNKIT = str(Path(sys.executable).with_name("dtnkit"))


def run(env: Environment, *argv: str) -> tuple[int, Any]:
    status = main(["fleet", "campaign", *argv, "--format", "json"], env)
    out = taken(env.stdout)
    return int(status), json.loads(out)


@pytest.mark.parametrize(
    ("base", "applied"),
    [([5e9, 5.1e9], [7e9]), ([5e9, 6e9], [5.4e9, 5.6e9]), ([5e9], [4e9]), ([0.0], [1e9])],
)
def test_judge_is_the_experiments_rule(
    environment: Environment, base: list[float], applied: list[float]
) -> None:
    argv = ["judge", "--group", "buffers"]
    for v in base:
        argv += ["--baseline", repr(v)]
    for v in applied:
        argv += ["--applied", repr(v)]
    status, doc = run(environment, *argv)
    assert status == 0
    assert (doc["verdict"], doc["ratio"], doc["margin"]) == judge(base, applied)
    assert doc["baseline_bps"] == base and doc["applied_bps"] == applied


def test_the_gate_keeps_a_group_off_a_pair_without_headroom(environment: Environment) -> None:
    # 9.6 of the slower 10 Gbit/s: 4 % left, inside the 5 % margin
    status, full = run(
        environment,
        "gate",
        "--group",
        "buffers",
        "--baseline",
        "9.6e9",
        "--nic-speed",
        "25gbit",
        "--nic-speed",
        "10gbit",
    )
    assert status == 0 and full["gated"] is True and full["nic_bps"] == 10e9
    assert full["headroom"] == pytest.approx(0.04) and full["margin"] == 0.05
    # the same baseline with a 30 % spread: the margin is the spread, still inside
    _, noisy = run(
        environment,
        "gate",
        "--group",
        "buffers",
        "--baseline",
        "5e9",
        "--baseline",
        "6.5e9",
        "--nic-speed",
        "7gbit",
    )
    assert noisy["gated"] is True and noisy["margin"] == pytest.approx(1.5 / 5.75)
    _, room = run(
        environment, "gate", "--group", "buffers", "--baseline", "5e9", "--nic-speed", "10gbit"
    )
    assert room["gated"] is False and room["headroom"] == pytest.approx(0.5)
    _, unknown = run(environment, "gate", "--group", "buffers", "--baseline", "9.9e9")
    assert unknown["gated"] is False and "unknown" in unknown["why"]
    _, measured = run(
        environment,
        "gate",
        "--group",
        "buffers",
        "--baseline",
        "1e9",
        "--nic-speed",
        "100gbit",
        "--measured-harmful",
    )
    assert measured["gated"] is True and "measured harmful" in measured["why"]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (
            ["judge", "--group", "buffers", "--baseline", "nan", "--applied", "1e9"],
            "bad --baseline value nan",
        ),
        (
            ["judge", "--group", "buffers", "--baseline", "1e9", "--applied", "inf"],
            "bad --applied value inf",
        ),
        (["judge", "--group", "buffers", "--baseline", "1e9"], "a verdict needs both runs"),
        (["gate", "--group", "buffers,congestion", "--baseline", "1e9"], "one group at a time"),
        (["gate", "--group", "nosuch", "--baseline", "1e9"], "unknown group nosuch"),
        (["gate", "--group", "buffers", "--baseline", "1e9", "--nic-speed", "-3gbit"], "speed"),
        (["server", "start", "--port", "70000", "--bind", "127.0.0.1"], "bad port 70000"),
    ],
)
def test_hostile_input_is_one_error_line(
    environment: Environment, argv: list[str], why: str
) -> None:
    status = main(["fleet", "campaign", *argv], environment)
    err = taken(environment.stderr)
    assert status == ExitStatus.BAD_INPUT, err
    assert err.startswith("dtnkit: error: ") and err.count("\n") == 1 and why in err, err
    assert taken(environment.stdout) == ""
    assert not environment.state_dir.exists()


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_server_start_reuse_and_stop_by_pid_file(tmp_path: Path) -> None:
    ns = Netns("ans")
    ns.create()
    state = tmp_path / "state"

    def campaign(*argv: str) -> dict[str, Any]:
        proc = ns.run(
            "env",
            "DTNKIT_TOKEN=ans-campaign-token",
            DTNKIT,
            "fleet",
            "campaign",
            "server",
            *argv,
            "--state-dir",
            str(state),
            "--format",
            "json",
        )
        doc: dict[str, Any] = json.loads(proc.stdout)
        return doc

    try:
        ns.run("ip", "link", "set", "lo", "up")
        up = campaign("start", "--port", "0", "--bind", "127.0.0.1")  # a free port
        port, pid = up["port"], up["pid"]
        assert up["started"] is True and port > 0
        assert Path(up["pid_file"]).read_text().strip() == str(pid)
        assert f"0100007F:{port:04X} " in ns.run("cat", "/proc/net/tcp").stdout
        again = campaign("start", "--port", str(port), "--bind", "127.0.0.1")
        assert again == {**up, "started": False}
        down = campaign("stop", "--port", str(port))
        assert down["stopped"] is True and down["pid"] == pid
        assert not Path(up["pid_file"]).exists()
        assert campaign("stop", "--port", str(port))["stopped"] is False
    finally:
        ns.delete()


def test_stop_never_kills_a_pid_that_is_not_iperf3(tmp_path: Path) -> None:
    """A stale PID file whose PID is now another process: that process lives on."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        pid_file = tmp_path / "servers" / "iperf3-5999.pid"
        pid_file.parent.mkdir()
        pid_file.write_text(f"{other.pid}\n")
        proc = subprocess.run(
            [
                DTNKIT,
                "fleet",
                "campaign",
                "server",
                "stop",
                "--port",
                "5999",
                "--state-dir",
                str(tmp_path),
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(proc.stdout)["stopped"] is False
        assert other.poll() is None and not pid_file.exists()
        os.kill(other.pid, 0)  # still there
    finally:
        other.kill()
        other.wait()
