"""Usage errors in dtnkit's one-line shape with exit 2, and a closed stdout pipe handled as
Unix tools handle it (killed by SIGPIPE, nothing on stderr)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import HOSTS, taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

TREE = str(HOSTS / "dtn-a")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["tune", "audit", "--zzz"],
            "dtnkit: error: tune audit: no such option '--zzz'. Next: see `dtnkit tune audit -h`",
        ),
        (
            ["tune", "audit", "--grou", "x"],
            "dtnkit: error: tune audit: no such option '--grou' (did you mean '--group' or "
            "'--groups'?). "
            "Next: see `dtnkit tune audit -h`",
        ),
        (["nosuch"], "dtnkit: error: no such command 'nosuch'. Next: see `dtnkit -h`"),
        (["cp", "a"], "dtnkit: error: cp: missing argument 'DST'. Next: see `dtnkit cp -h`"),
        (
            ["tune", "audit", "--format", "yaml"],
            "dtnkit: error: tune audit: invalid value for '--format': 'yaml' is not one of "
            "'table', 'json'. Next: see `dtnkit tune audit -h`",
        ),
        (
            ["probe", "net", "--peer", "x", "-P", "many"],
            "dtnkit: error: probe net: invalid value for '-P' / '--streams': 'many' is not a valid "
            "integer. Next: see `dtnkit probe net -h`",
        ),
        (
            ["lab", "up"],
            "dtnkit: error: lab up: missing argument 'NAME'. Next: see `dtnkit lab up -h`",
        ),
    ],
)
def test_usage_errors_are_one_line_exit_2(
    environment: Environment, argv: list[str], line: str
) -> None:
    # before: four lines (Usage: ..., Try ..., blank, Error: ...)
    assert main(argv, environment) == ExitStatus.USAGE
    assert taken(environment.stderr) == line + "\n"
    assert taken(environment.stdout) == ""


def test_usage_errors_in_json_mode_are_json_too(environment: Environment) -> None:
    assert main(["tune", "audit", "--format", "json", "--zzz"], environment) == 2
    doc = json.loads(taken(environment.stdout))
    assert doc["error"] == {
        "what": "tune audit: no such option '--zzz'",
        "why": "",
        "next": "see `dtnkit tune audit -h`",
        "exit_status": 2,
    }
    assert taken(environment.stderr).count("\n") == 1


def test_a_bare_group_prints_its_help(environment: Environment) -> None:
    proc = subprocess.run([sys.executable, "-m", "dtnkit", "tune"], capture_output=True, text=True)
    assert proc.returncode == ExitStatus.USAGE
    assert "Commands:" in proc.stderr + proc.stdout and "audit" in proc.stderr + proc.stdout


def run_into_closed_pipe(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """dtnkit writing into a real pipe whose reader has already gone."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "dtnkit", *argv], stdout=w, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(w)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_closed_pipe_ends_as_sigpipe_silently(fmt: str) -> None:
    # before: exit 1 (rich's console) or a BrokenPipeError at exit (JSON)
    proc = run_into_closed_pipe("tune", "audit", "--tree", TREE, "--format", fmt)
    assert proc.returncode == -signal.SIGPIPE, proc.stderr
    assert proc.stderr == b""


def test_head_reads_the_first_line_and_dtnkit_ends_quietly() -> None:
    # the shell's own pipe: whether dtnkit finished writing before head left is a race, so
    # either ending is right, but never an error, a traceback or exit 1
    dtnkit = f"{sys.executable} -m dtnkit"
    proc = subprocess.run(
        [
            "bash",
            "-c",
            f'{dtnkit} tune profiles dtn --format json | head -1; echo "rc=${{PIPESTATUS[0]}}"',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    first, rc = proc.stdout.splitlines()
    assert first == "{"
    assert rc in ("rc=0", "rc=141"), proc.stderr
    assert proc.stderr == ""


def test_main_returns_141_when_stdout_is_a_closed_pipe(environment: Environment) -> None:
    r, w = os.pipe()
    os.close(r)
    previous = signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it
    try:
        with os.fdopen(w, "w") as out:
            env = Environment(
                state_dir=environment.state_dir,
                results_db=environment.results_db,
                lab_state_root=environment.lab_state_root,
                stdin=environment.stdin,
                stdout=out,
                stderr=environment.stderr,
            )
            code = main(["tune", "profiles", "--format", "json"], env)
            with contextlib.suppress(BrokenPipeError):
                out.close()
    finally:
        signal.signal(signal.SIGPIPE, previous)
    assert code == ExitStatus.BROKEN_PIPE == 141
    assert taken(environment.stderr) == ""
