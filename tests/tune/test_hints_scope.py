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

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import HOSTS, Netns, taken

from dtnkit.cli.judging_options import judging_options
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.tune.judging import Judging


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
    differing = {
        f["key"] for f in audit["findings"] if f["status"] == "differs" and f["apply"] == "auto"
    }
    words = shlex.split(hint)
    assert words[:4] == ["dtnkit", "tune", "apply", "--dry-run"]
    code, plan = json_run(env, *words[1:])
    assert code == ExitStatus.OK, plan
    assert differing and {s["key"] for s in plan["plan"]} == differing


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
def test_netns_audit_hint_keeps_the_namespace_and_the_judging(
    netns: Netns, environment: Environment
) -> None:
    argv = [
        "tune",
        "audit",
        "--netns",
        netns.name,
        "--profile",
        "measurement",
        "--rtt",
        "50ms",
        "--speed",
        "10gbit",
    ]
    hint = next_hint(environment, argv)
    assert hint == (
        f"dtnkit tune apply --dry-run --netns {netns.name} --profile measurement "
        "--rtt 50ms --speed 10gbit"
    )
    planned_as_audited(environment, argv, hint)


def test_tree_audit_hint_keeps_the_tree_groups_and_interfaces(
    tmp_path: Path, environment: Environment
) -> None:
    tree = tmp_path / "dtn b"  # a blank in the path: the hint is quoted for a shell
    shutil.copytree(HOSTS / "dtn-b", tree, symlinks=True)
    argv = [
        "tune",
        "audit",
        "--tree",
        str(tree),
        "--group",
        "buffers,backlog",
        "--rtt",
        "20ms",
        "--iface",
        "enp1s0",
    ]
    hint = next_hint(environment, argv)
    assert hint == (
        f"dtnkit tune apply --dry-run --tree '{tree}' --rtt 20ms --iface enp1s0 "
        "--group buffers,backlog"
    )
    planned_as_audited(environment, argv, hint)


# ---- the hint's flags read back as the same judging ----------------------------------------


def _read_back(argv: list[str]) -> Judging:
    """The judging a command line gives, through the same options every command declares."""
    got: list[Judging] = []

    @click.command()
    @judging_options(iface=True, exact=True, netns=True, tree=True)
    def probe(judging: Judging) -> None:
        got.append(judging)

    probe.main(argv, standalone_mode=False)
    return got[0]


names = st.text(
    st.characters(codec="utf-8", exclude_characters="\x00/"), min_size=1, max_size=20
).filter(lambda t: t not in (".", ".."))


@settings(max_examples=300, deadline=None)
@given(
    profile=st.one_of(st.just("dtn"), st.just("measurement"), names),
    dirs=st.lists(names.map(lambda n: Path("/etc") / n), max_size=2),
    rtt=st.sampled_from([0.5, 1.0, 20.0, 50.0, 100.0, 150.0, 2500.0]),
    speed=st.one_of(st.none(), st.sampled_from([10, 100, 2500, 10_000, 25_000, 400_000])),
    ifaces=st.lists(st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True), max_size=3),
    exact=st.booleans(),
    where=st.one_of(
        st.none(),
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True).map(
            lambda n: ("netns", n)
        ),
        names.map(lambda n: ("tree", n)),
    ),
)
def test_a_hint_pasted_judges_as_the_run_did(
    profile: str,
    dirs: list[Path],
    rtt: float,
    speed: int | None,
    ifaces: list[str],
    exact: bool,
    where: tuple[str, str] | None,
) -> None:
    judging = Judging(
        profile=profile,
        profile_dirs=tuple(dirs),
        rtt_ms=rtt,
        speed_mbps=speed,
        ifaces=tuple(ifaces),
        exact=exact,
        netns=where[1] if where and where[0] == "netns" else None,
        tree=Path("/srv", where[1]) if where and where[0] == "tree" else None,
    )
    words = shlex.split(judging.command("tune", "apply", "--dry-run"))
    assert words[:4] == ["dtnkit", "tune", "apply", "--dry-run"]
    assert _read_back(words[4:]) == judging
    if judging.netns:
        assert shlex.split(judging.shell("sysctl -w a.b=1"))[:4] == [
            "ip",
            "netns",
            "exec",
            judging.netns,
        ]
