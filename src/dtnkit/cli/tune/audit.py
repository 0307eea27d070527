"""`dtnkit tune audit`: compare this host's settings with a profile; reads only."""

from __future__ import annotations

import click

from dtnkit.cli.hosts import make_host
from dtnkit.cli.options import CliCommand, pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.tune.options import group_flags, selection_options
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.tune.judging import Judging


@click.command(cls=CliCommand)
@selection_options
@format_option
@pass_env
def audit(env: Environment, groups: tuple[str, ...], judging: Judging, fmt: str) -> int:
    """Compare current settings with a profile.  Reads only.

    Exit 0 when every selected item complies, 3 when any differs or is unknown (the output
    says what to give, e.g. --speed for a NIC that reports none).
    """
    host = make_host(judging.netns, judging.tree, read_only=True)  # a namespace's helper
    result = judging.audit(host, judging.load_profile(), groups)  # starts while these load

    def table(p: Printer) -> None:
        # rich only for a table a person reads (a JSON audit draws none), as cli/output.py
        from dtnkit.cli.tune.audit_table import audit_table

        nxt = judging.command("tune", "apply", "--dry-run", extra=group_flags(groups))
        audit_table(p.console, result, next_cmd=nxt)

    emit(env, result.as_dict(), fmt, table)
    return int(ExitStatus.OK if result.compliant else ExitStatus.DRIFT)
