"""The one output path of every command: ``emit(env, document, fmt, table)``.

``--format json`` (or ``cp --json``): stdout holds the JSON document and nothing else.
Otherwise the command's ``table`` writes for people through a :class:`Printer`: plain lines,
or rich tables on a console built only then (JSON never needs one).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from dtnkit.cli.options import wide_option, wide_requested
from dtnkit.environment import Environment

if TYPE_CHECKING:
    from rich.console import Console

F = Callable[..., Any]

FORMATS = ("table", "json")


def format_option(f: F) -> F:
    """``--format table|json``, the option most commands share, and ``--wide`` with it (every
    command that prints for people takes it)."""
    f = wide_option(f)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="json: only JSON on stdout.",
    )(f)


class Printer:
    """Output for people, on the environment's streams."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def echo(self, text: str = "", *, err: bool = False) -> None:
        click.echo(text, file=self.env.stderr if err else self.env.stdout)

    @functools.cached_property
    def console(self) -> Console:
        # rich only for a table a person reads (cp prints plain lines: docs/benchmarks.md,
        # "cp start-up")
        from dtnkit.cli.render import console

        return console(self.env, wide=wide_requested())


Table = Callable[[Printer], None]


def emit(
    env: Environment, document: Any, fmt: str, table: Table | None = None, *, indent: int | None = 2
) -> None:
    """Print ``document`` as JSON when ``fmt`` is json (or there is no ``table``: JSON is the
    command's only form); else let ``table`` write for people."""
    if fmt == "json" or table is None:
        click.echo(json.dumps(document, indent=indent), file=env.stdout)
    else:
        table(Printer(env))


def for_people(env: Environment, fmt: str) -> Printer | None:
    """A printer for what a command shows while it works (a plan, progress), or None when
    stdout must hold only JSON."""
    return None if fmt == "json" else Printer(env)
