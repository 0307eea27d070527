"""``dtnkit fleet report DIR``: many hosts' audits, experiments and a campaign, compared, as
tables (or JSON) and, with ``-o DIR`` or ``--html FILE``, one self-contained HTML page with
figures.  ``dtnkit fleet campaign``: a campaign's steps on one host (cli/campaign.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import click
from rich.markup import escape

from dtnkit import htmlpage
from dtnkit.cli.campaign import campaign
from dtnkit.cli.options import CliGroup, pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.progress import reporter
from dtnkit.cli.render import Col, fits, print_fitted, whole
from dtnkit.environment import Environment
from dtnkit.errors import DtnkitError, ExitStatus
from dtnkit.fleet import page
from dtnkit.fleet.compare import Report, canonical, compare
from dtnkit.fleet.load import load_dir, printable
from dtnkit.fleet.page import NOT_DECIDED, setting_text, value_text, verdict_rows
from dtnkit.units import counted


@click.group(cls=CliGroup)
def fleet() -> None:
    """Many hosts: reports over the site audit's and a campaign's output, and the steps of a
    campaign that run on one host."""


fleet.add_command(campaign)


@fleet.command()
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option(
    "--reference",
    metavar="HOST",
    default=None,
    help="Also diff every host against this one (the name before .audit.json).",
)
@click.option(
    "--profile",
    metavar="NAME",
    default=None,
    help="Report the audits made against this profile (default: the one most "
    "audits used; the others are skipped with a warning).",
)
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    metavar="OUTDIR",
    help="Write report.html, its figures (PNG and SVG) and fleet.json into OUTDIR.",
)
@click.option(
    "--html",
    "html",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Write only the self-contained HTML page, as FILE.",
)
@format_option
@pass_env
def report(
    env: Environment,
    directory: Path,
    reference: str | None,
    profile: str | None,
    out: Path | None,
    html: Path | None,
    fmt: str,
) -> int:
    """Compare the hosts' audits in DIR (DIR/HOST.audit.json, the output of `dtnkit tune
    audit --format json`), with DIR/*.experiment.json and DIR/campaign.json if present:
    compliance per group per host, the values that differ between hosts, each host against
    the profile (and against --reference HOST).  A file that cannot be used is skipped with
    a warning naming it.  Exit 0 when every host complies, 3 when one does not, 9 when
    nothing in DIR is usable.  The HTML page needs matplotlib (the report extra:
    ./dev/bootstrap.sh in a checkout, else pip install 'dtnkit[report]')."""
    if out is not None and html is not None:
        raise DtnkitError(
            "fleet report: -o and --html together",
            "-o writes the page with its figures, --html the page alone",
            "give one of them",
            status=ExitStatus.USAGE,
        )
    if out is not None or html is not None:
        htmlpage.check_dir(out if out is not None else (html or Path()).parent)
    loaded = load_dir(directory)
    for s in loaded.skipped:  # before an error that nothing is usable
        click.echo(f"dtnkit: warning: {s.line()}", file=env.stderr)
    result = compare(loaded, reference=reference, profile=profile)
    for s in result.skipped[len(loaded.skipped) :]:  # left out for their profile
        click.echo(f"dtnkit: warning: {s.line()}", file=env.stderr)
    for note in result.notes:
        click.echo(f"dtnkit: note: {note}", file=env.stderr)
    doc = result.as_dict()
    if out is not None or html is not None:
        doc["written"] = page.build(result, out=out, html=html, progress=reporter(env, fmt))

    def tables(p: Printer) -> None:
        people(p, result)
        if "written" in doc:
            w = doc["written"]
            if out is not None:
                p.echo(
                    f"wrote {len(w['files'])} files to {out}: {len(w['figures'])} figures "
                    "(PNG and SVG), fleet.json"
                )
            p.echo(f"open {w['page']}")

    emit(env, doc, fmt, tables)
    return int(result.status)


#: the most host names a table cell lists (the JSON and the page list them all)
NAMES_SHOWN = 8


def hosts_text(hosts: Sequence[str], total: int) -> str:
    """Host names for a table cell: all of them, at most NAMES_SHOWN, or "every host"."""
    if total > 1 and len(hosts) == total:
        return f"every host ({total})"
    if len(hosts) <= NAMES_SHOWN:
        return ", ".join(hosts)
    return f"{', '.join(hosts[:NAMES_SHOWN])} and {len(hosts) - NAMES_SHOWN} more"


def grouped(rows: Iterable[tuple[str, tuple[str, ...]]]) -> list[tuple[tuple[str, ...], list[str]]]:
    """(what, hosts) for each distinct what, in the order first seen."""
    out: dict[tuple[str, ...], list[str]] = {}
    for host, what in rows:
        out.setdefault(what, []).append(host)
    return list(out.items())


def people(p: Printer, r: Report) -> None:
    """The report for people: a summary line, then one table per question.  A difference
    many hosts share is one row naming them (per host: the JSON and the page)."""

    def t(text: object, most: int = 200) -> str:
        return escape(printable(value_text(text, most) if not isinstance(text, str) else text))

    def k(key: str) -> str:  # as `tune audit` shows them: a sysctl by its name
        return t(key.removeprefix("sysctl/"))

    def v(key: str, value: object, missing: str = "not read") -> str:
        return escape(printable(setting_text(key, value, 120, missing=missing)))

    con = p.console
    n = len(r.hosts)
    parts = [
        f"{n} host{'s' if n != 1 else ''}"
        + (f" against profile [bold]{t(r.profile)}[/]: {r.compliant} compliant" if n else "")
    ]
    if r.experiments:
        parts.append(counted(len(r.experiments), "experiment"))
    if r.campaign:
        parts.append(f"campaign {t(r.campaign.status)} ({len(r.campaign.pairs)} pairs)")
    whole(con, f"[bold]fleet report[/] of {t(str(r.loaded.directory))}")
    con.print(", ".join(parts))
    if r.hosts:
        rows: list[tuple[str, ...]] = []
        for h in r.hosts:
            bad = [f"{g} {s.differs}" for g, s in h.groups.items() if s.state == "differs"]
            unknown = [f"{g} {s.unknown}" for g, s in h.groups.items() if s.unknown]
            text = (
                ", ".join(bad)
                + ("; " if bad and unknown else "")
                + (f"unknown: {', '.join(unknown)}" if unknown else "")
            )
            rows.append(
                (
                    t(h.name),
                    "[green]yes[/]" if h.audit.compliant else "[yellow]no[/]",
                    t(text or "-"),
                    t(h.audit.doc_host),
                )
            )
        cols = [
            Col("host", wrap=False),
            Col("compliant", wrap=False),
            Col("groups that differ (items)", least=20),
            Col("audited as", rank=1),
        ]
        if all(h.audit.doc_host == h.name for h in r.hosts):  # nothing to add
            cols, rows = cols[:3], [row[:3] for row in rows]
        con.print()
        print_fitted(con, cols, rows, title="compliance per host")
        con.print()
        if r.differing:
            print_fitted(
                con,
                (Col("setting"), Col("value", least=12), Col("hosts", least=16)),
                [
                    (k(d.key) if i == 0 else "", v(d.key, value), t(hosts_text(hosts, n)))
                    for d in r.differing
                    for i, (value, hosts) in enumerate(
                        [*d.by_value(), *([(None, list(d.not_read))] if d.not_read else [])]
                    )
                ],
                title=f"values that differ between hosts ({len(r.differing)})",
            )
        else:
            con.print("every host has the same values")
        if r.not_read:
            con.print(
                f"{counted(len(r.not_read), 'setting')} not read on some hosts, not "
                "compared there (--format json: not_read)"
            )
        found = grouped(
            (h.name, (i.key, i.status, canonical(i.current), canonical(i.recommended)))
            for h in r.hosts
            for i in h.against_profile
        )
        con.print()
        if found:
            cols = [
                Col("setting"),
                Col("status", rank=1, wrap=False),
                Col("current", least=10),
                Col("recommended", least=10),
                Col("hosts", least=16),
            ]
            rows = [
                (
                    k(key),
                    escape(status),
                    v(key, json.loads(cur)),
                    v(key, json.loads(rec), NOT_DECIDED),
                    t(hosts_text(hosts, n)),
                )
                for (key, status, cur, rec), hosts in found
            ]
            if not fits(con, cols, rows):  # narrow: one column, as `tune audit` does
                cols = [cols[0], cols[1], Col("current -> recommended", least=16), cols[4]]
                rows = [(a, b, f"{c} -> {d}", e) for a, b, c, d, e in rows]
            print_fitted(con, cols, rows, title="against the profile")
        else:
            con.print("no host differs from the profile")
    if r.reference:
        ref = r.reference
        diffs = grouped(
            (
                d.host,
                (
                    d.key,
                    "(not audited)" if d.only_on == "reference" else canonical(d.value),
                    "(not audited)" if d.only_on == "host" else canonical(d.reference_value),
                ),
            )
            for d in r.reference_diffs
        )

        def side(key: str, text: str) -> str:
            return text if text == "(not audited)" else v(key, json.loads(text))

        con.print()
        if diffs:
            cols = [
                Col("setting"),
                Col("value", least=10),
                Col("reference", least=10),
                Col("hosts", least=16),
            ]
            rows = [
                (k(key), side(key, mine), side(key, theirs), t(hosts_text(hosts, n - 1)))
                for (key, mine, theirs), hosts in diffs
            ]
            if not fits(con, cols, rows):
                cols = [cols[0], Col("value (the reference's)", least=16), cols[3]]
                rows = [(a, f"{b} ({c})", d) for a, b, c, d in rows]
            print_fitted(con, cols, rows, title=f"against the reference host {t(ref)}")
        else:
            con.print(f"every host has the values of the reference host {t(ref)}")
    verdicts = verdict_rows(r)
    if verdicts:
        con.print()
        print_fitted(
            con,
            (
                Col("pair or experiment"),
                Col("group", wrap=False),
                Col("verdict", wrap=False),
                Col("ratio", wrap=False, justify="right"),
                Col("noise", rank=1, wrap=False, justify="right"),
                Col("baseline", rank=2, wrap=False, justify="right"),
                Col("applied", rank=3, wrap=False, justify="right"),
            ),
            [tuple(t(c) for c in row[:7]) for row in verdicts],
            title="tuning verdicts",
        )
        c = r.campaign
        if c and c.failure:
            whole(
                con,
                f"[red]campaign failed[/] on {t(c.failure.get('host', ''))} at "
                f"{t(c.failure.get('step', ''))}: {t(c.failure.get('msg', ''))}; "
                f"restored: {t(', '.join(c.restored) or 'none')}",
            )
    if r.skipped:
        con.print(
            f"[yellow]{counted(len(r.skipped), 'file')} skipped[/] (the warnings above say why)"
        )
