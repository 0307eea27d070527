"""`dtnkit checklist`: the DC27 site checklist and the troubleshooting checks.  Reads only."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dtnkit.cli.options import pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

if TYPE_CHECKING:
    from dtnkit.diagnose.checklist import Checklist

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


@click.command()
@click.option("--peer", metavar="HOST",
              help="Another DTN: test IPv6 reach and the path MTU to it (a name or an IP).")
@click.option("--perfsonar", metavar="URL",
              help="The site's perfSONAR toolkit, e.g. https://ps.example.org (its "
                   "pScheduler API must answer).")
@click.option("--iface", "ifaces", multiple=True, metavar="IF",
              help="The data interfaces (default: as tune audit picks them).")
@click.option("--speed", metavar="SPEED",
              help="Link speed for the buffer items when the NIC reports none, e.g. 100gbit.")
@click.option("--profile", default="dtn", show_default=True,
              help="Tuning profile the host-tuned item audits against.")
@click.option("--netns", metavar="NAME", help="Check inside this network namespace (ip netns).")
@click.option("--tree", type=click.Path(path_type=Path), metavar="DIR",
              help="Read a captured host tree (proc/, sys/, etc/, cmd/) instead of this host.")
@format_option
@pass_env
def checklist(env: Environment, peer: str | None, perfsonar: str | None,
              ifaces: tuple[str, ...], speed: str | None, profile: str, netns: str | None,
              tree: Path | None, fmt: str) -> int:
    """The DC27 site checklist: each item pass / warn / fail, with evidence and the next step.

    Reads only.  Exit 0 when no item fails (warnings allowed: some items are network-side
    facts a host cannot see), 3 when any item fails.
    """
    from dtnkit.cli.tune import make_host
    from dtnkit.diagnose import checklist as core
    from dtnkit.diagnose.sitecfg import check_url, parse_peer
    from dtnkit.tune.profile import USER_PROFILE_DIR, load_profile
    from dtnkit.tune.validation import check_profile
    from dtnkit.units import parse_speed

    opts = core.Options(
        peer=parse_peer(peer) if peer is not None else None,
        ifaces=ifaces,
        speed_mbps=None if speed is None else parse_speed(speed),
        perfsonar=check_url(perfsonar) if perfsonar is not None else None,
        target=" ".join(shlex.quote(a) for a in
                        (["--netns", netns] if netns else
                         ["--tree", str(tree)] if tree is not None else [])),
    )
    prof = load_profile(profile, (USER_PROFILE_DIR,))
    check_profile(prof)
    host = make_host(netns, tree, read_only=True)
    result = core.run_checklist(host, prof, opts)
    emit(env, result.as_dict(), fmt, lambda p: _table(p, result))
    return int(ExitStatus.OK if result.ok else ExitStatus.DRIFT)


def _table(p: Printer, result: Checklist) -> None:
    from rich.markup import escape

    from dtnkit.cli.render import Col, print_fitted

    con = p.console
    peer = f", peer {escape(result.peer)}" if result.peer else ""
    con.print(f"[bold]dtnkit checklist[/]: {escape(result.host)}{peer}")
    rows: list[tuple[str, ...]] = []
    for item in result.items:
        rows.append((escape(item.id), f"[{STYLE[item.status]}]{item.status}[/]",
                     escape(item.summary or "-"), escape(item.next or "-")))
    hidden = print_fitted(con, (Col("item", wrap=False), Col("status", wrap=False),
                                Col("found", least=30), Col("next", rank=1, least=24)), rows)
    for item in result.items:
        if item.status == "pass":
            continue
        if "next" in hidden and item.next:
            con.print(f"[dim]next[/] {escape(item.id)}: {escape(item.next)}")
    counts = ", ".join(f"{n} {s}" for s, n in result.counts.items() if n)
    verdict = "[green]no item fails[/]" if result.ok else "[red]some items fail[/]"
    con.print(f"{verdict}: {counts} (--format json shows every item's evidence)")
