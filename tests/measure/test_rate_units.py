"""Every ``*_bps`` figure is bit/s: a storage probe's read and write rates read the same in its
progress lines, its headline, ``results list``, ``results show`` and ``results export``, and a
result stored when those rates were bytes/s reads as bits."""

from __future__ import annotations

import ast
import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from dtnkit.cli import measure_render
from dtnkit.measure.probes import disk
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore, export
from dtnkit.measure.tools import fio
from dtnkit.progress import Interval
from dtnkit.units import format_rate

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")


def _fio_report(rw: str, bw_bytes: int, seconds: int) -> str:
    """fio's final JSON report of one sequential job: ``bw_bytes`` for ``seconds``."""
    side = {
        "bw_bytes": bw_bytes,
        "iops": bw_bytes / 2**20,
        "total_ios": 1,
        "io_bytes": bw_bytes * seconds,
        "lat_ns": {"mean": 1e6},
    }
    idle = {"bw_bytes": 0, "iops": 0, "total_ios": 0, "io_bytes": 0, "lat_ns": {"mean": 0}}
    job = {
        "error": 0,
        "job_runtime": seconds * 1000,
        rw: side,
        ("read" if rw == "write" else "write"): idle,
    }
    return json.dumps({"jobs": [job]})


def _progress_bps(rw: str, report: str, size: int) -> float:
    """The rate the probe's progress line shows for a report covering the whole run."""
    got: list[Interval] = []

    class Record:
        def step(self, what: str, k: int = 0, n: int = 0, *, eta_s: float | None = None) -> None:
            pass

        def interval(self, interval: Interval) -> None:
            got.append(interval)

    fio._status(rw, size, Record())(json.loads(report))
    assert len(got) == 1 and got[0].bps is not None
    return got[0].bps


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80, highlight=False, soft_wrap=False), out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    write=st.integers(1, 40 * 10**9), read=st.integers(1, 40 * 10**9), seconds=st.integers(1, 600)
)
def test_every_rate_of_a_stored_storage_result_is_the_progress_figure(
    tmp_path: Path, write: int, read: int, seconds: int
) -> None:
    size = max(write, read) * seconds
    reports = {
        "write": _fio_report("write", write, seconds),
        "read": _fio_report("read", read, seconds),
    }
    shown = {rw: _progress_bps(rw, text, size) for rw, text in reports.items()}
    parsed = {rw: fio.parse_fio_json(text) for rw, text in reports.items()}
    summary = {
        "write_bps": parsed["write"]["write_bps"],
        "read_bps": parsed["read"]["read_bps"],
        "size_bytes": size,
    }
    summary["throughput_bps"] = summary["read_bps"]
    store = ResultStore(tmp_path / f"r-{write}-{read}-{seconds}.sqlite")
    rid = store.add(ProbeResult(disk.KIND, {"path": "/data"}, summary))
    stored = store.get(rid)
    expect = {
        "write_bps": shown["write"],
        "read_bps": shown["read"],
        "throughput_bps": shown["read"],
    }
    for key, bps in expect.items():
        assert stored.summary[key] == pytest.approx(bps, rel=1e-12), key
        assert stored.as_dict()["summary"][key] == pytest.approx(bps, rel=1e-12), key
    row = next(csv.DictReader(io.StringIO(export([stored], "csv"))))
    for key, bps in expect.items():
        assert float(row[key]) == pytest.approx(bps, rel=1e-12), key
    con, out = _console()
    measure_render.probe_summary(con, stored)
    head = out.getvalue().splitlines()[0]
    assert f"read {format_rate(shown['read'])}, write {format_rate(shown['write'])} in" in head
    con, out = _console()
    measure_render.results_list(con, [stored])
    assert format_rate(shown["read"]) in out.getvalue()


@given(read=st.floats(1, 1e11), write=st.floats(0, 1e11))
def test_a_storage_result_stored_in_bytes_reads_in_bits(read: float, write: float) -> None:
    old = {"read_bps": read, "write_bps": write, "throughput_bps": read * 8, "size_bytes": 1}
    new = disk.upgrade_summary(old)
    assert new["read_bps"] == read * 8 == new["throughput_bps"]
    assert new["write_bps"] == write * 8
    assert disk.upgrade_summary(new) == new  # once in bits, left alone


def test_a_csv_export_names_each_column_once(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.sqlite")
    store.add(
        ProbeResult(
            "net", {"peer": "x"}, {"throughput_bps": 1e9, "duration_s": 9.99}, duration_s=11.5
        )
    )
    header, row = list(csv.reader(io.StringIO(export(store.results(), "csv"))))
    assert len(header) == len(set(header))
    got = dict(zip(header, row, strict=True))
    assert got["duration_s"] == "11.5" and got["summary.duration_s"] == "9.99"


def _dtnkit(*argv: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "dtnkit", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@needs_fio
def test_probe_disk_then_results_show_one_rate_in_one_unit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = str(tmp_path / "r.sqlite")
    probe = _dtnkit("probe", "disk", "--path", str(data), "--size", "8MiB", "--db", db)
    shown = _dtnkit("results", "show", "1", "--db", db, "--format", "json")
    doc: dict[str, Any] = json.loads(shown.stdout)
    s = doc["summary"]
    raw = doc["raw"]
    # fio's own figure (bw_bytes, its final report): the summary holds it x 8, in bit/s
    fio_rates = {
        rw: fio.parse_fio_json(text)[f"{rw}_bps"]  # raw: str() of {rw: fio's stdout}
        for rw, text in ast.literal_eval(raw).items()
    }
    assert s["read_bps"] == fio_rates["read"] and s["write_bps"] == fio_rates["write"]
    assert s["throughput_bps"] == s["read_bps"]
    read, write = format_rate(s["read_bps"]), format_rate(s["write_bps"])
    assert probe.stdout.startswith(f"disk probe 1: read {read}, write {write} in")
    listed = _dtnkit("results", "list", "--db", db)
    assert read in listed.stdout
    row = next(
        csv.DictReader(
            io.StringIO(_dtnkit("results", "export", "--format", "csv", "--db", db).stdout)
        )
    )
    assert float(row["read_bps"]) == s["read_bps"] == float(row["throughput_bps"])
    assert float(row["write_bps"]) == s["write_bps"]


def test_results_show_reads_an_old_bytes_result_in_bits(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    ResultStore(db).add(
        ProbeResult(
            disk.KIND,
            {"path": "/data"},
            {  # as stored before
                "read_bps": 1.6e9,
                "write_bps": 2.15e9,
                "throughput_bps": 1.28e10,
            },
        )
    )
    s = json.loads(_dtnkit("results", "show", "1", "--db", str(db), "--format", "json").stdout)[
        "summary"
    ]
    assert (s["read_bps"], s["write_bps"], s["throughput_bps"]) == (1.28e10, 1.72e10, 1.28e10)
    assert "12.8 Gbit/s" in _dtnkit("results", "list", "--db", str(db)).stdout
