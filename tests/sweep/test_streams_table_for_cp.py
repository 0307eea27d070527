"""`dtnkit cp --streams auto` reads a sweep's recommended-streams table (`sweep analyze
--save-streams`): --streams-table FILE, else STATE_DIR/streams.json; the row for the measured
RTT chooses and cp says which source did.  A real download from a real `dtnkit serve`."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.loaded import offending, probe
from tests.support.served import holding

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.transfer.client import autostreams, streamtable
from dtnkit.transfer.client.policy import StreamPolicy
from dtnkit.transfer.server import ServerHandle

DATA = bytes(range(256)) * 64


def table_doc(rows: list[tuple[float, int]]) -> dict[str, object]:
    return {
        "schema": streamtable.STREAMS_TABLE_SCHEMA,
        "knee_fraction": 0.9,
        "rtts": [{"rtt_ms": r, "streams": s, "peak_streams": s, "peak_bps": 1e9} for r, s in rows],
    }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerHandle]:
    with holding(tmp_path / "root", {"f": DATA}) as handle:
        yield handle


def cp(tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = Environment(
        state_dir=tmp_path / "state", results_db=tmp_path / "r.sqlite", stdout=out, stderr=err
    )
    return main(["cp", *argv], env), out.getvalue(), err.getvalue()


def test_the_table_row_for_the_measured_rtt_chooses(served: ServerHandle, tmp_path: Path) -> None:
    table = tmp_path / "t.json"
    # loopback's RTT is well under 1 ms: the 0.5 ms row is the nearest (log scale)
    table.write_text(json.dumps(table_doc([(0.5, 3), (5.0, 7), (100.0, 24)])))
    code, out, err = cp(
        tmp_path,
        "--streams-table",
        str(table),
        "--format",
        "json",
        "-v",
        served.url + "f",
        str(tmp_path / "a"),
    )
    assert code == 0, err
    assert (tmp_path / "a").read_bytes() == DATA
    decision = json.loads(out)["streams_auto"]
    assert decision["streams"] == 3
    assert f"--streams auto: 3 streams: the streams table {table} (its row for 0.5 ms" in err


def test_the_state_dirs_table_is_the_default_and_rate_skips_it(
    served: ServerHandle, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    default = tmp_path / "state" / "streams.json"
    default.write_text(json.dumps(table_doc([(1.0, 5)])))
    code, out, err = cp(tmp_path, "--format", "json", "-v", served.url + "f", str(tmp_path / "a"))
    assert code == 0, err
    assert json.loads(out)["streams_auto"]["streams"] == 5 and str(default) in err
    code, out, err = cp(
        tmp_path, "--format", "json", "--rate", "1g", served.url + "f", str(tmp_path / "b")
    )
    assert code == 0 and "streams table" not in err
    assert "streams table" not in json.loads(out)["streams_auto"]["reason"]


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        ("{", (), "is not JSON"),
        ('{"schema": "other/1", "rtts": []}', (), "its schema is not dtnkit.sweep.streams/1"),
        (json.dumps(table_doc([(5.0, 0)])), (), "streams 1-1024"),
        (json.dumps(table_doc([(5.0, 4)])), ("--streams", "4"), "--streams-table: chooses"),
        (json.dumps(table_doc([(5.0, 4)])), ("--rate", "1g"), "--streams-table: chooses"),
    ],
)
def test_a_bad_table_is_one_line_and_copies_nothing(
    served: ServerHandle, tmp_path: Path, content: str, argv: tuple[str, ...], message: str
) -> None:
    table = tmp_path / "t.json"
    table.write_text(content)
    code, out, err = cp(
        tmp_path, "--streams-table", str(table), *argv, served.url + "f", str(tmp_path / "a")
    )
    assert code == ExitStatus.BAD_INPUT and out == ""
    assert err.startswith("dtnkit: error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "a").exists()
    code, _, err = cp(
        tmp_path,
        "--streams-table",
        str(tmp_path / "none.json"),
        served.url + "f",
        str(tmp_path / "a"),
    )
    assert code == ExitStatus.BAD_INPUT and "cannot read the streams table" in err


def test_a_table_caps_and_falls_back_without_an_rtt() -> None:
    d = autostreams.from_table([(1.0, 1000)], "T", 0.001, 1e9, "--rate")
    assert d is not None and d.streams == autostreams.TABLE_CAP and "capped" in d.reason
    assert autostreams.from_table([(1.0, 4)], "T", None, 1e9, "--rate") is None
    auto = StreamPolicy.auto(None, lambda: None, lambda a: None, table=[(1.0, 4)], table_source="T")
    assert auto.decide(lambda: None, lambda: None).reason.startswith("1 stream: the round")


def test_reading_a_table_loads_no_sweep_module(served: ServerHandle, tmp_path: Path) -> None:
    table = tmp_path / "t.json"
    table.write_text(json.dumps(table_doc([(0.5, 2)])))
    listing = tmp_path / "loaded.json"
    proc = probe(
        listing, "cp", "--streams-table", str(table), served.url + "f", str(tmp_path / "a")
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(listing.read_text())["modules"]
    assert (tmp_path / "a").read_bytes() == DATA
    assert "dtnkit.transfer.client.streamtable" in loaded
    assert offending(loaded, ("dtnkit.sweep", "statistics", "tomllib")) == []
