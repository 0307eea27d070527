"""The CLI in-process for tests that read its JSON, and the per-test files lab CLI runs use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dtnkit.cli.main import main


def lab_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Files of one test (results db, tune state dir, lab state root); the lab state root goes
    to the CLI as $DTNKIT_LAB_STATE."""
    monkeypatch.setenv("DTNKIT_LAB_STATE", str(tmp_path / "lab"))
    return {
        "db": str(tmp_path / "results.sqlite"),
        "state": str(tmp_path / "tune"),
        "lab": str(tmp_path / "lab"),
    }


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """Exit status and stdout (parsed when it is JSON)."""
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith(("{", "[")) else out
