"""The emulator-bound rule (dtnkit.lab.fidelity) on synthetic stats and on a real lab path."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from dtnkit.lab import fidelity
from dtnkit.lab import path as lab


def doc(
    t: float,
    cpu_s: float,
    p50: float | None,
    p99: float | None = None,
    *,
    thread: float = 10.0,
    drops: int = 0,
    packets: int = 0,
) -> dict[str, Any]:
    return {
        "updated": t,
        "cpu_seconds": cpu_s,
        "cpu_percent": 0.0,
        "cpu_thread_max_percent": thread,
        "lateness_ms": {"p50": p50, "p99": p99 if p99 is not None else p50, "count": 5},
        "queues": {
            "0": {"packets": packets, "kernel": {"queue_dropped": drops, "user_dropped": 0}}
        },
    }


def test_summarize_takes_the_median_p50_the_worst_p99_and_cpu_over_the_window() -> None:
    w = fidelity.summarize(
        [
            doc(0.0, 1.0, 0.1, 0.5, packets=100),
            doc(0.5, 1.2, 3.0, 9.0, drops=2, packets=600),
            doc(1.0, 1.5, 0.2, 1.0, thread=95.0, drops=3, packets=1100),
        ]
    )
    assert w.samples == 3 and w.lateness_p50_ms == 0.2
    assert w.lateness_p99_ms == 1.0 and w.lateness_p99_worst_ms == 9.0
    assert w.cpu_percent == 50.0  # 0.5 CPU seconds over 1 s
    assert w.cpu_thread_max_percent == 52.5  # mean of the intervals after the first
    assert w.kernel_drops == 3 and w.packets == 1000
    empty = fidelity.summarize([])
    assert empty.samples == 0 and not fidelity.emulator_bound(empty, rtt_ms=5).bound


@pytest.mark.parametrize(
    ("p50", "thread", "drops", "rtt", "bound"),
    [
        (0.4, 50.0, 0, 5.0, False),  # under the 0.5 ms floor
        (0.6, 50.0, 0, 5.0, True),  # above the floor, and 0.6 > 5 % of 5 ms
        (4.0, 50.0, 0, 100.0, False),  # 4 ms < 5 % of 100 ms
        (6.0, 50.0, 0, 100.0, True),
        (0.1, 92.0, 0, 100.0, True),  # a packet thread at 92 % of a core
        (0.4, 50.0, 0, 5.0, False),
        (0.1, 50.0, 1, 100.0, True),  # the kernel dropped at the stage's queue
    ],
)
def test_the_rule(p50: float, thread: float, drops: int, rtt: float, bound: bool) -> None:
    w = fidelity.StageWindow(2, thread, thread, p50, p50, drops, 10)
    verdict = fidelity.emulator_bound(w, rtt_ms=rtt)
    assert verdict.bound is bound
    assert bool(verdict.reason) is bound


@pytest.mark.parametrize(
    ("p99", "rtt", "bound"),
    [
        (4.9, 5.0, False),  # under the 5 ms floor
        (6.0, 5.0, True),
        (45.0, 100.0, False),  # under half the RTT
        (60.0, 100.0, True),
    ],
)
def test_a_late_tail_of_half_the_rtt_is_bound(p99: float, rtt: float, bound: bool) -> None:
    w = fidelity.StageWindow(2, 30.0, 30.0, 0.1, p99, 0, 10)
    assert fidelity.emulator_bound(w, rtt_ms=rtt).bound is bound


NEEDS = [t for t in ("iperf3", "iptables", "ss") if shutil.which(t) is None]


def run_iperf(
    p: lab.LabPath, argv: list[str], tmp: Path, pin: list[str]
) -> tuple[float, fidelity.StageWindow]:
    """iperf3 through the path; the stage's stats sampled meanwhile (each 0.5 s interval once)."""
    server = p.dst.popen(
        [*pin, "iperf3", "-s", "-1", "-B", p.dst.address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 5
        while ":5201" not in p.dst.run(["ss", "-ltnH"]).stdout:
            assert time.monotonic() < deadline, "iperf3 server did not start"
            time.sleep(0.02)  # waiting for the listener, bounded
        out = tmp / f"iperf-{secrets.token_hex(2)}.json"  # -J of 64 streams overfills a pipe
        with out.open("w") as sink:
            client = p.src.popen(
                [*pin, "iperf3", "-c", p.dst.address, "-J", "-O", "1", *argv],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            samples: list[dict[str, Any]] = []
            seen = None
            while client.poll() is None:
                time.sleep(0.2)  # sampling the stage's twice-a-second report
                s = p.emulator_stats() or {}
                if s.get("updated") != seen:
                    samples.append(s)
                    seen = s.get("updated")
            assert client.wait(30) == 0, out.read_text()[-500:]
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(5)
    result = json.loads(out.read_text())
    return result["end"]["sum_received"]["bits_per_second"], fidelity.summarize(samples[1:])


@pytest.mark.serial
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_a_stage_driven_hard_is_flagged_and_a_light_run_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 streams on a 5 ms / 1 Gbit/s path through the stage as it was before issue 13 (one
    thread, an ordinary process: `--engine single --sched normal`, chosen through the
    environment the path passes on) release packets milliseconds late on 2 shared cores; 1
    stream at 20 Mbit/s through the same path is the noise floor, measured in this run.  For
    the heavy run the stage and both iperf3 ends share one CPU, so it competes for that CPU on
    a machine with more cores too."""
    monkeypatch.setenv("DTNKIT_NFQDELAY_ENGINE", "single")
    monkeypatch.setenv("DTNKIT_NFQDELAY_SCHED", "normal")
    name = f"fid{secrets.token_hex(3)}"
    with lab.path(name, state_root=tmp_path / "lab", rtt_ms=5, rate_bps=1_000_000_000) as p:
        for h in (p.src, p.dst):
            h.run(
                [
                    "sysctl",
                    "-qw",
                    "net.ipv4.tcp_rmem=4096 131072 16777216",
                    "net.ipv4.tcp_wmem=4096 131072 16777216",
                ]
            )
        assert (p.emulator_stats() or {}).get("engine") == "single"
        _, light = run_iperf(p, ["-t", "3", "-b", "20M"], tmp_path, [])
        cpu = min(os.sched_getaffinity(0))
        stage = int((p.emulator_stats() or {})["pid"])  # the single engine's packet thread
        os.sched_setaffinity(stage, {cpu})
        pin = ["taskset", "-c", str(cpu)] if shutil.which("taskset") else []
        _, heavy = run_iperf(p, ["-t", "6", "-P", "64"], tmp_path, pin)
    quiet = fidelity.emulator_bound(light, rtt_ms=5)
    loud = fidelity.emulator_bound(heavy, rtt_ms=5)
    assert light.samples >= 3 and heavy.samples >= 6, (light, heavy)
    assert not quiet.bound, (quiet.reason, light)
    assert loud.bound, heavy
    # the heavy run's lateness stands well clear of the light run's (the noise here)
    assert heavy.lateness_p50_ms is not None and light.lateness_p50_ms is not None
    assert heavy.lateness_p50_ms > 3 * light.lateness_p50_ms or loud.reasons[0].startswith(
        "stage thread"
    ), (heavy, light)
