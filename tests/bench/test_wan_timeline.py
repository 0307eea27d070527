"""The WAN case's reading of a copy's timeline (``cp --timeline``): where its time went
(bench/lib/wan/timeline.py), and whether a cell's path held its rate cap (report.cap_held)."""

from __future__ import annotations

import pytest
from bench.lib.wan import timeline
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
    at_cap = 256 * MiB * 8 / (10**9 * payload_share(1500))  # seconds at the payload rate
    held = cap_held(
        {
            "iperf3 8 steady": [at_cap / 0.99],
            "iperf3 1 steady": [at_cap * 2],
            "iperf3 8": [at_cap * 3],
        },
        cell,
    )
    assert held is not None and held == (pytest.approx(0.99), "iperf3 8 steady")
    assert cap_held({"iperf3 8": [1.0]}, cell) is None  # no steady figure: nothing said
    # jumbo frames carry more of what the cap counts as payload
    assert payload_share(9000) > 0.99 > 0.96 > payload_share(1500)
