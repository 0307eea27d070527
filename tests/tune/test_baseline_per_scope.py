"""The last baseline is kept per scope (host, each netns, each tree): the lab's two ends are
applied and restored one after the other, as the README walks through them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
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


@pytest.fixture
def ends() -> Iterator[tuple[Netns, Netns]]:
    with Netns(prefix="dkts") as src, Netns(prefix="dktd") as dst:
        yield src, dst


def _apply_both(
    capsys: pytest.CaptureFixture[str], ends: tuple[Netns, Netns], state: str
) -> dict[str, str]:
    baselines = {}
    for ns in ends:
        code, out, err = run(
            capsys, "tune", "apply", "--netns", ns.name, "--state-dir", state, "--format", "json"
        )
        assert code == ExitStatus.OK, (out, err)
        assert out["baseline"]
        baselines[ns.name] = out["baseline"]
    return baselines


def test_both_lab_ends_restore_each_to_its_own_baseline(
    ends: tuple[Netns, Netns], state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = ends
    src.set_sysctl("net.ipv4.tcp_rmem", "4096 99999 7777777")
    dst.set_sysctl("net.ipv4.tcp_rmem", "4096 88888 6666666")
    before = {ns.name: ns.state() for ns in ends}
    _apply_both(capsys, ends, str(state_dir))
    assert src.sysctl("net.ipv4.tcp_rmem") != "4096\t99999\t7777777"
    # the source end first, though the destination was applied last
    for ns in (src, dst):
        code, out, err = run(
            capsys, "tune", "restore", "--netns", ns.name, "--state-dir", str(state_dir)
        )
        assert code == ExitStatus.OK, (out, err)
        assert ns.state() == before[ns.name]
    assert src.sysctl("net.ipv4.tcp_rmem") == "4096\t99999\t7777777"
    assert dst.sysctl("net.ipv4.tcp_rmem") == "4096\t88888\t6666666"


def test_list_at_80_columns_shows_each_snapshots_scope(
    ends: tuple[Netns, Netns],
    state_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    baselines = _apply_both(capsys, ends, str(state_dir))
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _err = run(capsys, "tune", "list", "--state-dir", str(state_dir))
    assert code == ExitStatus.OK
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    starts = [i for i, line in enumerate(lines) if line[:1].isdigit()]
    for name, snap_id in baselines.items():
        at = next(i for i in starts if lines[i].split()[0] == snap_id)
        assert f"netns {name}" in lines[at], out  # the scope whole, on the id's line
        rest = " ".join(lines[at : min([i for i in starts if i > at] + [len(lines)])])
        # each end's baseline is its own scope's last (the cell may wrap)
        assert "(last" in rest and "baseline)" in rest, out
    code, rows, _err = run(
        capsys, "tune", "list", "--state-dir", str(state_dir), "--format", "json"
    )
    assert {r["id"]: (r["scope"], r["last_baseline"]) for r in rows} == {
        snap_id: (f"netns {name}", True) for name, snap_id in baselines.items()
    }


def test_diff_of_a_namespace_snapshot_from_the_root_says_where_it_was_taken(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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
    assert code == ExitStatus.OK, (out, err)
    code, out, err = run(capsys, "tune", "diff", out["baseline"], "--state-dir", str(state_dir))
    assert code == ExitStatus.BAD_INPUT
    assert out == ""  # no false differences
    assert err.count("dtnkit: error:") == 1, err
    assert f"taken in netns {netns.name}" in err
    assert f"--netns {netns.name}" in err
    assert "Traceback" not in err
    # with the matching --netns it compares (the namespace still holds the applied values)
    code, out, err = run(
        capsys,
        "tune",
        "diff",
        "last",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--format",
        "json",
    )
    assert code in (ExitStatus.OK, ExitStatus.DRIFT), err
    assert out["b"] == f"netns {netns.name}"


def test_apply_under_ip_netns_exec_is_kept_as_that_namespaces(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = netns.state()
    done = netns.run(
        sys.executable,
        "-m",
        "dtnkit",
        "tune",
        "apply",
        "--state-dir",
        str(state_dir),
        "--format",
        "json",
        check=False,
    )
    assert done.returncode == ExitStatus.OK, done.stderr
    out = json.loads(done.stdout)
    assert f"--netns {netns.name}" in out["undo"]  # the undo line carries the scope
    # the root namespace refuses it (dry run: the old code would have tuned the root)
    code, _out, err = run(
        capsys, "tune", "restore", out["baseline"], "--dry-run", "--state-dir", str(state_dir)
    )
    assert code == ExitStatus.BAD_INPUT
    assert f"taken in netns {netns.name}" in err and "Traceback" not in err
    # under `ip netns exec` again, plain `restore` finds the namespace's last baseline (the
    # fleet's wrapper runs it so), as `--netns NS` from the root does
    back = netns.run(
        sys.executable,
        "-m",
        "dtnkit",
        "tune",
        "restore",
        "--dry-run",
        "--state-dir",
        str(state_dir),
        check=False,
    )
    assert back.returncode == ExitStatus.OK, back.stderr
    code, _out, err = run(
        capsys, "tune", "restore", "--netns", netns.name, "--state-dir", str(state_dir)
    )
    assert code == ExitStatus.OK, err
    assert netns.state() == before
