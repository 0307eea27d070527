"""The progress lines themselves: what a sample of the probe's flows becomes, and lines that fit
80 columns.  Pure: samples in, lines out."""

from __future__ import annotations

import io
from typing import Any

from dtnkit.cli.progress import Reporter, duration, size
from dtnkit.measure.tools.iperf3 import flow_intervals
from dtnkit.progress import Interval


class Seen:
    def __init__(self) -> None:
        self.got: list[Interval] = []

    def step(self, what: str, k: int = 0, n: int = 0, *, eta_s: float | None = None) -> None:
        pass

    def interval(self, got: Interval) -> None:
        self.got.append(got)


def flow(local: str, acked: int, retrans: int, received: int = 0) -> dict[str, Any]:
    return {
        "local": local,
        "peer": "10.0.0.2:5201",
        "bytes_acked": acked,
        "bytes_received": received,
        "retrans_total": retrans,
    }


def test_intervals_are_per_flow_deltas_of_acked_bytes_and_retransmits() -> None:
    seen = Seen()
    report = flow_intervals(seen, duration_s=2)
    report({"t_s": 1.0, "flows": [flow("a:1", 1000_000, 2), flow("a:2", 500_000, 0)]})
    report({"t_s": 2.0, "flows": [flow("a:1", 3000_000, 5), flow("a:2", 1500_000, 1)]})
    report({"t_s": 2.4, "flows": [flow("a:1", 3000_100, 5)]})  # iperf3 exiting: idle tail
    assert [(i.start_s, i.end_s, i.nbytes, i.retransmits) for i in seen.got] == [
        (0.0, 1.0, 1_500_000, 2),
        (1.0, 2.0, 3_000_000, 4),
    ]
    assert seen.got[1].bps == 24e6


def test_reverse_counts_the_bytes_received() -> None:
    seen = Seen()
    report = flow_intervals(seen, reverse=True)
    report({"t_s": 0.5, "flows": [flow("a:1", 10, 0, received=4096)]})
    assert seen.got[0].nbytes == 4096


def test_lines_fit_80_columns_and_read_as_iperf3s() -> None:
    out = io.StringIO()
    rep = Reporter(out)
    rep.step("group congestion (12 of 12): applied run 20 of 20", 480, 480, eta_s=3725)
    rep.interval(Interval(3598.5, 3600.0, 2**40, 123456))
    rep.interval(
        Interval(0.0, 1.0, 7 * 2**30, 0, phase="write", done_bytes=2**50 - 1, total_bytes=2**50)
    )
    rep.interval(Interval(0.0, 3599.0, phase="transfer", total_bytes=3 * 2**40))
    lines = out.getvalue().splitlines()
    assert lines[0] == ("[480/480] group congestion (12 of 12): applied run 20 of 20, ETA 1h02m")
    assert lines[1].split() == ["Interval", "Transfer", "Bitrate", "Retr"]
    assert lines[2].split() == ["3598.5-3600.0", "s", "1.00", "TiB", "5.86", "Tbit/s", "123456"]
    assert lines[3].split()[:4] == ["write", "0.0-1.0", "s", "60.1"]
    assert lines[4] == "    transfer: 3599 s (moving 3.00 TiB)"
    assert all(len(line) <= 80 for line in lines), [len(x) for x in lines]


def test_sizes_and_durations() -> None:
    assert [size(n) for n in (0, 999, 1024, 224 * 2**20, 1.5 * 2**30)] == [
        "0 B",
        "999 B",
        "1.00 KiB",
        "224 MiB",
        "1.50 GiB",
    ]
    assert [duration(s) for s in (0.4, 59, 60, 200, 3725)] == [
        "0s",
        "59s",
        "1m00s",
        "3m20s",
        "1h02m",
    ]
