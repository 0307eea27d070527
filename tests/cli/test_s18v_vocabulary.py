"""One vocabulary of flags: --group everywhere (repeatable, comma-separated, --groups alias),
--format on every command, IDs wherever a result is named, durations with units, iperf3's
short flags on `probe net`.  Real CLI runs through ``main(argv, env)``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import HOSTS, taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.measure.store import ResultStore

TREE = str(HOSTS / "dtn-a")


def run(env: Environment, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), env)
    return code, taken(env.stdout), taken(env.stderr)


def audit_groups(env: Environment, *flags: str) -> set[str]:
    code, out, err = run(env, "tune", "audit", "--tree", TREE, "--format", "json", *flags)
    assert code in (ExitStatus.OK, ExitStatus.DRIFT), err
    return {f["group"] for f in json.loads(out)["findings"]}


# ---- --group ----------------------------------------------------------------------------------
def test_tune_group_takes_commas_repeats_and_the_groups_alias(environment: Environment) -> None:
    # before: `--group buffers,congestion` was "unknown group buffers,congestion" (exit 9)
    assert audit_groups(environment, "--group", "buffers,congestion") == {"buffers",
                                                                          "congestion"}
    assert audit_groups(environment, "--group", "buffers, congestion", "--group", "cpu") == {
        "buffers", "congestion", "cpu"}
    assert audit_groups(environment, "--groups", "nic") == {"nic"}
    assert audit_groups(environment, "--group", "nic,nic") == {"nic"}
    code, out, err = run(environment, "tune", "apply", "--tree", TREE, "--dry-run",
                         "--group", "buffers,congestion", "--format", "json")
    assert code == ExitStatus.OK, err
    plan_groups = {s["group"] for s in json.loads(out)["plan"]}
    assert plan_groups and plan_groups <= {"buffers", "congestion"}


@pytest.mark.parametrize("value", [",", " , ", ""])
def test_an_empty_group_is_one_error(environment: Environment, value: str) -> None:
    code, out, err = run(environment, "tune", "audit", "--tree", TREE, "--group", value)
    assert code == ExitStatus.BAD_INPUT
    assert err.startswith("dtnkit: error: empty --group") and err.count("\n") == 1 and out == ""


def test_an_unknown_group_in_a_list_is_named(environment: Environment) -> None:
    code, _, err = run(environment, "tune", "audit", "--tree", TREE, "--group", "buffers,nosuch")
    assert code == ExitStatus.BAD_INPUT and "unknown group nosuch" in err


def test_experiment_takes_group_and_groups(environment: Environment) -> None:
    # before: `experiment --group` was "no such option" (exit 2); now both spellings parse and
    # the run gets as far as its own check (no --peer for the net probe)
    for flag in ("--group", "--groups"):
        code, _, err = run(environment, "experiment", flag, "buffers,congestion",
                           "--group", "cpu")
        assert code == ExitStatus.BAD_INPUT, err
        assert "--probe net needs --peer" in err
    code, _, err = run(environment, "experiment", "--peer", "localhost")
    assert code == ExitStatus.USAGE
    assert err.startswith("dtnkit: error: experiment: missing option '--group'")


# ---- --format on commands that only act -------------------------------------------------------
def test_tune_delete_prints_json(environment: Environment) -> None:
    code, out, err = run(environment, "tune", "save", "--tree", TREE, "--label", "s18v",
                         "--format", "json")
    assert code == 0, err
    snap_id = json.loads(out)["id"]
    code, out, err = run(environment, "tune", "delete", "s18v", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == {"deleted": snap_id}


def test_lab_down_prints_json(environment: Environment) -> None:
    name = f"s18v{uuid.uuid4().hex[:6]}"
    code, out, err = run(environment, "lab", "down", name, "--missing-ok", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == {"removed": []}


def test_lab_set_json_error_is_json(environment: Environment) -> None:
    code, out, _ = run(environment, "lab", "set", "s18vnosuch", "--rtt", "20ms",
                       "--format", "json")
    assert code != 0
    assert "error" in json.loads(out)


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_lab_set_and_down_print_what_they_did(environment: Environment) -> None:
    name = f"s18v{uuid.uuid4().hex[:6]}"
    code, _, err = run(environment, "lab", "up", name, "--rtt", "10ms", "--format", "json")
    try:
        assert code == 0, err
        code, out, err = run(environment, "lab", "set", name, "--rtt", "20ms", "--loss", "1%",
                             "--format", "json")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["name"] == name and doc["rtt_ms"] == 20.0 and doc["loss"] == 0.01
    finally:
        code, out, err = run(environment, "lab", "down", name, "--format", "json")
        if code != 0:  # whatever went wrong, leave no namespace behind
            main(["lab", "down", name, "--missing-ok"], environment)
    assert code == 0, err
    removed = json.loads(out)["removed"]
    assert removed and all(ns.startswith(f"dkl-{name}") for ns in removed)


# ---- IDs --------------------------------------------------------------------------------------
def test_results_show_takes_an_experiment_id(environment: Environment) -> None:
    store = ResultStore(environment.results_db)
    exp_id = "exp-20261201T000000-s18v"
    store.add_experiment(exp_id, {"id": exp_id, "spec": {"probe": "net"}, "groups": [],
                                  "helped": [], "started": "2026-12-01T00:00:00Z"})
    # before: "Invalid value for 'RESULT_ID': 'exp-...' is not a valid integer" (exit 2)
    code, out, err = run(environment, "results", "show", exp_id)
    assert code == 0, err
    assert json.loads(out)["id"] == exp_id
    code, out, err = run(environment, "results", "show", exp_id, "--format", "table")
    assert code == 0 and f"id: {exp_id}" in out
    code, _, err = run(environment, "results", "show", "#4242")
    assert code == ExitStatus.BAD_INPUT and "no result 4242" in err
    code, _, err = run(environment, "results", "show", "abc")
    assert code == ExitStatus.BAD_INPUT and "bad result ID 'abc'" in err


# ---- durations and --loss ---------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "fragment"), [
    (["probe", "net", "--peer", "x", "-t", "1.5s"], "not a whole number of seconds"),
    (["probe", "net", "--peer", "x", "--duration", "5x"], "bad --duration '5x'"),
    (["probe", "net", "--peer", "x", "-t", "2h"], "--duration 2h is out of range"),
    (["diagnose", "--peer", "x", "--interval", "0"], "--interval 0 is out of range"),
    (["cp", "--deadline", "2q", "http://127.0.0.1:1/f", "/tmp/x"], "bad --deadline '2q'"),
    (["serve", "--root", "/tmp", "--idle-timeout", "2h"], "--idle-timeout 2h is out of range"),
    (["tune", "apply", "--wait", "11m", "--dry-run", "--tree", TREE], "--wait 11m is out of"),
])
def test_bad_durations_are_one_error(environment: Environment, argv: list[str],
                                     fragment: str) -> None:
    code, out, err = run(environment, *argv)
    assert code == ExitStatus.BAD_INPUT, err
    assert err.startswith("dtnkit: error: ") and fragment in err and err.count("\n") == 1
    assert "Next: " in err and out == ""


def test_wait_reads_units_and_bare_seconds(environment: Environment) -> None:
    for value in ("10m", "600", "90s", "1m30s"):
        code, _, err = run(environment, "tune", "apply", "--wait", value, "--dry-run",
                           "--tree", TREE, "--format", "json")
        assert code == 0, (value, err)


def test_loss_says_which_unit_it_read(environment: Environment) -> None:
    # before: "loss 5 is out of range: allowed: 0 to 50%" (5 what?)
    code, _, err = run(environment, "lab", "up", "s18vloss", "--loss", "5")
    assert code == ExitStatus.BAD_INPUT
    assert "a number without % is a probability (5 = 500%)" in err
    assert "Next: for 5 percent write --loss 5%" in err


# ---- iperf3's short flags ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3")
def test_probe_net_takes_iperf3_short_flags(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    # a real process: -J must leave only JSON on stdout
    proc = subprocess.run([sys.executable, "-m", "dtnkit", "probe", "net", "--peer", "localhost",
                           "-P", "2", "-t", "1s", "-p", str(free_port()), "-J", "--db", str(db)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["spec"]["streams"] == 2 and doc["spec"]["duration_s"] == 1
    assert doc["summary"]["throughput_bps"] > 0


def test_probe_net_help_lists_the_short_flags(environment: Environment) -> None:
    code, _, _ = run(environment, "probe", "net", "-h")
    assert code == 0
    # click writes help to its own stdout, not the environment's: run it as a process
    out = subprocess.run([sys.executable, "-m", "dtnkit", "probe", "net", "-h"],
                         capture_output=True, text=True, check=True).stdout
    for flag in ("-P, --streams", "-t, --duration", "-R, --reverse", "-p, --port", "-C, --cc",
                 "-J "):
        assert flag in out


def test_a_count_of_one_is_singular() -> None:
    """No "1 streams" anywhere dtnkit counts (progress, titles, tables)."""
    from dtnkit.units import counted

    assert counted(1, "stream") == "1 stream"
    assert counted(4, "stream") == "4 streams"
    assert counted(0, "stream") == "0 streams"
