"""`-h` is `--help` on every command, however the command is reached first.

click keeps the help option a command makes the first time it is parsed; a command reached
through its own object (a test's CliRunner, a program embedding dtnkit) before `dtnkit` once
kept `--help` alone, and `dtnkit cp -h` was refused from then on in that process.  Each case
runs in a fresh interpreter, where nothing has been parsed yet.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from dtnkit.cli.main import COMMANDS

SCRIPT = textwrap.dedent(
    """
    import importlib, sys
    import click
    from click.testing import CliRunner
    from dtnkit.cli.main import COMMANDS, main

    name = sys.argv[1]
    module, attr = COMMANDS[name]
    command = getattr(importlib.import_module(module), attr)
    direct = CliRunner().invoke(command, ["-h"])
    print("direct", direct.exit_code, "Usage:" in direct.output)
    print("main", main([name, "-h"]))
    """
)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_reached_directly_first_still_answers_dash_h(name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, name], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith(("direct", "main"))]
    assert lines == ["direct 0 True", "main 0"], out.stdout + out.stderr
