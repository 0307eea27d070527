"""`dtnkit results list` names the host of rows pushed from other hosts (`results push`): a
column `host` in the table, only when such a row is listed (a store of this host's own rows
prints as before), within 80 columns; `origin_host` in the JSON."""

from __future__ import annotations

import io
import json
import socket
from dataclasses import replace
from pathlib import Path

from rich.cells import cell_len

from dtnkit.cli.main import main
from dtnkit.db.push import push
from dtnkit.environment import Environment
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore


def result(i: int, **kw: object) -> ProbeResult:
    fields: dict[str, object] = dict(
        kind="net",
        spec={"i": i},
        summary={"throughput_bps": 1e9 * (i + 1)},
        host=socket.gethostname(),
        started=1.7e9 + i,
        label=f"l21-{i}",
    )
    fields.update(kw)
    return ProbeResult(**fields)  # type: ignore[arg-type]


def listed(db: Path, *argv: str, width: int = 80) -> tuple[int, str, str]:
    env = Environment(
        results_db=db, stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()
    )
    env = replace(env, terminal_width=width)
    code = main(["results", "list", *argv], env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return code, env.stdout.getvalue(), env.stderr.getvalue()


def header(out: str) -> list[str]:
    return out.splitlines()[0].split()


def shared_store(tmp_path: Path, *, label: str = "") -> Path:
    """A shared store: one row of its own, three pushed from the host dtn-l21a."""
    source = tmp_path / "a.sqlite"
    s = ResultStore(source)
    for i in range(3):
        s.add(
            result(
                i,
                host="vm",
                label=label or f"a-{i}",
                netns="l21-ns" if label else None,
                tuning={"k": "v"} if label else None,
            )
        )
    shared = tmp_path / "shared.sqlite"
    ResultStore(shared).add(result(9, label=label or "own"))
    push(source, shared, host="dtn-l21a.example.org")
    return shared


def test_pushed_rows_show_the_host_they_came_from(tmp_path: Path) -> None:
    code, out, err = listed(shared_store(tmp_path))
    assert code == 0, err
    assert header(out) == ["id", "kind", "rate", "host", "label", "netns", "tuning"]
    rows = {line.split()[0]: line.split()[4] for line in out.splitlines()[1:]}  # rate: 2
    assert rows == {
        "1": socket.gethostname(),
        "2": "dtn-l21a.example.org",
        "3": "dtn-l21a.example.org",
        "4": "dtn-l21a.example.org",
    }
    code, out, err = listed(tmp_path / "shared.sqlite", "--format", "json")
    assert {r["id"]: r["origin_host"] for r in json.loads(out)} == {
        1: None,
        2: "dtn-l21a.example.org",
        3: "dtn-l21a.example.org",
        4: "dtn-l21a.example.org",
    }


def test_a_store_of_this_hosts_own_rows_has_no_host_column(tmp_path: Path) -> None:
    db = tmp_path / "own.sqlite"
    ResultStore(db).add(result(0, host="another-name"))  # measured elsewhere, never pushed
    code, out, err = listed(db)
    assert code == 0, err
    assert header(out) == ["id", "kind", "rate", "label", "netns", "tuning"]
    # rows this host pushed itself (its own name): as its own
    shared = tmp_path / "shared.sqlite"
    push(db, shared, host=socket.gethostname())
    assert header(listed(shared)[1]) == ["id", "kind", "rate", "label", "netns", "tuning"]


def test_the_host_column_fits_80_columns(tmp_path: Path) -> None:
    shared = shared_store(tmp_path, label="a long label of the kind a site writes for a run")
    code, out, err = listed(shared, width=80)
    assert code == 0, err
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert header(out) == ["id", "kind", "rate", "host", "label", "netns"]
    assert "(tuning hidden to fit 80 columns" in out  # before the label is cut to bits
    first = out.splitlines()[1:3]
    assert first[0].split()[4:7] == ["dtn-l21a.example.org", "a", "long"]
    assert len(first[1].split()) <= 6  # the label in two lines (the second: "of the kind...")
    code, out, err = listed(shared, width=40)
    assert max(cell_len(line) for line in out.splitlines()) <= 40
    assert header(out) == ["id", "kind", "rate"]  # the host last of all
    assert "(host, label, netns, tuning hidden to fit 40 columns" in " ".join(out.split())
    assert header(listed(shared, width=50)[1]) == ["id", "kind", "rate", "host"]
    code, out, err = listed(shared, "--wide", width=80)
    assert "host" in header(out) and "tuning" in header(out)
