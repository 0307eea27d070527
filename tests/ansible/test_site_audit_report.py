"""The site audit's report play finds the controller's dtnkit the way the README's inventory
names it (``all: vars: dtnkit_path``), and says which variable to set when it cannot: never a
silently skipped report.  Two real hosts (tests/ansible/namespace_hosts.py), a controller PATH
without dtnkit on it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.ansible.namespace_hosts import BIN, DTNKIT, Pair, ansible_env, missing_ansible, pair

_WHY = missing_ansible()
pytestmark = [
    pytest.mark.needs_ansible,
    pytest.mark.needs_root,
    pytest.mark.needs_netns,
    pytest.mark.skipif(bool(_WHY), reason=str(_WHY)),
]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with pair(tmp_path_factory.mktemp("site-report")) as p:
        yield p


def bare_path() -> str:
    """The controller's PATH without any dtnkit on it (the venv's bin dropped)."""
    kept = [
        d
        for d in os.environ.get("PATH", "/usr/bin:/bin").split(":")
        if d and Path(d).resolve() != BIN.resolve()
    ]
    path = ":".join(kept)
    assert shutil.which("dtnkit", path=path) is None, path
    return path


def inventory(hosts: Pair, where: Path, **all_vars: str) -> Path:
    inv = hosts.inventory(where / "inventory.json")
    doc = json.loads(inv.read_text())
    doc["all"]["vars"].update(all_vars)
    inv.write_text(json.dumps(doc))
    return inv


def site_audit(inv: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**ansible_env(), "PATH": bare_path()}
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(inv),
            "dtn.dtnkit.site_audit",
            "-e",
            f"dtnkit_out_dir={out}",
            "-e",
            "dtnkit_report_html=false",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=inv.parent,
    )


def test_the_report_runs_with_the_inventorys_dtnkit_path(hosts: Pair, tmp_path: Path) -> None:
    """The README's inventory sets dtnkit_path for all hosts; the controller is one of them."""
    out = tmp_path / "site"
    proc = site_audit(inventory(hosts, tmp_path, dtnkit_path=str(DTNKIT)), out)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert sorted(p.name for p in out.glob("*.audit.json")) == [
        f"{hosts.a.name}.audit.json",
        f"{hosts.b.name}.audit.json",
    ]
    assert "report skipped" not in proc.stdout
    # the fleet report's own table, naming both hosts
    report = proc.stdout.split("Show the report", 1)[1]
    assert hosts.a.name in report and hosts.b.name in report, report[-2000:]


def test_no_dtnkit_on_the_controller_fails_naming_the_variable(hosts: Pair, tmp_path: Path) -> None:
    out = tmp_path / "site"
    proc = site_audit(inventory(hosts, tmp_path, dtnkit_path="/nonexistent/dkfd/dtnkit"), out)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "dtnkit_controller_path" in proc.stdout, proc.stdout[-3000:]
    assert "/nonexistent/dkfd/dtnkit" in proc.stdout
    assert "report skipped" not in proc.stdout
    assert len(list(out.glob("*.audit.json"))) == 2  # the audits are kept


def test_a_given_controller_path_is_the_one_used(hosts: Pair, tmp_path: Path) -> None:
    out = tmp_path / "site"
    inv = inventory(hosts, tmp_path, dtnkit_path="/nonexistent/dkfd/dtnkit")
    proc = site_audit(inv, out, "-e", f"dtnkit_controller_path={DTNKIT}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    bad = site_audit(inv, out, "-e", "dtnkit_controller_path=/nonexistent/dkfd/other")
    assert bad.returncode != 0 and "dtnkit_controller_path" in bad.stdout, bad.stdout[-3000:]


def test_the_report_can_be_declined(hosts: Pair, tmp_path: Path) -> None:
    out = tmp_path / "site"
    inv = inventory(hosts, tmp_path, dtnkit_path="/nonexistent/dkfd/dtnkit")
    proc = site_audit(inv, out, "-e", "dtnkit_report=false")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(list(out.glob("*.audit.json"))) == 2
