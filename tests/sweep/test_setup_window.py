"""A point's throughput is measured over the transfer, not its tool's set-up: iperf3 connects
its -P streams one after the other, one round trip each (13 s for 128 streams at 100 ms), and
those seconds of nothing were averaged into the point's throughput before."""

from __future__ import annotations

import json
import secrets
import statistics

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.lab import fidelity
from dtnkit.measure.pathsampler import IDLE_SERIES, Window, measured_idle_percent
from dtnkit.sweep import store
from dtnkit.sweep.grid import Point

POINT = Point(
    rtt_ms=100.0,
    rate_bps=None,
    loss=0.0,
    origins=1,
    cores=None,
    profile=None,
    tool="iperf3",
    file_size=1,
    streams=128,
    repeat=0,
    duration_s=8.0,
    bytes=None,
    sample_interval_s=1.0,
    time_limit_s=60.0,
)


def _result(samples: list[tuple[float, float]], **extra: object) -> store.PointResult:
    return store.PointResult(point=POINT, status="ok", samples=tuple(samples), extra=extra)


def test_samples_that_began_before_the_set_up_ended_are_left_out() -> None:
    samples = [(1.0, 0.0), (2.0, 0.0), (3.0, 5e8), (4.0, 1e9), (5.0, 1e9)]
    p = _result(samples, measure_from_s=2.4)
    assert p.measured_samples == ((4.0, 1e9), (5.0, 1e9))  # (2, 3] straddles the start
    assert p.throughput_bps == 1e9 and p.record().throughput_bps == 1e9
    assert _result(samples, measure_from_s=2.0).measured_samples == tuple(samples[2:])
    # no window reported, or one that leaves nothing: every sample, as before
    assert _result(samples).throughput_bps == pytest.approx(5e8)
    assert _result(samples, measure_from_s=9.0).measured_samples == tuple(samples)
    assert _result(samples, measure_from_s="2").measured_samples == tuple(samples)
    assert _result(samples, measure_from_s=True).measured_samples == tuple(samples)


def test_the_lab_bound_rule_reads_the_machine_over_the_transfer_too() -> None:
    """The idle share that marks a point lab-bound: over the measured samples, weighted by
    their length, when the tool reported its set-up; over the whole point otherwise."""
    w = Window(
        samples=[(1.0, 0.0), (2.0, 0.0), (3.0, 5e8), (5.0, 1e9)],
        softirq={"machine": {"idle_percent": 52.0}},
    )
    w.series[IDLE_SERIES] = [95.0, 90.0, 10.0, 25.0]
    assert measured_idle_percent(w, 2.0) == 20.0  # (1 s x 10 + 2 s x 25) / 3 s
    assert measured_idle_percent(w, 2.4) == 25.0  # (2, 3] straddles the start
    assert measured_idle_percent(w, None) == 52.0
    assert measured_idle_percent(w, 9.0) == 52.0  # nothing after it: the whole point
    w.series[IDLE_SERIES] = [95.0, 90.0, None, None]  # unreadable samples
    assert measured_idle_percent(w, 2.0) == 52.0
    assert fidelity.machine_bound(
        measured_idle_percent(
            Window(
                samples=[(1.0, 0.0), (2.0, 1e9)],
                series={IDLE_SERIES: [80.0, 4.0]},
                softirq={"machine": {"idle_percent": 42.0}},
            ),
            1.0,
        )
    ).bound


@pytest.mark.serial
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_iperf3_set_up_is_not_counted_as_throughput(environment: Environment) -> None:
    """30 streams at 50 ms: about 1.5 s of connecting before a 1.5 s test."""
    lab = f"p21{secrets.token_hex(3)}"
    code = main(
        [
            "sweep",
            "run",
            "rtt=50ms",
            "streams=30",
            "tool=iperf3",
            "duration=1500ms",
            "sample_interval=250ms",
            "rate=300mbit",
            "--name",
            "setup",
            "--lab",
            lab,
            "--format",
            "json",
        ],
        environment,
    )
    assert code == 0, taken(environment.stderr)
    assert json.loads(taken(environment.stdout))["ok"] == 1
    (p,) = store.load_points(environment.results_db, "setup")
    start = p.extra["measure_from_s"]
    assert isinstance(start, float) and start >= 30 * 0.05 * 0.8  # one RTT per stream
    (t,) = p.transfers
    assert t.end_s is not None
    own = t.bytes * 8 / (t.end_s - start)  # iperf3's bytes over its own test time
    everything = statistics.fmean(b for _, b in p.samples)
    assert p.throughput_bps is not None
    # not below iperf3's own average (which has slow start in it, while the window may begin
    # a little after it: iperf3 exits a results exchange after its test), never above the cap
    assert own * 0.9 < p.throughput_bps < 300e6 * 1.1, (p.throughput_bps, own, p.samples)
    assert everything / own < 0.75, (everything, own)  # what the point reported before
    assert all(b < 0.2 * own for t_s, b in p.samples if t_s <= start - 0.5)
    idle = p.extra["idle_percent_measured"]  # what the lab-bound rule read: the transfer's
    assert isinstance(idle, float) and 0.0 <= idle <= 100.0
    assert len(p.series[IDLE_SERIES]) == len(p.samples)
