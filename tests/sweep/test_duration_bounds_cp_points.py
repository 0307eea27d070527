"""`duration` bounds dtnkit-cp points as it bounds iperf3's: on a real lab path, a copy that
would take longer than the duration is cut when the duration is over (counted, not failed),
the point's measured time is its set-up, the duration and the stopping, each measured; the
estimate printed before the run holds the run's real length; and the tools duration cannot
bound are named up front with why."""

from __future__ import annotations

import dataclasses
import re
import secrets
import time

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.measure.tools.workers import CUT_POLL_S
from dtnkit.sweep import estimate, store
from dtnkit.sweep.grid import parse_grid_flags

DURATION_S = 3.0
#: 256 MiB at the 200 Mbit/s cap is 10.7 s for one stream and 21 s for each of two: far
#: longer than the duration, so only the cut can end a cp point in time (run to their end,
#: the copies would take the run well past the estimate's margin)
GRID = [
    "rtt=5ms",
    "rate=200mbit",
    "streams=1,2",
    "tool=dtnkit-cp,iperf3",
    "file_size=256MiB",
    f"duration={DURATION_S:g}s",
    "sample_interval=500ms",
]


def _seconds(text: str) -> float:
    """``45s``, ``3m20s``, ``1h05m`` (the progress lines' times) in seconds."""
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    assert m and text, text
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return 3600 * h + 60 * mi + s


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.serial  # judges the run's real length against the estimate's margin
def test_cp_points_last_the_duration_and_the_estimate_holds(environment: Environment) -> None:
    env = dataclasses.replace(environment, stderr_isatty=True, terminal_width=80)
    lab = f"dur{secrets.token_hex(3)}"
    t0 = time.monotonic()
    code = main(["sweep", "run", *GRID, "--name", "dur", "--lab", lab], env)
    real_s = time.monotonic() - t0
    out, err = taken(env.stdout), taken(env.stderr)
    assert code == 0, (out, err)

    # what a person reads before the first point: the estimate, with its margin
    lines = err.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("[1/4]"))
    said = [line for line in lines[:first] if line.startswith("sweep dur: 4 points, about ")]
    assert len(said) == 1, err
    m = re.search(r"about (\S+) \((\S+) to (\S+)\), \S+ of it measuring$", said[0])
    assert m and len(said[0]) <= 80, said
    about, low, high = (_seconds(g) for g in m.groups())
    assert low <= about <= high
    # the run's real length (this process's own clock around it) is inside the margin, give
    # or take the rounding to whole seconds of the line
    assert low - 1 <= real_s <= high + 1, (real_s, said[0])
    assert re.search(r"points in \S+\s+\(estimated \S+, \S+ to \S+\)", out), out

    points = {(p.point.tool, p.point.streams): p for p in store.load_points(env.results_db, "dur")}
    assert len(points) == 4 and all(p.status == "ok" for p in points.values())
    # the noise of a point's bookkeeping around its tool, measured on the iperf3 points: the
    # time from the tool's last process exiting to the end of the point's measured time
    book = [
        p.tool_s - max(t.end_s for t in p.transfers if t.end_s is not None)
        for (tool, _), p in points.items()
        if tool == "iperf3" and p.tool_s is not None
    ]
    noise = max(book) + (max(book) - min(book))
    for streams in (1, 2):
        p = points[("dtnkit-cp", streams)]
        extra = p.extra
        setup, until = extra["measure_from_s"], extra["measure_until_s"]
        stop = extra["stop_s"]
        assert extra["data_from"] in ("link", "first copy")
        assert until - setup == pytest.approx(DURATION_S)
        # every copy was still moving when the duration ended: cut, counted, not failed
        assert extra["cut_copies"] == streams and len(p.transfers) == streams
        assert all(t.end_s is None and not t.error and t.bytes > 0 for t in p.transfers)
        assert all(t.bytes < p.point.file_size for t in p.transfers)
        # the measured time: set-up + duration + stopping (each measured) + the bookkeeping
        assert p.tool_s is not None
        excess = p.tool_s - (setup + DURATION_S + stop)
        assert -CUT_POLL_S <= excess <= noise + CUT_POLL_S, (p.tool_s, setup, stop, noise)
        assert 0 <= stop <= p.tool_s - until + CUT_POLL_S
        # the bytes the link carried are the point's throughput: the samples of the duration
        kept = p.measured_samples
        assert kept and all(setup <= t for t, _ in kept)
        assert p.throughput_bps is not None and p.throughput_bps > 0


def test_tools_duration_cannot_bound_are_named_with_why() -> None:
    grid = parse_grid_flags(
        [
            "rtt=5ms",
            "rate=100mbit",
            "streams=4",
            "file_size=1GiB",
            "tool=dtnkit-cp,dtnkit-tpc,command:c",
            "duration=5s",
            "command.c=sleep {duration}",
        ]
    )
    est = estimate.estimate(grid.points(), start_s=0.2)
    by_tool = {n.split(":")[0]: n for n in est.notes}
    assert set(by_tool) == {"dtnkit-tpc", "command"}, est.notes  # dtnkit-cp is bounded
    assert "does not bound" in by_tool["dtnkit-tpc"] and "runs to its end" in by_tool["dtnkit-tpc"]
    # one 1 GiB file at a quarter of 100 Mbit/s: 344 s more than the duration, said and
    # counted
    assert "5m44s" in by_tool["dtnkit-tpc"]
    costs = dict(zip((p.tool for p in grid.points()), est.costs, strict=True))
    assert costs["dtnkit-cp"].data_s == 5.0 == costs["command:c"].data_s
    assert costs["dtnkit-tpc"].data_s == pytest.approx(5.0 + 2**30 * 8 / 25e6)
    assert est.low_s < est.seconds < est.high_s


def test_the_eta_scales_the_overhead_still_to_come_by_what_it_took_so_far() -> None:
    grid = parse_grid_flags(["rtt=5ms", "streams=1,2,4,8", "tool=iperf3", "duration=10s"])
    est = estimate.estimate(grid.points(), start_s=0.5)
    over = [c.overhead_starts * 0.5 + c.overhead_rtts for c in est.costs]
    # the first two points took their data time and twice their estimated overhead
    took = 20.0 + 2 * (est.fixed_start_s + over[0] + over[1])
    left = est.remaining(2, took)
    assert left == pytest.approx(20.0 + 2 * (over[2] + over[3] + est.fixed_end_s))
    # as estimated: the estimate's own remainder
    assert est.remaining(2, 20.0 + est.fixed_start_s + over[0] + over[1]) == pytest.approx(
        est.seconds - (20.0 + est.fixed_start_s + over[0] + over[1])
    )
