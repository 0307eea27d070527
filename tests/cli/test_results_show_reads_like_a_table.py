"""`dtnkit results show ID` draws a table like every other command (before: JSON unless
--format table, and that was `key: value` lines with an epoch float); `--format json` gives
the full record.  Moments are ISO 8601 in UTC in tables and JSON (`started`), the epoch
seconds only beside them (`started_epoch`); an experiment stored with epoch seconds reads
the same way."""

from __future__ import annotations

import calendar
import csv
import io
import json
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
STARTED = 1764583810.25  # 2025-12-01T10:10:10Z


def run(env: Environment, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), env)
    return code, taken(env.stdout), taken(env.stderr)


@pytest.fixture
def env(environment: Environment) -> Environment:
    return replace(environment, terminal_width=80)


def net_result(**changes: object) -> ProbeResult:
    result = ProbeResult(
        "net",
        {"peer": "demo/dst", "tool": "iperf3", "streams": 4},
        {
            "throughput_bps": 9.41e9,
            "streams": 4,
            "duration_s": 10.0,
            "retransmits": 12,
            "sampler_samples": 20,
            "cc": "bbr",
        },
        host="dtn1",
        netns="dkl-demo-src",
        started=STARTED,
        duration_s=10.4,
        label="after buffers",
    )
    for key, value in changes.items():
        setattr(result, key, value)
    return result


def test_results_show_defaults_to_a_table(env: Environment) -> None:
    ResultStore(env.results_db).add(net_result())
    code, out, err = run(env, "results", "show", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "net probe 1: 9.41 Gbit/s to demo/dst"  # the figure first
    assert "{" not in out and "1764583810" not in out  # no JSON, no epoch
    record = {line.split(None, 1)[0]: line.split(None, 1)[1].strip() for line in lines[1:]}
    assert record["started"] == "2025-12-01T10:10:10Z, took 10.4 s"
    assert record["on"] == "host dtn1, netns dkl-demo-src"
    assert (record["tool"], record["label"]) == ("iperf3", "after buffers")
    assert record["samples"].endswith("--format json")
    assert max(len(line) for line in lines) <= 80

    code, out, _ = run(env, "results", "show", "1", "--format", "json")
    doc = json.loads(out)
    assert doc["started"] == "2025-12-01T10:10:10Z" and doc["started_epoch"] == STARTED
    assert doc["summary"]["throughput_bps"] == 9.41e9 and doc["id"] == 1


def test_an_experiment_stored_with_epochs_shows_iso_times(env: Environment) -> None:
    store = ResultStore(env.results_db)
    exp_id = "exp-20251201T101010-ht01"
    store.add_experiment(
        exp_id,
        {  # as dtnkit stored an experiment before
            "id": exp_id,
            "started": STARTED,
            "finished": STARTED + 600.0,
            "spec": {"probe": "net", "repeat": 2, "hosts": ["dtn1"], "groups": ["buffers"]},
            "groups": [
                {
                    "group": "buffers",
                    "verdict": "helps",
                    "ratio": 1.8,
                    "margin": 0.05,
                    "baseline_bps": [5e9, 5.2e9],
                    "applied_bps": [9.1e9, 9.3e9],
                }
            ],
            "helped": ["buffers"],
        },
    )
    code, out, err = run(env, "results", "show", exp_id)
    assert code == 0, err
    assert out.startswith(f"experiment {exp_id}: helped: buffers")
    assert "started 2025-12-01T10:10:10Z, finished 2025-12-01T10:20:10Z" in out
    assert f"dtnkit tune apply --from-experiment {exp_id}" in out
    assert "1764583810" not in out and "{" not in out
    code, out, _ = run(env, "results", "show", exp_id, "--format", "json")
    doc = json.loads(out)
    assert (doc["started"], doc["started_epoch"]) == ("2025-12-01T10:10:10Z", STARTED)
    assert (doc["finished"], doc["finished_epoch"]) == ("2025-12-01T10:20:10Z", STARTED + 600)
    code, out, _ = run(env, "results", "list", "--experiments", "--format", "json")
    assert json.loads(out)[0]["started"] == "2025-12-01T10:10:10Z"


def test_list_and_export_give_iso_times_with_the_epoch_beside(env: Environment) -> None:
    ResultStore(env.results_db).add(net_result())
    code, out, _ = run(env, "results", "list", "--format", "json")
    assert code == 0
    row = json.loads(out)[0]
    assert (row["started"], row["started_epoch"]) == ("2025-12-01T10:10:10Z", STARTED)
    code, out, _ = run(env, "results", "export", "--format", "csv")
    assert code == 0
    first = next(csv.DictReader(io.StringIO(out)))
    assert first["started"] == "2025-12-01T10:10:10Z"
    assert float(first["started_epoch"]) == STARTED
    code, out, _ = run(env, "results", "export")
    assert code == 0
    assert json.loads(out)[0]["started"] == "2025-12-01T10:10:10Z"


@pytest.mark.parametrize("started", [1e300, -5.0])
def test_a_moment_beyond_iso_shows_as_missing(env: Environment, started: float) -> None:
    """A stored start no clock could have given (a hand-edited or corrupt row): `-` in the
    table, null in JSON beside the stored number, no traceback."""
    ResultStore(env.results_db).add(net_result(started=started))
    code, out, err = run(env, "results", "show", "1")
    assert code == 0 and err == ""
    assert re.search(r"^  started +-, took 10.4 s", out, re.M), out
    code, out, _ = run(env, "results", "show", "1", "--format", "json")
    doc = json.loads(out)
    assert doc["started"] is None and doc["started_epoch"] == started


def test_a_missing_result_is_one_error(env: Environment) -> None:
    code, out, err = run(env, "results", "show", "7")
    assert code == ExitStatus.BAD_INPUT and out == ""
    assert err.startswith("dtnkit: error: no result 7") and err.count("\n") == 1


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
def test_a_real_disk_probe_shows_when_it_ran(env: Environment, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    before = time.time()
    code, _, err = run(env, "probe", "disk", "--path", str(tmp_path / "d"), "--size", "8MiB")
    assert code == 0, err
    code, out, _ = run(env, "results", "show", "1")
    assert out.startswith("disk probe 1: read ")
    started = re.search(r"started +(\S+),", out)
    assert started, out
    when = calendar.timegm(time.strptime(started.group(1), "%Y-%m-%dT%H:%M:%SZ"))
    assert before - 1 <= when <= time.time()


@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.text(max_size=5),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
    )
)
def test_format_time_is_iso_utc_or_missing(value: object) -> None:
    from dtnkit.units import MISSING, format_time

    shown = format_time(value)
    if shown == MISSING:
        return
    assert ISO.fullmatch(shown), shown
    assert isinstance(value, int | float) and not isinstance(value, bool)
    assert calendar.timegm(time.strptime(shown, "%Y-%m-%dT%H:%M:%SZ")) == int(value // 1)


def test_sweep_list_shows_when_a_run_was_created_in_iso(env: Environment) -> None:
    """Before: `2025-12-01 10:10` under `created (UTC)`."""
    from dtnkit.sweep import store

    made = store.SweepStore(env.results_db).create_run("ht-r", "", {}, 1)
    code, out, err = run(env, "sweep", "list", "--wide")
    assert code == 0, err
    assert format_created(made.created) in out and "(UTC)" not in out


def format_created(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
