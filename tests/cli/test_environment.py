"""One Environment, read once: flag > environment variable > default, and a test's own
environment keeps every write under its own directories."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import HOSTS, taken
from dtnkit.cli.main import main
from dtnkit.environment import (
    DEFAULT_LAB_STATE_ROOT,
    DEFAULT_RESULTS_DB,
    DEFAULT_STATE_DIR,
    FALLBACK_WIDTH,
    Environment,
)
from dtnkit.errors import ExitStatus


def quiet(environ: dict[str, str]) -> tuple[Environment, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Environment.from_os(environ, stdout=out, stderr=err), out, err


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_from_os_defaults() -> None:
    env, _, _ = quiet({})
    assert env.state_dir == DEFAULT_STATE_DIR == Path("/var/lib/dtnkit")
    assert env.results_db == DEFAULT_RESULTS_DB == Path("/var/lib/dtnkit/results.sqlite")
    assert env.lab_state_root == DEFAULT_LAB_STATE_ROOT == Path("/run/dtnkit/lab")
    assert env.token is None
    assert not env.stdout_isatty and not env.stderr_isatty


def test_from_os_reads_the_variables() -> None:
    env, out, err = quiet(
        {
            "DTNKIT_STATE_DIR": "/s",
            "DTNKIT_DB": "/d.sqlite",
            "DTNKIT_LAB_STATE": "/l",
            "DTNKIT_TOKEN": "t1",
            "BEARER_TOKEN": "t2",
            "COLUMNS": "200",
        }
    )
    assert (env.state_dir, env.results_db, env.lab_state_root) == (
        Path("/s"),
        Path("/d.sqlite"),
        Path("/l"),
    )
    assert env.token == "t1"  # DTNKIT_TOKEN before BEARER_TOKEN
    assert env.terminal_width == 200
    assert env.stdout is out and env.stderr is err


@pytest.mark.parametrize(
    ("environ", "token"),
    [
        ({"BEARER_TOKEN": "b"}, "b"),
        ({"DTNKIT_TOKEN": "", "BEARER_TOKEN": "b"}, "b"),
        ({"DTNKIT_TOKEN": "", "BEARER_TOKEN": ""}, None),
    ],
)
def test_token_falls_back_to_bearer_token(environ: dict[str, str], token: str | None) -> None:
    assert quiet(environ)[0].token == token


@pytest.mark.parametrize("columns", ["", "0", "-3", "wide"])
def test_a_useless_columns_falls_back(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # no terminal to ask either (the test's stdout is captured)
    monkeypatch.setattr("sys.__stdout__", None)
    assert quiet({"COLUMNS": columns})[0].terminal_width == FALLBACK_WIDTH


def test_the_environment_is_frozen() -> None:
    env = Environment()
    with pytest.raises(AttributeError):
        env.state_dir = Path("/elsewhere")  # type: ignore[misc]


def test_state_dir_flag_beats_variable_beats_default(tmp_path: Path) -> None:
    """`tune list` names the directory it read (and writes nothing)."""
    by_var, by_flag = tmp_path / "var", tmp_path / "flag"
    env, out, _ = quiet({"DTNKIT_STATE_DIR": str(by_var)})
    assert main(["tune", "list"], env) == 0
    assert f"no snapshots in {by_var}/snapshots" in out.getvalue()

    env, out, _ = quiet({"DTNKIT_STATE_DIR": str(by_var)})
    assert main(["tune", "list", "--state-dir", str(by_flag)], env) == 0
    assert f"no snapshots in {by_flag}/snapshots" in out.getvalue()

    env, _, err = quiet({})  # the default: only read (a missing snapshot is an error)
    assert main(["tune", "show", "dknosuchsnapshot"], env) == ExitStatus.BAD_INPUT
    assert "snapshots in /var/lib/dtnkit/snapshots" in err.getvalue()


def test_db_flag_beats_variable(tmp_path: Path) -> None:
    by_var, by_flag = tmp_path / "var.sqlite", tmp_path / "flag.sqlite"
    env, out, _ = quiet({"DTNKIT_DB": str(by_var)})
    assert main(["results", "list", "--format", "json"], env) == 0
    assert json.loads(out.getvalue()) == [] and by_var.exists()

    env, out, _ = quiet({"DTNKIT_DB": str(by_var)})
    assert main(["results", "list", "--format", "json", "--db", str(by_flag)], env) == 0
    assert json.loads(out.getvalue()) == [] and by_flag.exists()


def test_help_still_names_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "save", "--help"]) == 0
    assert "/var/lib/dtnkit or $DTNKIT_STATE_DIR" in " ".join(capsys.readouterr().out.split())
    assert main(["probe", "net", "--help"]) == 0
    assert "/var/lib/dtnkit/results.sqlite or $DTNKIT_DB" in " ".join(
        capsys.readouterr().out.split()
    )


def test_a_custom_environment_writes_under_its_state_dir_only(
    tmp_path: Path, environment: Environment
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(HOSTS / "dtn-a", tree, symlinks=True)
    tree_files = {p: p.read_bytes() for p in files_under(tree)}
    default = DEFAULT_STATE_DIR / "snapshots"
    before_default = files_under(default) if default.is_dir() else set()

    assert (
        main(
            ["tune", "save", "--tree", str(tree), "--label", "envtest", "--format", "json"],
            environment,
        )
        == 0
    )
    saved = json.loads(taken(environment.stdout))
    assert Path(saved["path"]).parent == environment.state_dir / "snapshots"
    code = main(
        ["tune", "apply", "--tree", str(tree), "--group", "buffers", "--format", "json"],
        environment,
    )
    assert code == ExitStatus.OK
    applied = json.loads(taken(environment.stdout))
    assert taken(environment.stderr) == ""
    assert applied["ok"] and applied["applied"]

    # everything new is under the environment's state dir; the tree changed in place only
    written = files_under(tmp_path) - set(tree_files)
    assert written and all(p.is_relative_to(environment.state_dir) for p in written), written
    assert {p.name for p in files_under(environment.state_dir / "snapshots")} >= {
        Path(saved["path"]).name,
        f"{applied['baseline']}.json",
    }
    assert (files_under(default) if default.is_dir() else set()) == before_default


def test_cp_sends_the_environments_token_unless_given_one(
    tmp_path: Path, environment: Environment
) -> None:
    from dtnkit.transfer.server import start_server

    root = tmp_path / "root"
    root.mkdir()
    (root / "f.bin").write_bytes(b"x" * 1000)
    tokens = tmp_path / "tokens"
    tokens.write_text("envtoken read\n")
    handle = start_server(root, tokens=tokens, quiet=True)
    try:
        url = handle.url + "f.bin"
        env = replace(environment, token="envtoken")
        assert main(["cp", url, str(tmp_path / "a.bin"), "--json"], env) == 0
        assert json.loads(taken(env.stdout))["bytes"] == 1000
        # the flag wins over the environment
        code = main(["cp", url, str(tmp_path / "b.bin"), "--json", "--token", "wrong"], env)
        assert code == ExitStatus.REFUSED and not (tmp_path / "b.bin").exists()
        # no token at all
        assert main(["cp", url, str(tmp_path / "c.bin")], environment) == ExitStatus.REFUSED
    finally:
        handle.stop()
