"""What every command shares: the :class:`~dtnkit.environment.Environment` handed down from
``main`` (click's ``ctx.obj``), and options whose defaults come from it.

Precedence for a setting with a flag: the flag, then the environment variable (read once by
``Environment.from_os``), then the built-in default.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import click

from dtnkit.db.location import Location, parse_location
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.units import parse_duration

#: the help option's names on every command: `-h` as well as `--help`
HELP_NAMES = ("-h", "--help")


def _dash_h(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """A command's click context settings with :data:`HELP_NAMES`.  Every command declares them
    itself, not only `dtnkit` above it, so they hold however the command is reached (a test or
    a program may invoke a subcommand's object directly): click keeps the help option a
    command first makes, and one made without `-h` would refuse it from then on, in that
    process, also under `dtnkit`."""
    return {"help_option_names": list(HELP_NAMES), **(settings or {})}


class CliCommand(click.Command):
    """A dtnkit command (``@click.command(cls=CliCommand)``, or a :class:`CliGroup`'s
    ``.command()``): `-h` is `--help`."""

    def __init__(
        self, name: str | None, context_settings: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(name, _dash_h(context_settings), **kwargs)


class CliGroup(click.Group):
    """A dtnkit command group: `-h` is `--help`, and its ``.command()`` and ``.group()`` make
    :class:`CliCommand` and :class:`CliGroup` objects."""

    command_class = CliCommand
    group_class = type  # a subgroup is of this class too

    def __init__(
        self,
        name: str | None = None,
        commands: Any = None,
        *,
        context_settings: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, commands, context_settings=_dash_h(context_settings), **kwargs)


class LazyGroup(CliGroup):
    """A command group whose commands' modules are imported only when one runs (or for the
    help listing): ``lazy`` maps each command's name to its module and attribute."""

    def __init__(
        self,
        name: str | None = None,
        commands: Any = None,
        *,
        lazy: Mapping[str, tuple[str, str]],
        **kwargs: Any,
    ) -> None:
        super().__init__(name, commands, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.lazy)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return None
        module, attr = self.lazy[cmd_name]
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
F = Callable[..., Any]


def env_of(ctx: click.Context) -> Environment:
    """The environment ``main`` built, or, for a command invoked on its own (tests call
    ``cp.main([...])``, a subprocess runs ``serve()``), one read from the process now."""
    env = ctx.find_object(Environment)
    if env is None:
        env = Environment.from_os()
        if ctx.obj is None:
            ctx.obj = env
    return env


def pass_env(f: Callable[Concatenate[Environment, P], R]) -> Callable[P, R]:
    """Give the command its environment as the first argument (put it nearest the function)."""

    @functools.wraps(f)
    def with_env(*args: P.args, **kwargs: P.kwargs) -> R:
        return f(env_of(click.get_current_context()), *args, **kwargs)

    return with_env


def env_default(
    pick: Callable[[Environment], T],
) -> Callable[[click.Context, click.Parameter, T | None], T]:
    """An option callback: the flag's value when given, else ``pick(environment)``."""

    def resolve(ctx: click.Context, param: click.Parameter, value: T | None) -> T:
        return value if value is not None else pick(env_of(ctx))

    return resolve


def state_dir_option(**attrs: Any) -> Callable[[F], F]:
    """``--state-dir DIR``: flag, else $DTNKIT_STATE_DIR, else /var/lib/dtnkit."""
    return click.option(
        "--state-dir",
        type=click.Path(path_type=Path),
        default=None,
        callback=env_default(lambda env: env.state_dir),
        **attrs,
    )


class DbLocation(click.ParamType[Location, Any]):
    """``--db``: an SQLite file or a ``postgresql://`` URL (:mod:`dtnkit.db.location`)."""

    name = "FILE|URL"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Location:
        return parse_location(value)


def db_option(**attrs: Any) -> Callable[[F], F]:
    """``--db FILE|URL``: flag, else $DTNKIT_DB, else /var/lib/dtnkit/results.sqlite; a
    ``postgresql://`` URL names a PostgreSQL store (its password is never shown)."""

    def pick(env: Environment) -> Location:
        return parse_location(env.results_db)

    attrs.setdefault("metavar", "FILE|URL")
    return click.option(
        "--db", type=DbLocation(), default=None, callback=env_default(pick), **attrs
    )


def split_list(values: tuple[str, ...] | list[str] | str | None, option: str) -> tuple[str, ...]:
    """A repeatable, comma-separated option's values as one tuple, in order, each once:
    ``--group buffers,congestion --group cpu`` -> ("buffers", "congestion", "cpu")."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        items = [item.strip() for item in value.split(",")]
        if not any(items):
            raise BadInput(
                f"empty {option}",
                "it takes names, comma-separated or repeated",
                f"e.g. {option} buffers,congestion",
            )
        out += [item for item in items if item and item not in out]
    return tuple(out)


class Duration(click.ParamType[float, Any]):
    """A duration option: ``5s``, ``2m``, ``1h30m``, ``1500ms`` or whole seconds, read by
    :func:`dtnkit.units.parse_duration` (one parser for every duration flag) -> seconds."""

    name = "duration"

    def __init__(self, lo: float = 0.0, hi: float = 86400.0, *, whole: bool = False) -> None:
        self.lo, self.hi, self.whole = lo, hi, whole

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float | int:
        if isinstance(value, int | float) and not isinstance(value, bool):
            text: str | float = value
        else:
            text = str(value)
        names = sorted(param.opts, key=len) if param is not None else []
        what = names[-1] if names else "duration"  # the long name: --duration, not -t
        seconds = parse_duration(text, what, lo=self.lo, hi=self.hi, whole=self.whole)
        return int(seconds) if self.whole else seconds

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str | None:
        return "DURATION"


#: where ``--wide`` is kept for the run (click's ``ctx.meta`` is shared by a command's contexts)
WIDE_KEY = "dtnkit.wide"


def _keep_wide(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[WIDE_KEY] = True
    return value


def wide_option(f: F) -> F:
    """``--wide``: tables show every column and nothing is wrapped to the terminal's width.
    Not passed to the command: the printer asks :func:`wide_requested`."""
    return click.option(
        "--wide",
        is_flag=True,
        expose_value=False,
        callback=_keep_wide,
        help="Show every column; do not wrap to the terminal's width.",
    )(f)


def wide_requested() -> bool:
    """Whether the command being run was given ``--wide``."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(WIDE_KEY))


# ---- what a host is judged by (dtnkit.tune.judging) ----------------------------------------
