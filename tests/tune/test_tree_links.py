"""A captured tree (`--tree DIR`) is read and written only below its root, following no link:
a tree with a symbolic link in it is refused (exit 9, one error line naming the link) by
audit, apply, restore and `--persist`, and canary files outside the tree stay untouched, also
when the link appears after the tree was checked."""

from __future__ import annotations

import json
import os
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.host.tree import Tree, TreeLink

CANARY = "canary: must stay as it is\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    out = json.loads(got.out) if got.out.strip().startswith(("{", "[")) else got.out
    return code, out, got.err


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the tree with canary files (a file, and an etc/sysctl.d)."""
    out = tmp_path / "outside"
    (out / "etc" / "sysctl.d").mkdir(parents=True)
    (out / "canary").write_text(CANARY)
    (out / "etc" / "sysctl.d" / "canary.conf").write_text(CANARY)
    return out


def untouched(outside: Path) -> None:
    assert (outside / "canary").read_text() == CANARY
    assert sorted(p.name for p in (outside / "etc" / "sysctl.d").iterdir()) == ["canary.conf"]
    assert (outside / "etc" / "sysctl.d" / "canary.conf").read_text() == CANARY


def plant(tree: Path, rel: str, target: Path) -> None:
    link = tree / rel
    if link.is_dir() and not link.is_symlink():
        import shutil

        shutil.rmtree(link)
    else:
        link.unlink(missing_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def refused(code: int, err: str, rel: str) -> None:
    assert code == ExitStatus.BAD_INPUT, err
    assert err.count("dtnkit: error:") == 1, err
    assert "symbolic link" in err and rel in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["audit", "apply", "save"])
def test_a_sysctl_file_linked_out_of_the_tree_is_refused(
    command: str,
    tree: Path,
    outside: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rel = "proc/sys/net/ipv4/tcp_no_metrics_save"
    plant(tree, rel, outside / "canary")
    argv = ["tune", command, "--tree", str(tree)]
    if command != "audit":
        argv += ["--state-dir", str(tmp_path / "state")]
    code, _out, err = run(capsys, *argv)
    refused(code, err, rel)
    untouched(outside)
    assert not (tmp_path / "state" / "snapshots").exists()  # no baseline of a refused tree


def test_persist_into_an_etc_linked_out_of_the_tree_is_refused(
    tree: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(tree, "etc", outside / "etc")
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file() and not p.is_symlink()}
    code, _out, err = run(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "congestion",
        "--persist",
        "--state-dir",
        str(tmp_path / "state"),
    )
    refused(code, err, "etc")
    untouched(outside)
    assert {p: p.read_bytes() for p in before} == before  # nothing in the tree written


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_a_link_planted_between_apply_and_restore_is_refused_by_restore(
    tree: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    code, out, err = run(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "congestion",
        "--persist",
        "--format",
        "json",
        *state,
    )
    assert code == ExitStatus.OK, err
    assert out["persisted"]
    # the persist file and the directory above it, swapped for links out of the tree
    plant(tree, "etc/sysctl.d", outside / "etc" / "sysctl.d")
    rel = "proc/sys/net/ipv4/tcp_congestion_control"
    plant(tree, rel, outside / "canary")
    code, _out, err = run(capsys, "tune", "restore", "--tree", str(tree), *state)
    assert code == ExitStatus.BAD_INPUT, err
    assert "symbolic link" in err and "Traceback" not in err
    untouched(outside)


def test_a_link_that_appears_after_the_check_is_refused_at_the_write(
    tree: Path, outside: Path
) -> None:
    host = Host.from_tree(tree)  # the tree is checked here: no link yet
    plant(tree, "sys/class/net/ens5f1np1", outside)
    (outside / "mtu").write_text(CANARY)
    with pytest.raises(TreeLink, match="symbolic link: sys/class/net/ens5f1np1"):
        host.write("/sys/class/net/ens5f1np1/mtu", "9000")
    with pytest.raises(TreeLink):
        host.read("/sys/class/net/ens5f1np1/mtu")
    with pytest.raises(TreeLink):
        host.listdir("/sys/class/net/ens5f1np1")
    plant(tree, "etc", outside / "etc")
    with pytest.raises(TreeLink):
        host.write("/etc/sysctl.d/90-dtnkit.conf", "x = 1\n")
    with pytest.raises(TreeLink):
        host.remove("/etc/sysctl.d/canary.conf")
    assert (outside / "mtu").read_text() == CANARY
    untouched(outside)


def test_a_replayed_command_linked_out_of_the_tree_is_refused(
    tree: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = outside / "secret.txt"
    secret.write_text("$ tuned-adm active\nCurrent active profile: SECRET-OUTSIDE\n")
    plant(tree, "cmd/tuned-adm-active.txt", secret)
    code, out, err = run(capsys, "tune", "audit", "--tree", str(tree), "--group", "cpu")
    refused(code, err, "cmd/tuned-adm-active.txt")
    assert "SECRET-OUTSIDE" not in str(out) + err.replace(str(secret), "")


def test_a_write_replaces_a_hard_linked_file_instead_of_writing_through_it(
    tree: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inside = tree / "proc/sys/net/ipv4/tcp_no_metrics_save"
    shared = outside / "hardlinked"
    shared.write_text("0\n")
    inside.unlink()
    os.link(shared, inside)
    code, _out, err = run(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "congestion",
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert code == ExitStatus.OK, err
    assert inside.read_text() == "1\n"
    assert shared.read_text() == "0\n"  # the file outside kept its content


def test_a_device_name_climbing_out_of_the_tree_is_refused(tree: Path, outside: Path) -> None:
    host = Host.from_tree(tree)
    with pytest.raises(TreeLink, match="climbs out"):
        host.write("/sys/class/net/../../../outside/canary", "1")
    untouched(outside)


NAMES = st.text(string.ascii_lowercase + string.digits + "._-", min_size=1, max_size=8).filter(
    lambda n: n not in (".", "..")
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(NAMES, min_size=1, max_size=4),
    at=st.integers(0, 3),
    op=st.sampled_from(["read", "write", "exists", "listdir", "unlink", "writable"]),
)
def test_a_link_anywhere_on_a_path_is_never_followed(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str], at: int, op: str
) -> None:
    base = tmp_path_factory.mktemp("links")
    root, outside = base / "tree", base / "outside"
    root.mkdir()
    outside.mkdir()
    at = min(at, len(parts) - 1)
    # the outside holds the same path below the link, with a canary at its end
    below = outside.joinpath(*parts[at + 1 :]) if at + 1 < len(parts) else outside / "end"
    below.parent.mkdir(parents=True, exist_ok=True)
    if at + 1 < len(parts):
        below.write_text(CANARY)
    (root.joinpath(*parts[:at])).mkdir(parents=True, exist_ok=True)
    root.joinpath(*parts[: at + 1]).symlink_to(outside if at + 1 < len(parts) else below)
    if at + 1 == len(parts):
        below.write_text(CANARY)
    tree = Tree(root)
    path = "/" + "/".join(parts)
    if op == "unlink" and at + 1 == len(parts):
        tree.unlink(path)  # a link at the end is removed itself, not followed
        assert not root.joinpath(*parts).is_symlink()
    else:
        with pytest.raises(TreeLink):
            if op == "read":
                tree.read_bytes(path)
            elif op == "write":
                tree.write_bytes(path, b"written\n")
            elif op == "exists":
                tree.exists(path)
            elif op == "listdir":
                tree.listdir(path)
            elif op == "unlink":
                tree.unlink(path)
            else:
                tree.writable(path)
    assert below.read_text() == CANARY


@pytest.mark.parametrize("device", ["..", "../../outside", "a b", "x:1", "sixteen-chars-xx"])
def test_a_snapshot_naming_a_device_that_is_no_interface_name_is_refused(
    device: str, tree: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = tmp_path / "state" / "snapshots" / "hostile.json"
    snap.parent.mkdir(parents=True)
    snap.write_text(
        json.dumps(
            {
                "schema": "dtnkit.snapshot/1",
                "id": "hostile",
                "kind": "manual",
                "created": "2026-01-01T00:00:00+00:00",
                "host": {"root": str(tree)},
                "values": {f"link/{device}/mtu": 1500},
            }
        )
    )
    code, _out, err = run(
        capsys,
        "tune",
        "restore",
        "hostile",
        "--tree",
        str(tree),
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert code == ExitStatus.BAD_INPUT, err
    assert err.count("dtnkit: error:") == 1 and "unknown setting" in err, err
    untouched(outside)
