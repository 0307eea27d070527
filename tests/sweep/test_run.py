"""`dtnkit sweep run` end to end on real lab paths with real iperf3 and dtnkit serve: a small
grid stored whole, a failing point recorded while the sweep goes on, a point stopped at its
time limit, Ctrl-C leaving no process and the lab as asked, and --resume running only the
points not stored."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.host.process import alive
from dtnkit.lab import path as lab
from dtnkit.sweep import store

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]

GRID = [
    "rtt=5ms,50ms",
    "streams=1,2,4",
    "tool=iperf3",
    "duration=1s",
    "sample_interval=250ms",
    "rate=500mbit",
]


def _lab_name() -> str:
    return f"r19{secrets.token_hex(3)}"


def _namespaces(name: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [
        line.split()[0] for line in out.splitlines() if line.startswith(f"{lab.NS_PREFIX}{name}-")
    ]


def test_small_grid_runs_end_to_end_and_is_stored(environment: Environment) -> None:
    name = _lab_name()
    t0 = time.monotonic()
    code = main(
        ["sweep", "run", *GRID, "--name", "ci", "--lab", name, "--format", "json"], environment
    )
    elapsed = time.monotonic() - t0
    doc = json.loads(taken(environment.stdout))
    assert code == 0, (doc, taken(environment.stderr))
    assert (doc["total"], doc["ran"], doc["ok"], doc["failed"]) == (6, 6, 6, 0)
    assert doc["lab"] == "removed" and _namespaces(name) == []
    assert elapsed < 180
    points = store.load_points(environment.results_db, "ci")
    assert sorted((p.point.rtt_ms, p.point.streams) for p in points) == [
        (5.0, 1),
        (5.0, 2),
        (5.0, 4),
        (50.0, 1),
        (50.0, 2),
        (50.0, 4),
    ]
    for p in points:
        assert p.status == "ok"
        # 1 s of data at 250 ms, plus the tool's start (connections, slow start at 50 ms);
        # sampling stops with the point, however long a loaded machine made its start
        times = [t for t, _ in p.samples]
        assert len(times) >= 4 and times == sorted(set(times)), p.samples
        assert times[-1] <= p.elapsed_s + 0.25, (times, p.elapsed_s)
        # the cap binds: the mean is below the cap and the best sample near it
        assert p.throughput_bps is not None and 0 < p.throughput_bps < 520e6
        assert p.cpu_seconds and p.cpu_seconds[0] >= 0
        assert p.retransmits is not None and p.ctxt and p.ctxt > 0
        assert set(p.nic_drops) == {"src", "dst", "path"}
        assert p.transfers and p.transfers[0].end_s is not None and p.transfers[0].bytes > 0
        assert "iperf3" in p.raw
        assert p.tuning.get("dst") is not None
    assert max(max(b for _, b in p.samples) for p in points) > 300e6
    info = store.run_info(environment.results_db, "ci")
    assert info.status == "done" and info.points_ok == 6
    assert info.environment["lab"]["name"] == name
    records = store.load_records(environment.results_db, "ci")
    assert len(records) == 6 and all(r.throughput_bps for r in records)
    assert main(["sweep", "list", "--format", "json"], environment) == 0
    runs = json.loads(taken(environment.stdout))
    assert [(r["name"], r["points_ok"]) for r in runs] == [("ci", 6)]


def test_two_runs_of_one_name_keep_their_files_apart(environment: Environment) -> None:
    """Another run of the same name (another user's store, a campaign beside a test) has its
    files under /dev/shm: this run neither trips on them nor removes them."""
    run_name = f"same{secrets.token_hex(3)}"
    other = Path("/dev/shm") / f"dtnkit-sweep-{run_name}"
    (other / "servers" / "0").mkdir(parents=True)
    keep = other / "servers" / "0" / "kept"
    keep.write_text("the other run's file")
    try:
        code = main(
            [
                "sweep",
                "run",
                "rtt=5ms",
                "streams=1",
                "tool=iperf3",
                "duration=1s",
                "sample_interval=250ms",
                "--name",
                run_name,
                "--lab",
                _lab_name(),
                "--format",
                "json",
            ],
            environment,
        )
        doc = json.loads(taken(environment.stdout))
        assert code == 0 and doc["ok"] == 1, (doc, taken(environment.stderr))
        assert keep.read_text() == "the other run's file"
        assert not [p for p in Path("/dev/shm").glob(f"dtnkit-sweep-{run_name}-*")]
    finally:
        shutil.rmtree(other, ignore_errors=True)


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(
    environment: Environment, tmp_path: Path
) -> None:
    name = _lab_name()
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'schema = 1\n[axes]\nrtt = ["5ms"]\nstreams = [2]\n'
        'tool = ["command:fail", "command:slow", "dtnkit-cp"]\n'
        'file_size = ["1MiB"]\n'
        # bytes, not a duration: every copy runs to its end (on a loaded machine a copy's
        # start-up can outlast a 1 s duration, and a cut copy has no end to check)
        '[run]\nbytes = "2MiB"\nsample_interval = "500ms"\ntime_limit = "10s"\n'
        "[commands]\nfail = \"sh -c 'echo nope >&2; exit 1'\"\n"
        f"slow = \"sh -c 'echo $$ > {tmp_path}/slow-$1.pid; sleep 30' sh "
        '{origin}"\n'
    )
    code = main(
        ["sweep", "run", str(grid), "--name", "f", "--lab", name, "--format", "json"], environment
    )
    doc = json.loads(taken(environment.stdout))
    assert code == 1, doc
    assert (doc["ran"], doc["ok"], doc["failed"]) == (3, 1, 2), doc["failures"]
    points = {p.point.tool: p for p in store.load_points(environment.results_db, "f")}
    assert points["command:fail"].status == "failed"
    assert "exit status 1" in points["command:fail"].error
    assert "nope" in points["command:fail"].error
    assert "time limit" in points["command:slow"].error
    pids = [int(f.read_text()) for f in tmp_path.glob("slow-*.pid")]
    assert pids and not any(alive(pid) for pid in pids)
    cp = points["dtnkit-cp"]
    assert cp.status == "ok" and len(cp.transfers) == 2, cp.transfers
    assert all(t.end_s is not None and t.verified for t in cp.transfers)
    assert all(t.bytes == 2**20 for t in cp.transfers)
    assert all(not t.error for t in cp.transfers)
    assert "--token" not in cp.raw  # the token goes in the environment, not argv
    assert "logged during the point" not in cp.raw  # servers' logs only for failed points
    assert _namespaces(name) == []


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_stops_everything_then_resume_runs_only_the_rest(tmp_path: Path, keep: bool) -> None:
    name = _lab_name()
    state_root = tmp_path / "lab"
    env = {
        **os.environ,
        "DTNKIT_DB": str(tmp_path / "r.db"),
        "DTNKIT_LAB_STATE": str(state_root),
        "DTNKIT_STATE_DIR": str(tmp_path / "state"),
    }
    grid = [
        "rtt=5ms,50ms",
        "streams=1,2" if keep else "streams=1,2,4",
        "tool=dtnkit-cp" if keep else "tool=iperf3",
        "duration=1s",
        "sample_interval=500ms",
        "file_size=1MiB",
    ]
    total = 4 if keep else 6
    if keep:  # a lab path that exists before the sweep: kept, its RTT put back
        lab.up(name, lab.PathSpec(rtt_ms=20.0), state_root=state_root)
    argv = [
        sys.executable,
        "-m",
        "dtnkit",
        "sweep",
        "run",
        *grid,
        "--name",
        "c",
        "--lab",
        name,
        "--keep-lab" if keep else "--down-lab",
        "--format",
        "json",
    ]
    try:
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        db = store.SweepStore(tmp_path / "r.db")
        deadline = time.monotonic() + 90
        seen: set[int] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            seen |= _descendants(proc.pid)
            if Path(tmp_path / "r.db").exists():
                try:
                    if len(db.done_point_ids("c")) >= 2:
                        break
                except Exception:  # the run's row may not be written yet
                    pass
            time.sleep(0.1)  # polling another process's progress, bounded by the deadline
        seen |= _descendants(proc.pid)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.count("\n") <= 2, err  # no traceback
        assert seen, "the sweep started no process"
        assert not [p for p in seen if alive(p)]
        stored = db.done_point_ids("c")
        assert 2 <= len(stored) < total
        assert db.run_info("c").status == "interrupted"
        if keep:
            assert lab.load(name, state_root=state_root).spec.rtt_ms == 20.0
            assert _namespaces(name)
        else:
            assert _namespaces(name) == []
        # resume: only the points not stored run
        proc2 = subprocess.run(
            [*argv[:-2], "--resume", "--format", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert proc2.returncode == 0, proc2.stderr
        doc = json.loads(proc2.stdout)
        assert doc["skipped"] == len(stored) and doc["ran"] == total - len(stored)
        assert len(db.done_point_ids("c")) == total
        assert db.run_info("c").status == "done"
    finally:
        lab.down(name, state_root=state_root, missing_ok=True)


def test_a_profile_is_applied_on_both_ends_and_restored_after_a_failed_point(
    environment: Environment, tmp_path: Path
) -> None:
    name = _lab_name()
    state_root = environment.lab_state_root
    lab.up(name, lab.PathSpec(rtt_ms=5.0, n_src=1), state_root=state_root)
    try:
        built = lab.load(name, state_root=state_root)
        key = "/proc/sys/net/ipv4/tcp_mtu_probing"

        def value(host: lab.LabHost) -> str:
            return host.run(["cat", key]).stdout.strip()

        before = {h.name: value(h) for h in built.hosts}
        seen = tmp_path / "seen"
        seen.mkdir()
        grid = tmp_path / "grid.toml"
        grid.write_text(
            'schema = 1\n[axes]\nrtt = ["5ms"]\nstreams = [1]\nprofile = ["dtn"]\n'
            'tool = ["command:look"]\n[run]\nduration = "1s"\nsample_interval = "500ms"\n'
            f"[commands]\nlook = \"sh -c 'cat {key} > {seen}/dst; exit 3'\"\n"
        )
        code = main(
            [
                "sweep",
                "run",
                str(grid),
                "--name",
                "p",
                "--lab",
                name,
                "--keep-lab",
                "--format",
                "json",
            ],
            environment,
        )
        assert code == 1, taken(environment.stderr)
        (point,) = store.load_points(environment.results_db, "p")
        assert point.status == "failed" and "exit status 3" in point.error
        during = (seen / "dst").read_text().strip()
        assert during != before["dst"]  # the profile was live while the tool ran
        # the tuning live during the point is stored for both ends
        assert str(point.tuning["dst"]["sysctl/net.ipv4.tcp_mtu_probing"]) == during
        assert point.tuning["src"] is not None
        after = {h.name: value(h) for h in built.hosts}
        assert after == before  # restored on both ends after the failed point
        snaps = environment.state_dir / "experiments"
        assert not snaps.exists() or not any(snaps.iterdir())
    finally:
        lab.down(name, state_root=state_root, missing_ok=True)


def test_a_lab_path_that_cannot_serve_the_grid_stops_the_sweep(environment: Environment) -> None:
    name = _lab_name()
    state_root = environment.lab_state_root
    lab.up(name, lab.PathSpec(rtt_ms=20.0, n_src=1), state_root=state_root)
    try:
        code = main(
            [
                "sweep",
                "run",
                "rtt=5ms",
                "streams=1,2",
                "origins=2",
                "duration=1s",
                "sample_interval=500ms",
                "--name",
                "two",
                "--lab",
                name,
            ],
            environment,
        )
        err = taken(environment.stderr)
        assert code == 9 and err.count("\n") == 1 and "has 1 sending hosts" in err, err
        info = store.run_info(environment.results_db, "two")
        assert (info.points_ok, info.points_failed, info.status) == (0, 0, "interrupted")
        kept = lab.load(name, state_root=state_root)  # the path that existed is left alone
        assert kept.spec.rtt_ms == 20.0 and _namespaces(name)
        # a path of another MTU than the grid's [run] mtu is refused the same way
        code = main(
            [
                "sweep",
                "run",
                "rtt=5ms",
                "streams=1",
                "mtu=9000",
                "duration=1s",
                "sample_interval=500ms",
                "--name",
                "jumbo",
                "--lab",
                name,
            ],
            environment,
        )
        err = taken(environment.stderr)
        assert code == 9 and err.count("\n") == 1 and "has MTU 1500" in err, err
        assert "MTU 9000" in err and lab.load(name, state_root=state_root).spec.mtu == 1500
    finally:
        lab.down(name, state_root=state_root, missing_ok=True)
