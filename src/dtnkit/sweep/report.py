"""``dtnkit sweep report RUN -o DIR``: a sweep run's figures (PNG and SVG, drawn with matplotlib)
and one self-contained HTML page (figures embedded as ``data:`` URIs, the analysis tables,
the grid, the environment and versions, and how to read each figure).

matplotlib is the report extra (``dev/bootstrap.sh`` installs it in a checkout, ``pip install
'dtnkit[report]'`` for the package), imported only here and
only when a report is drawn, with the Agg backend (no display).

Writing is safe in a directory others can write to: every file is made in a fresh private
directory inside DIR and then renamed over its name in DIR, so a symlink planted in DIR is
replaced, never followed; a DIR that is not a directory is refused before anything is drawn.
Every value from the run (its name, the grid's text, the environment, errors) is HTML-escaped,
and the page's Content-Security-Policy allows no script and no fetch.  Those helpers (writing,
escaping, tables, saving a figure) are :mod:`dtnkit.htmlpage`'s, shared with ``dtnkit fleet
report``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dtnkit import __version__, htmlpage
from dtnkit.db.location import Location
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.htmlpage import CSP, PAGE, Drawn, figure_html
from dtnkit.htmlpage import CSS as _CSS
from dtnkit.htmlpage import check_dir as check_dir  # re-exported: cli/sweep_analyze.py
from dtnkit.htmlpage import escape as _e
from dtnkit.htmlpage import html_table as _table
from dtnkit.htmlpage import mpl_text as _mpl
from dtnkit.htmlpage import nothing as _nothing
from dtnkit.htmlpage import save as _save
from dtnkit.htmlpage import write_files as write_files
from dtnkit.sweep import analyze, store
from dtnkit.units import (
    counted,
    format_bytes,
    format_duration,
    format_percent,
    format_rate,
    format_value,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from dtnkit.progress import Progress


@dataclasses.dataclass(frozen=True)
class ReportData:
    """What a report shows of one run (:func:`from_store` reads it from the results DB)."""

    name: str
    status: str
    points_total: int
    grid_toml: str
    environment: Mapping[str, Any]
    records: Sequence[analyze.PointRecord]
    #: per point ID: ``t_s``, ``throughput_bps`` and further series (``cpu_cores.N``, ...)
    series: Mapping[str, Mapping[str, Sequence[float | None]]]


#: the series key of a point's measured window, [from, until] seconds: the span of the
#: samples its throughput is the mean of (absent: every sample)
MEASURED = "measured_s"


def from_store(db: Location, run: str) -> ReportData:
    info = store.run_info(db, run)
    points = store.load_points(db, run)
    series: dict[str, dict[str, list[float | None]]] = {}
    for p in points:
        one: dict[str, list[float | None]] = {
            "t_s": [t for t, _ in p.samples],
            "throughput_bps": [b if math.isfinite(b) else None for _, b in p.samples],
        }
        one.update({k: list(v) for k, v in p.series.items()})
        kept = p.measured_samples  # the store's own rule: the samples the throughput is of
        if kept and kept != p.samples:
            times = [t for t, _ in p.samples]
            first = times.index(kept[0][0])
            one[MEASURED] = [times[first - 1] if first else 0.0, kept[-1][0]]
        series[p.point.id] = one
    return ReportData(
        name=info.name,
        status=info.status,
        points_total=info.points_total,
        grid_toml=info.grid_toml,
        environment=info.environment,
        records=[p.record() for p in points],
        series=series,
    )


@dataclasses.dataclass(frozen=True)
class Written:
    directory: Path
    page: Path
    files: tuple[str, ...]
    figures: tuple[str, ...]
    point_id: str | None  # the time series' point

    def as_dict(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "page": str(self.page),
            "files": list(self.files),
            "figures": list(self.figures),
            "timeseries_point": self.point_id,
        }


# ---------------------------------------------------------------- figures


def _pyplot() -> Any:
    return htmlpage.pyplot("dtnkit sweep report")


def curve_label(key: Mapping[str, Any], varying: Sequence[str]) -> str:
    """A curve's name: its RTT, and the other axes that differ between the run's curves."""
    parts = [f"{format_value(key.get('rtt_ms'))} ms"]
    for name in varying:
        if name == "rtt_ms":
            continue
        value = key.get(name)
        if name == "rate_bps":
            parts.append(f"cap {format_rate(value)}" if value else "no cap")
        elif name == "cores":
            parts.append(f"{format_value(value)} cores" if value else "no quota")
        elif name == "origins":
            parts.append(f"{value} origin{'s' if value != 1 else ''}")
        elif name == "file_size":
            parts.append(f"{value} B files")
        else:
            parts.append(f"{name} {format_value(value) if value is not None else 'none'}")
    return ", ".join(parts)


def varying_keys(keys: Sequence[Mapping[str, Any]]) -> list[str]:
    return [k for k in analyze.CURVE_KEYS if len({repr(x.get(k)) for x in keys}) > 1]


def _streams_axis(ax: Axes, streams: Sequence[int], label: str = "streams") -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(streams))
    ax.set_xticks(ticks, [str(s) for s in ticks])
    ax.minorticks_off()
    ax.set_xlabel(label)


def _gbit(bps: float | None) -> float:
    return (bps or 0.0) / 1e9


#: at most this many entries in one legend (more would cover the plot)
LEGEND_MAX = 8


def tools_of(keys: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tools in ``keys`` (curve keys or points' axes), each once, in first-seen order:
    one panel each."""
    return list(dict.fromkeys(str(k.get("tool")) for k in keys))


def grid_values(records: Sequence[analyze.PointRecord]) -> str:
    """The axes every point of the run shares, in words (a figure's subtitle): the cap,
    loss, origins x cores, file size and how long each point measured."""
    pts = [r.point for r in records]
    if not pts:
        return ""

    def one(get: Callable[[Any], Any]) -> tuple[bool, Any]:
        values = {repr(get(p)) for p in pts}
        return len(values) == 1, get(pts[0])

    parts = []
    same, rate = one(lambda p: p.rate_bps)
    if same:
        parts.append(f"cap {format_rate(rate)}" if rate else "no rate cap")
    same, loss = one(lambda p: p.loss)
    if same:
        parts.append(f"loss {format_percent(loss, fraction=True)}")
    same_o, origins = one(lambda p: p.origins)
    same_c, cores = one(lambda p: p.cores)
    if same_o and same_c:
        parts.append(
            f"{origins} origin{'s' if origins != 1 else ''} x "
            + (
                f"{format_value(cores)} core{'s' if cores != 1 else ''}"
                if cores
                else "no CPU quota"
            )
        )
    same, size = one(lambda p: p.file_size)
    if same and any(not p.tool.startswith("iperf3") for p in pts):
        parts.append(f"{format_bytes(size)} files")
    same, dur = one(lambda p: (p.duration_s, p.bytes))
    if same:
        parts.append(
            f"{format_duration(dur[0])} per point"
            if dur[0] is not None
            else f"{format_bytes(dur[1])} per point"
        )
    return ", ".join(parts)


def _panels(
    plt: Any, tools: Sequence[str], height: float = 4.2, *, sharey: bool = True
) -> tuple[Any, list[Any]]:
    n = max(1, len(tools))
    fig, axes = plt.subplots(
        1, n, figsize=(max(8.0, 4.6 * n), height), sharey=sharey, squeeze=False
    )
    return fig, list(axes[0])


def _legend(ax: Axes, **kw: Any) -> None:
    """The axes' legend, at most LEGEND_MAX entries: past that the last says how many more
    (the tables below the figures list every curve)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if len(handles) > LEGEND_MAX:
        more = len(handles) - LEGEND_MAX + 1
        handles, labels = handles[: LEGEND_MAX - 1], labels[: LEGEND_MAX - 1]
        (blank,) = ax.plot([], [], linestyle="none")
        handles.append(blank)
        labels.append(f"+{more} more (see the tables)")
    ax.legend(handles, labels, fontsize=8, **kw)


def _from_zero(axes: Sequence[Any], *, x: bool = False) -> None:
    """Every panel's y axis (and x, for ``x``) from 0 to a little above the largest value
    drawn in any panel: setting only the bottom on shared axes would keep the first panel's
    top, and a point above it (a hollow emulator-limited one) would fall off the figure."""
    tops = [ax.dataLim.y1 for ax in axes if ax.dataLim.height >= 0 and ax.has_data()]
    top = max([t for t in tops if math.isfinite(t)] or [1.0]) * 1.08 or 1.0
    for ax in axes:
        ax.set_ylim(0, top)
        if x and ax.has_data() and math.isfinite(ax.dataLim.x1):
            ax.set_xlim(0, (ax.dataLim.x1 or 1.0) * 1.08)


def _title(fig: Any, what: str, records: Sequence[analyze.PointRecord]) -> None:
    fixed = grid_values(records)
    fig.suptitle(_mpl(what + (f"\n{fixed}" if fixed else "")), fontsize=10)


def fig_throughput(
    plt: Any, analysis: analyze.Analysis, records: Sequence[analyze.PointRecord]
) -> Drawn:
    tools = tools_of(
        [c.key for c in analysis.curves]
        + [dataclasses.asdict(r.point) for r in records if r.emulator_bound]
    )
    fig, axes = _panels(plt, tools, 4.8)
    for tool, ax in zip(tools, axes, strict=False):
        curves = [c for c in analysis.curves if str(c.key.get("tool")) == tool]
        varying = [k for k in varying_keys([c.key for c in curves]) if k != "tool"]
        colours: dict[tuple[Any, ...], Any] = {}
        for i, c in enumerate(curves):
            xs = [lv.streams for lv in c.levels]
            (line,) = ax.plot(
                xs,
                [_gbit(lv.mean_bps) for lv in c.levels],
                marker="o",
                label=_mpl(curve_label(c.key, varying)),
                color=f"C{i % 10}",
            )
            ax.fill_between(
                xs,
                [_gbit(lv.min_bps) for lv in c.levels],
                [_gbit(lv.max_bps) for lv in c.levels],
                alpha=0.2,
                color=line.get_color(),
            )
            # the peak is a marker (a star), not a word a neighbouring line can cross
            ax.scatter(
                [c.peak_streams],
                [_gbit(c.peak_bps)],
                marker="*",
                s=160,
                zorder=4,
                color=line.get_color(),
                edgecolors="black",
                linewidths=0.6,
            )
            colours[tuple(c.key.get(k) for k in analyze.CURVE_KEYS)] = line.get_color()
        if curves:
            ax.scatter(
                [],
                [],
                marker="*",
                s=120,
                color="0.6",
                edgecolors="black",
                linewidths=0.6,
                label="peak (highest mean)",
            )
        bound = [
            r
            for r in records
            if r.emulator_bound
            and not r.failed
            and r.throughput_bps is not None
            and r.point.tool == tool
        ]
        # a curve whose every point the emulator limited has no line: its hollow markers
        # get a colour and a legend entry of their own, so its RTT can still be told
        lone: list[Mapping[str, Any]] = [dataclasses.asdict(r.point) for r in bound]
        lone_varying = [k for k in varying_keys([c.key for c in curves] + lone) if k != "tool"]
        for r in bound:
            key = tuple(getattr(r.point, k) for k in analyze.CURVE_KEYS)
            if key not in colours:
                colours[key] = f"C{len(colours) % 10}"
                ax.scatter(
                    [],
                    [],
                    facecolors="none",
                    edgecolors=colours[key],
                    label=_mpl(curve_label(dataclasses.asdict(r.point), lone_varying)),
                )
            ax.scatter(
                [r.point.streams],
                [_gbit(r.throughput_bps)],
                facecolors="none",
                edgecolors=colours[key],
                s=50,
                zorder=3,
            )
        if bound:
            ax.scatter(
                [], [], facecolors="none", edgecolors="0.3", label="hollow: emulator-limited"
            )
        _streams_axis(
            ax, [lv.streams for c in curves for lv in c.levels] + [r.point.streams for r in bound]
        )
        ax.grid(alpha=0.3)
        _legend(ax, loc="lower right")
        ax.set_title(_mpl(f"{tool}: throughput (Gbit/s)"), fontsize=9)
    _from_zero(axes)
    axes[0].set_ylabel("throughput (Gbit/s)")
    if not tools:
        _nothing(axes[0], "no point with a valid throughput")
    _title(
        fig, "Throughput against streams, one panel per tool (band: min..max over repeats)", records
    )
    fig.tight_layout()
    return _save(
        fig,
        "throughput-vs-streams",
        "Throughput against streams",
        "One panel per tool. Each line is one RTT (and combination of the other "
        "axes): the mean over repeats at each stream count, the band the repeats' "
        "spread. The star is the peak, where the line is highest; the drop is how "
        "far it falls to the right of the peak; a peak inside its neighbours' bands "
        "is a plateau, not a peak. Hollow markers are measurements the lab's "
        "network emulator limited: drawn, but left out of the peak, drop and knee.",
    )


def fig_heatmap(
    plt: Any, analysis: analyze.Analysis, records: Sequence[analyze.PointRecord]
) -> Drawn:
    tools = tools_of([c.key for c in analysis.curves])
    fig, axes = _panels(plt, tools, 4.4, sharey=False)
    cells_of: dict[str, dict[tuple[float, int], float]] = {}
    best_over: dict[str, list[str]] = {}
    for tool in tools:
        curves = [c for c in analysis.curves if str(c.key.get("tool")) == tool]
        best_over[tool] = [
            k for k in varying_keys([c.key for c in curves]) if k not in ("tool", "rtt_ms")
        ]
        cells: dict[tuple[float, int], float] = {}
        for c in curves:
            for lv in c.levels:
                k = (float(c.key["rtt_ms"]), lv.streams)
                cells[k] = max(cells.get(k, 0.0), lv.mean_bps)
        cells_of[tool] = cells
    top = max((_gbit(v) for cells in cells_of.values() for v in cells.values()), default=1.0) or 1.0
    im = None
    for tool, ax in zip(tools, axes, strict=False):
        cells = cells_of[tool]
        rtts = sorted({k[0] for k in cells})
        streams = sorted({k[1] for k in cells})
        grid = [
            [_gbit(cells[(r, s)]) if (r, s) in cells else math.nan for s in streams] for r in rtts
        ]
        im = ax.imshow(grid, aspect="auto", cmap="viridis", origin="lower", vmin=0, vmax=top)
        ax.set_xticks(range(len(streams)), [str(s) for s in streams])
        ax.set_yticks(range(len(rtts)), [f"{format_value(r)} ms" for r in rtts])
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if not math.isnan(v):
                    ax.text(
                        j,
                        i,
                        f"{v:.3g}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if v < top * 0.6 else "black",
                    )
        ax.set_xlabel("streams")
        ax.set_ylabel("RTT")
        over = best_over[tool]
        ax.set_title(
            _mpl(f"tool {tool}: Gbit/s" + (f" (best over {', '.join(over)})" if over else "")),
            fontsize=9,
        )
    if im is None:
        bound = [r for r in records if r.emulator_bound and not r.failed]
        _nothing(
            axes[0],
            f"every measured point ({len(bound)}) was limited by this machine, "
            "not the path:\nleft out (see the box above the figures)"
            if bound
            else "no point with a valid throughput",
        )
    else:
        fig.subplots_adjust(top=0.80, wspace=0.35, left=0.11, right=0.86)
        fig.colorbar(im, ax=axes, label="throughput (Gbit/s)")
    _title(fig, "Mean throughput by RTT and streams, one panel per tool", records)
    if im is None:
        fig.tight_layout()
    return _save(
        fig,
        "heatmap",
        "RTT x streams heatmap",
        "One panel per tool (its name is the panel's title); in each, one row per "
        "RTT, one column per stream count, each cell the mean throughput over "
        "repeats in Gbit/s (when another axis varies, the best value over it, "
        "named in the title). Bright cells are where the path is filled: the "
        "bright band moves right as the RTT grows (a longer path needs more "
        "streams); a row that darkens to the right is the drop past the peak. "
        "Emulator-limited measurements are left blank.",
    )


def fig_timeseries(
    plt: Any, record: analyze.PointRecord | None, series: Mapping[str, Sequence[float | None]]
) -> Drawn:
    fig, ax = plt.subplots(figsize=(8, 4.4))
    ts = list(series.get("t_s", ()))
    tput = list(series.get("throughput_bps", ()))
    if record is None or not ts:
        _nothing(ax, "no point with samples")
        title = "Time series"
    else:
        p = record.point
        pts = [
            (t, _gbit(v)) for t, v in zip(ts, tput, strict=False) if t is not None and v is not None
        ]
        ax.plot(
            [t for t, _ in pts],
            [v for _, v in pts],
            marker=".",
            color="C0",
            label="throughput (Gbit/s)",
        )
        ax.set_xlabel("time from the point's start (s)")
        ax.set_ylabel("throughput (Gbit/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        # the samples of the tool's set-up and stopping: shaded, as they are left out of
        # its throughput
        window = [*series.get(MEASURED, ()), None, None]
        start, until = window[0], window[1]
        end = max((t for t in ts if t is not None), default=0.0)
        if start is not None and start > 0:
            ax.axvspan(0, start, color="0.88", zorder=0, label="set-up, not in the throughput")
        if until is not None and until < end:
            ax.axvspan(
                until,
                end,
                facecolor="none",
                edgecolor="0.6",
                hatch="//",
                zorder=0,
                label="stopping, not in the throughput",
            )
        ax.set_xlim(0, end * 1.02 if end > 0 else None)
        cpu = sorted((k for k in series if k.startswith("cpu_cores.")), key=lambda k: (len(k), k))
        handles, labels = ax.get_legend_handles_labels()
        if cpu:
            ax2 = ax.twinx()
            shown = cpu if len(cpu) < LEGEND_MAX else []
            for i, k in enumerate(shown):
                vals = [
                    (t, v)
                    for t, v in zip(ts, series[k], strict=False)
                    if t is not None and v is not None
                ]
                ax2.plot(
                    [t for t, _ in vals],
                    [v for _, v in vals],
                    linestyle="--",
                    color=f"C{(i + 1) % 10}",
                    label=f"origin {k.split('.', 1)[1]} CPU",
                )
            if not shown:  # too many origins for a legend: their sum
                total = [
                    (
                        t,
                        sum(
                            v
                            for k in cpu
                            if (v := series[k][n] if n < len(series[k]) else None) is not None
                        ),
                    )
                    for n, t in enumerate(ts)
                    if t is not None
                ]
                ax2.plot(
                    [t for t, _ in total],
                    [v for _, v in total],
                    linestyle="--",
                    color="C1",
                    label=f"{len(cpu)} origins' CPU (sum)",
                )
            ax2.set_ylabel("CPU (cores)")
            ax2.set_ylim(bottom=0)
            h2, l2 = ax2.get_legend_handles_labels()
            handles, labels = handles + h2, labels + l2
        ax.legend(handles, labels, fontsize=8, loc="lower right")
        cap = f"cap {format_rate(p.rate_bps)}" if p.rate_bps else "no cap"
        title = (
            f"Point {p.id}: {p.tool}, RTT {format_value(p.rtt_ms)} ms, "
            f"{counted(p.streams, 'stream')}, {cap}, {counted(p.origins, 'origin')}, "
            f"repeat {p.repeat}" + (" (emulator-limited)" if record.emulator_bound else "")
        )
    ax.set_title(_mpl(title), fontsize=9)
    fig.tight_layout()
    return _save(
        fig,
        "timeseries",
        "Time series of one point",
        "The throughput of one point at each sampling interval (and each origin's "
        "CPU in cores, dashed, when it was sampled). Shaded: the tool's set-up "
        "before data flowed and, for dtnkit-cp, the stopping of the copies cut when "
        "the duration was over; neither counts in the point's throughput. A flat "
        "line is a steady path; "
        "a saw-tooth or dips are the fluctuation the CV measures; a slow start is TCP "
        "opening its windows. Choose the point with --point ID (default: the peak of "
        "the first curve).",
    )


def fig_cpu(plt: Any, records: Sequence[analyze.PointRecord]) -> Drawn:
    from matplotlib.ticker import MaxNLocator  # optional: the [report] extra, as pyplot

    usable = [
        r
        for r in records
        if not r.failed and r.throughput_bps is not None and r.cores_used is not None
    ]
    tools = list(dict.fromkeys(r.point.tool for r in usable))
    fig, axes = _panels(plt, tools, 4.4)
    rtts = sorted({r.point.rtt_ms for r in usable})
    for tool, ax in zip(tools, axes, strict=False):
        mine = [r for r in usable if r.point.tool == tool]
        for i, rtt in enumerate(rtts):
            rs = [r for r in mine if r.point.rtt_ms == rtt]
            for hollow in (False, True):
                sel = [r for r in rs if r.emulator_bound == hollow]
                if not sel:
                    continue
                colour = f"C{i % 10}"
                ax.scatter(
                    [r.cores_used for r in sel],
                    [_gbit(r.throughput_bps) for r in sel],
                    facecolors="none" if hollow else colour,
                    edgecolors=colour,
                )
            if rs:  # one legend entry per RTT, whether its markers are filled or hollow
                ax.scatter([], [], color=f"C{i % 10}", label=f"RTT {format_value(rtt)} ms")
        if any(r.emulator_bound for r in mine):
            ax.scatter(
                [], [], facecolors="none", edgecolors="0.3", label="hollow: emulator-limited"
            )
        ax.set_xlabel("CPU used by the origins (cores)")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # labels that never run together
        ax.grid(alpha=0.3)
        _legend(ax, loc="lower right")
        ax.set_title(_mpl(f"{tool}: Gbit/s against cores"), fontsize=9)
    _from_zero(axes, x=True)
    axes[0].set_ylabel("throughput (Gbit/s)")
    if not tools:
        _nothing(axes[0], "no point with CPU accounting")
    _title(fig, "Throughput against the origins' CPU, every point, one panel per tool", records)
    fig.tight_layout()
    return _save(
        fig,
        "cpu-vs-throughput",
        "CPU against throughput",
        "One panel per tool; each dot is one measurement: the cores its origins "
        "used (CPU seconds over the measurement's time) and the throughput it got, "
        "coloured by RTT. Dots on a straight line from zero mean a constant cost per "
        "bit; a line that bends up (more CPU for the same rate) is a cost that "
        "grows faster than the rate; dots stacked at one CPU value under a quota "
        "are limited by the CPU.",
    )


def fig_tail(plt: Any, analysis: analyze.Analysis, records: Sequence[analyze.PointRecord]) -> Drawn:
    tools = tools_of([t.key for t in analysis.tails])
    fig, axes = _panels(plt, tools, 4.4)
    for tool, ax in zip(tools, axes, strict=False):
        groups: dict[tuple[Any, ...], list[analyze.Tail]] = defaultdict(list)
        for t in analysis.tails:
            if str(t.key.get("tool")) == tool:
                groups[tuple(t.key.get(k) for k in analyze.CURVE_KEYS)].append(t)
        varying = [k for k in varying_keys([ts[0].key for ts in groups.values()]) if k != "tool"]
        for i, ts in enumerate(groups.values()):
            ts.sort(key=lambda t: t.streams)
            colour = f"C{i % 10}"
            xs = [t.streams for t in ts]
            # one legend entry per curve (its colour); the line styles have their own three
            ax.plot(
                xs,
                [t.last_s for t in ts],
                marker="o",
                color=colour,
                label=_mpl(curve_label(ts[0].key, varying)),
            )
            ax.plot(xs, [t.p99_s for t in ts], linestyle="--", color=colour)
            ax.plot(xs, [t.p50_s for t in ts], linestyle=":", color=colour)
        handles, labels = ax.get_legend_handles_labels()
        if len(handles) > LEGEND_MAX - 3:
            more = len(handles) - (LEGEND_MAX - 4)
            handles = handles[: LEGEND_MAX - 4] + ax.plot([], [], linestyle="none")
            labels = [*labels[: LEGEND_MAX - 4], f"+{more} more (see the table)"]
        styles = [
            ax.plot([], [], color="0.3", linestyle=s, marker=m)[0]
            for s, m in (("-", "o"), ("--", ""), (":", ""))
        ]
        ax.legend(
            handles + styles,
            [*labels, "last transfer", "p99", "median"],
            fontsize=8,
            loc="lower right",
        )  # the times sit at the top of an axis from zero
        _streams_axis(
            ax, [t.streams for ts in groups.values() for t in ts], "streams (concurrent transfers)"
        )
        ax.grid(alpha=0.3)
        ax.set_title(_mpl(f"{tool}: completion time (s)"), fontsize=9)
    _from_zero(axes)
    axes[0].set_ylabel("completion time (s)")
    # a tool measured but without a panel: say why, not leave the reader to wonder
    silent = [
        t
        for t in tools_of([dataclasses.asdict(r.point) for r in records if not r.failed])
        if t not in tools
    ]
    if not tools:
        _nothing(axes[0], "no point with transfer completion times")
    _title(
        fig,
        "Tail latency: when the transfers completed, one panel per tool"
        + (
            f"\nno panel for {', '.join(silent)}: none of its transfers completed (a copy "
            "cut at the duration has no completion time)"
            if silent
            else ""
        ),
        records,
    )
    fig.tight_layout()
    return _save(
        fig,
        "tail-latency",
        "Tail latency against streams",
        "One panel per tool; one colour per RTT. Solid: when the last transfer of a "
        "point completed (the tail latency); dashed: the p99 of the transfers' "
        "completion times; dotted: the median. A last completion far above the p99 "
        "is one straggler; a p99 that climbs with streams while throughput stays "
        "flat means the streams share the path unfairly.",
    )


def peak_point(analysis: analyze.Analysis, records: Sequence[analyze.PointRecord]) -> str | None:
    """The default time-series point: a repeat at the first curve's peak (the one nearest the
    mean), else the first point with samples."""
    if analysis.curves:
        c = analysis.curves[0]
        at = [
            r
            for r in records
            if not r.failed
            and not r.emulator_bound
            and r.throughput_bps is not None
            and r.point.streams == c.peak_streams
            and all(getattr(r.point, k) == c.key[k] for k in analyze.CURVE_KEYS)
        ]
        if at:
            return min(at, key=lambda r: abs((r.throughput_bps or 0) - c.peak_bps)).point.id
    return next((r.point.id for r in records if r.samples_bps), None)


def figures(
    data: ReportData,
    analysis: analyze.Analysis,
    point_id: str | None,
    progress: Progress | None = None,
) -> tuple[list[Drawn], str | None]:
    plt = _pyplot()
    chosen = point_id if point_id is not None else peak_point(analysis, data.records)
    record = next((r for r in data.records if r.point.id == chosen), None)
    steps: list[tuple[str, Callable[[], Drawn]]] = [
        ("throughput against streams", lambda: fig_throughput(plt, analysis, data.records)),
        ("RTT x streams heatmap", lambda: fig_heatmap(plt, analysis, data.records)),
        ("time series", lambda: fig_timeseries(plt, record, data.series.get(chosen or "", {}))),
        ("CPU against throughput", lambda: fig_cpu(plt, data.records)),
        ("tail latency", lambda: fig_tail(plt, analysis, data.records)),
    ]
    drawn = []
    with plt.rc_context({"svg.hashsalt": "dtnkit", "font.size": 9}):
        for k, (what, draw) in enumerate(steps, 1):
            if progress is not None:
                progress.step(f"drawing {what}", k, len(steps))
            drawn.append(draw())
    return drawn, chosen


# ---------------------------------------------------------------- the page


def _ratio(x: float | None) -> str:
    return MISSING if x is None else f"{x:.3g}"


MISSING = format_value(None)


def tables(
    analysis: analyze.Analysis, records: Sequence[analyze.PointRecord]
) -> list[tuple[str, str]]:
    """(title, HTML) of every analysis table, in the order `sweep analyze` prints them."""
    varying = varying_keys([c.key for c in analysis.curves])
    out = [
        (
            "Peak, drop and knee per RTT",
            _table(
                ["curve", "peak streams", "peak", "drop past peak", "knee"],
                [
                    [
                        curve_label(c.key, varying),
                        c.peak_streams,
                        format_rate(c.peak_bps),
                        format_percent(c.drop_pct),
                        c.knee_streams,
                    ]
                    for c in analysis.curves
                ],
                "no curve: no point with a valid throughput outside the emulator-bound ones",
            ),
        )
    ]
    f = analysis.fluctuation
    below = sum(1 for _, u, _c in f.points if u < f.threshold)
    out.append(
        (
            "Fluctuation against utilisation",
            _table(
                ["utilisation", "points", "mean CV"],
                [
                    [
                        f"below {format_percent(f.threshold, fraction=True)}",
                        below,
                        _ratio(f.cv_below),
                    ],
                    [
                        f"at or above {format_percent(f.threshold, fraction=True)}",
                        len(f.points) - below,
                        _ratio(f.cv_above),
                    ],
                    ["change", "", MISSING if f.change_pct is None else f"{f.change_pct:+.3g}%"],
                ],
                "",
            ),
        )
    )
    out.append(
        (
            "Gbit/s per core",
            _table(
                [
                    "tool",
                    "RTT",
                    "origins x cores",
                    "streams",
                    "throughput",
                    "per quota core",
                    "per core used",
                ],
                [
                    [
                        c.point.tool,
                        f"{format_value(c.point.rtt_ms)} ms",
                        f"{c.point.origins} x {format_value(c.point.cores)}",
                        c.point.streams,
                        format_rate(c.mean_bps),
                        _ratio(c.gbit_per_quota_core),
                        _ratio(c.gbit_per_core_used),
                    ]
                    for c in analysis.efficiency
                ],
                "no configuration",
            ),
        )
    )
    if analysis.minimum:
        out.append(
            (
                "Minimum resources for the target",
                _table(
                    ["RTT", "target", "reached", "min cores", "min origins", "min streams"],
                    [
                        [
                            f"{format_value(m.rtt_ms)} ms",
                            format_rate(m.target_bps),
                            format_value(m.reached),
                            format_value(m.min_cores),
                            format_value(m.min_origins),
                            format_value(m.min_streams),
                        ]
                        for m in analysis.minimum
                    ],
                    "",
                ),
            )
        )
    out.append(
        (
            "Origins at equal total cores",
            _table(
                ["RTT", "total cores", "origins x cores", "best streams", "throughput", "ratio"],
                [
                    [
                        f"{format_value(o.key.get('rtt_ms'))} ms",
                        format_value(o.total_cores),
                        f"{c.point.origins} x {format_value(c.point.cores)}",
                        c.point.streams,
                        format_rate(c.mean_bps),
                        _ratio(r),
                    ]
                    for o in analysis.origins
                    for c, r in zip(o.best, o.ratios, strict=True)
                ],
                "no two origin counts share a total quota in this run",
            ),
        )
    )
    out.append(
        (
            "Profiles",
            _table(
                ["profile", "baseline", "pairs", "ratio", "min..max", "stdev"],
                [
                    [
                        p.profile,
                        p.baseline,
                        p.pairs,
                        _ratio(p.ratio),
                        f"{_ratio(p.min_ratio)}..{_ratio(p.max_ratio)}",
                        _ratio(p.stdev),
                    ]
                    for p in analysis.profiles
                ],
                "one profile only: nothing to compare",
            ),
        )
    )
    tv = varying_keys([t.key for t in analysis.tails])
    out.append(
        (
            "Tail latency",
            _table(
                ["curve", "streams", "transfers", "last", "p50", "p90", "p99"],
                [
                    [
                        curve_label(t.key, tv),
                        t.streams,
                        t.transfers,
                        format_duration(t.last_s),
                        format_duration(t.p50_s),
                        format_duration(t.p90_s),
                        format_duration(t.p99_s),
                    ]
                    for t in analysis.tails
                ],
                "no transfer completion times",
            ),
        )
    )
    rows = analysis.streams_table.get("rtts", [])
    out.append(
        (
            "Recommended streams per RTT",
            _table(
                ["RTT", "streams (knee)", "peak streams", "peak"],
                [
                    [
                        f"{format_value(r['rtt_ms'])} ms",
                        r["streams"],
                        r["peak_streams"],
                        format_rate(r["peak_bps"]),
                    ]
                    for r in rows
                ],
                "no curve",
            ),
        )
    )
    out.append(
        (
            "Points kept out",
            _table(
                ["point", "why"],
                [[i, f"emulator bound: {w}"] for i, w in analysis.excluded]
                + [[i, f"failed: {e}"] for i, e in analysis.failed],
                "none: every point was measured and used",
            ),
        )
    )
    return out


def page(
    data: ReportData, analysis: analyze.Analysis, figs: Sequence[Drawn], point_id: str | None
) -> str:
    ok = sum(1 for r in data.records if not r.failed)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
        f"<title>dtnkit sweep report: {_e(data.name)}</title><style>{_CSS}</style></head>",
        f"<body><h1>Sweep <code>{_e(data.name)}</code></h1>",
        f"<p>Status {_e(data.status)}: {ok} points measured, {len(data.records) - ok} failed, "
        f"of {data.points_total} in the grid. Report by dtnkit {_e(__version__)}.</p>",
    ]
    if analysis.excluded:
        parts.append(
            f"<p class='note'>{len(analysis.excluded)} of {len(data.records)} measurements "
            "were limited by this machine's network emulator or by its CPUs (too busy to "
            "carry the lab), not by the path being tested, so they say nothing about the "
            "path. "
            "They are drawn as hollow markers and left out of the analysis tables. What "
            "limited them: "
            + "; ".join(_e(w) for w in limits(w for _, w in analysis.excluded))
            + ". To measure them, rerun with a lower rate or on a machine with more free "
            "CPU.</p>"
        )
    parts.append("<h2>Figures</h2>")
    for f in figs:
        parts.append(figure_html(f))
    if point_id:
        parts.append(f"<p>The time series is of point <code>{_e(point_id)}</code>.</p>")
    parts.append("<h2>Analysis</h2>")
    for title, body in tables(analysis, data.records):
        parts.append(f"<h3>{_e(title)}</h3>{body}")
    parts.append(f"<h2>The grid</h2><pre>{_e(data.grid_toml)}</pre>")
    env_rows = environment_rows(data.environment)
    parts.append(
        "<h2>Environment and versions</h2>" + _table(["what", "value"], env_rows, "not recorded")
    )
    parts.append("</body></html>\n")
    return "\n".join(parts)


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")  # a figure, not the 99 of p99


def limits(whys: Iterable[str]) -> list[str]:
    """Each kind of limit once, with how many measurements it held back and the range of
    its figure: ``lateness p99 7.34-14.9 ms > 5 ms (50% of 5 ms RTT) (3 measurements)``."""
    kinds: dict[str, list[str]] = {}
    for why in whys:
        for part in why.removeprefix("emulator bound: ").split("; "):
            kinds.setdefault(_NUMBER.sub("#", part), []).append(part)
    out = []
    for found in kinds.values():
        text = found[0]
        first = [float(m.group()) for f in found if (m := _NUMBER.search(f))]
        if first and min(first) != max(first):
            text = _NUMBER.sub(f"{min(first):.3g}-{max(first):.3g}", text, count=1)
        out.append(f"{text} ({counted(len(found), 'measurement')})")
    return out


#: a version string: digits with a dot (``iperf 3.12``, ``v5.5.3``)
_VERSION = re.compile(r"\d+\.\d+")
_TIMES = ("started", "finished", "time")


def _human(key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return format_value(value)
    if isinstance(value, int | float) and any(t in key for t in _TIMES) and value > 1e8:
        return datetime.datetime.fromtimestamp(value, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_human(k, v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_human(key, v) for v in value)
    return str(value)


def environment_rows(env: Mapping[str, Any]) -> list[list[str]]:
    """The environment in words: times ISO 8601 UTC, each tool's version, "not installed"
    (recorded empty) or "does not run" (its output has no version), nested values as
    ``name value`` lists, never JSON."""
    rows = []
    for k, v in sorted(env.items()):
        if k == "versions" and isinstance(v, Mapping):
            for tool, text in sorted(v.items()):
                text = str(text or "").strip()
                shown = (
                    "not installed"
                    if not text
                    else text
                    if _VERSION.search(text) and "not found" not in text
                    else f"does not run ({text[:80]})"
                )
                rows.append([f"{tool} version", shown])
        elif k == "lab" and isinstance(v, Mapping):
            rows.append(["lab path", lab_text(v)])
        else:
            rows.append([k, _human(k, v)])
    return rows


def lab_text(lab: Mapping[str, Any]) -> str:
    """The lab path as recorded, in words: ``hfeta: the nfqueue delay stage (why), MTU
    1500, 1 sending host``."""
    parts = []
    if lab.get("backend"):
        why = f" ({lab['backend_reason']})" if lab.get("backend_reason") else ""
        parts.append(f"the {lab['backend']} delay stage{why}")
    if lab.get("mtu") is not None:
        parts.append(f"MTU {lab['mtu']}")
    if isinstance(lab.get("n_src"), int):
        parts.append(counted(lab["n_src"], "sending host"))
    known = {"name", "backend", "backend_reason", "mtu", "n_src"}
    parts += [f"{k} {_human(k, x)}" for k, x in lab.items() if k not in known]
    return f"{lab.get('name', '-')}: " + ", ".join(parts)


# ---------------------------------------------------------------- all of it


def build(
    data: ReportData,
    out: Path,
    *,
    point_id: str | None = None,
    target_bps: float | None = None,
    baseline: str | None = None,
    progress: Progress | None = None,
) -> Written:
    """Analyse, draw and write the report into ``out``; nothing is written on an error."""
    check_dir(out)
    if point_id is not None and not any(r.point.id == point_id for r in data.records):
        match = [r.point.id for r in data.records if r.point.id.startswith(point_id)]
        if len(match) != 1 or len(point_id) < 4:
            shown = point_id if len(point_id) <= 20 else point_id[:17] + "..."
            raise BadInput(
                f"no point {shown!r} in run {data.name!r}",
                f"{len(match)} points start with it" if match else "no stored point has that ID",
                f"see `dtnkit sweep analyze {data.name} --format json`",
            )
        point_id = match[0]
    analysis = analyze.analyze(data.records, target_bps=target_bps, baseline=baseline)
    try:
        figs, chosen = figures(data, analysis, point_id, progress)
    except (ValueError, OverflowError, RuntimeError) as exc:  # matplotlib on odd data
        raise DtnkitError(
            "cannot draw the report's figures", str(exc)[:120], "run with --traceback and report it"
        ) from None
    files: dict[str, bytes] = {}
    for f in figs:
        files[f"{f.stem}.png"] = f.png
        files[f"{f.stem}.svg"] = f.svg
    files["analysis.json"] = (
        json.dumps(analysis.as_dict(), indent=1, allow_nan=False) + "\n"
    ).encode()
    files[PAGE] = page(data, analysis, figs, chosen).encode("utf-8")
    names = write_files(out, files)
    return Written(
        directory=out,
        page=out / PAGE,
        files=names,
        figures=tuple(f.stem for f in figs),
        point_id=chosen,
    )
