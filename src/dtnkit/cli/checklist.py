"""`dtnkit checklist`: the DC27 site checklist and the troubleshooting checks.  Reads only."""

from __future__ import annotations

import click
from rich.markup import escape

from dtnkit.cli.hosts import make_host
from dtnkit.cli.judging_options import judging_options
from dtnkit.cli.options import CliCommand, pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.render import Col, print_fitted
from dtnkit.diagnose.checklist import Checklist, Options, run_checklist
from dtnkit.diagnose.sitecfg import check_url, parse_peer
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.tune.judging import Judging

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


@click.command(cls=CliCommand)
@click.option(
    "--peer",
    metavar="HOST",
    help="Another DTN: test IPv6 reach and the path MTU to it (a name or an IP).",
)
@click.option(
    "--perfsonar",
    metavar="URL",
    help="The site's perfSONAR toolkit, e.g. https://ps.example.org (its "
    "pScheduler API must answer).",
)
@judging_options(iface=True, netns=True, tree=True)
@format_option
@pass_env
def checklist(
    env: Environment, peer: str | None, perfsonar: str | None, judging: Judging, fmt: str
) -> int:
    """The DC27 site checklist: each item pass / warn / fail, with evidence and the next step.

    Reads only.  The tuning items judge as `tune audit` does with the same --profile, --rtt,
    --speed and --iface, and every next step acts where the checklist looked (--netns,
    --tree).  Exit 0 when no item fails (warnings allowed: some items are network-side facts
    a host cannot see), 3 when any item fails.
    """
    opts = Options(
        peer=parse_peer(peer) if peer is not None else None,
        perfsonar=check_url(perfsonar) if perfsonar is not None else None,
    )
    prof = judging.load_profile()
    host = make_host(judging.netns, judging.tree, read_only=True)
    result = run_checklist(host, judging, opts, profile=prof)
    emit(env, result.as_dict(), fmt, lambda p: _table(p, result))
    return int(ExitStatus.OK if result.ok else ExitStatus.DRIFT)


def _table(p: Printer, result: Checklist) -> None:

    con = p.console
    peer = f", peer {escape(result.peer)}" if result.peer else ""
    con.print(f"[bold]dtnkit checklist[/]: {escape(result.host)}{peer}")
    rows: list[tuple[str, ...]] = []
    for item in result.items:
        rows.append(
            (
                escape(item.id),
                f"[{STYLE[item.status]}]{item.status}[/]",
                escape(item.summary or "-"),
                escape(item.next or "-"),
            )
        )
    hidden = print_fitted(
        con,
        (
            Col("item", wrap=False),
            Col("status", wrap=False),
            Col("found", least=30),
            Col("next", rank=1, least=24),
        ),
        rows,
    )
    for item in result.items:
        if item.status == "pass":
            continue
        if "next" in hidden and item.next:
            con.print(f"[dim]next[/] {escape(item.id)}: {escape(item.next)}")
    counts = ", ".join(f"{n} {s}" for s, n in result.counts.items() if n)
    verdict = "[green]no item fails[/]" if result.ok else "[red]some items fail[/]"
    con.print(f"{verdict}: {counts} (--format json shows every item's evidence)")
