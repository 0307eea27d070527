"""One vocabulary of flags: --group everywhere (repeatable, comma-separated, --groups alias),
--format on every command, IDs wherever a result is named, durations with units, iperf3's
short flags on `probe net`.  Real CLI runs through ``main(argv, env)``."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tests.support.ports import free_port

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
    assert audit_groups(environment, "--group", "buffers,congestion") == {"buffers", "congestion"}
    assert audit_groups(environment, "--group", "buffers, congestion", "--group", "cpu") == {
        "buffers",
        "congestion",
        "cpu",
    }
    assert audit_groups(environment, "--groups", "nic") == {"nic"}
    assert audit_groups(environment, "--group", "nic,nic") == {"nic"}
    code, out, err = run(
        environment,
        "tune",
        "apply",
        "--tree",
        TREE,
        "--dry-run",
        "--group",
        "buffers,congestion",
        "--format",
        "json",
    )
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
        code, _, err = run(environment, "experiment", flag, "buffers,congestion", "--group", "cpu")
        assert code == ExitStatus.BAD_INPUT, err
        assert "--probe net needs --peer" in err
    code, _, err = run(environment, "experiment", "--peer", "localhost")
    assert code == ExitStatus.USAGE
    assert err.startswith("dtnkit: error: experiment: missing option '--group'")


# ---- --format on commands that only act -------------------------------------------------------
def test_tune_delete_prints_json(environment: Environment) -> None:
    code, out, err = run(
        environment, "tune", "save", "--tree", TREE, "--label", "voc", "--format", "json"
    )
    assert code == 0, err
    snap_id = json.loads(out)["id"]
    code, out, err = run(environment, "tune", "delete", "voc", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == {"deleted": snap_id}


def test_lab_down_prints_json(environment: Environment) -> None:
    name = f"voc{uuid.uuid4().hex[:6]}"
    code, out, err = run(environment, "lab", "down", name, "--missing-ok", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == {"removed": []}


def test_lab_set_json_error_is_json(environment: Environment) -> None:
    code, out, _ = run(environment, "lab", "set", "vocnosuch", "--rtt", "20ms", "--format", "json")
    assert code != 0
    assert "error" in json.loads(out)


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_lab_set_and_down_print_what_they_did(environment: Environment) -> None:
    name = f"voc{uuid.uuid4().hex[:6]}"
    code, _, err = run(environment, "lab", "up", name, "--rtt", "10ms", "--format", "json")
    try:
        assert code == 0, err
        code, out, err = run(
            environment, "lab", "set", name, "--rtt", "20ms", "--loss", "1%", "--format", "json"
        )
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
    exp_id = "exp-20261201T000000-voc"
    store.add_experiment(
        exp_id,
        {
            "id": exp_id,
            "spec": {"probe": "net"},
            "groups": [],
            "helped": [],
            "started": "2026-12-01T00:00:00Z",
        },
    )
    # before: "Invalid value for 'RESULT_ID': 'exp-...' is not a valid integer" (exit 2)
    code, out, err = run(environment, "results", "show", exp_id, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["id"] == exp_id
    code, out, err = run(environment, "results", "show", exp_id)  # a table, the default
    assert code == 0 and f"experiment {exp_id}" in out
    code, _, err = run(environment, "results", "show", "#4242")
    assert code == ExitStatus.BAD_INPUT and "no result 4242" in err
    code, _, err = run(environment, "results", "show", "abc")
    assert code == ExitStatus.BAD_INPUT and "bad result ID 'abc'" in err


# ---- durations and --loss ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["probe", "net", "--peer", "x", "-t", "1.5s"], "not a whole number of seconds"),
        (["probe", "net", "--peer", "x", "--duration", "5x"], "bad --duration '5x'"),
        (["probe", "net", "--peer", "x", "-t", "2h"], "--duration 2h is out of range"),
        (["diagnose", "--peer", "x", "--interval", "0"], "--interval 0 is out of range"),
        (["cp", "--deadline", "2q", "http://127.0.0.1:1/f", "/tmp/x"], "bad --deadline '2q'"),
        (["serve", "--root", "/tmp", "--idle-timeout", "2h"], "--idle-timeout 2h is out of range"),
        (["tune", "apply", "--wait", "11m", "--dry-run", "--tree", TREE], "--wait 11m is out of"),
    ],
)
def test_bad_durations_are_one_error(
    environment: Environment, argv: list[str], fragment: str
) -> None:
    code, out, err = run(environment, *argv)
    assert code == ExitStatus.BAD_INPUT, err
    assert err.startswith("dtnkit: error: ") and fragment in err and err.count("\n") == 1
    assert "Next: " in err and out == ""


def test_wait_reads_units_and_bare_seconds(environment: Environment) -> None:
    for value in ("10m", "600", "90s", "1m30s"):
        code, _, err = run(
            environment,
            "tune",
            "apply",
            "--wait",
            value,
            "--dry-run",
            "--tree",
            TREE,
            "--format",
            "json",
        )
        assert code == 0, (value, err)


def test_loss_says_which_unit_it_read(environment: Environment) -> None:
    # before: "loss 5 is out of range: allowed: 0 to 50%" (5 what?)
    code, _, err = run(environment, "lab", "up", "vocloss", "--loss", "5")
    assert code == ExitStatus.BAD_INPUT
    assert "a number without % is a probability (5 = 500%)" in err
    assert "Next: for 5 percent write --loss 5%" in err


# ---- iperf3's short flags ---------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3")
def test_probe_net_takes_iperf3_short_flags(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    # a real process: -J must leave only JSON on stdout
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "probe",
            "net",
            "--peer",
            "localhost",
            "-P",
            "2",
            "-t",
            "1s",
            "-p",
            str(free_port()),
            "-J",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["spec"]["streams"] == 2 and doc["spec"]["duration_s"] == 1
    assert doc["summary"]["throughput_bps"] > 0


def test_probe_net_help_lists_the_short_flags(environment: Environment) -> None:
    code, _, _ = run(environment, "probe", "net", "-h")
    assert code == 0
    # click writes help to its own stdout, not the environment's: run it as a process
    out = subprocess.run(
        [sys.executable, "-m", "dtnkit", "probe", "net", "-h"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in (
        "-P, --streams",
        "-t, --duration",
        "-R, --reverse",
        "-p, --port",
        "-C, --cc",
        "-J ",
    ):
        assert flag in out


def test_a_count_of_one_is_singular() -> None:
    """No "1 streams" anywhere dtnkit counts (progress, titles, tables)."""
    from dtnkit.units import counted

    assert counted(1, "stream") == "1 stream"
    assert counted(4, "stream") == "4 streams"
    assert counted(0, "stream") == "0 streams"


# ---- one rate vocabulary, counts in words -----------------------------------------------------
#: a figure's rate unit: a number, a blank, then any spelling of bits per second
RATE_UNIT = re.compile(r"\d\s+((?:[kKMGTP]i?)?(?:bits?/s(?:ec)?|bps|b/s))(?![\w/])")
#: the one vocabulary dtnkit prints (units.format_rate, the help, the docs)
RATE_VOCABULARY = {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"}
#: "1 streams": one of a plural noun (not "1 s", "1 ms", "1 process", "1 status")
ONE_OF_MANY = re.compile(r"(?<![\w.,])1 ([a-z]{2,}s)(?<!ss)(?<!us)(?<!is)\b")
#: "file(s)": a count that did not decide (not "http(s)://")
EITHER_NUMBER = re.compile(r"[a-z]\(s\)(?!://)")


def vocabulary_faults(text: str) -> list[str]:
    """What in ``text`` breaks the one vocabulary: another rate spelling, "1 streams",
    "file(s)"."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return (
        [
            f"rate unit {m.group(1)!r}: {m.group(0)!r}"
            for m in RATE_UNIT.finditer(plain)
            if m.group(1) not in RATE_VOCABULARY
        ]
        + [f"{m.group(0)!r}" for m in ONE_OF_MANY.finditer(plain)]
        + [f"{m.group(0)!r}" for m in EITHER_NUMBER.finditer(plain)]
    )


def test_the_vocabulary_check_finds_each_fault() -> None:
    """The check the tests below rely on can fail, and passes what is right."""
    assert vocabulary_faults("read 12.0 Gbits/sec, write 941 Mbit/s") == [
        "rate unit 'Gbits/sec': '0 Gbits/sec'"
    ]
    assert vocabulary_faults("5.50 Kbits/sec; 10 Gbps; 3 Mb/s") == [
        "rate unit 'Kbits/sec': '0 Kbits/sec'",
        "rate unit 'Gbps': '0 Gbps'",
        "rate unit 'Mb/s': '3 Mb/s'",
    ]
    assert vocabulary_faults("dtnkit cp: --streams auto: 1 streams: the path") == ["'1 streams'"]
    assert vocabulary_faults("copied 1 file(s), 1.00 MiB; 1 job(s)") == ["'e(s)'", "'b(s)'"]
    right = (
        "copied 1 file, 4 files; 1 stream, 4 streams; 1 s, 1 ms, 0.1 settings; 1 process;"
        " http(s):// or dav(s):// URLs; 9.41 Gbit/s, 5.50 kbit/s, 0.00 bit/s; "
        "--speed 25000Mb/s; 10 Mbit/s to 1600 Gbit/s"
    )
    assert vocabulary_faults(right) == []


def every_help() -> dict[str, str]:
    """The --help of every command and subcommand, as click draws it."""
    import click

    from dtnkit.cli.main import cli

    out: dict[str, str] = {}

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(cmd, info_name=path[-1], parent=parent, terminal_width=80)
        out[" ".join(path)] = cmd.get_help(ctx)
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, [*path, name], ctx)

    walk(cli, ["dtnkit"], None)
    return out


def test_every_help_speaks_the_one_vocabulary() -> None:
    helps = every_help()
    assert {"dtnkit cp", "dtnkit tune audit", "dtnkit results show", "dtnkit sweep run"} <= set(
        helps
    ), sorted(helps)
    assert len(helps) > 40
    faults = {path: f for path, text in helps.items() if (f := vocabulary_faults(text))}
    assert faults == {}
    # the help does speak of rates, in the one vocabulary
    spoken = {m.group(1) for text in helps.values() for m in RATE_UNIT.finditer(text)}
    assert spoken and spoken <= RATE_VOCABULARY, spoken


@pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("iperf3", "fio")), reason="needs iperf3 and fio"
)
def test_help_and_real_runs_share_one_vocabulary(tmp_path: Path) -> None:
    """Before: the help said `1 Gbit/s`, every table and progress line `941 Mbits/sec`, a
    copy said `copied 1 file(s)` and a disk probe `1 job(s)`.  Now the help and what real runs
    print (tables at 80 columns, progress lines, a copy's summary) share one rate spelling and
    count in words."""
    from dataclasses import replace

    from dtnkit.transfer import tokens
    from dtnkit.transfer.server import start_server

    env = replace(
        Environment(
            state_dir=tmp_path / "state",
            results_db=tmp_path / "r.sqlite",
            lab_state_root=tmp_path / "lab",
            stdin=io.StringIO(),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        ),
        terminal_width=80,
        stderr_isatty=True,
    )  # progress lines on (a StringIO)
    shown: dict[str, str] = {}

    def run_shown(name: str, *argv: str, ok: tuple[int, ...] = (0,)) -> None:
        code, out, err = run(env, *argv)
        assert code in ok, (name, code, err)
        shown[name] = out + err

    tree = tmp_path / "tree"
    shutil.copytree(HOSTS / "dtn-a", tree, symlinks=True)
    run_shown("tune audit", "tune", "audit", "--tree", str(tree), ok=(0, 3))
    run_shown("tune apply", "tune", "apply", "--tree", str(tree), "--group", "buffers")
    run_shown(
        "probe net", "probe", "net", "--peer", "localhost", "-t", "1s", "-p", str(free_port())
    )
    (tmp_path / "disk").mkdir()
    run_shown("probe disk", "probe", "disk", "--path", str(tmp_path / "disk"), "--size", "8MiB")
    run_shown("results list", "results", "list")
    ids = [r.id for r in ResultStore(env.results_db).results(limit=10)]
    assert len(ids) == 2
    for rid in ids:
        run_shown(f"results show {rid}", "results", "show", str(rid), "--format", "table")
    root = tmp_path / "served"
    root.mkdir()
    (root / "f").write_bytes(os.urandom(2**20))
    with start_server(
        root, host="127.0.0.1", port=0, quiet=True, tokens=tokens.parse("ht-vocab read,write\n")
    ) as served:
        run_shown(
            "cp",
            "cp",
            served.url + "f",
            str(tmp_path / "got"),
            "--token",
            "ht-vocab",
            "--streams",
            "1",
        )
    faults = {name: f for name, text in shown.items() if (f := vocabulary_faults(text))}
    assert faults == {}, shown
    assert "copied 1 file," in shown["cp"], shown["cp"]
    assert "1 job" in shown["probe disk"], shown["probe disk"]
    spelled = {
        m.group(1)
        for text in [*shown.values(), *every_help().values()]
        for m in RATE_UNIT.finditer(text)
    }
    assert spelled <= RATE_VOCABULARY and len(spelled) >= 2, spelled


def test_bytes_in_the_streams_notes_never_have_an_exponent() -> None:
    """Before: `together their rate stopped growing at 1.01e+03 KiB per round trip`."""
    from dtnkit.transfer.client.autostreams import show_bytes

    assert show_bytes(1010 * 1024) == "0.986 MiB"
    assert [show_bytes(n) for n in (500 * 1024, 4 * 2**20, 1.5 * 2**30)] == [
        "500 KiB",
        "4 MiB",
        "1.5 GiB",
    ]
    for n in range(0, 2**31, 7_777_777):
        assert "e+" not in show_bytes(n), n
