"""A plan says what it cannot decide: `tune apply --dry-run` (and apply) on a host whose data
interface reports no link speed lists the items it leaves out and why, with the command that
decides them, and exits 16 (UNDECIDED), never 0 ("nothing left").

The host is a real network namespace whose default route goes through a bridge with no
ports: the kernel reports its speed as unknown (-1), as a VM NIC or a port without carrier
does.  A captured tree with a NIC that reports no speed (dtn-b's ens2) is the other case.
"""

from __future__ import annotations

import json
import shlex
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import sh, taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
BUFFERS = {"sysctl/net.ipv4.tcp_rmem", "sysctl/net.ipv4.tcp_wmem"}


@pytest.fixture
def slowless() -> Iterator[str]:
    """A namespace whose only data interface, a bridge without ports carrying the default
    route, reports no link speed."""
    name = f"hjud{uuid.uuid4().hex[:8]}"
    try:
        sh("ip", "netns", "add", name)
        for argv in (
            ["link", "add", "udbr0", "type", "bridge"],
            ["link", "set", "udbr0", "up"],
            ["link", "set", "lo", "up"],
            ["addr", "add", "192.0.2.1/24", "dev", "udbr0"],
            ["route", "add", "default", "via", "192.0.2.2"],
        ):
            sh("ip", "-n", name, *argv)
        yield name
    finally:
        sh("ip", "netns", "del", name, check=False)


def sysctls(ns: str) -> str:
    return sh(
        "ip",
        "netns",
        "exec",
        ns,
        "sh",
        "-c",
        "grep -r . /proc/sys/net/ipv4 /proc/sys/net/core 2>/dev/null | "
        "grep -v -e tcp_fastopen_key -e /neigh/ | sort",
        check=False,
    ).stdout


def json_run(env: Environment, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--format", "json"], env)
    out = taken(env.stdout)
    return code, json.loads(out)


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
def test_dry_run_lists_what_it_cannot_decide(slowless: str, environment: Environment) -> None:
    speed = sh("ip", "netns", "exec", slowless, "cat", "/sys/class/net/udbr0/speed").stdout
    assert speed.strip() == "-1"  # what the journey needs: a link that reports no speed
    before = sysctls(slowless)
    # the audit calls the buffers unknown ...
    code, audit = json_run(environment, "tune", "audit", "--netns", slowless)
    assert code == ExitStatus.DRIFT
    unknown = {f["key"] for f in audit["findings"] if f["status"] == "unknown"}
    assert unknown >= BUFFERS
    # ... and the plan says so, for each of them, with why and what decides it
    code, plan = json_run(environment, "tune", "apply", "--dry-run", "--netns", slowless)
    assert code == ExitStatus.UNDECIDED == 16
    assert {u["key"] for u in plan["undecided"]} == unknown
    for u in plan["undecided"]:
        assert "link speed unknown" in u["why"] and u["give"] == "--speed", u
    assert not BUFFERS & {s["key"] for s in plan["plan"]}
    assert plan["decide"] == f"dtnkit tune apply --dry-run --netns {slowless} --speed SPEED"

    # for people: the plan, then every undecided item and the command that decides them
    assert main(["tune", "apply", "--dry-run", "--netns", slowless], environment) == 16
    table = taken(environment.stdout)
    assert f"not decided ({len(unknown)} items, in no plan):" in table
    assert "net.ipv4.tcp_rmem" in table and "link speed unknown" in table
    decide = table.split("to decide them: `")[1].split("`")[0]
    assert decide == plan["decide"]
    assert sysctls(slowless) == before  # a dry run writes nothing

    # the command it prints, pasted with the speed filled in, decides them: nothing left out
    argv = shlex.split(decide.replace("SPEED", "10gbit"))[1:]
    code, decided = json_run(environment, *argv)
    assert code == ExitStatus.OK, decided
    assert decided["undecided"] == [] and decided["decide"] is None
    assert {s["key"] for s in decided["plan"]} >= BUFFERS
    assert sysctls(slowless) == before


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
def test_apply_says_what_it_left_undecided(slowless: str, environment: Environment) -> None:
    code, out = json_run(environment, "tune", "apply", "--netns", slowless)
    assert code == ExitStatus.UNDECIDED, out
    assert out["ok"] is True and out["baseline"]
    assert {u["key"] for u in out["undecided"]} >= BUFFERS
    assert not BUFFERS & {a["key"] for a in out["applied"]}
    # run again: nothing it can decide differs, and still it does not say "nothing left"
    assert main(["tune", "apply", "--netns", slowless], environment) == ExitStatus.UNDECIDED
    table = taken(environment.stdout)
    assert "nothing dtnkit can decide differs" in table
    assert "net.ipv4.tcp_rmem" in table and f"--netns {slowless} --speed SPEED" in table


def test_tree_plan_names_the_undecided_and_the_tree(
    tmp_path: Path, environment: Environment
) -> None:
    tree = tmp_path / "dtn-b"
    shutil.copytree(HOSTS / "dtn-b", tree, symlinks=True)
    # ens2 reports no speed: its pacing qdisc and the buffers sized by it are undecided
    code, plan = json_run(
        environment,
        "tune",
        "apply",
        "--dry-run",
        "--tree",
        str(tree),
        "--iface",
        "ens2",
        "--rtt",
        "50ms",
    )
    assert code == ExitStatus.UNDECIDED
    keys = {u["key"] for u in plan["undecided"]}
    assert "qdisc/ens2/root" in keys and keys >= BUFFERS
    assert plan["decide"] == (
        f"dtnkit tune apply --dry-run --tree {tree} --rtt 50ms --iface ens2 --speed SPEED"
    )
    code, plan = json_run(
        environment,
        "tune",
        "apply",
        "--dry-run",
        "--tree",
        str(tree),
        "--iface",
        "ens2",
        "--rtt",
        "50ms",
        "--speed",
        "25gbit",
    )
    assert code == ExitStatus.OK and plan["undecided"] == []
