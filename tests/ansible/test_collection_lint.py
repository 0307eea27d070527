"""The dtn.dtnkit collection passes ansible-lint (profile production, offline) and the
ansible-test sanity tests that run here without a container or a download; it builds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tests.ansible.namespace_hosts import BIN, COLLECTION, ansible_env, missing_ansible

_WHY = missing_ansible()
pytestmark = [pytest.mark.needs_ansible, pytest.mark.skipif(bool(_WHY), reason=str(_WHY))]

#: the sanity tests that need no venv of their own (the others download their requirements
#: into ~/.ansible/test/venv, which needs the network: see docs/fleet.md)
LOCAL_SANITY = (
    "compile",
    "shebang",
    "line-endings",
    "empty-init",
    "no-assert",
    "no-get-exception",
    "no-illegal-filenames",
    "no-smart-quotes",
    "replace-urlopen",
    "symlinks",
    "use-argspec-type-path",
    "use-compat-six",
    "action-plugin-docs",
    "changelog",
    "ignores",
)


def test_ansible_lint_production_passes(tmp_path: Path) -> None:
    if not (BIN / "ansible-lint").exists():
        pytest.skip("needs ansible-lint in the test venv")
    proc = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=COLLECTION,
        env={**ansible_env(), "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in proc.stderr + proc.stdout


def test_ansible_test_sanity_without_containers(tmp_path: Path) -> None:
    argv = [str(BIN / "ansible-test"), "sanity", "--local", "--python", "3.11"]
    for test in LOCAL_SANITY:
        argv += ["--test", test]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=COLLECTION,
        env={**ansible_env(), "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "ERROR" not in proc.stdout + proc.stderr
    shutil.rmtree(COLLECTION / "tests" / "output", ignore_errors=True)


def test_the_collection_builds(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=COLLECTION,
        env={**ansible_env(), "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = tmp_path.glob("dtn-dtnkit-*.tar.gz")
    import dtnkit

    assert built.name == f"dtn-dtnkit-{dtnkit.__version__}.tar.gz"
    listing = subprocess.run(
        ["tar", "tzf", str(built)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "plugins/modules/tune.py" in listing and "playbooks/campaign.yml" in listing
    assert not [n for n in listing if n.startswith("tests/output")]
