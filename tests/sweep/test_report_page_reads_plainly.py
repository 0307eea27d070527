"""The report page as a reader meets it: a run of two tools (iperf3 and dtnkit-cp) gives
one panel per tool in every figure, legends of at most 8 entries, unique table rows, no raw
JSON or epoch timestamps in the environment, a broken tool's version said in words, and a
plain-words warning about emulator-limited measurements."""

from __future__ import annotations

import dataclasses
import html.parser
import re
from pathlib import Path

from tests.sweep.synthetic import results

from dtnkit.sweep import report as R

ENV = {
    "host": "dtn1",
    "kernel": "6.1",
    "started": 1764787200.5,
    "versions": {
        "dtnkit": "0.1",
        "iperf3": "iperf 3.12 (cJSON 1.7.15)",
        "xrootd": "",
        "gfal-copy": "/usr/bin/gfal-copy: 28: exec: /usr/bin/python: not found",
    },
    "lab": {"name": "demo", "backend": "tbf", "mtu": 1500},
}


class Tables(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[list[str]]] = []
        self.figures: list[dict[str, str | None]] = []
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.rows.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._row.append("")
        elif tag == "figure":
            self.figures.append(dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._row is not None:
            self.rows[-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row:
            self._row[-1] += data


def two_tools() -> R.ReportData:
    pts = results(2)
    pts += [
        dataclasses.replace(p, point=dataclasses.replace(p.point, tool="iperf3"))
        for p in results(2)
    ]
    return R.ReportData(
        name="mixed",
        status="done",
        points_total=len(pts),
        grid_toml="",
        environment=ENV,
        records=[p.record() for p in pts],
        series={p.point.id: {"t_s": [1.0], "throughput_bps": [1e8]} for p in pts},
    )


def test_the_page_of_a_two_tool_run_reads_plainly(tmp_path: Path) -> None:
    R.build(two_tools(), tmp_path / "o")
    text = (tmp_path / "o" / "report.html").read_text()
    page = Tables()
    page.feed(text)
    assert len(page.figures) == 5
    for fig in page.figures:
        assert 0 <= int(fig["data-legend-entries"] or "0") <= 8, fig["id"]
    heat = text[text.index("id='fig-heatmap'") :]
    heat = heat[: heat.index("</figure>")]
    assert "tool dtnkit-cp: Gbit/s" in heat and "tool iperf3: Gbit/s" in heat
    for table in page.rows:
        body = [tuple(r) for r in table[1:]]
        assert len(body) == len(set(body)), body
    assert "{" not in text.split("<h2>Environment", 1)[1]  # no raw JSON
    assert not re.search(r"\b1[67]\d{8}\b", text)  # no epoch seconds
    assert "2025-12-03T18:40:00Z" in text
    assert "gfal-copy version</td><td>does not run (" in text
    assert "xrootd version</td><td>not installed" in text
    assert "iperf3 version</td><td>iperf 3.12" in text
    assert "limited by this machine's network emulator" in text
