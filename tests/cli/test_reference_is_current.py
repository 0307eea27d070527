"""docs/reference.md lists every command with its options as the click tree has them (written by
dev/cli_reference.py), and every command family has a user's guide that exists."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "dev" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cli_reference", module)
    spec.loader.exec_module(module)
    return module


def test_the_command_list_is_the_click_trees() -> None:
    ref = _script()
    assert ref.written() == ref.render(), (
        "docs/reference.md's command list is stale: run .venv/bin/python dev/cli_reference.py"
    )


def test_every_command_is_listed_with_a_guide_that_exists() -> None:
    ref = _script()
    listed = ref.render()
    for words, cmd in ref.commands():
        assert f"| `dtnkit {' '.join(words)}" in listed, words
        assert (ROOT / "docs" / ref.GUIDE[words[0]]).is_file(), words
        for param in cmd.params:
            if getattr(param, "hidden", False) or param.name == "help":
                continue
            longs = [o for o in param.opts if o.startswith("--")]
            if longs:
                assert f"`{longs[0]}" in listed, (words, longs[0])
