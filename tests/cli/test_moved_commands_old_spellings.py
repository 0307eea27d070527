"""`dtnkit report` is `dtnkit sweep report` and `dtnkit campaign` is `dtnkit fleet campaign`.

The old spellings still run the same commands (scripts and older Ansible collections use
them): same stdout, same exit status, and one note on stderr naming the new spelling.  They
are not in `dtnkit --help`; the new ones are in their group's help.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from conftest import taken
from dtnkit.cli.main import ALIASES, cli, main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

GATE = ["gate", "--group", "buffers", "--baseline", "1e9", "--nic-speed", "10gbit"]


def listed(words: list[str], capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The commands `dtnkit WORDS --help` lists."""
    assert main([*words, "--help"]) == ExitStatus.OK
    shown = capsys.readouterr().out.split("Commands:", 1)[1]
    return {line.split()[0] for line in shown.splitlines() if line.strip()}


def test_the_top_level_help_lists_neither_old_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    names = listed([], capsys)
    assert {"sweep", "fleet"} <= names
    assert not names & {"report", "campaign"}, names


@pytest.mark.parametrize(("group", "command"), [("sweep", "report"), ("fleet", "campaign")])
def test_each_group_lists_its_new_command(
    capsys: pytest.CaptureFixture[str], group: str, command: str
) -> None:
    assert command in listed([group], capsys)


def test_an_old_spelling_is_the_same_command_object() -> None:
    ctx = click.Context(cli)
    for old, (group, name) in ALIASES.items():
        parent = cli.get_command(ctx, group)
        assert isinstance(parent, click.Group)
        assert cli.get_command(ctx, old) is parent.get_command(ctx, name), old


def test_campaign_gate_old_and_new_print_the_same(environment: Environment) -> None:
    new = main(["fleet", "campaign", *GATE, "--format", "json"], environment)
    new_out, new_err = taken(environment.stdout), taken(environment.stderr)
    old = main(["campaign", *GATE, "--format", "json"], environment)
    old_out, old_err = taken(environment.stdout), taken(environment.stderr)
    assert new == old == ExitStatus.OK
    assert json.loads(new_out)["gated"] is False and old_out == new_out
    assert new_err == ""
    assert old_err == "dtnkit: note: `dtnkit campaign` is now `dtnkit fleet campaign`\n"


def test_report_old_and_new_fail_the_same(environment: Environment, tmp_path: Path) -> None:
    """A run the store does not hold: the same error and exit status, the note before it,
    nothing written."""
    argv = ["nosuch", "-o", str(tmp_path / "out"), "--db", str(tmp_path / "none.sqlite")]
    new = main(["sweep", "report", *argv], environment)
    new_out, new_err = taken(environment.stdout), taken(environment.stderr)
    old = main(["report", *argv], environment)
    old_out, old_err = taken(environment.stdout), taken(environment.stderr)
    assert new == old == ExitStatus.BAD_INPUT
    assert new_out == old_out == ""
    assert new_err.startswith("dtnkit: error: no sweep run 'nosuch'"), new_err
    assert old_err == "dtnkit: note: `dtnkit report` is now `dtnkit sweep report`\n" + new_err
    assert not (tmp_path / "out").exists()


def test_json_mode_keeps_stdout_json_with_the_old_spelling(
    environment: Environment, tmp_path: Path
) -> None:
    argv = [
        "report",
        "nosuch",
        "-o",
        str(tmp_path / "out"),
        "--db",
        str(tmp_path / "none.sqlite"),
        "--format",
        "json",
    ]
    assert main(argv, environment) == ExitStatus.BAD_INPUT
    assert json.loads(taken(environment.stdout))["error"]["exit_status"] == ExitStatus.BAD_INPUT
    assert taken(environment.stderr).startswith("dtnkit: note: ")
