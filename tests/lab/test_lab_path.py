"""Lab paths for real: namespaces, the delay stage, htb, iperf3 and ping.

Rates vary by about ±30 % between runs on the CI machine, so every throughput assertion is a
relation (to the cap, to window/RTT, between runs), never an absolute figure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from tests.support.lab import goodput_bps, set_tcp_buffers

from dtnkit.cli.main import main
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath, PathSpec

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]

NEEDS = [t for t in ("iperf3", "ping", "iptables") if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
SMALL = "4096 131072 4194304"  # 4 MiB buffers in both end namespaces


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's lab state root: passed to the API, and to the CLI as $DTNKIT_LAB_STATE."""
    root = tmp_path / "lab"
    monkeypatch.setenv("DTNKIT_LAB_STATE", str(root))
    return root


@pytest.fixture
def leftovers(state: Path) -> Iterator[None]:
    """Fails a test that leaves a lab namespace or one of its delay stages behind."""
    yield
    assert [n for n in lab._netns_list() if n.startswith(lab.NS_PREFIX)] == []
    assert subprocess.run(["pgrep", "-f", f"dtnkit.lab.nfqdelay .*{state}"],
                          capture_output=True).returncode == 1


@needs_tools
@pytest.mark.parametrize("rtt", [10.0, 100.0])
def test_idle_rtt_is_accurate(rtt: float, state: Path, leftovers: None) -> None:
    # up to three measurements: a VM's steal time can put one outlier into a run of 20 pings;
    # a real bias or jitter of the delay stage fails all three
    tries: list[dict[str, float] | None] = []
    with lab.path(state_root=state, rtt_ms=rtt) as p:
        for _ in range(3):
            got = p.measure_rtt(count=20)
            tries.append(got)
            if got and rtt - 0.1 <= got["avg_ms"] <= rtt + 1.5 and got["mdev_ms"] < 0.5:
                break
    assert got is not None, tries
    assert rtt - 0.1 <= got["avg_ms"] <= rtt + 1.5, tries
    assert got["mdev_ms"] < 0.5, tries


@needs_tools
@pytest.mark.parametrize("rate", [500_000_000, 2_000_000_000])
def test_rate_cap_is_accurate(rate: int, state: Path, leftovers: None) -> None:
    with lab.path(state_root=state, rtt_ms=10, rate_bps=rate) as p:
        set_tcp_buffers(p, "4096 131072 67108864")
        got = goodput_bps(p, seconds=5)
    # goodput excludes TCP/IP/Ethernet headers (1448 of 1514 bytes at MTU 1500)
    assert 0.90 <= got / (rate * 1448 / 1514) <= 1.02


@needs_tools
def test_physics_window_over_rtt_then_tuned_buffers_then_streams(
    state: Path, leftovers: None, capsys: pytest.CaptureFixture[str]
) -> None:
    cap = 2_000_000_000
    with lab.path(state_root=state, rtt_ms=50, rate_bps=cap) as p:
        set_tcp_buffers(p, SMALL)
        one = goodput_bps(p)
        window_rate = 4 * 2**20 * 8 / 0.050
        assert one < 0.5 * cap  # bound by the window, not the cap
        assert 0.35 <= one / window_rate <= 1.1

        four = goodput_bps(p, streams=4)
        assert 3.0 <= four / one <= 4.6

        for h in (p.src, p.dst):  # dtnkit tune, for real, on both ends of the path
            code = main(["tune", "apply", "--group", "buffers", "--netns", h.netns, "--rtt",
                         "50ms", "--state-dir", str(state / "tune"), "--format", "json"])
            assert code == ExitStatus.OK, capsys.readouterr()
        tuned = goodput_bps(p)
        assert tuned >= 0.8 * cap * 1448 / 1514


@needs_tools
def test_parameters_change_in_place(state: Path, leftovers: None) -> None:
    with lab.path(state_root=state, rtt_ms=10) as p:
        before = p.measure_rtt()
        p.set(rtt_ms=40)
        after = p.measure_rtt()
        assert p.status(measure=False)["rtt_ms"] == 40
    assert before is not None and after is not None
    assert 9.9 <= before["avg_ms"] <= 11.5
    assert 39.9 <= after["avg_ms"] <= 41.5


@needs_tools
def test_loss_is_within_a_binomial_bound(state: Path, leftovers: None) -> None:
    with lab.path(state_root=state, rtt_ms=2, loss=0.05, seed=7) as p:
        p.src.run(["ping", "-q", "-c", "400", "-i", "0.002", "-W", "1", p.dst.address],
                  check=False)
        stats = p.emulator_stats(fresh=True)
    assert stats is not None
    q = stats["queues"]["0"]
    n, dropped = q["packets"], q["dropped_loss"]
    mean, sd = n * 0.05, (n * 0.05 * 0.95) ** 0.5
    assert n >= 400 and abs(dropped - mean) <= 4 * sd


@needs_tools
def test_multi_host_sides_share_the_path(state: Path, leftovers: None) -> None:
    with lab.path(state_root=state, rtt_ms=5, n_src=2, n_dst=2) as p:
        assert [h.name for h in p.hosts] == ["src1", "src2", "dst1", "dst2"]
        for h in p.hosts[:2]:
            got = h.run(["ping", "-c", "2", "-i", "0.05", p.host("dst2").address])
            assert "2 received" in got.stdout


@needs_tools
def test_failure_inside_the_block_still_tears_down(state: Path, leftovers: None) -> None:
    with pytest.raises(RuntimeError), lab.path(state_root=state, rtt_ms=5) as p:
        assert p.src.netns in lab._netns_list()
        raise RuntimeError("test failed mid-way")


@needs_tools
def test_kill_9_of_the_emulator_then_down_leaves_nothing(state: Path, leftovers: None) -> None:
    p = lab.up("dkkill", PathSpec(rtt_ms=5), state_root=state)
    pid = p.state.emulator_pid
    assert pid and lab._alive(pid)
    server = p.dst.popen(["sleep", "300"])  # a process inside a lab namespace
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert main(["lab", "down", "dkkill"]) == 0
    assert not Path(f"/proc/{server.pid}").exists()  # stopped and reaped by down
    assert not (state / "dkkill").exists()


@needs_tools
def test_cli_up_status_exec_list_down(
    state: Path, leftovers: None, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        capsys.readouterr()
        assert main(["lab", "up", "dkcli", "--rtt", "20ms", "--rate", "1gbit", "--format",
                     "json"]) == 0
        up = json.loads(capsys.readouterr().out)
        assert up["backend"] in ("netem", "nfqueue") and up["backend_reason"]
        assert [h["name"] for h in up["hosts"]] == ["src", "dst"]
        assert main(["lab", "status", "dkcli", "--format", "json"]) == 0
        st = json.loads(capsys.readouterr().out)
        for key in ("name", "backend", "rtt_ms", "rate_bps", "loss", "hosts"):
            assert key in st
        assert st["rate_bps"] == 1_000_000_000 and st["rtt_ms"] == 20
        assert {"name", "netns", "address"} <= set(st["hosts"][0])
        assert 19.9 <= st["measured"]["avg_ms"] <= 21.5
        if st["backend"] == "nfqueue":
            assert st["emulator"]["alive"] and st["emulator"]["cpu_percent"] is not None
        assert main(["lab", "list", "--format", "json"]) == 0
        assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["dkcli"]
        assert main(["lab", "up", "dkcli"]) == ExitStatus.BAD_INPUT  # name in use
        assert "already exists" in capsys.readouterr().err
    finally:
        assert main(["lab", "down", "--all"]) == 0


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--rtt", "5s"], "out of range"),
        (["--rtt", "fast"], "bad RTT"),
        (["--rate", "10tbit"], "out of range"),
        (["--rate", "lots"], "bad rate"),
        (["--loss", "80%"], "out of range"),
        (["--src", "0"], "out of range"),
        (["--mtu", "100"], "out of range"),
    ],
)
def test_bad_input_builds_nothing(
    argv: list[str], fragment: str, state: Path, leftovers: None,
    capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["lab", "up", "dkbad", *argv]) == ExitStatus.BAD_INPUT
    assert fragment in capsys.readouterr().err
    assert not (state / "dkbad").exists()


def test_bad_names_are_refused() -> None:
    for name in ("../x", "UPPER", "a" * 13, "-x", ""):
        with pytest.raises(BadInput):
            lab.check_name(name)


def test_queue_is_one_bandwidth_delay_product_unless_given() -> None:
    assert PathSpec(rtt_ms=50, rate_bps=2 * 10**9).queue_size() == 12_500_000
    assert PathSpec(rtt_ms=1, rate_bps=10**8).queue_size() == lab.MIN_QUEUE
    assert PathSpec(rtt_ms=50, rate_bps=10**9, queue_bytes=10**6).queue_size() == 10**6


def test_netem_backend_commands(tmp_path: Path) -> None:
    """This kernel has no netem, so only the commands can be checked here (real DTNs have it:
    the backend is chosen there automatically)."""
    calls: list[list[str]] = []

    def record(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    state = lab.plan("dknetem", PathSpec(rtt_ms=40, rate_bps=10**9, loss=0.001), 3, (251, 252))
    state.backend = "netem"
    LabPath(state, state_root=tmp_path, run=record)._apply_path(initial=True)
    tc = [" ".join(c) for c in calls if c[0] == "tc" and ("qdisc" in c or "class" in c)]
    assert "tc -n dkl-dknetem-path qdisc add dev dkd1 parent 1:1 handle 10: netem delay 20.0ms " \
           "limit 1000000 loss 0.1%" in tc
    assert "tc -n dkl-dknetem-path qdisc add dev dks1 parent 1:1 handle 10: netem delay 20.0ms " \
           "limit 1000000" in tc  # the reverse direction is delayed, not lossy
    assert any("htb rate 1000000000bit" in c for c in tc)
    assert not any("iptables" in c for c in calls)
    calls.clear()
    state.spec.rate_bps = None  # no cap: netem is the root qdisc
    LabPath(state, state_root=tmp_path, run=record)._apply_path()
    assert [" ".join(c[6:]) for c in calls if "replace" in c] == [
        "dks1 root netem delay 20.0ms limit 1000000",
        "dkd1 root netem delay 20.0ms limit 1000000 loss 0.1%"]
