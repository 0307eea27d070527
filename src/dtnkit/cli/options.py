"""What every command shares: the :class:`~dtnkit.environment.Environment` handed down from
``main`` (click's ``ctx.obj``), and options whose defaults come from it.

Precedence for a setting with a flag: the flag, then the environment variable (read once by
``Environment.from_os``), then the built-in default.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import click

from dtnkit.environment import Environment

P = ParamSpec("P")
R = TypeVar("R")
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
    pick: Callable[[Environment], Path],
) -> Callable[[click.Context, click.Parameter, Path | None], Path]:
    """An option callback: the flag's value when given, else ``pick(environment)``."""

    def resolve(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path:
        return value if value is not None else pick(env_of(ctx))

    return resolve


def state_dir_option(**attrs: Any) -> Callable[[F], F]:
    """``--state-dir DIR``: flag, else $DTNKIT_STATE_DIR, else /var/lib/dtnkit."""
    return click.option("--state-dir", type=click.Path(path_type=Path), default=None,
                        callback=env_default(lambda env: env.state_dir), **attrs)


def db_option(**attrs: Any) -> Callable[[F], F]:
    """``--db FILE``: flag, else $DTNKIT_DB, else /var/lib/dtnkit/results.sqlite."""
    return click.option("--db", type=click.Path(path_type=Path), default=None,
                        callback=env_default(lambda env: env.results_db), **attrs)


#: where ``--wide`` is kept for the run (click's ``ctx.meta`` is shared by a command's contexts)
WIDE_KEY = "dtnkit.wide"


def _keep_wide(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[WIDE_KEY] = True
    return value


def wide_option(f: F) -> F:
    """``--wide``: tables show every column and nothing is wrapped to the terminal's width.
    Not passed to the command: the printer asks :func:`wide_requested`."""
    return click.option("--wide", is_flag=True, expose_value=False, callback=_keep_wide,
                        help="Show every column; do not wrap to the terminal's width.")(f)


def wide_requested() -> bool:
    """Whether the command being run was given ``--wide``."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(WIDE_KEY))
