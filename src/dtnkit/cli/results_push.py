"""`dtnkit results push`: a host's results into the fleet's shared store."""

from __future__ import annotations

import socket

import click

from dtnkit.cli.options import CliCommand, DbLocation, db_option, pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.progress import reporter
from dtnkit.cli.render import Col, print_fitted
from dtnkit.db.location import Location
from dtnkit.db.push import TABLES
from dtnkit.db.push import push as run
from dtnkit.environment import Environment
from dtnkit.units import format_duration


@click.command(cls=CliCommand)
@click.argument("target", metavar="URL", type=DbLocation())
@click.option(
    "--host",
    "host",
    default=None,
    metavar="NAME",
    help="The name recorded as the rows' origin host (default: this host's name).",
)
@format_option
@db_option(
    help="This host's store to push from (default $DTNKIT_DB or /var/lib/dtnkit/results.sqlite)."
)
@pass_env
def push(env: Environment, target: Location, host: str | None, fmt: str, db: Location) -> int:
    """Copy this host's results into a shared store (a postgresql:// URL).

    Probe results, experiments, sweep runs and their points; each row keeps where it came
    from (this store's ID, its id here, the host).  Pushing again adds only what is new (a
    run or an experiment that changed is rewritten); one transaction, so a failed push
    changes nothing.  Put the password in ~/.pgpass or $PGPASSWORD, not in the URL.
    """

    progress = reporter(env, fmt)

    due: dict[str, int] = {}

    def say(table: str, done: int, total: int) -> None:
        """A line when a table starts, at each tenth of it, and at its end."""
        if 0 < done < total and done < due.get(table, 0):
            return
        due[table] = done + max(1, total // 10)
        progress.step(f"{table}: {done:,} of {total:,} rows", TABLES.index(table) + 1, len(TABLES))

    summary = run(db, target, host=host or socket.gethostname(), progress=say)
    doc = summary.as_dict()

    def table(p: Printer) -> None:
        # unwrapped: the store's path and the target are copied whole
        p.echo(
            f"pushed {doc['source']!s} to {doc['target']!s} as {doc['host']!s} in "
            f"{format_duration(doc['elapsed_s'])}"
        )
        print_fitted(
            p.console,
            (
                Col("table", wrap=False),
                Col("read", justify="right"),
                Col("new", justify="right"),
                Col("present", justify="right"),
                Col("conflicts", justify="right"),
            ),
            [
                (
                    name,
                    f"{c['read']:,}",
                    f"{c['new']:,}",
                    f"{c['present']:,}",
                    f"{c['conflicts']:,}",
                )
                for name, c in doc["tables"].items()
            ],
        )
        for c in doc["conflicts"]:
            p.echo(
                f"dtnkit: warning: {c['table']} {c['key']!r} is in the target from "
                "another store: not pushed (names must differ between hosts)",
                err=True,
            )

    emit(env, doc, fmt, table)
    return 0
