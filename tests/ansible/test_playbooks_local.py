"""The dtn.dtnkit playbooks, quickly, with ``ansible_connection: local`` and a dtnkit_path
wrapper per host that runs dtnkit inside that host's namespace (tests/ansible/namespace_hosts.py).
Over SSH against several hosts they are tested in tests/fleet/ (the SSH harness)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.ansible.namespace_hosts import BIN, Host, Pair, ansible_env, missing_ansible, pair

_WHY = missing_ansible()
pytestmark = [
    pytest.mark.needs_ansible,
    pytest.mark.needs_root,
    pytest.mark.needs_netns,
    pytest.mark.skipif(bool(_WHY), reason=str(_WHY)),
]
KEYS = ("net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_slow_start_after_idle")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with pair(tmp_path_factory.mktemp("ans-pb")) as p:
        yield p


@pytest.fixture
def untuned(hosts: Pair, tmp_path: Path) -> Pair:
    """Both hosts untuned for the congestion group, each with a fresh state dir."""
    for h, side in ((hosts.a, "a"), (hosts.b, "b")):
        h.set_sysctl(KEYS[0], "0")
        h.set_sysctl(KEYS[1], "1")
        h.state_dir = tmp_path / f"state-{side}"
        h.state_dir.mkdir()
    return hosts


def playbook(inventory: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), name, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=ansible_env(),
        cwd=inventory.parent,
    )


def values(*hs: Host) -> list[dict[str, Any]]:
    return [h.values() for h in hs]


def test_a_write_failing_mid_campaign_restores_every_host_and_stops(
    untuned: Pair, tmp_path: Path
) -> None:
    a, b = untuned.a, untuned.b
    before = values(a, b)
    # b cannot record its baseline: its apply fails before writing, after a's apply wrote
    (b.state_dir / f"last-baseline.netns-{b.netns}").mkdir()  # its namespace's pointer
    inv = untuned.inventory(tmp_path / "inventory.json")
    out = tmp_path / "out"
    proc = playbook(
        inv,
        "dtn.dtnkit.campaign",
        "-e",
        json.dumps(
            {
                "dtnkit_out_dir": str(out),
                "dtnkit_groups": ["congestion", "buffers"],
                "dtnkit_probe_duration": "1s",
                "dtnkit_rtt": "20ms",
            }
        ),
    )
    assert proc.returncode != 0, proc.stdout[-3000:]
    doc = json.loads((out / "campaign.json").read_text())
    assert set(doc) == {
        "schema",
        "profile",
        "groups",
        "started",
        "finished",
        "status",
        "failure",
        "pairs",
        "restored",
    }
    assert doc["schema"] == "dtnkit.campaign/1" and doc["status"] == "failed"
    assert doc["groups"] == ["congestion", "buffers"]
    assert doc["finished"] >= doc["started"] > 0
    assert doc["failure"]["host"] == b.name, doc["failure"]
    assert doc["failure"]["step"] == "Apply the group on both ends"
    assert "cannot record the last baseline" in doc["failure"]["msg"]
    assert doc["pairs"] == [{"client": a.name, "server": b.name, "nic_bps": None, "results": []}]
    assert sorted(doc["restored"]) == [a.name, b.name]
    assert values(a, b) == before  # a's applied group was put back
    assert f"campaign failed on {b.name}" in proc.stdout
    assert not list((b.state_dir / "servers").glob("*.pid"))  # the probe server was stopped


def test_rollback_restores_the_last_baseline_and_a_second_run_changes_nothing(
    untuned: Pair, tmp_path: Path
) -> None:
    a, b = untuned.a, untuned.b
    before = values(a, b)
    a.dtnkit("tune", "apply", "--group", "congestion", "--state-dir", str(a.state_dir))
    assert values(a)[0] != before[0]
    inv = untuned.inventory(tmp_path / "inventory.json")
    first = playbook(inv, "dtn.dtnkit.rollback", "--diff")
    assert first.returncode == 0, first.stdout[-3000:]
    assert values(a, b) == before  # b had no baseline: left alone
    assert "+sysctl/net.ipv4.tcp_no_metrics_save = 0" in first.stdout
    second = playbook(inv, "dtn.dtnkit.rollback")
    assert second.returncode == 0 and "changed=1" not in second.stdout, second.stdout[-2000:]


@pytest.mark.parametrize("name", ["dtn.dtnkit.site_audit", "dtn.dtnkit.campaign"])
def test_a_relative_output_directory_is_refused_and_nothing_is_written(
    hosts: Pair, tmp_path: Path, name: str
) -> None:
    """Ansible would take a relative dtnkit_out_dir from the playbook's own directory (inside
    the collection), not from where the admin ran the command: refused with one message."""
    inv = hosts.inventory(tmp_path / "inventory.json")
    before = sorted(p.name for p in tmp_path.iterdir())
    out = playbook(inv, name, "-e", "dtnkit_out_dir=site", "-e", '{"dtnkit_groups": ["buffers"]}')
    assert out.returncode != 0
    assert "absolute path" in out.stdout, out.stdout[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    collections = Path(ansible_env()["ANSIBLE_COLLECTIONS_PATH"])
    assert not (collections / "ansible_collections/dtn/dtnkit/playbooks/site").exists()
