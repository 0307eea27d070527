"""The `next:` hint of `tune audit` carries the scope (--netns, --tree) and the judging flags
given (--profile, --rtt, --speed, --iface, and the --group): pasted, it plans for the host the
audit looked at, judged as the audit judged, and its plan holds what the audit found to
differ.  Before, it was `dtnkit tune apply --dry-run`: the live host's root namespace at
100 ms."""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import HOSTS, Netns, taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus


def next_hint(env: Environment, argv: list[str]) -> str:
    wide = dataclasses.replace(env, terminal_width=1000)  # the hint on one line
    assert main(argv, wide) == ExitStatus.DRIFT
    table = taken(env.stdout)
    lines = [line for line in table.splitlines() if line.startswith("next: `")]
    assert len(lines) == 1, table
    return lines[0].split("`")[1]


def json_run(env: Environment, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--format", "json"], env)
    return code, json.loads(taken(env.stdout))


def planned_as_audited(env: Environment, audit_argv: list[str], hint: str) -> None:
    """The hint, pasted, plans every item the audit found to differ (apply: auto)."""
    code, audit = json_run(env, *audit_argv)
    differing = {f["key"] for f in audit["findings"]
                 if f["status"] == "differs" and f["apply"] == "auto"}
    words = shlex.split(hint)
    assert words[:4] == ["dtnkit", "tune", "apply", "--dry-run"]
    code, plan = json_run(env, *words[1:])
    assert code == ExitStatus.OK, plan
    assert differing and {s["key"] for s in plan["plan"]} == differing


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
def test_netns_audit_hint_keeps_the_namespace_and_the_judging(
        netns: Netns, environment: Environment) -> None:
    argv = ["tune", "audit", "--netns", netns.name, "--profile", "measurement", "--rtt", "50ms",
            "--speed", "10gbit"]
    hint = next_hint(environment, argv)
    assert hint == (f"dtnkit tune apply --dry-run --netns {netns.name} --profile measurement "
                    "--rtt 50ms --speed 10gbit")
    planned_as_audited(environment, argv, hint)


def test_tree_audit_hint_keeps_the_tree_groups_and_interfaces(
        tmp_path: Path, environment: Environment) -> None:
    tree = tmp_path / "dtn b"  # a blank in the path: the hint is quoted for a shell
    shutil.copytree(HOSTS / "dtn-b", tree, symlinks=True)
    argv = ["tune", "audit", "--tree", str(tree), "--group", "buffers,backlog", "--rtt", "20ms",
            "--iface", "enp1s0"]
    hint = next_hint(environment, argv)
    assert hint == (f"dtnkit tune apply --dry-run --tree '{tree}' --rtt 20ms --iface enp1s0 "
                    "--group buffers,backlog")
    planned_as_audited(environment, argv, hint)
