"""bench/bench_cp_wan.py measures each cell's practical floor: iperf3 -P 1 and -P 8 in every
round, the best median data phase plus three round trips in the verdicts, cp's copy phase beside
its wall time, a start-up line per run; its iperf3 servers go with the rest whatever stops it."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from tests.support.wanbench import BENCH, STATE_ROOT, clean, loaded, own_leftovers, own_processes
from tests.support.xrootd import missing, missing_gfal2_python, missing_xrootd

from dtnkit.lab import path as lab


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    with loaded("bench_cp_wan_s23f") as module:
        yield module


def test_the_practical_floor_is_the_best_iperf3_median_plus_three_round_trips(
        bench: ModuleType) -> None:
    times = {"iperf3 1": [4.3, 4.2, 4.1], "iperf3 1 wall": [0.1],  # a wall time is no floor
             "iperf3 8": [2.7, 2.5, 2.6], "iperf3 8 wall": [0.2], "cp 1 XRootD": [0.3]}
    floor = bench.practical_floor(times, 50.0)
    assert (floor.streams, floor.data_s, floor.rtt_s) == ("8", 2.6, 0.05)
    assert floor.seconds == pytest.approx(2.75)
    assert bench.practical_floor({"iperf3 8": [2.6]}, 10.0).seconds == pytest.approx(2.63)
    # no iperf3 run that succeeded, or no RTT: no floor (the verdicts fall back)
    assert bench.practical_floor({"iperf3 8": [], "cp 1 XRootD": [3.0]}, 50.0) is None
    assert bench.practical_floor(times, None) is None
    assert bench.practical_floor(times, float("nan")) is None
    # "iperf3 auto" ran with the streams cp auto used; the floor names that count
    auto = {**times, "iperf3 auto": [2.4, 2.45]}
    assert bench.practical_floor(auto, 50.0, {"iperf3 auto": [4, 4]}).streams == "4"
    assert bench.practical_floor(auto, 50.0, {"iperf3 auto": [4, 5]}).streams == "4/5"
    # the same -P twice (auto used 8): the better median counts
    same = {"iperf3 8": [2.5], "iperf3 auto": [2.7]}
    assert bench.practical_floor(same, 50.0, {"iperf3 auto": [8]}).data_s == 2.5


def test_a_verdict_names_the_highest_floor_the_ask_is_under(bench: ModuleType) -> None:
    t = bench.Target("a", "b", 0.5, "")
    floor = bench.Floor("8", 2.58, 0.0505)  # 2.7315 s
    # under the wire floor (the lower one): the wire-floor wording, as before
    assert bench.verdict({"a": [3.0], "b": [4.0]}, t, 2.15, floor) == (
        "0.75", "not met: asks 2.000 s < wire floor 2.150 s")
    # above the wire floor, under the practical one: physically out of reach, and how we know
    assert bench.verdict({"a": [3.0], "b": [5.0]}, t, 2.15, floor) == (
        "0.60", "not met: asks 2.500 s < practical floor 2.732 s "
                "(iperf3 -P 8 data phase 2.580 s + 3 RTT)")
    assert bench.verdict({"a": [3.0], "b": [5.0]}, t, None, floor)[1].startswith(
        "not met: asks 2.500 s < practical floor")
    # above both: a plain miss; within the target: met, floors or not
    assert bench.verdict({"a": [3.0], "b": [5.6]}, t, 2.15, floor) == ("0.54", "not met")
    assert bench.verdict({"a": [2.0], "b": [5.0]}, t, 2.15, floor) == ("0.40", "met")
    # without a practical floor nothing changes
    assert bench.verdict({"a": [3.0], "b": [5.0]}, t, 2.15) == ("0.60", "not met")
    # information rows stay information
    assert bench.verdict({"a": [9.0], "b": [1.0]}, bench.Target("a", "b", None, ""), 2.15,
                         floor) == ("9.00", "(information)")


def test_iperf3_runs_with_every_time_target_and_alone_when_asked(bench: ModuleType) -> None:
    names = bench.order("auto", None)
    goals = bench.targets("auto", None)
    assert {"iperf3 1", "iperf3 8"} <= set(names)
    every = bench.only(names, [], goals)
    assert every == names
    # interleaved like any measurement: in the round, reversed every other round
    assert bench.round_order(every, 1) == every[::-1]
    iperf = ["iperf3 8", "iperf3 1"]
    assert bench.only(names, ["iperf3"], goals) == iperf  # auto: no cp auto to count from
    for starts in (["upload"], ["cp auto"]):  # "iperf3 auto" follows the cp auto run
        picked = bench.only(names, starts, goals)
        assert [n for n in picked if n.startswith("iperf3")] == [
            "iperf3 8", "iperf3 auto", "iperf3 1"], starts
        first = next(i for i, n in enumerate(picked) if n.startswith("cp auto "))
        assert picked.index("iperf3 auto") == first + 1
    for starts in (["cp 1", "curl"], ["tpc"]):
        picked = bench.only(names, starts, goals)
        assert [n for n in picked if n.startswith("iperf3")] == iperf, starts
    assert "iperf3 auto" not in bench.order("8", None)  # a dtnkit without --streams auto
    # a selection judged by no time target (a baseline alone) gets no floor runs
    assert bench.only(names, ["xrdcp --cksum"], goals) == ["xrdcp --cksum adler32:source"]
    # cp's copy phase is recorded by the cp run, judged against curl's wall time
    copy = [t for t in goals if t.measured.endswith(" copy phase")]
    assert {(bench.recorded_by(t.measured), t.baseline, t.limit) for t in copy} == {
        ("cp 1 XRootD", "curl XRootD", None), ("cp 1 dtnkit", "curl dtnkit", None)}
    assert bench.recorded_by("iperf3 8 wall") == "iperf3 8"
    assert bench.recorded_by("cp auto XRootD") == "cp auto XRootD"


def reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    return (missing_xrootd() or missing("curl", "xrdcp", "gfal-copy", "iptables", "iperf3")
            or missing_gfal2_python())


needs_all = pytest.mark.skipif(bool(reason()), reason=str(reason()))




@pytest.fixture
def prefix() -> Iterator[str]:
    p = f"f23t{secrets.token_hex(2)}"
    yield p
    clean(p)


@needs_all
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_xrootd
def test_a_quick_run_prints_the_floor_and_the_start_up_line(prefix: str) -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--only", "iperf3",
                           "--prefix", prefix], capture_output=True, text=True, check=False,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    rows = {m.group(1): float(m.group(2))
            for m in re.finditer(r"^\| (iperf3 \d(?: wall)?) \| ([0-9.]+) \|", out, re.M)}
    assert set(rows) == {"iperf3 1", "iperf3 1 wall", "iperf3 8", "iperf3 8 wall"}, out
    for n in ("1", "8"):  # the data phase is inside the wall time; 64 MiB at 1 Gbit/s
        assert 0.54 < rows[f"iperf3 {n}"] < rows[f"iperf3 {n} wall"]
    m = re.search(r"_Practical floor: ([0-9.]+) s = iperf3 -P (\d) data phase ([0-9.]+) s .*"
                  r"\+ 3 x RTT ([0-9.]+) ms", out)
    assert m, out
    best = min(rows["iperf3 1"], rows["iperf3 8"])
    assert float(m.group(3)) == pytest.approx(best, abs=0.006)
    assert float(m.group(1)) == pytest.approx(best + 3 * float(m.group(4)) / 1000, abs=0.011)
    assert "_Wire floor: 64 MiB at 1 Gbit/s = 0.54 s" in out
    start = re.search(r"_Start-up in the dst namespace.*`python -c pass` (\d+) ms, "
                      r"`python -c \"import socket, ssl\"` (\d+) ms, `dtnkit cp --help` (\d+) "
                      r"ms, `curl --version` (\d+) ms", out)
    assert start, out
    assert out.index("_Start-up") < out.index("| measurement |")  # above the tables
    assert own_leftovers(prefix) == []  # the iperf3 server stopped with the rest


@needs_all
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_an_error_stops_the_iperf3_server(prefix: str, bench: ModuleType) -> None:
    work = Path("/dev/shm") / f"dtnkit-wanbench-{prefix}-x"
    work.mkdir()
    with lab.path(f"{prefix}0", state_root=STATE_ROOT, rtt_ms=1, rate_bps=10**9) as p:
        with pytest.raises(RuntimeError, match="measurement failed"), \
                bench.iperf3_server(p.src, work) as server:
            assert server.poll() is None
            assert "Server listening" in (work / "iperf3-src.log").read_text()
            assert any(c.startswith("iperf3 -s") for c in own_processes(prefix))
            raise RuntimeError("measurement failed")
        assert server.poll() is not None
        assert server.pid not in bench.TRACKED.pids()
        assert own_processes(prefix) == []
