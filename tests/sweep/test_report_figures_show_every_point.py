"""The report's figures as a reader meets them when the machine limited every measurement
(what a loaded 2-core machine gives): every point is drawn inside its panel, whichever panel
holds the largest value; hollow markers of different RTTs can be told apart by the legend;
the CPU axis's numbers never run together; a tool whose copies were all cut at the duration
(no completion time) is named on the tail-latency figure instead of silently missing; and
the warning says each kind of limit once, with how many measurements it held back; the
time series shades the samples the point's throughput leaves out."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.sweep.synthetic import results, store_run

from dtnkit.measure.tool import Transfer
from dtnkit.sweep import analyze as A
from dtnkit.sweep import report as R

ENV = {
    "host": "dtn1",
    "started": 1764787200.5,
    "versions": {"dtnkit": "0.1"},
    "lab": {
        "name": "demo",
        "backend": "nfqueue",
        "backend_reason": "the kernel has no netem qdisc",
        "mtu": 1500,
        "n_src": 1,
    },
}
WHYS = [
    "lateness p99 7.336 ms > 5 ms (50% of 5 ms RTT); the machine 0 % idle (< 10 %): "
    "the lab's hosts and path share its CPUs",
    "lateness p99 14.86 ms > 5 ms (50% of 5 ms RTT); the machine 3 % idle (< 10 %): "
    "the lab's hosts and path share its CPUs",
    "the machine 0 % idle (< 10 %): the lab's hosts and path share its CPUs",
]


def limited_run() -> R.ReportData:
    """Two RTTs x 3 stream counts for dtnkit-cp (every copy cut: no completion) and for
    iperf3 (twice the throughput, so its panel holds the largest values); every point
    limited by the machine."""
    pts = []
    for k, p in enumerate(
        x for x in results(1, bound_at=None, failed_at=None) if x.point.streams in (1, 2, 4)
    ):
        cut = tuple(dataclasses.replace(t, end_s=None) for t in p.transfers)
        pts.append(
            dataclasses.replace(p, transfers=cut, emulator_bound=True, emulator_why=WHYS[k % 3])
        )
        fast = tuple((t, 2 * b) for t, b in p.samples)
        pts.append(
            dataclasses.replace(
                p,
                point=dataclasses.replace(p.point, tool="iperf3"),
                samples=fast,
                transfers=(Transfer(0.0, 6.0, 2**20),),
                emulator_bound=True,
                emulator_why=WHYS[2],
                cpu_seconds=(0.01 * (k + 1),),
            )
        )
    return R.ReportData(
        name="limited",
        status="done",
        points_total=len(pts),
        grid_toml="",
        environment=ENV,
        records=[p.record() for p in pts],
        series={p.point.id: {"t_s": [1.0], "throughput_bps": [1e8]} for p in pts},
    )


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, Any]]]:
    """Each figure's panels as drawn (limits, every marker's position, tick labels, legend
    entries) and its title, caught just before it is saved."""
    seen: dict[str, dict[str, Any]] = {}
    save = R._save

    def catch(fig: Any, stem: str, *args: Any, **kw: Any) -> Any:
        fig.canvas.draw()
        panels = []
        for ax in fig.axes:
            points = [tuple(xy) for c in ax.collections for xy in c.get_offsets()]
            legend = ax.get_legend()
            panels.append(
                {
                    "title": ax.get_title(),
                    "ylim": ax.get_ylim(),
                    "xlim": ax.get_xlim(),
                    "points": points,
                    "xticks": [t.get_text() for t in ax.get_xticklabels() if t.get_text()],
                    "xtick_boxes": [
                        t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()
                    ],
                    "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                    "texts": [t.get_text() for t in ax.texts],
                }
            )
        seen[stem] = {"panels": panels, "title": fig._suptitle.get_text() if fig._suptitle else ""}
        return save(fig, stem, *args, **kw)

    monkeypatch.setattr(R, "_save", catch)
    yield seen


def test_a_run_the_machine_limited_reads_plainly(drawn: dict[str, dict[str, Any]]) -> None:
    data = limited_run()
    analysis = A.analyze(data.records)
    R.figures(data, analysis, None)
    for stem in ("throughput-vs-streams", "cpu-vs-throughput", "tail-latency"):
        for panel in drawn[stem]["panels"]:
            (x0, x1), (y0, y1) = panel["xlim"], panel["ylim"]
            for x, y in panel["points"]:  # every marker inside its panel
                assert x0 <= x <= x1 and y0 <= y <= y1, (
                    stem,
                    panel["title"],
                    (x, y),
                    panel["ylim"],
                )
    throughput = drawn["throughput-vs-streams"]["panels"]
    assert [p["title"] for p in throughput] == [
        "dtnkit-cp: throughput (Gbit/s)",
        "iperf3: throughput (Gbit/s)",
    ]
    assert all(len(p["points"]) == 6 for p in throughput)  # 2 RTTs x 3 stream counts each
    for p in throughput:  # with no line, the legend still tells the RTTs apart
        assert {"5 ms", "100 ms"} <= set(p["legend"]), p["legend"]
    for p in drawn["cpu-vs-throughput"]["panels"]:
        assert {"RTT 5 ms", "RTT 100 ms"} <= set(p["legend"]), p["legend"]
        boxes = p["xtick_boxes"]  # the CPU axis's numbers never overlap
        assert all(a.x1 < b.x0 for a, b in itertools.pairwise(boxes)), p["xticks"]
    (heat,) = drawn["heatmap"]["panels"]  # empty, and saying why: not "no valid point"
    assert heat["texts"] == [
        "every measured point (12) was limited by this machine, not the "
        "path:\nleft out (see the box above the figures)"
    ]
    tail = drawn["tail-latency"]
    assert [p["title"] for p in tail["panels"]] == ["iperf3: completion time (s)"]
    assert "no panel for dtnkit-cp" in tail["title"]
    assert "cut at the duration" in tail["title"]


def test_the_warning_names_each_limit_once_with_its_count() -> None:
    data = limited_run()
    text = R.page(data, A.analyze(data.records), [], None)
    note = text[text.index("<p class='note'>") :]
    note = note[: note.index("</p>")]
    assert "(1 measurements)" not in note
    assert note.count("idle (&lt; 10 %)") == 1 and note.count("lateness p99") == 1
    assert "lateness p99 7.34-14.9 ms &gt; 5 ms (50% of 5 ms RTT) (4 measurements)" in note
    assert (
        "the machine 0-3 % idle (&lt; 10 %): the lab&#x27;s hosts and path share its "
        "CPUs (12 measurements)"
    ) in note
    lab = next(row for row in R.environment_rows(ENV) if row[0] == "lab path")
    assert lab[1] == (
        "demo: the nfqueue delay stage (the kernel has no netem qdisc), MTU 1500, 1 sending host"
    )


def test_the_time_series_shades_what_the_throughput_leaves_out(
    tmp_path: Path, drawn: dict[str, dict[str, Any]]
) -> None:
    """A cp point's set-up (before data flowed) and stopping (after the duration) samples
    are shaded and named, and they are exactly the samples its throughput leaves out."""
    p = results(1, bound_at=None, failed_at=None)[0]
    p = dataclasses.replace(
        p,
        samples=tuple((float(t), 1e8 * t) for t in range(1, 7)),
        extra={"measure_from_s": 0.4, "measure_until_s": 4.5},
    )
    store_run(tmp_path / "r.db", "cut", points=[p])
    data = R.from_store(tmp_path / "r.db", "cut")
    assert data.series[p.point.id][R.MEASURED] == [1.0, 5.0]
    assert p.measured_samples == tuple((float(t), 1e8 * t) for t in range(2, 6))
    R.figures(data, A.analyze(data.records), p.point.id)
    (panel, *_) = drawn["timeseries"]["panels"]
    assert {"set-up, not in the throughput", "stopping, not in the throughput"} <= set(
        panel["legend"]
    ), panel["legend"]
