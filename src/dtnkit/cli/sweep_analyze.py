"""``dtnkit sweep analyze RUN`` and ``dtnkit sweep report RUN -o DIR``: a stored sweep run's
analysis as tables (or JSON), the recommended-streams table ``dtnkit cp`` reads, and the
figures and HTML page.  Both are registered in the ``sweep`` group (cli/sweep.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from dtnkit.atomicfile import replace_file
from dtnkit.cli.options import CliCommand, db_option, pass_env, state_dir_option
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.progress import reporter
from dtnkit.cli.render import Col, print_fitted
from dtnkit.db.location import Location
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.sweep import analyze, report, store
from dtnkit.sweep.report import curve_label, varying_keys
from dtnkit.transfer.client.streamtable import DEFAULT_NAME
from dtnkit.units import (
    counted,
    format_duration,
    format_percent,
    format_rate,
    format_value,
    parse_rate,
)

if TYPE_CHECKING:
    from dtnkit.sweep.analyze import Analysis
    from dtnkit.sweep.store import RunInfo


def _target(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    return None if value is None else parse_rate(value, "target", lo=1000, hi=10**13)


def default_streams_table(state_dir: Path) -> Path:
    """Where ``--save-streams`` without a file writes, and ``cp --streams auto`` reads."""
    return state_dir / DEFAULT_NAME


def save_json(path: Path, doc: Any) -> None:
    """Write ``doc`` to ``path`` atomically: a new file beside it, then renamed over it (a
    symlink at ``path`` is replaced, not followed)."""
    if path.is_dir():
        raise BadInput(
            f"cannot save the streams table to {path}", "it is a directory", "give a file name"
        )
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, text)
    except OSError as exc:
        raise BadInput(
            f"cannot save the streams table to {path}",
            exc.strerror or str(exc),
            "give a file in a directory you can write to",
        ) from None


@click.command(cls=CliCommand, name="analyze")
@click.argument("run")
@click.option(
    "--target",
    callback=_target,
    default=None,
    metavar="RATE",
    help="A rate to reach (e.g. 900mbit, 10g): the minimum cores, origins and "
    "streams that reach it, per RTT.",
)
@click.option(
    "--baseline",
    default=None,
    metavar="PROFILE",
    help="The profile the others are compared with (default: none, or the run's first profile).",
)
@click.option(
    "--save-streams",
    "save_streams",
    default=None,
    metavar="FILE|default",
    help="Write the recommended-streams-per-RTT table (JSON) that `dtnkit cp "
    "--streams auto` reads; `default`: STATE_DIR/streams.json, which cp reads "
    "without --streams-table.",
)
@format_option
@db_option()
@state_dir_option()
@pass_env
def analyze_cmd(
    env: Environment,
    run: str,
    target: int | None,
    baseline: str | None,
    save_streams: str | None,
    fmt: str,
    db: Location,
    state_dir: Path,
) -> int:
    """Analyse a stored sweep run: per RTT the peak, drop and knee; fluctuation against
    utilisation; Gbit/s per core; minimum resources for --target; origins at equal cores;
    profile ratios; tail latency; the recommended streams per RTT (docs/sweep.md)."""
    info = store.run_info(db, run)
    result = analyze.analyze(store.load_records(db, run), target_bps=target, baseline=baseline)
    saved: Path | None = None
    if save_streams is not None:
        if not result.streams_table.get("rtts"):
            raise BadInput(
                f"no streams table to save from run {run!r}",
                "no curve has a valid throughput outside emulator-bound points",
                "measure the run (dtnkit sweep run) first",
            )
        saved = (
            default_streams_table(state_dir) if save_streams == "default" else Path(save_streams)
        )
        save_json(saved, result.streams_table)
    doc = {
        "run": _run_doc(info),
        **result.as_dict(),
        "streams_saved_to": str(saved) if saved else None,
    }
    emit(env, doc, fmt, lambda p: _tables(p, info, result, saved))
    return 0


def _run_doc(info: RunInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "status": info.status,
        "points_total": info.points_total,
        "points_ok": info.points_ok,
        "points_failed": info.points_failed,
    }


def _label_keys(keys: Sequence[dict[str, Any]]) -> list[str]:
    return varying_keys(keys)


def _tables(p: Printer, info: RunInfo, a: Analysis, saved: Path | None) -> None:

    con = p.console

    def fit(title: str, cols: list[Col], rows: list[list[str]]) -> None:
        con.print()
        print_fitted(con, cols, [[escape(c) for c in r] for r in rows], title)

    def ratio(x: float | None) -> str:
        return format_value(None) if x is None else f"{x:.3g}"

    con.print(
        f"[bold]sweep {escape(info.name)}[/]: {escape(info.status)}, "
        f"{info.points_ok} of {info.points_total} points measured, "
        f"{info.points_failed} failed"
    )
    varying = _label_keys([dict(c.key) for c in a.curves])
    fit(
        "Peak, drop and knee per RTT",
        [
            Col("curve"),
            Col("peak streams", justify="right"),
            Col("peak", justify="right"),
            Col("drop past peak", justify="right"),
            Col("knee", justify="right"),
            Col("levels", rank=2, justify="right"),
        ],
        [
            [
                curve_label(c.key, varying),
                str(c.peak_streams),
                format_rate(c.peak_bps),
                format_percent(c.drop_pct),
                str(c.knee_streams),
                str(len(c.levels)),
            ]
            for c in a.curves
        ]
        or [["no curve (no valid throughput)", "", "", "", "", ""]],
    )
    f = a.fluctuation
    below = sum(1 for _, u, _c in f.points if u < f.threshold)
    at = format_percent(f.threshold, fraction=True)
    change = format_value(None) if f.change_pct is None else f"{f.change_pct:+.3g}%"
    fit(
        "Fluctuation (CV) against utilisation",
        [Col("utilisation"), Col("points", justify="right"), Col("mean CV", justify="right")],
        [
            [f"below {at}", str(below), ratio(f.cv_below)],
            [f"{at} or more", str(len(f.points) - below), ratio(f.cv_above)],
            [f"change above {at}", "", change],
        ],
    )
    fit(
        "Gbit/s per core",
        [
            Col("RTT", justify="right"),
            Col("origins x cores"),
            Col("streams", justify="right"),
            Col("throughput", justify="right"),
            Col("per quota core", justify="right"),
            Col("per core used", justify="right"),
            Col("tool", rank=2),
            Col("profile", rank=3),
        ],
        [
            [
                f"{format_value(c.point.rtt_ms)} ms",
                f"{c.point.origins} x {format_value(c.point.cores)}",
                str(c.point.streams),
                format_rate(c.mean_bps),
                ratio(c.gbit_per_quota_core),
                ratio(c.gbit_per_core_used),
                c.point.tool,
                format_value(c.point.profile),
            ]
            for c in a.efficiency
        ],
    )
    if a.minimum:
        fit(
            f"Minimum resources for {format_rate(a.minimum[0].target_bps)}",
            [
                Col("RTT", justify="right"),
                Col("reached"),
                Col("min cores", justify="right"),
                Col("min origins", justify="right"),
                Col("min streams", justify="right"),
                Col("cheapest", rank=2),
            ],
            [
                [
                    f"{format_value(m.rtt_ms)} ms",
                    format_value(m.reached),
                    format_value(m.min_cores),
                    format_value(m.min_origins),
                    format_value(m.min_streams),
                    (
                        f"{m.cheapest.point.origins} x "
                        f"{format_value(m.cheapest.point.cores)} cores, "
                        + counted(m.cheapest.point.streams, "stream")
                        if m.cheapest
                        else "-"
                    ),
                ]
                for m in a.minimum
            ],
        )
    if a.origins:
        fit(
            "Origins at equal total cores (each at its best streams)",
            [
                Col("RTT", justify="right"),
                Col("total cores", justify="right"),
                Col("origins x cores"),
                Col("streams", justify="right"),
                Col("throughput", justify="right"),
                Col("ratio", justify="right"),
            ],
            [
                [
                    f"{format_value(o.key.get('rtt_ms'))} ms",
                    format_value(o.total_cores),
                    f"{c.point.origins} x {format_value(c.point.cores)}",
                    str(c.point.streams),
                    format_rate(c.mean_bps),
                    ratio(r),
                ]
                for o in a.origins
                for c, r in zip(o.best, o.ratios, strict=True)
            ],
        )
    else:
        con.print(
            "\n[dim]origins at equal total cores: no two origin counts share a total "
            "quota in this run[/]"
        )
    if a.profiles:
        fit(
            "Profiles (ratios to the baseline, paired by repeat)",
            [
                Col("profile"),
                Col("baseline"),
                Col("pairs", justify="right"),
                Col("ratio", justify="right"),
                Col("min..max", justify="right"),
                Col("stdev", justify="right", rank=2),
            ],
            [
                [
                    pr.profile,
                    pr.baseline,
                    str(pr.pairs),
                    ratio(pr.ratio),
                    f"{ratio(pr.min_ratio)}..{ratio(pr.max_ratio)}",
                    ratio(pr.stdev),
                ]
                for pr in a.profiles
            ],
        )
    else:
        con.print("\n[dim]profiles: one profile only, nothing to compare[/]")
    if a.tails:
        tv = _label_keys([dict(t.key) for t in a.tails])
        fit(
            "Tail latency (mean over repeats)",
            [
                Col("curve"),
                Col("streams", justify="right"),
                Col("last", justify="right"),
                Col("p50", justify="right"),
                Col("p90", justify="right", rank=2),
                Col("p99", justify="right"),
            ],
            [
                [
                    curve_label(t.key, tv),
                    str(t.streams),
                    format_duration(t.last_s),
                    format_duration(t.p50_s),
                    format_duration(t.p90_s),
                    format_duration(t.p99_s),
                ]
                for t in a.tails
            ],
        )
    rows = a.streams_table.get("rtts", [])
    if rows:
        fit(
            "Recommended streams per RTT",
            [
                Col("RTT", justify="right"),
                Col("streams", justify="right"),
                Col("peak streams", justify="right"),
                Col("peak", justify="right"),
            ],
            [
                [
                    f"{format_value(r['rtt_ms'])} ms",
                    str(r["streams"]),
                    str(r["peak_streams"]),
                    format_rate(r["peak_bps"]),
                ]
                for r in rows
            ],
        )
    if saved is not None:
        p.echo(f"saved the streams table to {saved}")  # unwrapped: a path is copied whole
    if a.excluded:
        whys = Counter(w for _, w in a.excluded)
        con.print(
            f"\n{counted(len(a.excluded), 'point')} the lab's emulator bound, kept out "
            "of the peak, drop, knee, fluctuation and streams table: "
            + "; ".join(f"{escape(w)} ({n})" for w, n in whys.most_common())
        )
        if a.hint:
            con.print(f"Next: {escape(a.hint)}")
    if a.failed:
        con.print(
            f"{counted(len(a.failed), 'point')} failed or without a valid sample: "
            + "; ".join(f"{i} {escape(e[:60])}" for i, e in a.failed[:5])
            + (" ..." if len(a.failed) > 5 else "")
        )


@click.command(cls=CliCommand, name="report")
@click.argument("run")
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(path_type=Path),
    required=True,
    metavar="DIR",
    help="The directory to write the figures and report.html into.",
)
@click.option(
    "--point",
    "point_id",
    default=None,
    metavar="ID",
    help="The point whose time series is drawn (an ID or a unique prefix of 4+ "
    "characters; default: the peak of the first curve).",
)
@click.option(
    "--target",
    callback=_target,
    default=None,
    metavar="RATE",
    help="As sweep analyze --target: a table of the minimum resources for it.",
)
@click.option("--baseline", default=None, metavar="PROFILE", help="As sweep analyze --baseline.")
@format_option
@db_option()
@pass_env
def report_cmd(
    env: Environment,
    run: str,
    out: Path,
    point_id: str | None,
    target: int | None,
    baseline: str | None,
    fmt: str,
    db: Location,
) -> int:
    """Draw a sweep run's figures (PNG and SVG) and write one self-contained HTML page
    (DIR/report.html) with them, the analysis tables, the grid and the environment.  Needs
    matplotlib (the report extra: ./dev/bootstrap.sh in a checkout, else pip install
    'dtnkit[report]')."""
    report.check_dir(out)
    data = report.from_store(db, run)
    written = report.build(
        data,
        out,
        point_id=point_id,
        target_bps=target,
        baseline=baseline,
        progress=reporter(env, fmt),
    )

    def lines(p: Printer) -> None:
        p.echo(
            f"wrote {len(written.files)} files to {written.directory}: "
            f"{len(written.figures)} figures (PNG and SVG), analysis.json"
        )
        p.echo(f"open {written.page}")

    emit(env, written.as_dict(), fmt, lines)
    return 0
