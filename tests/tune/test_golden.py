"""Golden end-to-end tests: `dtnkit tune audit --tree T --format json` against stored output.

Regenerate after an intended change with `DTNKIT_UPDATE_GOLDEN=1 pytest tests/tune/test_golden.py`
and review the diff like code.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dtnkit.cli.main import main

HERE = Path(__file__).parents[1]
CASES = {
    "audit-dtn-a": ["--tree", "dtn-a"],
    "audit-dtn-a-measurement": ["--tree", "dtn-a", "--profile", "measurement"],
    "audit-dtn-b": ["--tree", "dtn-b"],
    "audit-dtn-b-20ms": ["--tree", "dtn-b", "--rtt", "20ms"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_audit_json_matches_golden(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        str(HERE / "fixtures" / "hosts" / a) if i > 0 and CASES[name][i - 1] == "--tree" else a
        for i, a in enumerate(CASES[name])
    ]
    capsys.readouterr()
    code = main(["tune", "audit", "--format", "json", *args])
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert code == (0 if doc["compliant"] else 3)
    golden = HERE / "golden" / f"{name}.json"
    if os.environ.get("DTNKIT_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(doc, indent=2) + "\n")
    assert doc == json.loads(golden.read_text()), f"{name} changed; see the module docstring"
