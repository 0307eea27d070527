"""Concurrent applies and restores on one namespace, as real processes.

The lock covers read, plan, baseline, write and verify, so: at most one run holds it at a
time, every run plans from what the namespace holds when it gets the lock (never from reads
made before), and restoring the first baseline gives back the exact starting state.
"""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Netns
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.tune import apply as apply_mod
from dtnkit.tune.keys import as_kept
from dtnkit.tune.snapshot import Store

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns, pytest.mark.needs_ethtool]


class LockNetns(Netns):
    """The shared throw-away namespace, named with this test file's own prefix."""

    def __init__(self) -> None:
        super().__init__()
        self.name = f"dklk{uuid.uuid4().hex[:8]}"


@pytest.fixture
def ns() -> Iterator[LockNetns]:
    n = LockNetns()
    lock_file: Path | None = None
    try:
        n.create()
        lock_file, _ = apply_mod.lock_path(Host.live(n.name), Path("/nonexistent"))
        yield n
    finally:
        n.delete()
        if lock_file is not None:  # this namespace's lock file, now that it is gone
            lock_file.unlink(missing_ok=True)


def dtnkit(*argv: str) -> list[str]:
    return [sys.executable, "-m", "dtnkit", *argv, "--format", "json"]


def run_all(argvs: list[list[str]]) -> list[tuple[int, dict[str, Any], str]]:
    """Start every command at once; (exit code, JSON document, stderr) of each."""
    procs = [
        subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for a in argvs
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        results.append((p.returncode, json.loads(out) if out.strip() else {}, err))
    return results


def run_one(*argv: str) -> dict[str, Any]:
    [(code, doc, err)] = run_all([dtnkit(*argv)])
    assert code == 0, err
    return doc


def assert_one_at_a_time(docs: list[dict[str, Any]]) -> int:
    """The lock windows the runs report never overlap; returns how many there were."""
    windows = sorted((d["lock"]["acquired"], d["lock"]["released"]) for d in docs if d.get("lock"))
    for (_, end), (nxt, _) in itertools.pairwise(windows):
        assert end <= nxt, f"two runs held the lock at once: {end} > {nxt}"
    return len(windows)


def changed(doc: dict[str, Any]) -> dict[str, Any]:
    """key -> value before, of what a run wrote, as a snapshot keeps it (the JSON gives a
    sysctl triple as an array of integers, the snapshot's values hold the kernel's text)."""
    return {s["key"]: as_kept(s["key"], s["before"]) for s in doc.get("applied") or []}


def test_twenty_concurrent_applies_write_once_and_restore_exactly(
    ns: LockNetns, tmp_path: Path
) -> None:
    start_state = ns.state()
    dirs = [tmp_path / "a", tmp_path / "b"]  # the lock is the namespace's, whatever the dir
    start = run_one(
        "tune", "save", "--netns", ns.name, "--state-dir", str(dirs[0]), "--label", "start"
    )
    start_values = Store(dirs[0]).load(start["id"]).values

    results = run_all(
        [
            dtnkit("tune", "apply", "--netns", ns.name, "--state-dir", str(dirs[i % 2]))
            for i in range(20)
        ]
    )

    for code, doc, err in results:
        assert code in (ExitStatus.OK, ExitStatus.LOCKED), err
        if code == ExitStatus.LOCKED:
            assert "another dtnkit apply or restore is running" in doc["error"]["what"]
    docs = [doc for code, doc, _ in results if code == ExitStatus.OK]
    assert_one_at_a_time(docs)
    writers = [d for d in docs if d["applied"]]
    # the first to get the lock tunes; anyone after it reads the tuned values: nothing to do
    assert len(writers) == 1, [changed(d) for d in writers]
    [writer] = writers
    assert all(d["baseline"] is None for d in docs if d is not writer)
    home = next(
        d for d in dirs if (d / "snapshots").exists() and writer["baseline"] in Store(d).ids()
    )
    baseline = Store(home).load(writer["baseline"])
    assert baseline.values == start_values
    assert {k: start_values[k] for k in changed(writer)} == changed(writer)
    # the undo hint names this namespace and state dir: pasted as is, it restores the start
    undo = shlex.split(writer["undo"])
    assert undo[:4] == ["dtnkit", "tune", "restore", writer["baseline"]]
    assert f"--netns {ns.name}" in writer["undo"] and f"--state-dir {home}" in writer["undo"]
    run_one(*undo[1:])
    assert ns.state() == start_state


def test_applies_racing_restores_each_see_the_true_state(ns: LockNetns, tmp_path: Path) -> None:
    start_state = ns.state()
    sd = ["--netns", ns.name, "--state-dir", str(tmp_path / "s")]
    first = run_one("tune", "apply", *sd)
    assert first["applied"]
    b0 = first["baseline"]
    tuned_keys = set(changed(first))
    start_values = Store(tmp_path / "s").load(b0).values

    n = 6
    argvs = []
    for _ in range(n):  # interleaved: restore, apply, restore, apply ...
        argvs.append(dtnkit("tune", "restore", b0, *sd, "--wait", "120s"))
        argvs.append(dtnkit("tune", "apply", *sd, "--wait", "120s"))
    results = run_all(argvs)
    assert [code for code, _, _ in results] == [0] * len(argvs), [e for _, _, e in results]
    docs = [doc for _, doc, _ in results]
    assert assert_one_at_a_time(docs) == len(argvs)

    # replay the runs in lock order: each must have acted on the state the previous left
    tuned = True
    writes = 0
    for doc in sorted(docs, key=lambda d: d["lock"]["acquired"]):
        is_restore = "snapshot" in doc
        if is_restore:
            assert set(changed(doc)) == (tuned_keys if tuned else set())
            tuned = False
        else:
            if tuned:
                assert doc["applied"] == [] and doc["baseline"] is None
            else:
                assert set(changed(doc)) == tuned_keys
                assert changed(doc) == {k: start_values[k] for k in tuned_keys}
                assert Store(tmp_path / "s").load(doc["baseline"]).values == start_values
            tuned = True
        writes += bool(doc["applied"])
    assert writes >= 1  # the restores ran and undid something

    run_one("tune", "restore", b0, *sd)
    assert ns.state() == start_state
