"""A restore whose snapshot names interfaces that were renamed or removed since puts back
everything else, names every setting it could not put back, and exits 3 (not 0).  A snapshot
that holds no settings is refused (exit 9), not restored as a silent no-op."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import Netns
from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    out = json.loads(got.out) if got.out.strip().startswith(("{", "[")) else got.out
    return code, out, got.err


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
def test_a_renamed_and_a_removed_interface_are_named_and_restore_exits_3(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    netns.run("ip", "link", "add", "dkx0", "type", "veth", "peer", "name", "dkx1")
    for dev in ("dkv0", "dkv1", "dkx0"):
        netns.run("ip", "link", "set", dev, "txqueuelen", "777")
    netns.set_sysctl("net.ipv4.tcp_rmem", "4096 99999 7777777")
    state = ["--netns", netns.name, "--state-dir", str(state_dir)]
    code, out, err = run(capsys, "tune", "apply", *state, "--format", "json")
    assert code == ExitStatus.OK, err
    applied = {a["key"] for a in out["applied"]}
    assert {"link/dkv1/txqueuelen", "link/dkx0/txqueuelen"} <= applied
    # dkv1 renamed, the dkx pair removed
    netns.run("ip", "link", "set", "dkv1", "down")
    netns.run("ip", "link", "set", "dkv1", "name", "dkv9")
    netns.run("ip", "link", "del", "dkx0")

    code, plan, err = run(capsys, "tune", "restore", "--dry-run", *state, "--format", "json")
    assert code == ExitStatus.OK, err
    named = {line.split(":")[0] for line in plan["not_restored"]}
    assert {"link/dkv1/txqueuelen", "link/dkx0/txqueuelen"} <= named

    code, out, err = run(capsys, "tune", "restore", *state, "--format", "json")
    assert code == ExitStatus.DRIFT, err
    assert out["ok"] is True  # everything that is there was put back
    lines = out["not_restored"]
    assert {line.split(":")[0] for line in lines} == named
    assert all(
        k.startswith(
            (
                "link/dkv1/",
                "link/dkx0/",
                "link/dkx1/",
                "feature/dkv1/",
                "feature/dkx0/",
                "feature/dkx1/",
                "ring/dkv1/",
                "ring/dkx0/",
                "qdisc/dkv1/",
                "qdisc/dkx0/",
                "coalesce/",
                "pause/",
            )
        )
        for k in named
    ), named
    assert any("no interface dkv1 here (renamed or removed" in line for line in lines)
    # the rest is back
    assert netns.sysctl("net.ipv4.tcp_rmem") == "4096\t99999\t7777777"
    assert netns.run("cat", "/sys/class/net/dkv0/tx_queue_len").stdout.strip() == "777"

    # for people: one line per setting, and the run says it is incomplete
    code, text, err = run(capsys, "tune", "restore", *state)
    assert code == ExitStatus.DRIFT, err
    assert text.count("not restored: link/dkv1/txqueuelen") == 1, text
    assert "incomplete" in text


def test_a_snapshot_with_no_settings_is_refused_not_a_silent_no_op(
    tree: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (state_dir / "snapshots").mkdir(parents=True)
    (state_dir / "snapshots" / "empty.json").write_text(
        json.dumps(
            {
                "schema": "dtnkit.snapshot/1",
                "id": "empty",
                "kind": "manual",
                "created": "2026-01-01T00:00:00+00:00",
                "host": {"root": str(tree)},
                "values": {},
            }
        )
    )
    for extra in ((), ("--dry-run",)):
        code, out, err = run(
            capsys,
            "tune",
            "restore",
            "empty",
            "--tree",
            str(tree),
            "--state-dir",
            str(state_dir),
            *extra,
        )
        assert code == ExitStatus.BAD_INPUT, (out, err)
        assert err.count("dtnkit: error:") == 1 and "holds no settings" in err, err
