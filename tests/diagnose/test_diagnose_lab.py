"""diagnose / experiment / apply --from-experiment on real lab paths with iperf3 and fio.

Three cases: small buffers on a long path (host network, buffers help), a rate cap that binds
(path: nothing helps, nothing is applied), throttled storage (storage: network tuning does not
change end to end).  Relations with tolerances, never absolute rates.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import lab_files, run
from tests.support.lab import set_tcp_buffers

from dtnkit.errors import ExitStatus
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]
NEEDS = [t for t in ("iperf3", "ping", "iptables", "fio") if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
SMALL = "4096 131072 4194304"
BIG = "4096 131072 67108864"


def probe(capsys: pytest.CaptureFixture[str], p: LabPath, env: dict[str, str]) -> float:
    code, doc = run(
        capsys,
        "probe",
        "net",
        "--peer",
        f"{p.name}/dst",
        "--netns",
        p.src.netns,
        "--duration",
        "4",
        "--interval",
        "1",
        "--db",
        env["db"],
        "--format",
        "json",
    )
    assert code == 0, doc
    return float(doc["summary"]["throughput_bps"])


@pytest.mark.serial
@needs_tools
def test_small_buffers_on_a_long_path(
    capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> None:
    with lab.path(state_root=Path(env["lab"]), rtt_ms=50, rate_bps=2_000_000_000) as p:
        set_tcp_buffers(p, SMALL)
        code, diag = run(
            capsys,
            "diagnose",
            "--peer",
            f"{p.name}/dst",
            "--netns",
            p.src.netns,
            "--duration",
            "4",
            "--interval",
            "0.5",
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert code == 11, diag["checks"]
        assert diag["verdict"]["layer"] == "host-network"
        assert "buffers" in diag["verdict"]["groups"]

        # buffers alone: what this case asserts is about buffers (a second group doubled the
        # runs; the two-group experiment is run by the rate-cap and NIC-full cases)
        code, exp = run(
            capsys,
            "experiment",
            "--groups",
            "buffers",
            "--peer",
            f"{p.name}/dst",
            "--netns",
            p.src.netns,
            "--both-ends",
            "--repeat",
            "2",
            "--duration",
            "4",
            "--rtt",
            "50ms",
            "--interval",
            "1",
            "--state-dir",
            env["state"],
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert code == 0, exp
        verdicts = {g["group"]: g for g in exp["groups"]}
        assert verdicts["buffers"]["verdict"] == "helps", verdicts["buffers"]
        assert verdicts["buffers"]["ratio"] > 1.5
        assert "buffers" in exp["helped"]
        # every group was restored after its runs
        assert p.src.run(["cat", "/proc/sys/net/ipv4/tcp_rmem"]).stdout.split() == SMALL.split()

        before = probe(capsys, p, env)
        for h in (p.src, p.dst):
            code, out = run(
                capsys,
                "tune",
                "apply",
                "--from-experiment",
                exp["id"],
                "--db",
                env["db"],
                "--netns",
                h.netns,
                "--state-dir",
                env["state"],
                "--format",
                "json",
            )
            assert code == 0 and out["ok"], out
        after = probe(capsys, p, env)
        assert after > 1.5 * before
        # every stored result says which tuning was live: the applied buffers changed it
        code, rows = run(capsys, "results", "list", "--db", env["db"], "--format", "json")
        assert rows and all(r["tuning_id"] for r in rows)
        assert rows[0]["tuning_id"] != rows[1]["tuning_id"]


@pytest.mark.serial
@needs_tools
def test_a_rate_cap_that_binds(capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    with lab.path(state_root=Path(env["lab"]), rtt_ms=20, rate_bps=500_000_000) as p:
        set_tcp_buffers(p, BIG)
        code, diag = run(
            capsys,
            "diagnose",
            "--peer",
            f"{p.name}/dst",
            "--netns",
            p.src.netns,
            "--duration",
            "4",
            "--interval",
            "0.5",
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert diag["verdict"]["layer"] in ("path", "nic"), diag["checks"]
        assert code in (10, 12) and diag["verdict"]["groups"] == []

        code, exp = run(
            capsys,
            "experiment",
            "--groups",
            "buffers,congestion",
            "--peer",
            f"{p.name}/dst",
            "--netns",
            p.src.netns,
            "--both-ends",
            "--repeat",
            "2",
            "--duration",
            "3",
            "--rtt",
            "20ms",
            "--interval",
            "1",
            "--state-dir",
            env["state"],
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert code == 0, exp
        assert {g["verdict"] for g in exp["groups"]} <= {"neutral", "harmful"}, exp["groups"]
        assert exp["helped"] == []
        state = p.src.run(
            ["sh", "-c", "cat /proc/sys/net/ipv4/tcp_*mem /proc/sys/net/ipv4/tcp_no_metrics_save"]
        ).stdout
        code, out = run(
            capsys,
            "tune",
            "apply",
            "--from-experiment",
            exp["id"],
            "--db",
            env["db"],
            "--netns",
            p.src.netns,
            "--state-dir",
            env["state"],
            "--format",
            "json",
        )
        assert code == 0 and out["applied"] == [] and out["baseline"] is None
        assert (
            p.src.run(
                [
                    "sh",
                    "-c",
                    "cat /proc/sys/net/ipv4/tcp_*mem /proc/sys/net/ipv4/tcp_no_metrics_save",
                ]
            ).stdout
            == state
        )


@pytest.fixture
def receiver(env: dict[str, str]) -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(p: LabPath, port: int) -> str:
        srv = p.dst.popen(
            [sys.executable, "-m", "dtnkit.measure.netpipe", "recv", str(port)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        procs.append(srv)
        assert srv.stdout is not None
        assert "listening" in srv.stdout.readline()
        return f"{p.dst.address}:{port}"

    yield start
    for srv in procs:
        if srv.poll() is None:
            os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()


@pytest.mark.serial
@needs_tools
def test_throttled_storage(
    capsys: pytest.CaptureFixture[str], env: dict[str, str], tmp_path: Path, receiver: Any
) -> None:
    from dtnkit.lab.disk import slow_disk, throttling_available

    why = throttling_available()
    if why:
        pytest.skip(why)
    with (
        slow_disk(48 * 2**20, read_bps=20 * 10**6, write_bps=20 * 10**6, workdir=tmp_path) as sd,
        lab.path(state_root=Path(env["lab"]), rtt_ms=10) as p,
    ):
        set_tcp_buffers(p, BIG)
        sink = receiver(p, 9100)
        command = (
            f"dd if={{src}} bs=1M iflag=direct status=none | {sys.executable} -m "
            "dtnkit.measure.netpipe send {dst}"
        )
        code, diag = run(
            capsys,
            "diagnose",
            "--peer",
            f"{p.name}/dst",
            "--netns",
            p.src.netns,
            "--path",
            sd.device,
            "--size",
            "32MiB",
            "--cgroup",
            sd.cgroup,
            "--e2e",
            sd.device,
            sink,
            "--command",
            command,
            "--duration",
            "3",
            "--interval",
            "1",
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert code == 13, diag["checks"]
        assert diag["verdict"]["layer"] == "storage", diag["checks"]
        assert "will not change end-to-end" in diag["verdict"]["summary"]
        ev = diag["verdict"]["evidence"]
        assert ev["network_bps"] > 5 * ev["disk_read_bps"]
        assert 0.7 <= ev["e2e_bps"] / ev["disk_read_bps"] <= 1.3


@needs_tools
def test_a_peer_that_does_not_answer(
    capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> None:
    with lab.path(state_root=Path(env["lab"]), rtt_ms=1) as p:
        silent = p.dst.address.rsplit(".", 1)[0] + ".99"  # inside the lab: nobody there
        code, doc = run(
            capsys,
            "probe",
            "net",
            "--peer",
            silent,
            "--netns",
            p.src.netns,
            "--duration",
            "2",
            "--db",
            env["db"],
            "--format",
            "json",
        )
    assert code == ExitStatus.ERROR
    assert "failed" in doc["error"]["what"] and doc["error"]["why"]


def test_missing_iperf3_and_fio_are_named(
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, doc = run(
        capsys, "probe", "net", "--peer", "localhost", "--db", env["db"], "--format", "json"
    )
    assert code == ExitStatus.TOOL_MISSING and "apt-get install iperf3" in doc["error"]["why"]
    code, doc = run(
        capsys, "probe", "disk", "--path", str(tmp_path), "--db", env["db"], "--format", "json"
    )
    assert code == ExitStatus.TOOL_MISSING and "fio" in doc["error"]["why"]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    return lab_files(tmp_path, monkeypatch)
