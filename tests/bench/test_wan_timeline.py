"""The WAN case's reading of a copy's timeline (``cp --timeline``): where its time went
(bench/lib/wan/timeline.py), and whether a cell's path held its rate cap (its hold check:
tools.hold_check, report.cap_held)."""

from __future__ import annotations

import pytest
from bench.lib.wan import timeline, tools
from bench.lib.wan.cells import Cell
from bench.lib.wan.report import cap_held, payload_share

MiB = 2**20


def doc() -> dict[str, object]:
    """Two connections: the first from 0.30 s, the second joining at 0.50 s; 8 MiB in all,
    the last byte at 1.00 s, the copy's end at 1.10 s."""
    return {
        "schema": 1,
        "process_start_s": -0.2,
        "events": [
            {"t": 0.05, "what": "connect", "connection": 0},
            {"t": 0.40, "what": "connect", "connection": 1},
            {"t": 1.10, "what": "end"},
        ],
        "connections": [
            {
                "index": 0,
                "rows": [
                    [0.1, 0, 0, 50.0, 10],
                    [0.3, 100_000, 0, 50.0, 10],
                    [0.6, 2 * MiB, 0, 50.0, 40],
                    [1.0, 5 * MiB, 0, 50, 80],
                ],
            },
            {
                "index": 1,
                "rows": [
                    [0.45, 0, 0, 50.0, 10],
                    [0.5, 70_000, 0, 50.0, 10],
                    [0.9, 3 * MiB, 0, 50.0, 40],
                ],
            },
        ],
    }


def test_phases_cut_a_copy_where_its_bytes_moved() -> None:
    ph = timeline.phases(doc(), 8 * MiB)
    assert ph.startup_s == pytest.approx(0.2)
    assert (ph.before_s, ph.setup_s) == pytest.approx((0.05, 0.25))
    assert (ph.data_s, ph.after_s) == pytest.approx((0.7, 0.1))
    assert ph.streams == 2 and ph.late_s == pytest.approx([0.2])
    assert ph.total_s == pytest.approx(1.1)
    # the sum of every connection's latest count, at each sample
    assert timeline.total_received(doc())[-1] == (1.0, 8 * MiB)
    with pytest.raises(ValueError, match="not the file's"):
        timeline.phases(doc(), 9 * MiB)
    with pytest.raises(ValueError, match="no connection"):
        timeline.phases({"events": [], "connections": []}, 1)


def test_a_path_holds_its_cap_when_iperf3_carries_its_payload_rate() -> None:
    cell = Cell(50.0, 10**9, False, 256 * MiB)
    payload = 10**9 * payload_share(1500)
    assert cap_held(0.99 * payload, cell) == pytest.approx(0.99)
    assert cap_held(None, cell) is None  # no hold check: nothing said
    # jumbo frames carry more of what the cap counts as payload
    assert payload_share(9000) > 0.99 > 0.96 > payload_share(1500)


def iperf3_doc(rates_bps: list[float], step: float = 0.5) -> dict[str, object]:
    """A timed iperf3 run's JSON as `iperf3 --json -i STEP` writes it: one interval a step."""
    intervals = [
        {"sum": {"start": i * step, "end": (i + 1) * step, "seconds": step, "bytes": r * step / 8}}
        for i, r in enumerate(rates_bps)
    ]
    return {"intervals": intervals, "end": {"sum_received": {"seconds": len(rates_bps) * step}}}


def test_the_hold_check_reads_past_slow_start() -> None:
    # 2 s at 5 Gbit/s after 2 s of slow start: the second half is the path's own rate, where
    # the whole run's average (what a file-sized run gives) reads 63 %
    ramp = [0.5e9, 1e9, 2e9, 4e9]
    doc = iperf3_doc([*ramp, *[5e9] * 4])
    assert tools.second_half_bps(doc) == pytest.approx(5e9)
    with pytest.raises(ValueError, match="no data"):
        tools.second_half_bps(iperf3_doc([1e9, 0.0]))
    # long enough for slow start on any lab path: 8 s, or 40 round trips
    assert tools.hold_seconds(50) == 8 and tools.hold_seconds(300) == 12
    assert tools.hold_seconds(None) == 8
