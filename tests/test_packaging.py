"""The package's metadata: one version, extras that say what they are for."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

import dtnkit

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once_and_every_copy_reads_it() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "dtnkit.__version__"
    out = subprocess.run(
        [sys.executable, "-m", "dtnkit", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert dtnkit.__version__ in out
    # the Ansible collection is released with the package: the same version
    galaxy = yaml.safe_load(
        (ROOT / "ansible/ansible_collections/dtn/dtnkit/galaxy.yml").read_text()
    )
    assert str(galaxy["version"]) == dtnkit.__version__


def test_the_extras_keep_the_test_runner_linters_and_features_apart() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        return {
            req.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip()
            for req in extras[extra]
        }

    assert {"ruff", "mypy", "import-linter"} <= names("lint")
    assert not names("test") & names("lint")
    assert not names("test") & (names("report") | names("postgresql"))
    assert "pytest" in names("test") and "matplotlib" in names("report")
    # dev/test.sh installs every extra the suite needs, through dev/bootstrap.sh
    assert "'.[test,lint,report,postgresql]'" in (ROOT / "dev/bootstrap.sh").read_text()
