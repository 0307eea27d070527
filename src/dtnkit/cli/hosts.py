"""Which host a command works on: ``--netns NAME`` or ``--tree DIR``, and the
:class:`~dtnkit.host.host.Host` they make (tune, checklist, probe, diagnose, experiment)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from dtnkit.cli.options import F
from dtnkit.errors import BadInput
from dtnkit.host.host import Host
from dtnkit.host.sysctl_scope import PROBE

_NETNS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def host_options(f: F) -> F:
    f = click.option(
        "--netns", metavar="NAME", help="Work inside this network namespace (ip netns)."
    )(f)
    f = click.option(
        "--tree",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help="Read a captured host tree (proc/, sys/, cmd/) instead of this host.",
    )(f)
    return f


def make_host(netns: str | None, tree: Path | None, *, read_only: bool = False) -> Host:
    if tree is not None:
        if netns:
            raise BadInput("--tree and --netns cannot be combined", "", "pick one")
        return Host.from_tree(tree, read_only=read_only)
    if netns is not None:
        if not _NETNS.match(netns):
            raise BadInput(
                f"bad namespace name {netns!r}",
                "names are letters, digits, '.', '_' and '-'",
                "see `ip netns list`",
            )
        if not Path("/run/netns", netns).exists():
            raise BadInput(
                f"no network namespace {netns!r}", "it is not in /run/netns", "see `ip netns list`"
            )
        PROBE.warm()  # the sysctl scope probe's child starts beside the namespace's helper
    return Host.live(netns, read_only=read_only)
