#!/usr/bin/env python3
"""Write the list of commands in docs/reference.md ("Commands") from the click tree: every
command with its arguments, what it does, the page that explains it and its options.  Run it
after adding or changing a command or an option; tests/cli/test_reference_is_current.py fails
until it is run.

    .venv/bin/python dev/cli_reference.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from dtnkit.cli.main import cli

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
BEGIN = "<!-- commands: written by dev/cli_reference.py from the click tree; do not edit -->"
END = "<!-- end of commands -->"

#: the user's guide of each command family (its first word)
GUIDE = {
    "tune": "tune.md", "lab": "lab.md", "serve": "transfer.md", "cp": "transfer.md",
    "scitags": "transfer.md", "probe": "measure.md", "results": "measure.md",
    "diagnose": "measure.md", "experiment": "measure.md", "exporter": "monitoring.md",
    "metrics": "monitoring.md", "checklist": "monitoring.md", "sweep": "sweep.md",
    "fleet": "fleet.md",
}


def commands() -> list[tuple[list[str], click.Command]]:
    """Every command that runs (not the groups), as (its words, it), in the CLI's order."""
    ctx = click.Context(cli)
    found: list[tuple[list[str], click.Command]] = []

    def walk(cmd: click.Command, words: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, [*words, name])
        else:
            found.append((words, cmd))

    walk(cli, [])
    return found


def _option(param: click.Option) -> str:
    names = [o for o in param.opts if o.startswith("--")][:1] + \
        [o for o in param.opts if not o.startswith("--")]
    text = "/".join(names)
    if param.secondary_opts:
        text += "/" + param.secondary_opts[0]
    return f"`{text}`"


def _what(cmd: click.Command) -> str:
    text = (cmd.help or cmd.short_help or "").strip().split("\n\n")[0]
    text = " ".join(text.split())
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0].rstrip(".")
    return first.replace("|", "\\|")


def render() -> str:
    rows = ["| command | what it does | guide | options |", "|---|---|---|---|"]
    for words, cmd in commands():
        args = " ".join(p.human_readable_name.upper() for p in cmd.params
                        if isinstance(p, click.Argument))
        options = ", ".join(_option(p) for p in cmd.params
                            if isinstance(p, click.Option) and not p.hidden
                            and p.name != "help")
        guide = GUIDE[words[0]]
        name = " ".join(["dtnkit", *words, *([args] if args else [])]).replace("|", "\\|")
        rows.append(f"| `{name}` | {_what(cmd)} | [{guide}]({guide}) | {options} |")
    return "\n".join([BEGIN, *rows, END])


def written() -> str:
    text = REFERENCE.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def main() -> int:
    text = REFERENCE.read_text()
    new = text.replace(written(), render())
    if new != text:
        REFERENCE.write_text(new)
        print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
