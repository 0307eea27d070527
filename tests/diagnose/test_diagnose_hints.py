"""`diagnose` and `experiment` judge as told and their next steps keep it: on a lab path of
50 ms with small buffers, `diagnose --rtt 50ms --speed 10gbit` names the buffers and its hint
is the tune command for each end with `--rtt 50ms --speed 10gbit` and that end's `--netns`;
pasted, it sizes the buffers for 50 ms at 10 Gbit/s.  `experiment` keeps the speed and RTT
in its record, so `tune apply --from-experiment ID` judges as the experiment did.
"""

from __future__ import annotations

import json
import shlex
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.conftest import sh, taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]
NEEDS = [t for t in ("iperf3", "ping") if shutil.which(t) is None]
SMALL = "4096 131072 4194304"
TUNED_MAX = 67108864  # 10 Gbit/s x 50 ms = 60 MiB, rounded up to 64 MiB


@pytest.fixture
def small_lab(environment: Environment) -> Iterator[str]:
    """`lab up NAME --rtt 50ms --rate 2gbit`, both ends' buffers at 4 MiB."""
    name = f"hjd{uuid.uuid4().hex[:6]}"
    code = main(
        ["lab", "up", name, "--rtt", "50ms", "--rate", "2gbit", "--format", "json"], environment
    )
    taken(environment.stdout)
    try:
        assert code == 0, taken(environment.stderr)
        for end in ("src", "dst"):
            for key in ("tcp_rmem", "tcp_wmem"):
                sh(
                    "ip",
                    "netns",
                    "exec",
                    f"dkl-{name}-{end}",
                    "sysctl",
                    "-qw",
                    f"net.ipv4.{key}={SMALL}",
                )
        yield name
    finally:
        main(["lab", "down", name, "--format", "json"], environment)
        taken(environment.stdout)


def run_json(env: Environment, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--format", "json"], env)
    out = taken(env.stdout)
    return code, json.loads(out)


def rmem_max(ns: str) -> int:
    return int(sh("ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.tcp_rmem").stdout.split()[2])


@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_diagnose_hint_tunes_each_end_as_judged(small_lab: str, environment: Environment) -> None:
    src, dst = f"dkl-{small_lab}-src", f"dkl-{small_lab}-dst"
    state = str(environment.state_dir)
    code, diag = run_json(
        environment,
        "diagnose",
        "--peer",
        f"{small_lab}/dst",
        "--netns",
        src,
        "--duration",
        "4",
        "--interval",
        "0.5",
        "--rtt",
        "50ms",
        "--speed",
        "10gbit",
        "--state-dir",
        state,
    )
    assert code == 11 and diag["verdict"]["layer"] == "host-network", diag["checks"]
    hint = diag["verdict"]["next"]
    cmds = [part.split("`")[0] for part in hint.split("`dtnkit ")[1:]]
    assert cmds == [
        f"tune apply --group buffers --rtt 50ms --netns {end} --state-dir {state} --speed 10gbit"
        for end in (src, dst)
    ], hint
    for cmd in cmds:  # pasted as printed
        code, out = run_json(environment, *shlex.split(cmd))
        assert code == 0 and out["ok"], out
    assert rmem_max(src) == rmem_max(dst) == TUNED_MAX


@pytest.mark.serial  # its `helped` is a judged rate: beside three other workers it was not
@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_experiment_keeps_its_judging_for_apply(small_lab: str, environment: Environment) -> None:
    src = f"dkl-{small_lab}-src"
    state = str(environment.state_dir)
    code, exp = run_json(
        environment,
        "experiment",
        "--group",
        "buffers",
        "--peer",
        f"{small_lab}/dst",
        "--netns",
        src,
        "--both-ends",
        "--repeat",
        "1",
        "--duration",
        "3",
        "--interval",
        "0.5",
        "--rtt",
        "50ms",
        "--speed",
        "10gbit",
        "--state-dir",
        state,
    )
    assert code == 0, exp
    assert exp["spec"]["rtt_ms"] == 50.0 and exp["spec"]["speed_mbps"] == 10000
    assert rmem_max(src) == 4194304  # restored after its runs
    assert exp["helped"] == ["buffers"], exp["groups"]
    cmd = exp["next"][0]
    assert cmd.startswith(f"dtnkit tune apply --from-experiment {exp['id']} --netns {src}")
    code, plan = run_json(environment, *shlex.split(cmd)[1:], "--dry-run")
    rmem = next(s for s in plan["plan"] if s["key"] == "sysctl/net.ipv4.tcp_rmem")
    assert rmem["after"] == [4096, 131072, TUNED_MAX]  # 10 Gbit/s x 50 ms, as it was tried
