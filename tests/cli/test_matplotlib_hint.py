"""How to get matplotlib, as the report commands say it: `dtnkit sweep report` and `dtnkit
fleet report` give the same hint, in their help and when it is missing, and in a checkout it is the
checkout's own bootstrap (`pip install 'dtnkit[report]'` is for an installed package)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from dtnkit.errors import ExitStatus

ROOT = Path(__file__).parents[2]
SENTENCE = (
    "needs matplotlib (the report extra: ./dev/bootstrap.sh in a checkout, else pip "
    "install 'dtnkit[report]')"
)


def dtnkit(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dtnkit", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_both_report_commands_tell_the_same_way_to_get_matplotlib() -> None:
    for words in (["sweep", "report"], ["fleet", "report"]):
        help_text = flat(dtnkit(*words, "--help").stdout)
        assert SENTENCE in help_text.lower(), (words, help_text)


def test_a_missing_matplotlib_names_the_checkouts_bootstrap(tmp_path: Path) -> None:
    """matplotlib made unimportable (a package of that name that raises ImportError, first
    on the path): the fleet report's page needs it, the error names how to get it here."""
    blocker = tmp_path / "blocker" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    audits = tmp_path / "site"
    audits.mkdir()
    audit = dtnkit(
        "tune", "audit", "--tree", str(ROOT / "tests/fixtures/hosts/dtn-a"), "--format", "json"
    )
    (audits / "dtn-a.audit.json").write_text(audit.stdout)
    path = [str(blocker.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    done = dtnkit(
        "fleet",
        "report",
        str(audits),
        "-o",
        str(tmp_path / "out"),
        env={"PYTHONPATH": os.pathsep.join(path)},
    )
    assert done.returncode == ExitStatus.TOOL_MISSING, done.stderr
    err = done.stderr.strip().splitlines()[-1]
    assert err.startswith("dtnkit: error: dtnkit fleet report needs matplotlib"), err
    assert f"in the checkout {ROOT}: run ./dev/bootstrap.sh" in err, err
    assert "pip install 'dtnkit[report]'" not in err, err
