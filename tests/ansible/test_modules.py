"""The dtn.dtnkit modules, run as Ansible runs them on a host (``python MODULE.py ARGS.json``)
and through ``ansible localhost -m dtn.dtnkit.X``, against the real dtnkit inside two network
namespaces of this test (tests/ansible/namespace_hosts.py): never the host's own settings."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.ansible.namespace_hosts import (
    BIN,
    COLLECTION,
    Host,
    Pair,
    ansible_env,
    missing_ansible,
    pair,
    run_module,
)

import dtnkit
from dtnkit.diagnose.experiment import judge

_WHY = missing_ansible()
pytestmark = [pytest.mark.needs_ansible, pytest.mark.skipif(bool(_WHY), reason=str(_WHY))]
HOSTNAME = socket.gethostname()
CONGESTION = (
    "sysctl/net.ipv4.tcp_no_metrics_save",
    "sysctl/net.ipv4.tcp_slow_start_after_idle",
    "sysctl/net.ipv4.tcp_mtu_probing",
)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with pair(tmp_path_factory.mktemp("ans-mod")) as p:
        yield p


@pytest.fixture
def host(hosts: Pair, tmp_path: Path) -> Iterator[Host]:
    """Host a, untuned for the congestion group, with a state dir of this test's own; put
    back as it was after the test."""
    h = hosts.a
    start = h.values()
    for key, value in zip(CONGESTION, ("0", "1", "0"), strict=True):
        h.set_sysctl(key.split("/", 1)[1], value)
    h.state_dir = tmp_path / "state"
    yield h
    for key in CONGESTION:
        h.set_sysctl(key.split("/", 1)[1], str(start[key]))


def congestion(h: Host) -> dict[str, str]:
    return {k: h.sysctl(k.split("/", 1)[1]) for k in CONGESTION}


def base_args(h: Host, **more: Any) -> dict[str, Any]:
    return {"dtnkit_path": str(h.dtnkit_path), "state_dir": str(h.state_dir), **more}


# ---- versions ---------------------------------------------------------------------------------
@pytest.mark.needs_ansible
def test_the_collection_is_versioned_with_dtnkit() -> None:
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())
    utils = (COLLECTION / "plugins" / "module_utils" / "dtnkit.py").read_text()
    role = yaml.safe_load((COLLECTION / "roles" / "install" / "vars" / "main.yml").read_text())
    assert galaxy["version"] == dtnkit.__version__
    assert f'COLLECTION_VERSION = "{dtnkit.__version__}"' in utils
    assert role["install_min_version"] == dtnkit.__version__
    assert f"## {dtnkit.__version__}" in (COLLECTION / "CHANGELOG.md").read_text()


# ---- audit --------------------------------------------------------------------------------
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_audit_returns_facts_and_never_changes_anything(host: Host, tmp_path: Path) -> None:
    before = host.values()
    for check in (False, True):
        out = run_module(
            "audit",
            {"dtnkit_path": str(host.dtnkit_path), "groups": ["congestion"]},
            tmp_path,
            check=check,
        )
        assert out["changed"] is False and out["compliant"] is False
        audit = out["ansible_facts"]["dtnkit_audit"]
        assert audit == out["audit"] == json.loads(out["audit_json"])
        assert audit["schema"] == "dtnkit.audit/2"
        assert audit["environment"]["initial_netns"] is False  # ran inside the namespace
        assert {f["key"] for f in audit["findings"] if f["status"] == "differs"} >= set(
            CONGESTION[:2]
        )
        assert out["nic_mbps"] == 10000  # the veth's speed
    assert host.values() == before
    assert not host.state_dir.exists()


# ---- tune ---------------------------------------------------------------------------------
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_tune_check_mode_writes_nothing_and_diff_shows_each_setting(
    host: Host, tmp_path: Path
) -> None:
    before = host.values()
    out = run_module(
        "tune", base_args(host, groups=["congestion"]), tmp_path, check=True, diff=True
    )
    assert out["changed"] is True  # it would write
    assert {w["key"] for w in out["written"]} == set(CONGESTION[:2]) | (
        {CONGESTION[2]} if before[CONGESTION[2]] != 1 else set()
    )
    assert "sysctl/net.ipv4.tcp_no_metrics_save = 0\n" in out["diff"]["before"]
    assert "sysctl/net.ipv4.tcp_no_metrics_save = 1\n" in out["diff"]["after"]
    assert host.values() == before
    assert not host.state_dir.exists()  # not even a baseline


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_tune_apply_is_idempotent_and_restore_puts_back_exact_values(
    host: Host, tmp_path: Path
) -> None:
    before = host.values()
    applied = run_module(
        "tune", base_args(host, groups=["congestion"], label="ans"), tmp_path, diff=True
    )
    assert applied["changed"] is True and applied["snapshot"].endswith("-ans")
    assert congestion(host)["sysctl/net.ipv4.tcp_no_metrics_save"] == "1"
    again = run_module("tune", base_args(host, groups=["congestion"]), tmp_path)
    assert again["changed"] is False and again["written"] == [] and again["snapshot"] is None
    dry = run_module("tune", base_args(host, state="restored"), tmp_path, check=True)
    assert dry["changed"] is True
    assert host.values() != before  # check mode restored nothing
    back = run_module("tune", base_args(host, state="restored"), tmp_path, diff=True)
    assert back["changed"] is True and back["snapshot"] == applied["snapshot"]
    assert host.values() == before
    assert run_module("tune", base_args(host, state="restored"), tmp_path)["changed"] is False


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_tune_saved_always_writes_and_missing_ok_leaves_a_host_without_baseline(
    host: Host, tmp_path: Path
) -> None:
    assert (
        run_module("tune", base_args(host, state="saved"), tmp_path, check=True)["snapshot"] is None
    )
    assert not host.state_dir.exists()
    saved = run_module("tune", base_args(host, state="saved", label="weekly"), tmp_path)
    assert saved["changed"] is True
    assert (host.state_dir / "snapshots" / f"{saved['snapshot']}.json").exists()
    none = run_module("tune", base_args(host, state="restored", missing_ok=True), tmp_path)
    assert none["changed"] is False and none["snapshot"] is None
    fails = run_module("tune", base_args(host, state="restored"), tmp_path)
    assert fails["failed"] and "no baseline has been saved yet" in fails["msg"]


# ---- a missing, too old or hostile dtnkit -------------------------------------------------
def test_a_missing_or_too_old_dtnkit_is_one_clear_failure_naming_the_host(tmp_path: Path) -> None:
    old = tmp_path / "dtnkit-old"
    old.write_text("#!/bin/sh\necho 'dtnkit, version 0.0.9'\n")
    old.chmod(0o755)
    cases = {
        str(tmp_path / "nowhere" / "dtnkit"): "is not an executable file",
        "ans-no-such-dtnkit": "no ans-no-such-dtnkit on PATH",
        str(old): f"dtnkit 0.0.9 at {old} is older than this collection needs "
        f"(dtn.dtnkit {dtnkit.__version__} needs dtnkit >= {dtnkit.__version__})",
    }
    for i, (path, why) in enumerate(cases.items()):
        # every module on the too-old one, one module each on the others
        for module in ("audit", "tune", "probe", "experiment") if i == 2 else ("tune",):
            args: dict[str, Any] = {"dtnkit_path": path}
            if module == "probe":
                args.update(
                    peer="192.0.2.1", token="ans-unused-token", server_key="-----BEGIN PUBLIC KEY"
                )
            if module == "experiment":
                args.update(group="buffers", baseline_bps=[1e9])
            out = run_module(module, args, tmp_path)
            assert out["failed"] is True
            assert out["msg"].startswith(f"dtnkit on host {HOSTNAME}: "), out["msg"]
            assert why in out["msg"] and "\n" not in out["msg"]


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"groups": ["buffers;rm -rf /"]}, "unknown group buffers;rm -rf /"),
        ({"groups": ["congestion"], "rtt": "nan"}, "bad RTT 'nan'"),
        ({"groups": ["congestion"], "speed": "-1gbit"}, "speed"),
        ({"groups": ["congestion"], "state_dir": "FILE"}, "state"),
        ({"state": "restored", "snapshot": "../../etc/passwd"}, "snapshot"),
        # a value dtnkit would read as an option: given after --, it is a (bad) snapshot name
        ({"state": "restored", "snapshot": "--dry-run"}, "bad snapshot name '--dry-run'"),
        ({"state": "restored", "snapshot": "--tree=/"}, "bad snapshot name '--tree=/'"),
    ],
)
def test_hostile_module_args_give_one_clear_failure_and_write_nothing(
    host: Host, tmp_path: Path, args: dict[str, Any], why: str
) -> None:
    if args.get("state_dir") == "FILE":
        (tmp_path / "a file").write_text("not a directory\n")
        args = {**args, "state_dir": str(tmp_path / "a file")}
    before = host.values()
    out = run_module("tune", {**base_args(host), **args}, tmp_path)
    assert out["failed"] is True, out
    assert out["msg"].startswith(f"dtnkit on host {HOSTNAME}: `tune "), out["msg"]
    assert why in out["msg"] and "\n" not in out["msg"]
    assert host.values() == before
    assert not host.state_dir.exists()


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_odd_characters_in_a_path_reach_dtnkit_as_one_argument(host: Host, tmp_path: Path) -> None:
    odd = tmp_path / "st ate;$(touch ans-pwned)'\"`"
    out = run_module("tune", base_args(host, state="saved", state_dir=str(odd)), tmp_path)
    assert out["changed"] is True
    assert (odd / "snapshots" / f"{out['snapshot']}.json").exists()
    assert not list(tmp_path.rglob("ans-pwned")) and not Path("ans-pwned").exists()


# ---- experiment: the gate and the verdict, by dtnkit's rules ------------------------------
def test_experiment_gate_and_verdict_follow_dtnkits_rules(tmp_path: Path) -> None:
    path = str(BIN / "dtnkit")
    base, applied = [5.0e9, 5.2e9], [7.0e9, 7.1e9]
    verdict = run_module(
        "experiment",
        {"dtnkit_path": path, "group": "buffers", "baseline_bps": base, "applied_bps": applied},
        tmp_path,
    )
    name, ratio, margin = judge(base, applied)
    assert (
        (verdict["verdict"], verdict["result"]["ratio"], verdict["result"]["margin"])
        == (name, ratio, margin)
        == ("helps", pytest.approx(7.05 / 5.1), 0.05)
    )  # spread 3.9 % < 5 %
    assert verdict["changed"] is False and verdict["gated"] is False
    # headroom: 9.5 of 10 Gbit/s leaves 5 %, inside the 5 % margin -> predicted harmful
    full = run_module(
        "experiment",
        {
            "dtnkit_path": path,
            "group": "buffers",
            "baseline_bps": [9.5e9, 9.52e9],
            "nic_speeds": ["10000mbit", "25gbit"],
        },
        tmp_path,
    )
    assert full["gated"] is True and full["verdict"] == "gated"
    assert full["result"]["applied"] is False and "predicted harmful" in full["why"]
    room = run_module(
        "experiment",
        {
            "dtnkit_path": path,
            "group": "buffers",
            "baseline_bps": [5e9],
            "nic_speeds": ["10gbit", "10gbit"],
        },
        tmp_path,
    )
    assert room["gated"] is False and room["verdict"] is None
    before = run_module(
        "experiment",
        {"dtnkit_path": path, "group": "buffers", "baseline_bps": [5e9], "measured_harmful": True},
        tmp_path,
    )
    assert before["gated"] is True and "measured harmful" in before["why"]
    for bad, why in (
        ({"baseline_bps": [float("nan")]}, "bad --baseline value nan"),
        ({"group": "buffers,congestion"}, "one group at a time"),
    ):
        out = run_module(
            "experiment",
            {"dtnkit_path": path, "group": "buffers", "baseline_bps": [1e9], **bad},
            tmp_path,
        )
        assert out["failed"] is True and why in out["msg"], out


# ---- probe: a server on b, the probe from a, the server stopped -----------------------------
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_probe_between_two_hosts_starts_and_stops_the_server(hosts: Pair, tmp_path: Path) -> None:
    a, b = hosts.a, hosts.b
    server = {"dtnkit_path": str(b.dtnkit_path), "state_dir": str(b.state_dir), "port": 5201}
    start = {**server, "state": "server_started", "bind": b.address, "token": "ans-token"}
    up = run_module("probe", start, tmp_path)
    assert up["changed"] is True and up["server"]["started"] is True
    assert up["server"]["bind"] == b.address and up["server"]["user"] == "nobody"
    assert "ans-token" not in json.dumps(up)
    pid = up["server"]["pid"]
    again = run_module("probe", start, tmp_path)
    assert again["changed"] is False and again["server"]["pid"] == pid
    try:
        out = run_module(
            "probe",
            {
                "dtnkit_path": str(a.dtnkit_path),
                "peer": b.address,
                "port": 5201,
                "duration": "1s",
                "token": "ans-token",
                "server_key": up["server"]["public_key"],
                "db": str(tmp_path / "results.sqlite"),
            },
            tmp_path,
        )
        assert out["changed"] is False
        assert 1e6 < out["throughput_bps"] <= 500e6 * 1.05  # the tbf cap a -> b
        assert out["probe"]["summary"]["throughput_bps"] == out["throughput_bps"]
        assert (tmp_path / "results.sqlite").exists()
    finally:
        down = run_module("probe", {**server, "state": "server_stopped"}, tmp_path)
    assert down["changed"] is True and down["server"]["pid"] == pid
    assert (
        not Path(f"/proc/{pid}/cmdline").exists() or not Path(f"/proc/{pid}/cmdline").read_bytes()
    )
    assert run_module("probe", {**server, "state": "server_stopped"}, tmp_path)["changed"] is False


# ---- through Ansible itself ------------------------------------------------------------------
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_ansible_adhoc_check_diff_then_apply(host: Host, tmp_path: Path) -> None:
    before = host.values()
    argv = [
        str(BIN / "ansible"),
        "localhost",
        "-m",
        "dtn.dtnkit.tune",
        "-a",
        json.dumps(base_args(host, groups=["congestion"])),
    ]
    check = subprocess.run(
        [*argv, "--check", "--diff"],
        capture_output=True,
        text=True,
        timeout=120,
        env=ansible_env(),
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert re.search(r"^-sysctl/net.ipv4.tcp_no_metrics_save = 0$", check.stdout, re.M)
    assert re.search(r"^\+sysctl/net.ipv4.tcp_no_metrics_save = 1$", check.stdout, re.M)
    assert "CHANGED" in check.stdout
    assert host.values() == before and not host.state_dir.exists()
    real = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=ansible_env(), cwd=tmp_path
    )
    assert real.returncode == 0 and "CHANGED" in real.stdout, real.stdout + real.stderr
    assert congestion(host)["sysctl/net.ipv4.tcp_no_metrics_save"] == "1"
