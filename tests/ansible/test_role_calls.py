"""A module's ``check_version: false`` skips ``dtnkit --version`` (one dtnkit start fewer),
counted by the host's dtnkit_path wrapper, which logs its arguments
(tests/ansible/namespace_hosts.py), on two real namespaces named ``rcall*``.  What the role
pair_experiment runs per pair is counted in tests/fleet/test_playbooks_over_ssh.py (its
campaigns already run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.ansible.namespace_hosts import (
    Pair,
    missing_ansible,
    pair,
    run_module,
    wrapper,
)

_WHY = missing_ansible()
pytestmark = [
    pytest.mark.needs_ansible,
    pytest.mark.needs_root,
    pytest.mark.needs_netns,
    pytest.mark.skipif(bool(_WHY), reason=str(_WHY)),
]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with pair(tmp_path_factory.mktemp("rcall-calls"), prefix="rcall") as p:
        yield p


def counted(hosts: Pair, where: Path) -> dict[str, Path]:
    """Each host's dtnkit_path now logs its runs into a file of this test's own."""
    logs = {}
    for h in (hosts.a, hosts.b):
        logs[h.name] = where / f"runs-{h.name}.log"
        wrapper(h.dtnkit_path, h.netns, logs[h.name])
    return logs


def runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_check_version_false_starts_dtnkit_once(hosts: Pair, tmp_path: Path) -> None:
    log = counted(hosts, tmp_path)[hosts.a.name]
    args = {"dtnkit_path": str(hosts.a.dtnkit_path), "groups": ["congestion"]}
    checked = run_module("audit", args, tmp_path)
    assert not checked.get("failed"), checked
    assert checked["dtnkit_version"] and runs(log)[0] == "--version"
    assert [r.split()[:2] for r in runs(log)] == [["--version"], ["tune", "audit"]]
    log.unlink()
    unchecked = run_module("audit", {**args, "check_version": False}, tmp_path)
    assert not unchecked.get("failed"), unchecked
    assert unchecked["dtnkit_version"] is None
    assert [r.split()[:2] for r in runs(log)] == [["tune", "audit"]]
    assert unchecked["audit"]["findings"] == checked["audit"]["findings"]
