"""One output path: JSON alone on stdout for scripts, tables for people; every exit code
documented."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import HOSTS, taken
from dtnkit.cli.main import main
from dtnkit.cli.output import Printer, emit, for_people
from dtnkit.diagnose.layers import EXIT
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

DOCS = Path(__file__).parents[2] / "docs"


def test_json_mode_prints_only_the_document(environment: Environment) -> None:
    called: list[Printer] = []
    doc = {"ok": True, "values": [1, 2.5, None], "name": "ü"}
    emit(environment, doc, "json", called.append)
    out = taken(environment.stdout)
    assert json.loads(out) == doc
    assert out == json.dumps(doc, indent=2) + "\n"
    assert taken(environment.stderr) == "" and called == []


def test_json_mode_keeps_the_requested_indent(environment: Environment) -> None:
    emit(environment, {"a": 1}, "json", indent=None)
    assert taken(environment.stdout) == '{"a": 1}\n'


def test_table_mode_writes_for_people_through_the_environment(
    environment: Environment,
) -> None:
    env = replace(environment, terminal_width=200)

    def table(p: Printer) -> None:
        p.echo("to stdout")
        p.echo("to stderr", err=True)
        p.console.print("[bold]rich[/] text")
        assert p.console.width == 200

    emit(env, {"ignored": True}, "table", table)
    assert taken(env.stdout) == "to stdout\nrich text\n"
    assert taken(env.stderr) == "to stderr\n"


def test_tables_take_the_terminals_width(environment: Environment) -> None:
    env = replace(environment, terminal_width=40)  # no longer raised to 120 (issue 12)
    printer = for_people(env, "table")
    assert printer is not None and printer.console.width == 40
    assert for_people(env, "json") is None


def test_without_a_table_json_is_the_only_form(environment: Environment) -> None:
    emit(environment, [1], "table")
    assert json.loads(taken(environment.stdout)) == [1]


@pytest.mark.parametrize(
    "argv",
    [
        ["tune", "audit", "--tree", str(HOSTS / "dtn-a")],
        ["tune", "apply", "--tree", str(HOSTS / "dtn-b"), "--dry-run"],
        ["tune", "profiles"],
        ["tune", "profiles", "measurement"],
        ["tune", "list"],
        ["results", "list"],
        ["results", "list", "--experiments"],
        ["tune", "audit", "--group", "nosuch"],
    ],
)
def test_commands_in_json_mode_print_one_document(
    argv: list[str], environment: Environment
) -> None:
    code = main([*argv, "--format", "json"], environment)
    assert code in (ExitStatus.OK, ExitStatus.DRIFT, ExitStatus.BAD_INPUT)
    json.loads(taken(environment.stdout))  # one document, nothing else


def test_errors_go_to_the_environments_stderr(environment: Environment) -> None:
    assert main(["tune", "show", "nosuch"], environment) == ExitStatus.BAD_INPUT
    assert taken(environment.stdout) == ""
    assert taken(environment.stderr).startswith("dtnkit: error: no snapshot 'nosuch'")
    assert main(["tune", "audit", "--format", "yaml"], environment) == ExitStatus.USAGE
    assert taken(environment.stdout) == "" and "yaml" in taken(environment.stderr)


def documented_exit_codes() -> dict[int, str]:
    text = (DOCS / "reference.md").read_text()
    section = text.split("## Exit codes", 1)[1]
    return {
        int(code): meaning
        for code, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.MULTILINE)
    }


def test_every_exit_status_is_documented() -> None:
    documented = documented_exit_codes()
    assert set(documented) == {int(s) for s in ExitStatus}
    assert "interrupted" in documented[ExitStatus.INTERRUPTED]


def test_diagnose_exits_with_exit_status_members() -> None:
    assert all(isinstance(code, ExitStatus) for code in EXIT.values())
    assert sorted(EXIT.values()) == [0, 10, 11, 12, 13, 14, 15]
    documented = documented_exit_codes()
    for layer, code in EXIT.items():
        if code:
            assert "diagnose" in documented[code], layer
