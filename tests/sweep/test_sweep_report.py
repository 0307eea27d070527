"""`dtnkit sweep report RUN -o DIR` on a synthetic run stored in a real results database: every
figure as PNG and SVG, one self-contained HTML page with every value escaped, written without
following planted symlinks; and the page rendered by headless Chromium (the Debian package)
loads without a console message and shows every figure."""

from __future__ import annotations

import base64
import dataclasses
import html.parser
import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.chromium import (
    HEIGHT,
    WIDTH,
    chromium,
    console_lines,
    probed_figures,
    with_probe,
)
from tests.sweep.synthetic import GRID_TOML, results, store_run

from dtnkit.cli import main as cli_main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.sweep import analyze as A
from dtnkit.sweep import report as R

FIGURES = ("throughput-vs-streams", "heatmap", "timeseries", "cpu-vs-throughput", "tail-latency")
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def dtnkit(tmp_path: Path) -> Run:
    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        env = Environment(
            state_dir=tmp_path / "state", results_db=tmp_path / "r.sqlite", stdout=out, stderr=err
        )
        return cli_main.main(list(argv), env), out.getvalue(), err.getvalue()

    return run


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """One report of the synthetic run (drawing is the slow part: shared by the tests that
    only read it), through the command with --point by a prefix: (DIR, its JSON output)."""
    base = tmp_path_factory.mktemp("swr-report")
    store_run(base / "r.sqlite")
    out, err = io.StringIO(), io.StringIO()
    pid = results()[-1].point.id
    env = Environment(
        stdout=out, stderr=err, results_db=base / "r.sqlite", state_dir=base / "state"
    )
    code = cli_main.main(
        [
            "sweep",
            "report",
            "synth",
            "-o",
            str(base / "rep"),
            "--point",
            pid[:6],
            "--target",
            "700mbit",
            "--format",
            "json",
        ],
        env,
    )
    assert code == 0, err.getvalue()
    return base / "rep", {**json.loads(out.getvalue()), "asked_point": pid}


class Page(html.parser.HTMLParser):
    """What a browser would make of the page: elements, attributes, text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_report_writes_every_figure_and_one_page(built: tuple[Path, dict[str, object]]) -> None:
    out, doc = built
    assert doc["figures"] == list(FIGURES) and doc["page"] == str(out / "report.html")
    assert doc["timeseries_point"] == doc["asked_point"]  # --point by a 6-character prefix
    assert sorted(os.listdir(out)) == sorted(
        ["analysis.json", "report.html", *(f"{f}.{x}" for f in FIGURES for x in ("png", "svg"))]
    )
    for f in FIGURES:
        assert (out / f"{f}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert ET.parse(out / f"{f}.svg").getroot().tag.endswith("svg")
    text = (out / "report.html").read_text()
    page = Page(text)
    imgs = [a for t, a in page.tags if t == "img"]
    assert len(imgs) == len(FIGURES)  # self-contained: each figure a data: URI of its PNG
    for f, img in zip(FIGURES, imgs, strict=True):
        src = img["src"] or ""
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == (out / f"{f}.png").read_bytes()
    assert not [a for t, a in page.tags if t in ("script", "link", "iframe")]
    words = " ".join(page.text)
    for want in (
        "Peak, drop and knee per RTT",
        "Fluctuation against utilisation",
        "Gbit/s per core",
        "Minimum resources for the target",
        "Tail latency",
        "Recommended streams per RTT",
        "Points kept out",
        'rtt = ["5ms", "100ms"]',
        "kernel",
        "2 of 24 measurements were limited by this machine's network emulator",
        "delay stage at 97% of a core (2 measurements)",
        "connection refused",
    ):
        assert want in words, want
    assert f"The time series is of point <code>{doc['asked_point']}</code>" in text
    assert json.loads((out / "analysis.json").read_text())["curves"][0]["peak_streams"] == 8


def test_the_default_time_series_is_the_first_curves_peak() -> None:
    records = [p.record() for p in results()]
    chosen = R.peak_point(A.analyze(records), records)
    point = next(r.point for r in records if r.point.id == chosen)
    assert (point.rtt_ms, point.streams) == (5.0, 8)
    assert R.peak_point(A.analyze([]), []) is None


def test_a_file_or_a_symlink_as_dir_is_refused(tmp_path: Path, dtnkit: Run) -> None:
    store_run(tmp_path / "r.sqlite")
    (tmp_path / "f").write_text("mine")
    code, _, err = dtnkit("sweep", "report", "synth", "-o", str(tmp_path / "f"))
    assert code == ExitStatus.BAD_INPUT and "is not a directory" in err
    assert err.count("\n") == 1 and (tmp_path / "f").read_text() == "mine"
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    code, _, err = dtnkit("sweep", "report", "synth", "-o", str(tmp_path / "link"))
    assert code == ExitStatus.BAD_INPUT and "symbolic link" in err
    assert os.listdir(tmp_path / "real") == []
    code, _, err = dtnkit("sweep", "report", "nosuch", "-o", str(tmp_path / "n"))
    assert code == ExitStatus.BAD_INPUT and "no sweep run 'nosuch'" in err


def test_planted_symlinks_in_dir_are_replaced_not_followed(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    victims = {}
    for name in ("report.html", "heatmap.png", "analysis.json"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("precious")
        (out / name).symlink_to(victim)
        victims[name] = victim
    names = R.write_files(out, {n: b"new " + n.encode() for n in (*victims, "a.svg")})
    assert names[-1] == "report.html"  # the page last
    for name, victim in victims.items():
        assert victim.read_text() == "precious"
        assert (
            not (out / name).is_symlink() and (out / name).read_bytes() == b"new " + name.encode()
        )
        assert oct((out / name).stat().st_mode & 0o777) == "0o644"
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # no temporary left


def test_a_directory_in_the_way_fails_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "o"
    (out / "report.html").mkdir(parents=True)
    (out / "report.html" / "x").write_text("x")
    with pytest.raises(BadInput, match="cannot write the report"):
        R.write_files(out, {"a.png": b"a", "report.html": b"<html>"})
    assert not [n for n in os.listdir(out) if n.startswith(".")]


HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&"


def hostile_data() -> R.ReportData:
    pts = results(1)
    pts[3] = dataclasses.replace(pts[3], emulator_bound=True, emulator_why=HOSTILE)
    pts[0] = dataclasses.replace(pts[0], status="failed", error=HOSTILE, samples=())
    # a profile name that varies makes the curves' labels: a "$" must not start mathtext
    pts[5] = dataclasses.replace(
        pts[5], point=dataclasses.replace(pts[5].point, profile="$\\frac{$" + HOSTILE)
    )
    records = [p.record() for p in pts]
    return R.ReportData(
        name=HOSTILE,
        status=HOSTILE,
        points_total=len(pts),
        grid_toml=GRID_TOML + f"# {HOSTILE}\n</pre><script>alert(3)</script>",
        environment={HOSTILE: HOSTILE, "versions": {"x": HOSTILE}},
        records=records,
        series={p.point.id: {"t_s": [1.0], "throughput_bps": [1e8]} for p in pts},
    )


class Steps:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    def step(self, what: str, k: int = 0, n: int = 0, *, eta_s: float | None = None) -> None:
        self.seen.append((what, k, n))

    def interval(self, got: object) -> None:
        raise AssertionError("a report has no intervals")


def test_hostile_values_are_escaped(tmp_path: Path) -> None:
    steps = Steps()
    R.build(hostile_data(), tmp_path / "o", baseline=None, progress=steps)  # type: ignore[arg-type]
    assert [(k, n) for _, k, n in steps.seen] == [(k, 5) for k in range(1, 6)]
    assert steps.seen[0][0] == "drawing throughput against streams"
    text = (tmp_path / "o" / "report.html").read_text()
    page = Page(text)
    assert not [t for t, _ in page.tags if t == "script"]
    assert [a for t, a in page.tags if t == "img"] == [
        a for t, a in page.tags if t == "img" and "class" in a
    ]
    assert not [k for _, a in page.tags for k in a if k.startswith("on")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;/pre&gt;&lt;script&gt;alert(3)" in text
    assert HOSTILE in "".join(page.text)  # shown as text, whole
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert "profile $\\frac{$&lt;script&gt;" in text  # the label, shown as written


def test_an_empty_run_still_gives_a_page(tmp_path: Path, dtnkit: Run) -> None:
    pts = [dataclasses.replace(p, status="failed", error="refused", samples=()) for p in results(1)]
    store_run(tmp_path / "r.sqlite", "dead", points=pts)
    code, stdout, err = dtnkit("sweep", "report", "dead", "-o", str(tmp_path / "o"))
    assert code == 0, err
    assert f"wrote 12 files to {tmp_path / 'o'}: 5 figures (PNG and SVG)" in stdout
    assert f"open {tmp_path / 'o' / 'report.html'}" in stdout
    text = (tmp_path / "o" / "report.html").read_text()
    assert "no curve" in text and "failed: refused" in text
    code, stdout, err = dtnkit(
        "sweep", "report", "dead", "-o", str(tmp_path / "p"), "--point", "zzzz"
    )
    assert code == ExitStatus.BAD_INPUT and "no point 'zzzz'" in err and stdout == ""
    assert not (tmp_path / "p").exists()


def test_without_matplotlib_a_clear_error_and_nothing_written(tmp_path: Path) -> None:
    store_run(tmp_path / "r.sqlite")
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from dtnkit.cli.main import main\n"
        f"sys.exit(main(['sweep', 'report', 'synth', '-o', {str(tmp_path / 'o')!r}, '--db', "
        f"{str(tmp_path / 'r.sqlite')!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == ExitStatus.TOOL_MISSING, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "./dev/bootstrap.sh" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


# ---------------------------------------------------------------- in a real browser


@pytest.mark.needs_chromium
def test_the_page_renders_in_chromium_with_every_figure(
    tmp_path: Path, built: tuple[Path, dict[str, object]]
) -> None:
    assert shutil.which("chromium")
    page = built[0] / "report.html"
    # 1. the page as written: a screenshot, and not one console message (a blocked
    #    script, a refused resource, a parse error would each log one)
    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, page, f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc) == []
    # 2. the same page with a probe script (allowed by a copy's policy): every figure
    #    decoded, with its natural size, and where it is on the page
    proc = chromium(tmp_path, with_probe(page, tmp_path / "probe.html"), "--dump-dom")
    figs = probed_figures(proc)
    assert figs is not None, proc.stderr[-2000:]
    assert console_lines(proc) == []
    assert len(figs) == len(FIGURES)
    from matplotlib.image import imread

    image = imread(str(shot))  # rows x columns x RGB(A), 0..1
    assert image.shape[:2] == (HEIGHT, WIDTH)
    for complete, nat_w, nat_h, left, top, width, height in figs:
        assert complete == 1 and nat_w >= 400 and nat_h >= 200
        assert top + height <= HEIGHT, "the window is too short for the page"
        region = image[top : top + height, left : left + width, :3]
        dark = (region.sum(axis=2) < 2.4).mean()  # a share of non-white pixels
        assert 0.01 < dark < 0.9, (top, dark)
