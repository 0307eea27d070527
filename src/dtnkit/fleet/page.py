"""The fleet report's figures (matplotlib, through :mod:`dtnkit.htmlpage`) and its one
self-contained HTML page.

Every value from the documents (host names, keys, values, reasons, file names) is escaped;
the page's Content-Security-Policy allows no script and no fetch.  Figures whose data is
absent (no campaign, no experiment) are not drawn; the page says so instead.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dtnkit import __version__, htmlpage
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.fleet.compare import Report
from dtnkit.fleet.load import clip, printable
from dtnkit.htmlpage import CSP, CSS, PAGE, Drawn, escape, figure_html, html_table, mpl_text
from dtnkit.tune.kinds.qdisc import words
from dtnkit.units import counted, format_duration, format_percent, format_rate, format_value

if TYPE_CHECKING:
    from dtnkit.fleet.load import GroupVerdict
    from dtnkit.progress import Progress

COMMAND = "dtnkit fleet report"
#: a group's state, as drawn
STATE_COLOURS = {
    "differs": "#e4572e",
    "unknown": "#9b59b6",
    "ok": "#4caf50",
    "n/a": "#d9d9d9",
    "not audited": "#ffffff",
}
VERDICT_COLOURS = {
    "helps": "#4caf50",
    "neutral": "#bdbdbd",
    "harmful": "#e4572e",
    "gated": "#f4b400",
    "not tried": "#ffffff",
}
#: past this many rows a figure's cells are not labelled (the labels would not be read)
LABELLED_ROWS = 80


#: a current value the audit could not read (null), and a recommendation it did not make
NOT_READ = "not read"
NOT_DECIDED = "not decided"


def setting_text(key: str, value: Any, most: int = 200, *, missing: str = NOT_READ) -> str:
    """A setting's value as people read it: ``missing`` for null (``not read`` for a current
    value, ``not decided`` for a recommendation), a qdisc in words as ``tc qdisc show``
    prints it (``tbf rate 1Gbit burst 64Kb lat 10ms``), else :func:`value_text`."""
    if value is None:
        return missing
    if key.startswith("qdisc/") and isinstance(value, dict):
        return clip(words(value), most)
    return value_text(value, most)


def value_text(value: Any, most: int = 200) -> str:
    """A document's value as text: numbers and strings as they are, a list of numbers (a
    sysctl triple such as tcp_rmem) as sysctl prints it, other lists and objects as JSON, null
    as ``-``; cut to ``most`` characters."""
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        text = " ".join(format_value(v) for v in value)
    elif isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True)
    else:
        text = format_value(value)
    return clip(text, most)


#: the tallest figure (inches at 100 dpi): 300 hosts still get a row each
TALLEST = 40.0


def _rows_height(n: int) -> float:
    return min(1.8 + 0.2 * max(n, 1), TALLEST)


def _label_size(n: int) -> float:
    """Points that fit a row: 8, smaller once the rows are squeezed under TALLEST."""
    row_pt = (_rows_height(n) - 1.8) * 72 / max(n, 1)
    return max(3.0, min(8.0, row_pt * 0.75))


def _grid(
    plt: Any,
    rows: Sequence[str],
    cols: Sequence[str],
    cells: Sequence[Sequence[str]],
    texts: Sequence[Sequence[str]],
    colours: dict[str, str],
    title: str,
    xlabel: str,
) -> Any:
    """A categorical heatmap: one coloured cell per (row, column), a legend of the colours."""
    # optional (the [report] extra): loaded with pyplot when a figure is drawn
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    names = list(colours)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 + 0.85 * len(cols)), _rows_height(len(rows))))
    codes = [[names.index(c) for c in row] for row in cells]
    ax.imshow(
        codes,
        aspect="auto",
        cmap=ListedColormap([colours[n] for n in names]),
        vmin=-0.5,
        vmax=len(names) - 0.5,
        interpolation="nearest",
    )
    ax.set_xticks(
        range(len(cols)), [mpl_text(clip(printable(c), 30)) for c in cols], rotation=30, ha="right"
    )
    size = _label_size(len(rows))
    ax.set_yticks(range(len(rows)), [mpl_text(clip(printable(r), 40)) for r in rows], fontsize=size)
    # white lines between the cells: two line collections (minor ticks would be one
    # artist per line, slow past a few dozen hosts)
    ax.hlines(
        [y - 0.5 for y in range(1, len(rows))], -0.5, len(cols) - 0.5, colors="white", linewidth=1.5
    )
    ax.vlines(
        [x - 0.5 for x in range(1, len(cols))], -0.5, len(rows) - 0.5, colors="white", linewidth=1.5
    )
    ax.tick_params(length=0)
    if len(rows) <= LABELLED_ROWS:
        for i, row in enumerate(texts):
            for j, text in enumerate(row):
                if text:
                    ax.text(j, i, mpl_text(text), ha="center", va="center", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.legend(
        handles=[Patch(facecolor=colours[n], edgecolor="0.6", label=n) for n in names],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
    )
    ax.set_title(title)
    fig.tight_layout()
    return fig


def fig_compliance(plt: Any, report: Report, svg: bool = True) -> Drawn:
    rows = [h.name for h in report.hosts]
    cells = [[h.groups[g].state for g in report.groups] for h in report.hosts]
    texts = [
        [
            str(h.groups[g].differs or h.groups[g].unknown or "")
            if h.groups[g].state in ("differs", "unknown")
            else ""
            for g in report.groups
        ]
        for h in report.hosts
    ]
    fig = _grid(
        plt,
        rows,
        report.groups,
        cells,
        texts,
        STATE_COLOURS,
        "Compliance per group per host",
        "group (cell: items that differ or are unknown)",
    )
    return htmlpage.save(
        fig,
        "compliance",
        "Compliance per group per host",
        "One row per host, one column per group of the profile. Red: some "
        "item of the group differs from the profile (the number is how many); "
        "purple: some item is unknown (dtnkit could not judge it: the host's "
        "audit says what to give); green: every item dtnkit can judge "
        "complies; grey: nothing to judge there (unsupported by the NIC, or "
        "global to a host audited in a namespace); white: the group was not "
        "audited. A column red on every host is a profile the fleet does not "
        "follow; a row red alone is a host that drifted.",
        svg=svg,
    )


def fig_differences(plt: Any, report: Report, svg: bool = True) -> Drawn:
    names = [h.name for h in report.hosts]
    prof = [len(h.against_profile) for h in report.hosts]
    fig, ax = plt.subplots(figsize=(9, _rows_height(len(names))))
    ys = list(range(len(names)))
    if report.reference:
        ref = [len(report.reference_diffs_of(n)) for n in names]
        ax.barh(
            [y - 0.2 for y in ys],
            prof,
            height=0.4,
            color="#e4572e",
            label=f"against the profile {mpl_text(printable(report.profile or ''))}",
        )
        ax.barh(
            [y + 0.2 for y in ys],
            ref,
            height=0.4,
            color="#3b75af",
            label=mpl_text(f"against the reference host {clip(report.reference, 40)}"),
        )
    else:
        ax.barh(
            ys,
            prof,
            height=0.6,
            color="#e4572e",
            label=f"against the profile {mpl_text(printable(report.profile or ''))}",
        )
    # the reference host has no second bar: its label says why
    ax.set_yticks(
        ys,
        [mpl_text(clip(n, 40) + (" (reference)" if n == report.reference else "")) for n in names],
        fontsize=_label_size(len(names)),
    )
    ax.invert_yaxis()
    ax.set_xlabel("settings that differ (or are unknown)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(
        "How far each host is from the profile"
        + (" and from the reference host" if report.reference else "")
    )
    fig.tight_layout()
    return htmlpage.save(
        fig,
        "differences",
        "Differences per host",
        "One bar per host: how many of its settings differ from the profile "
        "(or are unknown)"
        + (
            "; the second bar, how many differ from the "
            "reference host's (or only one of the two has)"
            if report.reference
            else ""
        )
        + ". A host far longer than the others is the one to look at first; "
        "equal bars across the fleet mean the hosts drifted together.",
        svg=svg,
    )


def _verdict_rows(report: Report) -> tuple[list[str], list[str], list[list[GroupVerdict | None]]]:
    rows: list[str] = []
    table: list[list[GroupVerdict | None]] = []
    groups: list[str] = list(report.campaign.groups) if report.campaign else []
    sources: list[tuple[str, Sequence[GroupVerdict]]] = []
    if report.campaign:
        sources += [(p.label, p.results) for p in report.campaign.pairs]
    sources += [(f"experiment {e.name}", e.groups) for e in report.experiments]
    for _, results in sources:
        for v in results:
            if v.group not in groups:
                groups.append(v.group)
    for label, results in sources:
        by_group = {v.group: v for v in results}
        rows.append(label)
        table.append([by_group.get(g) for g in groups])
    return rows, groups, table


def fig_verdicts(plt: Any, report: Report, svg: bool = True) -> Drawn:
    rows, groups, table = _verdict_rows(report)
    cells = [[v.verdict if v else "not tried" for v in row] for row in table]
    texts = [
        ["" if v is None or v.ratio is None else f"x{v.ratio:.2f}" for v in row] for row in table
    ]
    fig = _grid(
        plt,
        rows,
        groups,
        cells,
        texts,
        VERDICT_COLOURS,
        "Tuning verdicts per host pair and group",
        "group (cell: applied / baseline)",
    )
    return htmlpage.save(
        fig,
        "verdicts",
        "Verdicts per pair and group",
        "One row per host pair of the campaign (client -> server) and per "
        "experiment, one column per group, in the order they were tried. "
        "Green: the group helped (the ratio of throughput with it applied to "
        "the interleaved baseline is above the noise); grey: neutral; red: "
        "harmful; amber: gated (the NIC-headroom gate kept the group off the "
        "pair). Harmful and gated groups are never applied on that pair; "
        "white: the group was not tried there.",
        svg=svg,
    )


def figures(report: Report, *, svg: bool = True, progress: Progress | None = None) -> list[Drawn]:
    """The figures there is data for (PNG, and SVG unless ``svg`` is false)."""
    plt = htmlpage.pyplot(COMMAND)
    steps: list[tuple[str, Callable[[], Drawn]]] = []
    if report.hosts:
        steps += [
            ("compliance per group per host", lambda: fig_compliance(plt, report, svg)),
            ("differences per host", lambda: fig_differences(plt, report, svg)),
        ]
    if (report.campaign and report.campaign.pairs) or report.experiments:
        steps.append(("verdicts per pair and group", lambda: fig_verdicts(plt, report, svg)))
    drawn = []
    try:  # a name's glyph missing from the font is drawn as a box, not warned about
        with plt.rc_context({"svg.hashsalt": "dtnkit", "font.size": 9}), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            for k, (what, draw) in enumerate(steps, 1):
                if progress is not None:
                    progress.step(f"drawing {what}", k, len(steps))
                drawn.append(draw())
    except (ValueError, OverflowError, RuntimeError) as exc:  # matplotlib on odd data
        raise DtnkitError(
            "cannot draw the fleet report's figures",
            str(exc)[:120],
            "run with --traceback and report it",
        ) from None
    return drawn


# ---------------------------------------------------------------- the page


def _ratio(v: GroupVerdict) -> str:
    return format_value(None) if v.ratio is None else f"x{v.ratio:.2f}"


def _margin(v: GroupVerdict) -> str:
    if v.margin is None:
        return format_value(None)
    return f"+-{format_percent(v.margin, fraction=True)}"


def _mean_rate(xs: Sequence[float]) -> str:
    return format_rate(sum(xs) / len(xs) if xs else None)


def verdict_rows(report: Report) -> list[list[str]]:
    """[source, group, verdict, ratio, noise, baseline, applied, why] of every verdict."""
    out = []
    if report.campaign:
        for p in report.campaign.pairs:
            for v in p.results:
                out.append(
                    [
                        p.label,
                        v.group,
                        v.verdict,
                        _ratio(v),
                        _margin(v),
                        _mean_rate(v.baseline_bps),
                        _mean_rate(v.applied_bps),
                        v.why,
                    ]
                )
    for e in report.experiments:
        for v in e.groups:
            out.append(
                [
                    f"experiment {e.name}",
                    v.group,
                    v.verdict,
                    _ratio(v),
                    _margin(v),
                    _mean_rate(v.baseline_bps),
                    _mean_rate(v.applied_bps),
                    v.why,
                ]
            )
    return out


def _when(t: float | None) -> str:
    if t is None:
        return format_value(None)
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
    except (OverflowError, OSError, ValueError):
        return format_value(t)


def page(report: Report, figs: Sequence[Drawn]) -> str:
    e = escape
    n = len(report.hosts)
    title = f"dtnkit fleet report: {report.loaded.directory.name or report.loaded.directory}"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
        f"<title>{e(title)}</title><style>{CSS}</style></head>",
        f"<body><h1>Fleet report <code>{e(report.loaded.directory)}</code></h1>",
        f"<p>{counted(n, 'host')} audited against profile <code>{e(report.profile or '-')}</code>: "
        f"{report.compliant} compliant, {n - report.compliant} not; "
        f"{counted(len(report.experiments), 'experiment')}; "
        + ("a campaign" if report.campaign else "no campaign")
        + (f"; reference host <code>{e(report.reference)}</code>" if report.reference else "")
        + f". Report by dtnkit {e(__version__)}.</p>",
    ]
    if report.skipped:
        parts.append(
            "<p class='note'>"
            + f"{counted(len(report.skipped), 'file')} skipped: "
            + "; ".join(f"<code>{e(s.file)}</code>: {e(s.why)}" for s in report.skipped)
            + "</p>"
        )
    for note in report.notes:
        parts.append(f"<p class='note'>{e(note)}</p>")
    parts.append("<h2>Figures</h2>")
    parts += [figure_html(f, files=bool(f.svg)) for f in figs]
    if not (report.campaign and report.campaign.pairs) and not report.experiments:
        parts.append(
            "<p class='none'>No campaign.json and no *.experiment.json: no verdicts to draw.</p>"
        )

    parts.append("<h2>Compliance per group per host</h2>")
    parts.append(
        html_table(
            ["host", "audited as", "compliant", *report.groups],
            [
                [
                    h.name,
                    h.audit.doc_host,
                    "yes" if h.audit.compliant else "no",
                    *(_state_text(h.groups[g]) for g in report.groups),
                ]
                for h in report.hosts
            ],
            "no audit",
        )
    )
    parts.append(
        "<h2>Values that differ between hosts</h2>"
        "<p>Interfaces are compared by their place in each host's audit "
        "(nic1, nic2, ...). A value a host's audit could not read (a host-wide "
        "setting seen from inside a namespace, a setting its driver does not "
        'report) is "not read": it is listed, never counted as a '
        "difference.</p>"
    )
    parts.append(
        html_table(
            ["setting", "group", "value", "hosts"],
            [
                [d.key, d.group, setting_text(d.key, v, 400), ", ".join(hosts)]
                for d in report.differing
                for v, hosts in [*d.by_value(), *([(None, list(d.not_read))] if d.not_read else [])]
            ],
            "every host has the same values" if report.hosts else "no audit",
        )
    )

    parts.append(
        "<h2>Values not read</h2>"
        "<p>Settings some hosts' audits could not read, so not compared there.</p>"
    )
    parts.append(
        html_table(
            ["setting", "group", "not read on", "why"],
            [[u.key, u.group, ", ".join(u.hosts), u.why] for u in report.not_read],
            "every host read every setting it audited" if report.hosts else "no audit",
        )
    )
    parts.append("<h2>Each host</h2>")
    for h in report.hosts:
        parts.append(
            f"<h3 id='host-{e(h.name)}'>{e(h.name)}</h3>"
            f"<p>File <code>{e(h.audit.file)}</code>, audited as "
            f"<code>{e(h.audit.doc_host)}</code>, interfaces "
            f"{e(', '.join(h.audit.devices) or '-')}: "
            + ("compliant" if h.audit.compliant else "not compliant")
            + ".</p>"
        )
        parts.append(
            "<h4>Against the profile</h4>"
            + html_table(
                ["setting", "group", "status", "current", "recommended", "why"],
                [
                    [
                        i.key,
                        i.group,
                        i.status,
                        setting_text(i.key, i.current, 400),
                        setting_text(i.key, i.recommended, 400, missing=NOT_DECIDED),
                        i.why,
                    ]
                    for i in h.against_profile
                ],
                "nothing differs from the profile",
            )
        )
        if report.reference and h.name != report.reference:
            parts.append(
                f"<h4>Against the reference host {e(report.reference)}</h4>"
                + html_table(
                    ["setting", "group", "this host", report.reference],
                    [
                        [d.key, d.group, _side(d, "host"), _side(d, "reference")]
                        for d in report.reference_diffs_of(h.name)
                    ],
                    "the same values as the reference host",
                )
            )

    c = report.campaign
    parts.append("<h2>Campaign and experiments</h2>")
    if c:
        parts.append(
            f"<p>Campaign <code>{e(c.file)}</code>: status {e(c.status)}, profile "
            f"{e(c.profile or '-')}, groups in order {e(', '.join(c.groups) or '-')}"
            f", started {e(_when(c.started))}, finished {e(_when(c.finished))}"
            + (
                f" ({e(format_duration(c.finished - c.started))})"
                if c.started is not None and c.finished is not None
                else ""
            )
            + f"; restored at the end: {e(', '.join(c.restored) or 'none')}.</p>"
        )
        if c.failure:
            parts.append(
                f"<p class='note'>The campaign failed on host "
                f"<code>{e(c.failure.get('host', ''))}</code> at step "
                f"{e(c.failure.get('step', ''))}: {e(c.failure.get('msg', ''))}</p>"
            )
    parts.append(
        html_table(
            [
                "pair or experiment",
                "group",
                "verdict",
                "ratio",
                "noise",
                "baseline",
                "applied",
                "why",
            ],
            verdict_rows(report),
            "no campaign and no experiment in the directory",
        )
    )
    if report.experiments:
        parts.append(
            html_table(
                ["experiment", "file", "id", "hosts", "probe", "profile"],
                [
                    [x.name, x.file, x.id, ", ".join(x.hosts), x.probe or "-", x.profile or "-"]
                    for x in report.experiments
                ],
                "",
            )
        )
    parts.append(
        "<h2>Files</h2>"
        + html_table(
            ["file", "skipped because"],
            [[s.file, s.why] for s in report.skipped],
            "every document in the directory was used",
        )
    )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _state_text(s: Any) -> str:
    if s.state == "differs":
        return f"differs ({s.differs} of {s.items})"
    if s.state == "unknown":
        return f"unknown ({s.unknown} of {s.items})"
    return str(s.state)


def _side(d: Any, side: str) -> str:
    if d.only_on is not None and d.only_on != side:
        return "(not audited)"
    return setting_text(d.key, d.value if side == "host" else d.reference_value, 400)


def build(
    report: Report,
    *,
    out: Path | None = None,
    html: Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Draw and write: into directory ``out`` (page, figures as PNG and SVG, the report as
    JSON), or the page alone as ``html``.  Nothing is written on an error."""
    assert (out is None) != (html is None)
    if out is not None:
        htmlpage.check_dir(out)
    else:
        assert html is not None
        _check_page(html)
    figs = figures(report, svg=out is not None, progress=progress)
    text = page(report, figs).encode("utf-8")
    if html is not None:
        htmlpage.write_files(html.parent, {html.name: text})
        return {"page": str(html), "figures": [f.stem for f in figs], "files": [html.name]}
    assert out is not None
    files: dict[str, bytes] = {PAGE: text}
    for f in figs:
        files[f"{f.stem}.png"] = f.png
        files[f"{f.stem}.svg"] = f.svg
    files["fleet.json"] = (json.dumps(report.as_dict(), indent=1, allow_nan=False) + "\n").encode()
    names = htmlpage.write_files(out, files)
    return {
        "directory": str(out),
        "page": str(out / PAGE),
        "figures": [f.stem for f in figs],
        "files": list(names),
    }


def _check_page(html: Path) -> None:
    if html.name in ("", ".", "..") or html.name.startswith("."):
        raise BadInput(
            f"cannot write the page to {html}",
            "give a file name that does not start with a dot",
            "e.g. --html fleet.html",
        )
    if html.is_dir():
        raise BadInput(
            f"cannot write the page to {html}",
            "it is a directory",
            "give a file name, or -o DIR for the page and its figures",
        )
    htmlpage.check_dir(html.parent)
