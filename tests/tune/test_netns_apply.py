"""apply / audit / restore for real, inside throw-away network namespaces with veth pairs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import Netns
from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.host.runner import Result, SubprocessRunner
from dtnkit.tune import apply as apply_mod
from dtnkit.tune.audit import run_audit
from dtnkit.tune.profile import load_profile
from dtnkit.tune.snapshot import Store

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns, pytest.mark.needs_ethtool]

PER_NAMESPACE = ("netns", "interface")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def audit_json(capsys: pytest.CaptureFixture[str], ns: Netns, *extra: str) -> tuple[int, Any]:
    return run_json(capsys, "tune", "audit", "--netns", ns.name, "--format", "json", *extra)


def test_apply_then_audit_is_compliant_for_every_per_namespace_key(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, before = audit_json(capsys, netns)
    assert code == ExitStatus.DRIFT
    assert before["environment"]["initial_netns"] is False
    assert any("host-scope" in note for note in before["environment"]["notes"])
    differing = [
        f["key"] for f in before["findings"] if f["status"] == "differs" and f["apply"] == "auto"
    ]
    assert "sysctl/net.ipv4.tcp_no_metrics_save" in differing
    assert "link/dkv0/txqueuelen" in differing

    code, out = run_json(
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
    assert code == ExitStatus.OK, out
    assert out["ok"] and out["baseline"]
    assert {a["key"] for a in out["applied"]} == set(differing)

    code, after = audit_json(capsys, netns)
    per_ns = [f for f in after["findings"] if f["scope"] in PER_NAMESPACE and f["apply"] == "auto"]
    assert per_ns
    assert [f["key"] for f in per_ns if f["status"] == "differs"] == []
    # host-global keys were reported, not touched
    host_keys = {f["key"]: f["status"] for f in after["findings"] if f["scope"] == "host"}
    assert host_keys["sysctl/net.core.rmem_max"] == "host-scope"
    assert netns.sysctl("net.ipv4.tcp_no_metrics_save") == "1"
    assert netns.run("cat", "/sys/class/net/dkv0/tx_queue_len").stdout.strip() == "10000"
    # the only thing still differing is on-request (MTU): exit code still says drift
    assert {f["key"] for f in after["findings"] if f["status"] == "differs"} <= {
        "link/dkv0/mtu",
        "link/dkv1/mtu",
    }


def test_restore_brings_every_value_back_exactly(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # start from values that are not the kernel defaults, so "exact" means something
    netns.set_sysctl("net.ipv4.tcp_rmem", "4096 99999 7777777")
    netns.run("ip", "link", "set", "dkv0", "txqueuelen", "777")
    netns.run("ethtool", "-K", "dkv1", "gro", "off")
    netns.run(
        "tc",
        "qdisc",
        "replace",
        "dev",
        "dkv0",
        "root",
        "tbf",
        "rate",
        "1gbit",
        "burst",
        "125000",
        "latency",
        "7ms",
    )
    before = netns.state()

    code, out = run_json(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--format",
        "json",
        "--mtu",
    )
    assert code == ExitStatus.OK, out
    assert netns.state() != before

    code, out = run_json(
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
    assert code == ExitStatus.OK, out
    assert out["snapshot"]
    assert netns.state() == before
    assert "tbf" in netns.state()["tc-dkv0"]  # the qdisc came back with its parameters


def test_dry_run_writes_nothing(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = netns.state()
    code, out = run_json(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--dry-run",
        "--format",
        "json",
        "--mtu",
    )
    assert code == ExitStatus.OK
    assert out["dry_run"] is True and out["plan"]
    assert netns.state() == before
    assert not state_dir.exists()  # not even a baseline

    # the same plan path runs with a Host that refuses every write
    host = Host.live(netns.name, read_only=True)
    audit = run_audit(host, load_profile("dtn"))
    assert apply_mod.plan(audit)
    assert host.writes == []


def test_failure_half_way_leaves_the_namespace_exactly_as_before(
    netns: Netns, state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the kernel rejects tcp_ecn 5 (EINVAL: it takes 0-2) after buffers, backlog and the
    # earlier congestion keys have been written; dtnkit's own checks know no bounds for
    # tcp_ecn, so only the kernel can refuse it (a value dtnkit knows is bad is refused first)
    profile = tmp_path / "bad.toml"
    profile.write_text(
        'include = ["dtn"]\n[tune."sysctl/net.ipv4.tcp_ecn"]\ngroup = "congestion"\n'
        'value = 5\nmode = "exact"\nsource = "test: a value the kernel rejects"\n'
    )
    before = netns.state()
    code, out = run_json(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--profile",
        str(profile),
        "--format",
        "json",
    )
    assert code == ExitStatus.PARTIAL_APPLY
    assert out["ok"] is False
    assert out["failed"]["key"] == "sysctl/net.ipv4.tcp_ecn"
    assert "Invalid argument" in out["error"]["why"]
    assert len(out["rolled_back"]) >= 3  # buffers, txqueuelen, earlier congestion keys
    assert out["rollback_errors"] == []
    assert netns.state() == before


def test_raise_only_leaves_larger_values_alone_and_exact_lowers_them(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = "8192 262144 1073741824"
    netns.set_sysctl("net.ipv4.tcp_rmem", big)
    netns.run("ip", "link", "set", "dkv0", "txqueuelen", "20000")

    code, audit = audit_json(capsys, netns, "--group", "buffers", "--group", "backlog")
    rows = {f["key"]: f for f in audit["findings"]}
    assert rows["sysctl/net.ipv4.tcp_rmem"]["status"] == "ok"
    assert "raise-only" in rows["sysctl/net.ipv4.tcp_rmem"]["why"]
    assert rows["link/dkv0/txqueuelen"]["status"] == "ok"

    code, _ = run_json(
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
    assert code == ExitStatus.OK
    assert netns.sysctl("net.ipv4.tcp_rmem").split() == big.split()
    assert netns.run("cat", "/sys/class/net/dkv0/tx_queue_len").stdout.strip() == "20000"

    # a larger middle value with a smaller max: raise-only lifts only the max
    netns.set_sysctl("net.ipv4.tcp_wmem", "4096 65536 4194304")
    code, _ = run_json(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--group",
        "buffers",
        "--format",
        "json",
    )
    wmem = netns.sysctl("net.ipv4.tcp_wmem").split()
    assert wmem[1] == "65536" and int(wmem[2]) > 4194304

    code, _out = run_json(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--exact",
        "--group",
        "backlog",
        "--format",
        "json",
    )
    assert code == ExitStatus.OK
    assert netns.run("cat", "/sys/class/net/dkv0/tx_queue_len").stdout.strip() == "10000"


def test_second_run_waits_for_the_lock(
    netns: Netns, state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = netns.state()
    with apply_mod.lock(Host.live(netns.name), state_dir):
        code, out = run_json(
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
        assert code == ExitStatus.LOCKED
        assert "another dtnkit apply" in out["error"]["what"]
        # the lock is the namespace's, not the state dir's: another --state-dir waits too
        code, out = run_json(
            capsys,
            "tune",
            "apply",
            "--netns",
            netns.name,
            "--state-dir",
            str(tmp_path / "other"),
            "--format",
            "json",
        )
        assert code == ExitStatus.LOCKED
        code, out = run_json(
            capsys,
            "tune",
            "restore",
            "x",
            "--netns",
            netns.name,
            "--state-dir",
            str(tmp_path / "other"),
            "--format",
            "json",
        )
        assert code in (ExitStatus.LOCKED, ExitStatus.BAD_INPUT)  # no snapshot x: 9 first
    assert netns.state() == before
    assert not (tmp_path / "other").exists() or not any((tmp_path / "other").iterdir())


def test_save_diff_list_show_delete_round_trip(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sd = ["--state-dir", str(state_dir)]
    code, saved = run_json(
        capsys, "tune", "save", "--netns", netns.name, "--label", "pre", *sd, "--format", "json"
    )
    assert code == 0 and saved["values"] > 5
    code, out = run_json(
        capsys, "tune", "diff", saved["id"], "--netns", netns.name, *sd, "--format", "json"
    )
    assert code == 0 and out["differences"] == []

    netns.set_sysctl("net.ipv4.tcp_slow_start_after_idle", "0")
    code, out = run_json(
        capsys, "tune", "diff", "pre", "--netns", netns.name, *sd, "--format", "json"
    )
    assert code == ExitStatus.DRIFT
    assert out["differences"] == [
        {
            "key": "sysctl/net.ipv4.tcp_slow_start_after_idle",
            "b_key": "sysctl/net.ipv4.tcp_slow_start_after_idle",
            "group": "congestion",
            "unit": None,
            "a": 1,
            "b": 0,
        }
    ]
    assert out["pairs"] == []  # the same namespace: every interface pairs by its name

    code, listing = run_json(capsys, "tune", "list", *sd, "--format", "json")
    assert [r["id"] for r in listing] == [saved["id"]]
    code, shown = run_json(capsys, "tune", "show", "pre", *sd, "--format", "json")
    assert shown["values"]["sysctl/net.ipv4.tcp_slow_start_after_idle"] == 1

    code, out = run_json(
        capsys, "tune", "restore", "pre", "--netns", netns.name, *sd, "--format", "json"
    )
    assert code == 0 and [a["key"] for a in out["applied"]] == [
        "sysctl/net.ipv4.tcp_slow_start_after_idle"
    ]
    assert netns.sysctl("net.ipv4.tcp_slow_start_after_idle") == "1"

    assert main(["tune", "delete", "pre", *sd]) == 0
    assert Store(state_dir).ids() == []


def test_restore_refuses_a_snapshot_of_another_namespace(
    netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sd = ["--state-dir", str(state_dir)]
    run_json(capsys, "tune", "save", "--netns", netns.name, "--label", "x", *sd, "--format", "json")
    code, out = run_json(capsys, "tune", "restore", "x", *sd, "--format", "json")
    assert code == ExitStatus.BAD_INPUT
    assert "taken in netns" in out["error"]["what"]


class FaultyRunner(SubprocessRunner):
    """Real commands; the Nth write (`ip netns exec ... tee`, `ip link set`) raises *fault*
    instead, once: the undo that follows runs normally."""

    def __init__(self, after: int, fault: BaseException) -> None:
        super().__init__()
        self.left = after
        self.fault = fault

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        if "tee" in argv or ("link" in argv and "set" in argv):
            self.left -= 1
            if self.left == -1:
                raise self.fault
        return super().run(argv, stdin=stdin)


def test_interrupt_half_way_is_undone(netns: Netns, state_dir: Path) -> None:
    before = netns.state()
    runner = FaultyRunner(after=4, fault=KeyboardInterrupt())
    host = Host(Path("/"), netns=netns.name, runner=runner)
    out = apply_mod.apply(host, lambda h: run_audit(h, load_profile("dtn")), Store(state_dir))
    assert out.error is not None and out.error.status == ExitStatus.INTERRUPTED
    assert len(out.done) == 4
    assert out.rollback_errors == []
    assert netns.state() == before


def test_an_unexpected_failure_half_way_is_undone(netns: Netns, state_dir: Path) -> None:
    before = netns.state()
    runner = FaultyRunner(after=4, fault=OSError(5, "simulated I/O error"))
    host = Host(Path("/"), netns=netns.name, runner=runner)
    out = apply_mod.apply(host, lambda h: run_audit(h, load_profile("dtn")), Store(state_dir))
    assert out.error is not None and out.error.status == ExitStatus.ERROR
    assert "OSError" in out.error.why
    assert len(out.done) == 4
    assert out.rollback_errors == []
    assert netns.state() == before
