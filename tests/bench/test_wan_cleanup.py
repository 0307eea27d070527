"""``python -m bench wan``: a bad option is one line, and whatever stops a run (Ctrl-C,
SIGTERM, kill -9 and the next run) leaves none of its lab paths, servers or files behind;
its quick run prints the floor and the start-up line, and an error stops its iperf3 server."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.lib.procs import Tracked
from bench.lib.wan.lab import clean_leftovers, iperf3_server
from tests.support.wanbench import STATE_ROOT, clean, own_leftovers, own_processes
from tests.support.xrootd import missing, missing_gfal2_python, missing_xrootd

from dtnkit.lab import path as lab

ROOT = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, "-m", "bench", "wan"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--paths", "50ms"],
        ["--paths", "fast/1gbit"],
        ["--ends", "warm"],
        ["--prefix", "Bad-"],
        ["--repeat", "0"],
        ["--hold", "-1"],
    ],
)
def test_bad_arguments_are_one_line(argv: list[str]) -> None:
    proc = subprocess.run(
        [*BENCH, *argv], capture_output=True, text=True, check=False, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error:" in proc.stderr.splitlines()[-1]


def reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    return (
        missing_xrootd()
        or missing("curl", "xrdcp", "gfal-copy", "iptables", "iperf3")
        or missing_gfal2_python()
    )


needs_all = pytest.mark.skipif(bool(reason()), reason=str(reason()))


@pytest.fixture
def prefix() -> Iterator[str]:
    p = f"bw{secrets.token_hex(2)}"
    yield p
    # whatever the test did, nothing of this prefix is left for the next one
    clean(p)


def start_and_wait_for_first_measurement(prefix: str) -> subprocess.Popen[str]:
    """The bench in --quick mode, once its path, servers and first measurement are done."""
    proc = subprocess.Popen(
        [*BENCH, "--quick", "--prefix", prefix],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(240, proc.kill)
    watchdog.start()
    try:
        assert proc.stderr is not None
        said: list[str] = []  # what it printed, for the failure's message
        for line in proc.stderr:
            if "round 1/1" in line:
                break
            said.append(line)
        else:
            raise AssertionError(
                f"the bench ended before measuring: exit {proc.wait()}: {''.join(said[-30:])}"
            )
    finally:
        watchdog.cancel()
    assert own_leftovers(prefix), "it should be running now"
    return proc


@needs_all
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_xrootd
@pytest.mark.parametrize("signum", [signal.SIGINT])  # SIGTERM: the same unwinding
def test_interrupted_run_cleans_up(prefix: str, signum: int) -> None:
    proc = start_and_wait_for_first_measurement(prefix)
    # the first measurement is iperf3's: its server is among what must go
    assert [c for c in own_processes(prefix) if c.startswith("iperf3 -s")], own_processes(prefix)
    proc.send_signal(signum)
    assert proc.stderr is not None
    rest = proc.stderr.read()
    assert proc.wait(120) != 0
    assert "cleaned up" in rest, rest[-2000:]
    assert own_leftovers(prefix) == []


@needs_all
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_xrootd
def test_the_next_run_removes_what_a_killed_one_left(prefix: str) -> None:
    proc = start_and_wait_for_first_measurement(prefix)
    proc.kill()
    proc.wait(30)
    assert own_leftovers(prefix)  # kill -9: nothing could clean up
    clean_leftovers(prefix)  # what the next run does first
    assert own_leftovers(prefix) == []


@pytest.mark.serial  # judges the share of its cap the lab path carried (iperf3 rates)
@needs_all
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_xrootd
def test_a_quick_run_prints_the_floor_and_the_start_up_line(prefix: str) -> None:
    proc = subprocess.run(
        [*BENCH, "--quick", "--only", "iperf3", "--prefix", prefix],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    rows = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^\| (iperf3 \d(?: wall)?) \| ([0-9.]+) \|", out, re.M)
    }
    assert set(rows) == {"iperf3 1", "iperf3 1 wall", "iperf3 8", "iperf3 8 wall"}, out
    for n in ("1", "8"):  # the data phase is inside the wall time; 64 MiB at 1 Gbit/s
        assert 0.54 < rows[f"iperf3 {n}"] < rows[f"iperf3 {n} wall"]
    m = re.search(
        r"_Practical floor: ([0-9.]+) s = iperf3 -P (\d) data phase ([0-9.]+) s .*"
        r"\+ 3 x RTT ([0-9.]+) ms",
        out,
    )
    assert m, out
    best = min(rows["iperf3 1"], rows["iperf3 8"])
    assert float(m.group(3)) == pytest.approx(best, abs=0.006)
    assert float(m.group(1)) == pytest.approx(best + 3 * float(m.group(4)) / 1000, abs=0.011)
    assert "_Wire floor: 64 MiB at 1 Gbit/s = 0.54 s" in out
    # whether the path carried its cap: the hold check's share, its command and a verdict
    held = re.search(
        r"_The path held ([0-9.]+)% of its cap's payload rate \(([0-9.]+) Gbit/s over the "
        r"second half of `iperf3 -R -P 16 -t 4`, the better of 2 runs",
        out,
    )
    assert held, out
    assert 50 < float(held.group(1)) < 120
    assert "an honest emulation of the rate" in out or "binds this cell" in out
    start = re.search(
        r"_Start-up in the dst namespace.*`python -c pass` (\d+) ms, "
        r"`python -c \"import socket, ssl\"` (\d+) ms, `dtnkit cp --help` (\d+) "
        r"ms, `curl --version` (\d+) ms",
        out,
    )
    assert start, out
    assert out.index("_Start-up") < out.index("| measurement |")  # above the tables
    assert own_leftovers(prefix) == []  # the iperf3 server stopped with the rest


@needs_all
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_an_error_stops_the_iperf3_server(prefix: str) -> None:
    work = Path("/dev/shm") / f"dtnkit-bench-{prefix}-x"
    work.mkdir()
    tracked = Tracked()
    with lab.path(f"{prefix}0", state_root=STATE_ROOT, rtt_ms=1, rate_bps=10**9) as p:
        with (
            pytest.raises(RuntimeError, match="measurement failed"),
            iperf3_server(p.src, work, tracked) as server,
        ):
            assert server.poll() is None
            assert "Server listening" in (work / "iperf3-src.log").read_text()
            assert any(c.startswith("iperf3 -s") for c in own_processes(prefix))
            raise RuntimeError("measurement failed")
        assert server.poll() is not None
        assert server.pid not in tracked.pids()
        assert own_processes(prefix) == []
