"""`dtnkit sweep run` and `sweep list` on hostile input: one error line, exit 9, nothing
written (no database, no lab path)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.sweep import grid as grid_mod
from dtnkit.sweep import store

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "sweep-grid.toml"


def _refused(environment: Environment, argv: list[str], needle: str) -> str:
    code = main(argv, environment)
    err = taken(environment.stderr)
    assert code == 9, (code, err)
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: "), err
    assert needle in err, err
    assert not environment.results_db.exists()
    assert not environment.lab_state_root.exists()
    return err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--name", "../x", "rtt=5ms", "streams=1"], "bad run name"),
        (["--name", "a/b", "rtt=5ms", "streams=1"], "bad run name"),
        (["--name", "a..b", "rtt=5ms", "streams=1"], "bad run name"),
        (["--name", "x" * 65, "rtt=5ms", "streams=1"], "bad run name"),
        (["--resume", "rtt=5ms", "streams=1"], "--resume needs --name"),
        (["--resume", "--name", "nope", "rtt=5ms", "streams=1"], "no sweep run 'nope'"),
        (["rtt=5ms"], "axis streams is missing"),
        ([], "no grid"),
        (["a.toml", "b.toml"], "2 grid files given"),
        (["--lab", "Bad/Name", "rtt=5ms", "streams=1"], "lab"),
        (["rtt=5ms", "streams=0"], "bad streams value"),
        (["/nonexistent/grid.toml"], "cannot read grid"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    environment: Environment, args: list[str], needle: str
) -> None:
    _refused(environment, ["sweep", "run", *args], needle)


def test_a_file_and_words_together_are_refused(environment: Environment, tmp_path: Path) -> None:
    _refused(environment, ["sweep", "run", str(EXAMPLE), "rtt=5ms"], "a grid file and")


def test_resume_with_another_grid_is_refused(environment: Environment) -> None:
    g = grid_mod.parse_grid_flags(["rtt=5ms", "streams=1"], known_profiles=[])
    store.SweepStore(environment.results_db).create_run("r", g.to_toml(), {}, len(g))
    before = environment.results_db.read_bytes()
    code = main(["sweep", "run", "--resume", "--name", "r", "rtt=5ms", "streams=1,2"], environment)
    err = taken(environment.stderr)
    assert code == 9 and "started with another grid" in err and err.count("\n") == 1
    assert environment.results_db.read_bytes() == before
    assert not environment.lab_state_root.exists()


def test_list_without_a_database_creates_none(environment: Environment) -> None:
    assert main(["sweep", "list", "--format", "json"], environment) == 0
    assert json.loads(taken(environment.stdout)) == []
    assert main(["sweep", "list"], environment) == 0
    assert "no sweep runs" in taken(environment.stdout)
    assert not environment.results_db.exists()


def test_fuzzed_grid_files_are_refused_in_one_line(
    environment: Environment, tmp_path: Path
) -> None:
    rng = random.Random(19)
    text = EXAMPLE.read_bytes()
    refused = 0
    for i in range(120):
        data = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(3)
            at = rng.randrange(len(data))
            if op == 0:
                data[at] = rng.randrange(256)
            elif op == 1:
                del data[at : at + rng.randint(1, 40)]
            else:
                data[at:at] = rng.choice(
                    [
                        b"\x00",
                        b"[",
                        b"]",
                        b'"',
                        b"=",
                        b"\n",
                        b"nan",
                        b"-1",
                        b"\xff\xfe",
                        b"1e999",
                        b"{",
                        b"9" * 30,
                    ]
                )
        path = tmp_path / f"g{i}.toml"
        path.write_bytes(bytes(data))
        try:
            grid_mod.load_grid(path)
        except BadInput:
            pass
        else:
            continue  # still a valid grid: it would run; not this test's business
        _refused(environment, ["sweep", "run", str(path), "--name", f"g{i}"], "")
        refused += 1
    assert refused > 60
