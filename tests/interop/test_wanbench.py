"""bench/bench_cp_wan.py: its verdicts and its order are right, and whatever stops it (Ctrl-C,
SIGTERM, kill -9 and the next run) leaves none of its lab paths, servers or files behind."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest
from tests.support.wanbench import BENCH, clean, loaded, own_leftovers, own_processes
from tests.support.xrootd import missing, missing_gfal2_python, missing_xrootd


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    with loaded("bench_cp_wan") as module:
        yield module


def test_verdicts(bench: ModuleType) -> None:
    t = bench.Target("a", "b", 0.5, "")
    assert bench.verdict({"a": [1.0, 9.0, 2.0], "b": [4.0]}, t) == ("0.50", "met")
    assert bench.verdict({"a": [2.1], "b": [4.0]}, t) == ("0.53", "not met")
    assert bench.verdict({"a": [2.1]}, t) == ("-", "no data")
    assert bench.verdict({"a": [1.0], "b": [2.0]},
                         bench.Target("a", "b", None, "")) == ("0.50", "(information)")
    # a target asking for less than the wire floor says so; one above it is a plain miss
    assert bench.verdict({"a": [3.0], "b": [4.0]}, t, 2.15) == (
        "0.75", "not met: asks 2.000 s < wire floor 2.150 s")
    assert bench.verdict({"a": [3.0], "b": [5.0]}, t, 2.15) == ("0.60", "not met")
    assert bench.verdict({"a": [2.0], "b": [4.0]}, t, 2.15) == ("0.50", "met")


def test_every_target_is_measured_and_rounds_alternate(bench: ModuleType) -> None:
    for many, default in (("8", None), ("auto", None), ("auto", "4")):
        names = bench.order(many, default)
        assert len(set(names)) == len(names)
        for t in bench.targets(many, default):
            assert {bench.recorded_by(t.measured), t.baseline} <= set(names), t
        assert bench.round_order(names, 0) == names
        assert bench.round_order(names, 1) == names[::-1]
    goals = {(t.measured, t.baseline): t.limit for t in bench.targets("auto", None)}
    assert goals[("cp auto XRootD", "gfal-copy -K adler32")] == 0.5
    assert goals[("cp auto XRootD", "xrdcp -S 8")] == 0.75
    assert goals[("cp 1 XRootD", "curl XRootD")] == 1.0
    assert goals[("upload auto", "cp auto dtnkit")] == 1.1
    assert goals[("tpc dtnkit 8", "tpc XRootD 8")] == 1.0


@pytest.mark.parametrize("argv", [["--paths", "50ms"], ["--paths", "fast/1gbit"],
                                  ["--ends", "warm"], ["--prefix", "Bad-"], ["--repeat", "0"]])
def test_bad_arguments_are_one_line(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error:" in proc.stderr.splitlines()[-1]


def reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    return (missing_xrootd() or missing("curl", "xrdcp", "gfal-copy", "iptables")
            or missing_gfal2_python())



@pytest.fixture
def prefix() -> Iterator[str]:
    p = f"b11s{secrets.token_hex(2)}"
    yield p
    # whatever the test did, nothing of this prefix is left for the next one
    clean(p)


def start_and_wait_for_first_measurement(prefix: str) -> subprocess.Popen[str]:
    """The bench in --quick mode, once its path, servers and first measurement are done."""
    proc = subprocess.Popen([sys.executable, str(BENCH), "--quick", "--prefix", prefix],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(240, proc.kill)
    watchdog.start()
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "round 1/1" in line:
                break
        else:
            raise AssertionError(f"the bench ended before measuring: exit {proc.wait()}")
    finally:
        watchdog.cancel()
    assert own_leftovers(prefix), "it should be running now"
    return proc


needs_all = pytest.mark.skipif(bool(reason()), reason=str(reason()))


@needs_all
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_xrootd
@pytest.mark.parametrize("signum", [signal.SIGINT])  # SIGTERM: the same unwinding
def test_interrupted_run_cleans_up(prefix: str, signum: int) -> None:
    proc = start_and_wait_for_first_measurement(prefix)
    # the first measurement is iperf3's: its server is among what must go
    assert [c for c in own_processes(prefix) if c.startswith("iperf3 -s")], \
        own_processes(prefix)
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
def test_the_next_run_removes_what_a_killed_one_left(prefix: str, bench: ModuleType) -> None:
    proc = start_and_wait_for_first_measurement(prefix)
    proc.kill()
    proc.wait(30)
    assert own_leftovers(prefix)  # kill -9: nothing could clean up
    bench.clean_leftovers(prefix)  # what the next run does first
    assert own_leftovers(prefix) == []
