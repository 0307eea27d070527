"""`tune apply --tuned` switches the TuneD profile first and then writes and verifies the rest
on what TuneD left, so TuneD's network-throughput (tcp_rmem/tcp_wmem at 16 MiB) cannot undo
dtnkit's buffers after they were verified; restore switches TuneD back first too.

TuneD is not installed here: the captured tree's replay model switches the profile the way
`tuned-adm profile` does and writes network-throughput's [sysctl] values into the tree
(`dtnkit.host.replay.TUNED_SYSCTLS`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus
from dtnkit.host.replay import TUNED_SYSCTLS

NT = TUNED_SYSCTLS["network-throughput"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    out = json.loads(got.out) if got.out.strip().startswith(("{", "[")) else got.out
    return code, out, got.err


def sysctl(tree: Path, key: str) -> str:
    return (tree / "proc/sys" / key.replace(".", "/")).read_text().strip()


def active(tree: Path) -> str:
    return (tree / "cmd/tuned-adm-active.txt").read_text().splitlines()[-1]


def test_tuned_is_switched_first_and_the_buffers_stay_dtnkits(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    before = {k: sysctl(tree, k) for k in NT}
    code, out, err = run(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "buffers",
        "--group",
        "cpu",
        "--tuned",
        "--format",
        "json",
        *state,
    )
    assert code == ExitStatus.OK, err
    keys = [a["key"] for a in out["applied"]]
    assert keys[0] == "tuned/profile", keys  # TuneD first, then what it left is re-planned
    assert active(tree) == "Current active profile: network-throughput"
    for key, tuned_value in NT.items():
        now = [int(x) for x in sysctl(tree, key).split()]
        assert now[2] > int(tuned_value.split()[2]), (key, now)  # not TuneD's 16 MiB
    code, audit, _err = run(
        capsys, "tune", "audit", "--tree", str(tree), "--group", "buffers", "--format", "json"
    )
    status = {f["key"]: f["status"] for f in audit["findings"]}
    assert status["sysctl/net.ipv4.tcp_rmem"] == "ok"
    assert status["sysctl/net.ipv4.tcp_wmem"] == "ok"

    code, out, err = run(capsys, "tune", "restore", "--tree", str(tree), "--format", "json", *state)
    assert code == ExitStatus.OK, err
    assert active(tree) == "Current active profile: throughput-performance"
    assert {k: sysctl(tree, k) for k in NT} == before


def test_a_failure_after_the_switch_undoes_it_and_puts_the_baseline_back(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {k: sysctl(tree, k) for k in NT}
    # the pacing group's tc commands are not modelled by the replay: that step fails after
    # TuneD was switched and the buffers written
    code, out, err = run(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "buffers",
        "--group",
        "pacing",
        "--group",
        "cpu",
        "--tuned",
        "--format",
        "json",
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert code == ExitStatus.PARTIAL_APPLY, err
    assert out["failed"]["key"].startswith("qdisc/"), out["failed"]
    assert out["rolled_back"][0]["key"] == "tuned/profile"
    assert out["rollback_errors"] == []
    assert active(tree) == "Current active profile: throughput-performance"
    assert {k: sysctl(tree, k) for k in NT} == before  # not TuneD's, not dtnkit's
