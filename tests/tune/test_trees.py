"""Captured host trees: what no namespace here can show (100G/25G NICs, bonds, VLANs,
rings, cpufreq, tuned-adm), audited, applied and restored through the same code."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.host.replay import FixtureRunner
from dtnkit.tune.audit import run_audit
from dtnkit.tune.profile import load_profile

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in doc["findings"]}


def digest(root: Path, *, kernel_files_only: bool = False) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if kernel_files_only and path.relative_to(root).parts[0] not in ("proc", "sys"):
            continue
        if path.is_file():
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def audit(capsys: pytest.CaptureFixture[str], tree: Path, *extra: str) -> tuple[int, Any]:
    return run_json(capsys, "tune", "audit", "--tree", str(tree), "--format", "json", *extra)


def test_every_command_the_audit_runs_is_captured(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("dtn-a", "dtn-b"):
        host = Host.from_tree(HOSTS / name)
        runner = host.runner
        assert isinstance(runner, FixtureRunner)
        asked: list[tuple[str, ...]] = []
        original = runner.run

        def spy(
            argv: Any,
            *,
            stdin: str | None = None,
            _orig: Any = original,
            _asked: list[tuple[str, ...]] = asked,
        ) -> Any:
            _asked.append(tuple(argv))
            return _orig(argv, stdin=stdin)

        runner.run = spy  # type: ignore[method-assign]
        run_audit(host, load_profile("dtn", ()))
        missing = [a for a in asked if a not in runner.captures]
        assert missing == [], f"{name}: not captured: {missing}"


def test_audit_of_a_tree_is_read_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    before = digest(HOSTS / "dtn-a")
    code, _ = audit(capsys, HOSTS / "dtn-a")
    assert code == ExitStatus.DRIFT
    assert digest(HOSTS / "dtn-a") == before


def test_rings_go_to_the_hardware_maximum_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    _, a = audit(capsys, HOSTS / "dtn-a", "--group", "rings")  # newer ethtool: JSON
    r = rows(a)
    for dev in ("ens5f1np1", "ens1f0np0", "ens1f1np1"):
        assert (r[f"ring/{dev}/rx"]["current"], r[f"ring/{dev}/rx"]["recommended"]) == (1024, 8192)
    _, b = audit(capsys, HOSTS / "dtn-b", "--group", "rings")  # ethtool 6.1: JSON refused
    r = rows(b)
    assert r["ring/enp1s0/rx"]["status"] == "ok"
    assert "ring/eno1/tx" not in r  # a 1G management port is not a data interface
    _, b = audit(capsys, HOSTS / "dtn-b", "--group", "rings", "--iface", "eno1")
    r = rows(b)
    assert (r["ring/eno1/tx"]["current"], r["ring/eno1/tx"]["recommended"]) == (256, 4096)


@pytest.mark.parametrize("tree", ["dtn-a"], indirect=True)
def test_apply_rings_and_governor_then_restore_on_a_tree(
    capsys: pytest.CaptureFixture[str], tree: Path, tmp_path: Path
) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    before = digest(tree, kernel_files_only=True)
    code, out = run_json(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "rings",
        "--group",
        "cpu",
        "--format",
        "json",
        *state,
    )
    assert code == ExitStatus.OK, out
    keys = {a["key"] for a in out["applied"]}
    assert {"ring/ens5f1np1/rx", "ring/ens1f0np0/tx", "cpu/governor"} <= keys
    assert "tuned/profile" not in keys  # on request only
    governors = {
        p.read_text().strip()
        for p in tree.glob("sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
    }
    assert governors == {"performance"}
    code, after = audit(capsys, tree, "--group", "rings", "--group", "cpu")
    assert {f["status"] for f in after["findings"] if f["key"] != "tuned/profile"} == {"ok"}

    code, out = run_json(capsys, "tune", "restore", "--tree", str(tree), "--format", "json", *state)
    assert code == ExitStatus.OK, out
    governors = {
        p.read_text().strip()
        for p in tree.glob("sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
    }
    assert governors == {"powersave"}
    code, again = audit(capsys, tree, "--group", "rings")
    assert {f["current"] for f in again["findings"]} == {1024}
    # the kernel's files of the tree (governors) are byte for byte as before
    assert digest(tree, kernel_files_only=True) == before


def test_each_interface_is_sized_by_its_own_speed(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = audit(capsys, HOSTS / "dtn-a", "--group", "pacing", "--group", "backlog")
    r = rows(doc)
    assert r["qdisc/ens5f1np1/root"]["recommended"]["maxrate_bps"] == 20_000_000_000
    assert r["qdisc/ens1f0np0/root"]["recommended"]["maxrate_bps"] == 5_000_000_000
    assert r["qdisc/ens5f1np1/root"]["recommended"]["mq"] is True
    assert r["sysctl/net.core.netdev_max_backlog"]["recommended"] == 500000
    assert doc["decisions"][0]["value"] == 100000
    # only the bond: its members' 25G sizes the buffers, not the 100G port
    _, bond = audit(capsys, HOSTS / "dtn-a", "--iface", "bond0.111", "--group", "backlog")
    assert [i["device"] for i in bond["interfaces"]] == ["ens1f0np0", "ens1f1np1"]
    assert bond["interfaces"][0]["via"] == "under bond0.111 -> member ens1f0np0"
    assert rows(bond)["sysctl/net.core.netdev_max_backlog"]["recommended"] == 300000


def test_down_link_without_speed_is_reported_not_mapped(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = audit(capsys, HOSTS / "dtn-b", "--iface", "ens2", "--group", "buffers")
    assert doc["decisions"][0]["value"] is None
    assert rows(doc)["sysctl/net.core.rmem_max"]["status"] == "unknown"


def test_raise_only_keeps_a_sites_larger_value(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = audit(capsys, HOSTS / "dtn-b", "--rtt", "20ms", "--group", "buffers")
    row = rows(doc)["sysctl/net.core.rmem_max"]
    assert (row["current"], row["recommended"], row["status"]) == (268435456, 134217728, "ok")
    assert "raise-only" in row["why"]
    _, exact = audit(capsys, HOSTS / "dtn-b", "--rtt", "20ms", "--group", "buffers", "--exact")
    assert rows(exact)["sysctl/net.core.rmem_max"]["status"] == "differs"


def test_pause_is_read_from_text_not_ethtool_61_json(capsys: pytest.CaptureFixture[str]) -> None:
    # dtn-b's ethtool 6.1 prints true for every pause field in JSON; the text says off
    _, doc = audit(capsys, HOSTS / "dtn-b", "--iface", "enp1s0", "--group", "nic")
    assert rows(doc)["pause/enp1s0/rx"]["current"] is False


def test_cpu_checks_and_tuned(capsys: pytest.CaptureFixture[str]) -> None:
    _, a = audit(capsys, HOSTS / "dtn-a", "--group", "cpu", "--group", "checks")
    r = rows(a)
    assert r["cpu/governor"]["status"] == "differs"
    assert set(r["cpu/governor"]["current"].values()) == {"powersave"}
    assert r["tuned/profile"]["current"] == "throughput-performance"
    assert r["tuned/profile"]["apply"] == "on-request"
    assert "reapply_sysctl" in r["tuned/profile"]["why"]
    assert r["check/irqbalance"]["current"] == "running"
    assert r["check/smt"]["status"] == "differs"  # SMT on at 100G
    assert "off NUMA node" in r["check/irq-affinity"]["current"]
    _, b = audit(capsys, HOSTS / "dtn-b", "--group", "cpu", "--group", "checks")
    r = rows(b)
    assert r["tuned/profile"]["status"] == "unsupported"
    assert r["check/smt"]["status"] == "ok"


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_persist_writes_files_and_restore_removes_them(
    capsys: pytest.CaptureFixture[str], tree: Path, tmp_path: Path
) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    code, out = run_json(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "congestion",
        "--group",
        "rings",
        "--iface",
        "enp1s0",
        "--iface",
        "eno1",
        "--persist",
        "--format",
        "json",
        *state,
    )
    assert code == ExitStatus.OK, out
    conf = tree / "etc/sysctl.d/90-dtnkit.conf"
    udev = tree / "etc/udev/rules.d/90-dtnkit.rules"
    assert sorted(out["persisted"]) == [
        "/etc/sysctl.d/90-dtnkit.conf",
        "/etc/udev/rules.d/90-dtnkit.rules",
    ]
    assert "net.ipv4.tcp_congestion_control = bbr" in conf.read_text()
    assert 'KERNEL=="eno1", RUN+="/sbin/ethtool -G eno1 rx 4096"' in udev.read_text()
    code, out = run_json(capsys, "tune", "restore", "--tree", str(tree), "--format", "json", *state)
    assert code == ExitStatus.OK, out
    assert not conf.exists() and not udev.exists()
    assert (tree / "proc/sys/net/ipv4/tcp_congestion_control").read_text().strip() == "cubic"
