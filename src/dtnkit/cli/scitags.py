"""`dtnkit scitags`: the SciTags registry this host resolves names with (list, refresh)."""

from __future__ import annotations

import click

from dtnkit.cli.options import CliGroup, pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.render import Col, print_fitted
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.transfer.client.scitags import DEFAULT_URL, STATE_NAME, load, refresh
from dtnkit.transfer.wire.scitags import tag


@click.group(cls=CliGroup)
def scitags() -> None:
    """The SciTags registry of experiment and activity ids (scitags.org api.json) that
    `cp --experiment/--activity` and `serve --experiment/--activity` resolve names with:
    the copy `refresh` kept in the state directory, else the snapshot shipped with dtnkit."""


@scitags.command("list")
@click.option(
    "--registry",
    "source",
    default=None,
    metavar="FILE|URL",
    help="List this registry instead of the one in use.",
)
@click.option(
    "--experiment", default=None, metavar="NAME", help="Only this experiment's activities."
)
@format_option
@pass_env
def list_(env: Environment, source: str | None, experiment: str | None, fmt: str = "table") -> int:
    """Experiments and activities with their ids and the tag (expId << 6 | actId)."""
    registry = load(source, env.state_dir)
    exps = registry.experiments
    if experiment is not None:
        try:
            exps = (registry.experiment(experiment),)
        except KeyError:
            raise BadInput(
                f"--experiment {experiment[:80]}",
                "is not in the registry",
                "run `dtnkit scitags list` for the names",
            ) from None
    rows = [
        {
            "experiment": e.name,
            "experiment_id": e.id,
            "activity": name,
            "activity_id": act,
            "scitag": tag(e.id, act),
        }
        for e in exps
        for name, act in e.activities.items()
    ]
    doc = {"source": registry.source, "modified": registry.modified, "activities": rows}

    def table(p: Printer) -> None:
        p.echo(f"registry: {registry.source} (modified {registry.modified or '-'})")
        print_fitted(
            p.console,
            [
                Col("EXPERIMENT", wrap=False),
                Col("ID", justify="right"),
                Col("ACTIVITY"),
                Col("ID", justify="right"),
                Col("SCITAG", justify="right"),
            ],
            [
                [
                    str(r["experiment"]),
                    str(r["experiment_id"]),
                    str(r["activity"]),
                    str(r["activity_id"]),
                    str(r["scitag"]),
                ]
                for r in rows
            ],
        )

    emit(env, doc, fmt, table)
    return 0


@scitags.command(name="refresh")
@click.argument("source", required=False, metavar="[FILE|URL]")
@format_option
@pass_env
def refresh_cmd(env: Environment, source: str | None, fmt: str = "table") -> int:
    """Fetch the registry from SOURCE (default https://www.scitags.org/api.json), check it
    and keep it in the state directory (scitags-api.json, replaced atomically): names
    resolve with it from then on.  A registry that does not check leaves the kept one."""
    where = source or DEFAULT_URL
    registry = refresh(where, env.state_dir)
    kept = env.state_dir / STATE_NAME
    doc = {
        "source": where,
        "kept": str(kept),
        "modified": registry.modified,
        "experiments": len(registry.experiments),
        "activities": sum(len(e.activities) for e in registry.experiments),
    }
    emit(
        env,
        doc,
        fmt,
        lambda p: p.echo(
            f"kept the SciTags registry of {where} in {kept}: {doc['experiments']} experiments, "
            f"{doc['activities']} activities (modified {registry.modified or '-'})"
        ),
    )
    return 0
