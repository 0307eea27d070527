"""`-h` is `--help` on every command and subcommand, however the command is reached first.

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
    top = getattr(importlib.import_module(module), attr)

    def walk(command, path):
        yield path, command
        if isinstance(command, click.Group):
            for sub_name, sub in sorted(command.commands.items()):
                yield from walk(sub, [*path, sub_name])

    every = list(walk(top, [name]))
    # each command's own object first, deepest first: nothing above it has been parsed
    for path, command in reversed(every):
        direct = CliRunner().invoke(command, ["-h"])
        print("direct", " ".join(path), direct.exit_code, "Usage:" in direct.output)
    for path, command in every:
        print("main", " ".join(path), main([*path, "-h"]))
    """
)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_reached_directly_first_still_answers_dash_h(name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, name], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith(("direct", "main"))]
    direct = [line for line in lines if line.startswith("direct")]
    main = [line for line in lines if line.startswith("main")]
    assert direct and len(direct) == len(main), out.stdout + out.stderr
    assert all(line.endswith(" 0 True") for line in direct), "\n".join(direct)
    assert all(line.endswith(" 0") for line in main), "\n".join(main)
