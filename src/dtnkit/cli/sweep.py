"""`dtnkit sweep run` and `dtnkit sweep list`: a grid of measurements on a lab path, stored
in the results database (docs/sweep.md)."""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from dtnkit.cli.options import CliGroup, db_option, pass_env, state_dir_option
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.progress import duration, reporter
from dtnkit.cli.render import Col, print_fitted
from dtnkit.cli.sweep_analyze import analyze_cmd, report_cmd
from dtnkit.db.location import Location
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus, NeedsRoot
from dtnkit.lab.path import check_name
from dtnkit.sweep import runner, store
from dtnkit.sweep.grid import load_grid, parse_grid_flags
from dtnkit.tune.apply import sigterm_as_interrupt
from dtnkit.units import format_time


def default_lab_name(run_name: str) -> str:
    """The run's own lab path: ``sw`` + 8 hex digits of (the user behind sudo, the run name),
    so two users or two runs never share (or tear down) each other's path, and a --resume of
    the run finds its path again."""
    user = os.environ.get("SUDO_UID") or str(os.getuid())
    return "sw" + hashlib.sha256(f"{user}:{run_name}".encode()).hexdigest()[:8]


@click.group(cls=CliGroup)
def sweep() -> None:
    """Sweeps: a grid of measurements (RTT x streams x origins x ...) on a lab path."""


def _grid(words: tuple[str, ...]) -> tuple[Any, str, str]:
    """(Grid, its TOML text as stored, the default run name's base) from a grid file or
    ``axis=values`` words."""
    files = [w for w in words if "=" not in w]
    flags = [w for w in words if "=" in w]
    if len(files) > 1:
        raise BadInput(
            f"{len(files)} grid files given",
            "a sweep runs one grid",
            "give one GRID file, or axis=value words",
        )
    if files and flags:
        raise BadInput(
            "a grid file and axis=value words given",
            "a sweep runs one grid",
            f"put {flags[0].split('=')[0]} in {files[0]}, or give only words",
        )
    if not files and not flags:
        raise BadInput(
            "no grid",
            "give a grid file (docs/examples/sweep-grid.toml) or axis=value words",
            "e.g. dtnkit sweep run rtt=5ms streams=1,4",
        )
    if files:
        grid = load_grid(files[0])
        base = grid.name or Path(files[0]).stem
    else:
        grid = parse_grid_flags(flags)
        base = grid.name or "sweep"
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip(".-_")[:40] or "sweep"
    return grid, grid.to_toml(), base


@sweep.command(name="run", context_settings={"ignore_unknown_options": False})
@click.argument("words", nargs=-1, metavar="[GRID] [AXIS=VALUES]...")
@click.option(
    "--name", default=None, help="The run's name (default: the grid's name and the UTC time)."
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue run --name: skip its points stored ok, rerun the failed ones.",
)
@click.option(
    "--lab",
    "lab_name",
    default=None,
    help="The lab path to run on: reused when it exists (with enough sending "
    "hosts), else built [default: swXXXXXXXX, the run's own: from the user "
    "and the run name].",
)
@click.option(
    "--keep-lab/--down-lab",
    "keep_lab",
    default=None,
    help="After the sweep (also after Ctrl-C): leave the lab path up, restored to "
    "the RTT, rate and loss it had, or remove it [default: keep a path that "
    "existed, remove one the sweep built].",
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "netem", "nfqueue"]),
    default="auto",
    show_default=True,
    help="The delay backend of a lab path the sweep builds.",
)
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where source files and per-point files go (removed at the end) "
    "[default: /dev/shm/dtnkit-sweep-NAME-RANDOM, one per run, else under "
    "--state-dir].",
)
@db_option(
    show_default="/var/lib/dtnkit/results.sqlite or $DTNKIT_DB", help="The results store (SQLite)."
)
@state_dir_option(help="dtnkit's state (profile snapshots of the points).")
@format_option
@pass_env
def run(
    env: Environment,
    words: tuple[str, ...],
    name: str | None,
    resume: bool,
    lab_name: str | None,
    keep_lab: bool | None,
    backend: str,
    workdir: Path | None,
    db: Location,
    state_dir: Path,
    fmt: str,
) -> int:
    """Run a grid: each point on the lab path, stored in the results database.

    The grid is a TOML file (docs/sweep.md) or axis=values words such as
    `rtt=5ms,100ms streams=1,4,16 tool=iperf3 duration=10s`.  A failed point is stored
    with its error and the sweep goes on (exit status 1 at the end).  Ctrl-C stops every
    process the sweep started, restores profiles, stores nothing of the point in flight and
    leaves the lab path as --keep-lab/--down-lab say; `--resume --name RUN` continues.
    """
    if resume and name is None:
        raise BadInput(
            "--resume needs --name",
            "it continues one stored run",
            "see `dtnkit sweep list`, then --resume --name RUN",
        )
    if name is not None:
        store.check_run_name(name)
    if lab_name is not None:
        check_name(lab_name)
    grid, text, base = _grid(words)
    run_name = name or f"{base}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    store.check_run_name(run_name)
    lab_name = lab_name or default_lab_name(run_name)
    if os.geteuid() != 0:
        raise NeedsRoot(
            "dtnkit sweep run needs root",
            "it builds lab paths (network namespaces) and cgroups",
            "run it with sudo",
        )
    opts = runner.SweepOptions(
        name=run_name,
        db_path=db,
        lab_name=lab_name,
        lab_state_root=env.lab_state_root,
        state_dir=state_dir,
        workdir=workdir or runner.default_workdir(run_name, state_dir),
        resume=resume,
        keep_lab=keep_lab,
        backend=backend,
    )
    sweep_run = runner.Sweep(grid, text, opts, progress=reporter(env, fmt))
    with sigterm_as_interrupt():
        summary = sweep_run.run()
    doc = summary.as_dict()
    emit(env, doc, fmt, lambda p: _summary(p, doc))
    return int(ExitStatus.ERROR) if summary.failed else 0


def _summary(p: Printer, doc: dict[str, Any]) -> None:

    con = p.console
    est = doc.get("estimate") or {}
    said = (
        f" (estimated {duration(est['seconds'])}, {duration(est['low_s'])} to "
        f"{duration(est['high_s'])})"
        if est.get("seconds") is not None
        else ""
    )
    con.print(
        f"[bold]sweep {escape(doc['name'])}[/]: {doc['ok']} ok, {doc['failed']} failed"
        f", {doc['skipped']} skipped (already stored) of {doc['total']} points in "
        f"{duration(doc['elapsed_s'])}{said}"
    )
    for f in doc["failures"][:10]:
        con.print(f"  failed {f['id']}: {escape(f['error'])}", soft_wrap=True)  # an error: whole
    if len(doc["failures"]) > 10:
        con.print(f"  ... and {len(doc['failures']) - 10} more (--format json lists all)")
    con.print(
        f"lab path {escape(doc['lab_name'])}: {doc['lab'] or 'not used'}; "
        f"stored in {escape(doc['db'])}"
    )
    con.print(f"[dim]next: `dtnkit sweep analyze {escape(doc['name'])}`[/]")


@sweep.command(name="list")
@db_option(
    show_default="/var/lib/dtnkit/results.sqlite or $DTNKIT_DB", help="The results store (SQLite)."
)
@format_option
@pass_env
def list_runs(env: Environment, db: Location, fmt: str) -> int:
    """The stored sweep runs, newest first."""
    runs = store.list_runs(db)
    doc = [{k: v for k, v in r.as_dict().items() if k != "grid_toml"} for r in runs]
    emit(env, doc, fmt, lambda p: _runs(p, runs))
    return 0


def _runs(p: Printer, runs: list[Any]) -> None:

    con = p.console
    if not runs:
        con.print("no sweep runs")
        return
    rows = [
        (
            escape(r.name),
            r.status,
            f"{r.points_ok}/{r.points_total}",
            str(r.points_failed),
            format_time(r.created),
            escape(str(r.environment.get("lab", {}).get("name", ""))),
        )
        for r in runs
    ]
    print_fitted(
        con,
        (
            Col("run", wrap=False),
            Col("status", wrap=False),
            Col("ok", justify="right", wrap=False),
            Col("failed", justify="right", wrap=False, rank=1),
            Col("created", rank=2, wrap=False),
            Col("lab", rank=3),
        ),
        rows,
    )


sweep.add_command(analyze_cmd)
sweep.add_command(report_cmd)
