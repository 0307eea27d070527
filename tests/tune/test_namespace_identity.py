"""One network namespace is one scope whichever way it is entered: `--netns NS`, a process
under `ip netns exec NS`, a second name for it, or no name at all (`unshare --net`).  The lock
and the last baseline follow the namespace's identity (the inode of its nsfs file), so a run
entered one way is refused while a run entered the other way holds the lock, and a baseline
saved one way is restored the other way."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Netns, sh
from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.tune import apply as apply_mod

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns, pytest.mark.needs_ethtool]

# a child that takes the lock of the namespace it runs in (as `tune apply` would, without
# --netns), says so on stdout and holds it until its stdin closes
HOLD_LOCK = """
import sys
from pathlib import Path
from dtnkit.host.host import Host
from dtnkit.tune import apply
with apply.lock(Host.live(sys.argv[2] or None), Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    out = json.loads(got.out) if got.out.strip().startswith(("{", "[")) else got.out
    return code, out, got.err


def dtnkit(*argv: str) -> list[str]:
    return [sys.executable, "-m", "dtnkit", *argv]


class Holder:
    """A process holding the namespace lock, entered one way or the other."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the lock is held
        assert line.strip() == "held", self.proc.stderr.read() if self.proc.stderr else ""

    def release(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def alias(netns: Netns) -> Iterator[str]:
    """A second `ip netns` name for the test namespace (a bind mount of its nsfs file, as
    `ip netns attach` makes)."""
    name = f"dkal{uuid.uuid4().hex[:8]}"
    path = Path("/run/netns") / name
    path.touch()
    try:
        sh("mount", "--bind", f"/run/netns/{netns.name}", str(path))
        yield name
    finally:
        sh("umount", str(path), check=False)
        path.unlink(missing_ok=True)


def test_apply_entered_one_way_is_refused_while_the_other_way_holds_the_lock(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = netns.state()
    # held by a process under `ip netns exec NS`: `--netns NS` is refused
    holder = Holder(
        ["ip", "netns", "exec", netns.name, sys.executable, "-c", HOLD_LOCK, str(state_dir), ""]
    )
    try:
        code, _out, err = run(
            capsys, "tune", "apply", "--netns", netns.name, "--state-dir", str(state_dir)
        )
    finally:
        holder.release()
    assert code == ExitStatus.LOCKED, err
    assert f"PID {holder.proc.pid}" in err or "held by PID" in err
    # held through `--netns NS`: a run under `ip netns exec NS` is refused
    holder = Holder([sys.executable, "-c", HOLD_LOCK, str(state_dir), netns.name])
    try:
        done = netns.run(*dtnkit("tune", "apply", "--state-dir", str(state_dir)), check=False)
    finally:
        holder.release()
    assert done.returncode == ExitStatus.LOCKED, done.stderr
    assert netns.state() == before  # neither refused run wrote


def test_a_baseline_saved_with_netns_is_restored_under_ip_netns_exec(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    netns.set_sysctl("net.ipv4.tcp_rmem", "4096 99999 7777777")
    before = netns.state()
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
    assert code == ExitStatus.OK, err
    assert netns.state() != before
    back = netns.run(
        *dtnkit("tune", "restore", "--state-dir", str(state_dir), "--format", "json"), check=False
    )
    assert back.returncode == ExitStatus.OK, back.stderr
    assert json.loads(back.stdout)["snapshot"] == out["baseline"]
    assert netns.state() == before


def test_two_names_of_one_namespace_are_one_scope(
    netns: Netns, alias: str, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = netns.state()
    # one lock: held under one name, the other name is refused
    holder = Holder([sys.executable, "-c", HOLD_LOCK, str(state_dir), netns.name])
    try:
        code, _out, err = run(
            capsys, "tune", "apply", "--netns", alias, "--state-dir", str(state_dir)
        )
    finally:
        holder.release()
    assert code == ExitStatus.LOCKED, err
    # one baseline: applied under one name, `restore` (its `last`) under the other
    code, out, err = run(
        capsys, "tune", "apply", "--netns", alias, "--state-dir", str(state_dir), "--format", "json"
    )
    assert code == ExitStatus.OK, err
    first = sorted([netns.name, alias])[0]
    assert f"--netns {first}" in out["undo"]  # the namespace's first name, whichever used
    code, out, err = run(
        capsys,
        "tune",
        "restore",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    assert netns.state() == before
    code, rows, _err = run(
        capsys, "tune", "list", "--state-dir", str(state_dir), "--format", "json"
    )
    assert [r["scope"] for r in rows] == [f"netns {first}"]


def test_an_unnamed_namespace_has_a_scope_of_its_own_not_the_hosts(
    state_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the host scope's own baseline pointer, set before
    state_dir.mkdir(parents=True)
    (state_dir / "last-baseline").write_text("host-baseline-id\n")
    script = tmp_path / "in-unnamed.sh"
    cmd = " ".join(dtnkit("tune", "{}", "--state-dir", str(state_dir), "--format", "json"))
    script.write_text(
        "\n".join(
            [
                "set -e",
                "ip link set lo up",
                "echo 4096 99999 7777777 > /proc/sys/net/ipv4/tcp_rmem",
                f"{cmd.format('apply --speed 10gbit')} > {tmp_path}/applied.json",
                f"cat /proc/sys/net/ipv4/tcp_rmem > {tmp_path}/tuned",
                f"{cmd.format('restore')} > {tmp_path}/restored.json",
                f"cat /proc/sys/net/ipv4/tcp_rmem > {tmp_path}/back",
                "",
            ]
        )
    )
    done = subprocess.run(
        ["unshare", "--net", "sh", str(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    applied_doc = json.loads((tmp_path / "applied.json").read_text())
    restored_doc = json.loads((tmp_path / "restored.json").read_text())
    assert (tmp_path / "tuned").read_text().split() != ["4096", "99999", "7777777"]
    # plain `restore` in the same namespace found its baseline
    assert (tmp_path / "back").read_text().split() == ["4096", "99999", "7777777"]
    assert restored_doc["snapshot"] == applied_doc["baseline"]
    # the host's last baseline is untouched, and the root namespace refuses the snapshot
    assert (state_dir / "last-baseline").read_text() == "host-baseline-id\n"
    code, rows, _err = run(
        capsys, "tune", "list", "--state-dir", str(state_dir), "--format", "json"
    )
    [row] = rows
    assert row["scope"].startswith("netns-id "), row
    assert row["last_baseline"] is True
    code, _out, err = run(
        capsys,
        "tune",
        "restore",
        applied_doc["baseline"],
        "--dry-run",
        "--state-dir",
        str(state_dir),
    )
    assert code == ExitStatus.BAD_INPUT
    assert "an unnamed network namespace" in err and "Traceback" not in err


def test_the_lock_file_is_the_same_whichever_way_the_namespace_is_named(
    netns: Netns, alias: str
) -> None:
    a, _ = apply_mod.lock_path(Host.live(netns.name), Path("/nonexistent"))
    b, _ = apply_mod.lock_path(Host.live(alias), Path("/nonexistent"))
    assert a == b
