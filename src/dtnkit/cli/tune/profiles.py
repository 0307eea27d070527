"""`dtnkit tune profiles`: the shipped and user profiles, each shown after its includes are
merged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dtnkit.cli.options import CliCommand, pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.tune import tables
from dtnkit.environment import Environment
from dtnkit.tune.profile import USER_PROFILE_DIR, load_profile, shipped_names
from dtnkit.tune.validation import check_profile


def _profile(name: str, dirs: tuple[Path, ...]) -> Any:
    prof = load_profile(name, dirs or (USER_PROFILE_DIR,))
    check_profile(prof)  # `tune profiles NAME` shows only what apply would accept
    return prof


@click.command(cls=CliCommand)
@click.argument("name", required=False)
@click.option("--profile-dir", type=click.Path(path_type=Path), multiple=True)
@format_option
@pass_env
def profiles(env: Environment, name: str | None, profile_dir: tuple[Path, ...], fmt: str) -> int:
    """List profiles, or show one after includes are merged."""
    if name is None:
        names = shipped_names()

        def listing(p: Printer) -> None:
            for n in names:
                p.console.print(f"[bold]{n}[/]: {load_profile(n, profile_dir).description}")

        emit(env, names, fmt, listing, indent=None)
        return 0
    prof = _profile(name, profile_dir)
    emit(
        env,
        {
            "name": prof.name,
            "description": prof.description,
            "files": list(prof.files),
            "params": prof.params,
            "items": {
                k: {
                    "group": s.group,
                    "value": s.value,
                    "tiers": s.tiers,
                    "rule": s.rule,
                    "mode": s.mode,
                    "apply": s.apply,
                    "source": s.source,
                }
                for k, s in prof.items.items()
            },
        },
        fmt,
        lambda p: tables.profile(p.console, prof),
    )
    return 0
