"""`dtnkit tune`: audit, apply, save, list, show, diff, restore, delete, profiles.

Each command's module is imported only when it runs (or for the help listing), as
:mod:`dtnkit.cli.main` does for the top-level commands: an audit does not load what apply,
the snapshots or the results store need."""

from __future__ import annotations

import click

from dtnkit.cli.options import LazyGroup

#: command -> (module, attribute)
COMMANDS: dict[str, tuple[str, str]] = {
    "apply": ("dtnkit.cli.tune.writes", "apply_cmd"),
    "audit": ("dtnkit.cli.tune.audit", "audit"),
    "delete": ("dtnkit.cli.tune.snapshots", "delete"),
    "diff": ("dtnkit.cli.tune.snapshots", "diff_cmd"),
    "list": ("dtnkit.cli.tune.snapshots", "list_cmd"),
    "profiles": ("dtnkit.cli.tune.profiles", "profiles"),
    "restore": ("dtnkit.cli.tune.writes", "restore_cmd"),
    "save": ("dtnkit.cli.tune.snapshots", "save"),
    "show": ("dtnkit.cli.tune.snapshots", "show"),
}


@click.group(cls=LazyGroup, lazy=COMMANDS)
def tune() -> None:
    """Audit and tune host settings, with snapshots to restore them."""
