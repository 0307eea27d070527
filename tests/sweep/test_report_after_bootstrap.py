"""The README's run command makes a venv that can draw the README tour's report: a copy of
this checkout bootstrapped as ``dev/run.sh`` does it (``dev/bootstrap.sh``, a fresh ``.venv``,
pip from PyPI through pip's cache), then the tour's ``dtnkit sweep report tour -o DIR`` as written.
Without matplotlib the hint names what fits how dtnkit was installed: the checkout's own
bootstrap, or the package's extra."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.sweep.synthetic import store_run

from dtnkit import htmlpage
from dtnkit.errors import ExitStatus

ROOT = Path(__file__).resolve().parents[2]


def checkout_copy(dest: Path) -> Path:
    """The tracked files of this checkout (what a fresh clone has), without its .venv."""
    names = (
        subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file() and not name.startswith("tests/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_the_tours_report_line_runs_in_a_venv_made_by_the_run_command(tmp_path: Path) -> None:
    clone = checkout_copy(tmp_path / "clone")
    boot = subprocess.run(
        ["dev/bootstrap.sh"], cwd=clone, capture_output=True, text=True, timeout=900, check=False
    )
    if boot.returncode != 0 and "needs root to install" in boot.stderr:
        pytest.skip(f"bootstrap needs root here: {boot.stderr.strip()}")
    assert boot.returncode == 0, boot.stderr[-3000:]
    dtnkit = clone / ".venv" / "bin" / "dtnkit"
    store_run(tmp_path / "r.sqlite", "tour")
    env = {
        **os.environ,
        "DTNKIT_DB": str(tmp_path / "r.sqlite"),
        "DTNKIT_STATE_DIR": str(tmp_path / "state"),
    }
    # the README tour's line, as written (its /scratch/tour under tmp_path)
    proc = subprocess.run(
        [str(dtnkit), "sweep", "report", "tour", "-o", str(tmp_path / "tour")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"open {tmp_path / 'tour' / 'report.html'}" in proc.stdout
    assert (tmp_path / "tour" / "report.html").stat().st_size > 10_000
    # the same venv with matplotlib hidden: the hint is the checkout's own, runnable there
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from dtnkit.cli.main import entry; sys.exit(entry())"
    )
    proc = subprocess.run(
        [
            str(clone / ".venv" / "bin" / "python"),
            "-c",
            code,
            "sweep",
            "report",
            "tour",
            "-o",
            str(tmp_path / "none"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == ExitStatus.TOOL_MISSING, proc.stderr
    assert f"in the checkout {clone}: run ./dev/bootstrap.sh" in proc.stderr
    assert ".venv/bin/pip install -e '.[report]'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "none").exists()


def test_an_installed_package_is_told_the_extra(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages" / "dtnkit"
    site.mkdir(parents=True)
    assert htmlpage.install_hint(site) == htmlpage.INSTALL_HINT
    assert "pip install 'dtnkit[report]'" in htmlpage.install_hint(site)
    # a directory named src next to no bootstrap is not a checkout either
    fake = tmp_path / "other" / "src" / "dtnkit"
    fake.mkdir(parents=True)
    assert htmlpage.install_hint(fake) == htmlpage.INSTALL_HINT
    assert "./dev/bootstrap.sh" in htmlpage.install_hint(ROOT / "src" / "dtnkit")
