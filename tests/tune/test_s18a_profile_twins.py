"""Shipped profiles are read from their JSON twins (no tomllib at start-up), and the twins
say exactly what the TOML says; a stale twin is never used."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dtnkit.tune import profile as profile_mod
from dtnkit.tune.profile import load_profile, shipped_dir, shipped_names, twin_document


@pytest.mark.parametrize("name", shipped_names())
def test_each_twin_matches_its_toml(name: str) -> None:
    toml = shipped_dir() / f"{name}.toml"
    twin = json.loads(toml.with_suffix(".json").read_text())
    want = twin_document(toml.read_bytes())
    # json.dumps tells 1 from 1.0 and True from 1, which == does not; and the order of the
    # items, which is the order of the audit's findings
    assert json.dumps(twin) == json.dumps(want), f"{name}.json is stale: run dev/profile_twins.py"


def test_a_stale_twin_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tmp_path / "profiles"
    shutil.copytree(shipped_dir(), shipped)
    monkeypatch.setattr(profile_mod, "shipped_dir", lambda: shipped)
    good = load_profile("dtn", ())
    twin = json.loads((shipped / "dtn.json").read_text())
    twin["data"]["params"]["bdp_multiplier"] = 7.0  # a twin that lies ...
    (shipped / "dtn.json").write_text(json.dumps(twin))
    assert load_profile("dtn", ()).params["bdp_multiplier"] == 7.0  # ... is used while fresh
    toml = shipped / "dtn.toml"
    toml.write_text(toml.read_text() + "\n# edited\n")  # the TOML changed: the twin is stale
    assert load_profile("dtn", ()) == good


def test_an_audit_does_not_load_tomllib() -> None:
    code = ("import sys; from dtnkit.tune.profile import load_profile; load_profile('measurement')"
            "; print('tomllib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
