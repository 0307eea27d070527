"""Sysctl triples (tcp_rmem, tcp_wmem, tcp_mem) are arrays of integers in every JSON dtnkit
prints or keeps: the audit (schema dtnkit.audit/2), the plan and apply's steps, snapshots
(schema dtnkit.snapshot/2) and `tune show`.  A snapshot an older dtnkit wrote (schema 1, the
triples as text) is still read and restored exactly.  A triple that is not three integers
is refused with one error line, before anything is written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import HOSTS, Netns, taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.tune.snapshot import SCHEMA, Snapshot

RMEM = "sysctl/net.ipv4.tcp_rmem"
WMEM = "sysctl/net.ipv4.tcp_wmem"


def json_run(env: Environment, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--format", "json"], env)
    out = taken(env.stdout)
    return code, json.loads(out)


def ints(value: Any, n: int = 3) -> bool:
    return (
        isinstance(value, list)
        and len(value) == n
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
def test_triples_are_arrays_from_audit_to_restore_of_an_old_snapshot(
    netns: Netns, environment: Environment
) -> None:
    netns.set_sysctl("net.ipv4.tcp_rmem", "4096 87380 6291456")
    judged = ("--netns", netns.name, "--speed", "10gbit", "--rtt", "50ms")
    code, audit = json_run(environment, "tune", "audit", *judged)
    assert audit["schema"] == "dtnkit.audit/2"
    rows = {f["key"]: f for f in audit["findings"]}
    assert rows[RMEM]["current"] == [4096, 87380, 6291456]
    assert rows[RMEM]["recommended"] == [4096, 131072, 67108864]
    assert ints(rows[WMEM]["current"]) and ints(rows[WMEM]["recommended"])
    # no sysctl value of integers is left as text anywhere in the audit
    for f in audit["findings"]:
        for side in ("current", "recommended"):
            v = f[side]
            assert not (isinstance(v, str) and v.replace(" ", "").isdigit()), f

    code, plan = json_run(environment, "tune", "apply", "--dry-run", *judged)
    step = next(s for s in plan["plan"] if s["key"] == RMEM)
    assert step["before"] == [4096, 87380, 6291456] and step["after"] == [4096, 131072, 67108864]

    code, out = json_run(environment, "tune", "apply", *judged)
    assert code == ExitStatus.OK and out["ok"], out
    assert next(s for s in out["applied"] if s["key"] == RMEM)["after"] == [4096, 131072, 67108864]
    assert netns.sysctl("net.ipv4.tcp_rmem").split() == ["4096", "131072", "67108864"]
    path = environment.state_dir / "snapshots" / f"{out['baseline']}.json"
    kept = json.loads(path.read_text())
    assert kept["schema"] == SCHEMA == "dtnkit.snapshot/2"
    assert kept["values"][RMEM] == [4096, 87380, 6291456]
    code, shown = json_run(environment, "tune", "show", out["baseline"])
    assert shown["values"][RMEM] == [4096, 87380, 6291456] and ints(shown["values"][WMEM])

    # the same baseline as an older dtnkit wrote it: schema 1, triples as text
    old = {
        **kept,
        "schema": "dtnkit.snapshot/1",
        "id": "old-format",
        "values": {
            k: " ".join(map(str, v)) if isinstance(v, list) else v
            for k, v in kept["values"].items()
        },
    }
    assert old["values"][RMEM] == "4096 87380 6291456"
    (path.parent / "old-format.json").write_text(json.dumps(old, indent=2))
    code, shown = json_run(environment, "tune", "show", "old-format")
    assert (
        code == 0 and shown["schema"] == SCHEMA and shown["values"][RMEM] == [4096, 87380, 6291456]
    )
    code, back = json_run(environment, "tune", "restore", "old-format", "--netns", netns.name)
    assert code == ExitStatus.OK and back["ok"], back
    assert netns.sysctl("net.ipv4.tcp_rmem").split() == ["4096", "87380", "6291456"]
    code, diff = json_run(environment, "tune", "diff", "old-format", "--netns", netns.name)
    assert code == ExitStatus.OK and diff["differences"] == [], diff


triple = st.lists(st.integers(min_value=1, max_value=2**31 - 1), min_size=3, max_size=3).map(sorted)


@settings(max_examples=200, deadline=None)
@given(rmem=triple, wmem=triple, old=st.booleans())
def test_a_snapshot_keeps_every_triple_through_its_json(
    rmem: list[int], wmem: list[int], old: bool
) -> None:
    values = {
        RMEM: " ".join(map(str, rmem)),
        WMEM: " ".join(map(str, wmem)),
        "sysctl/net.core.rmem_max": rmem[2],
    }
    snap = Snapshot("s", "", "manual", "2026-01-01T00:00:00+00:00", {}, values)
    doc = json.loads(json.dumps(snap.as_dict()))
    assert doc["values"][RMEM] == rmem and doc["values"][WMEM] == wmem
    if old:  # as schema 1 kept it
        doc = {
            **doc,
            "schema": "dtnkit.snapshot/1",
            "values": {**doc["values"], RMEM: values[RMEM], WMEM: values[WMEM]},
        }
    assert Snapshot.from_dict(doc, "test").values == values


BAD_TRIPLES = {
    "text inside": [4096, "x", 1],
    "a boolean": [True, 1, 2],
    "two numbers": [4096, 131072],
    "four numbers": [1, 2, 3, 4],
    "a list inside": [[1], 2, 3],
    "a fraction": [4096.5, 131072, 6291456],
    "out of order": [6291456, 131072, 4096],
    "above the kernel's int": [4096, 131072, 2**70],
    "negative": [-1, 131072, 6291456],
    "an object": {"min": 4096},
    "the array as text": "[4096, 131072, 6291456]",
    "empty": [],
}


@pytest.mark.parametrize("case", list(BAD_TRIPLES))
def test_a_bad_triple_is_one_error_line_and_nothing_is_written(
    case: str, tmp_path: Path, environment: Environment
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(HOSTS / "dtn-a", tree, symlinks=True)
    assert main(["tune", "save", "--tree", str(tree), "--label", "good"], environment) == 0
    taken(environment.stdout)
    path = next((environment.state_dir / "snapshots").glob("*.json"))
    doc = json.loads(path.read_text())
    doc["values"][RMEM] = BAD_TRIPLES[case]
    path.unlink()
    (path.parent / "bad.json").write_text(json.dumps(doc))
    before = {p: p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}
    code = main(["tune", "restore", "bad", "--tree", str(tree)], environment)
    err = taken(environment.stderr)
    assert code == ExitStatus.BAD_INPUT, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dtnkit: error: "), err
    assert "tcp_rmem" in err and "Traceback" not in err
    assert taken(environment.stdout) == ""
    assert {p: p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()} == before
