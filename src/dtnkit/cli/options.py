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

from dtnkit.db.location import Location, parse_location
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.tune.judging import DEFAULT_PROFILE, DEFAULT_RTT_MS, Judging
from dtnkit.tune.profile import GROUPS
from dtnkit.units import parse_duration, parse_ms, parse_speed

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
    return click.option("--state-dir", type=click.Path(path_type=Path), default=None,
                        callback=env_default(lambda env: env.state_dir), **attrs)


class DbLocation(click.ParamType[Location, Any]):
    """``--db``: an SQLite file or a ``postgresql://`` URL (:mod:`dtnkit.db.location`)."""

    name = "FILE|URL"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Location:
        return parse_location(value)


def db_option(**attrs: Any) -> Callable[[F], F]:
    """``--db FILE|URL``: flag, else $DTNKIT_DB, else /var/lib/dtnkit/results.sqlite; a
    ``postgresql://`` URL names a PostgreSQL store (its password is never shown)."""

    def pick(env: Environment) -> Location:
        return parse_location(env.results_db)

    attrs.setdefault("metavar", "FILE|URL")
    return click.option("--db", type=DbLocation(), default=None, callback=env_default(pick),
                        **attrs)


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
            raise BadInput(f"empty {option}", "it takes names, comma-separated or repeated",
                           f"e.g. {option} buffers,congestion")
        out += [item for item in items if item and item not in out]
    return tuple(out)


def group_option(*, required: bool = False, help: str | None = None) -> Callable[[F], F]:
    """``--group G`` (repeatable and comma-separated; ``--groups`` is the same option): the
    one declaration every command that selects tuning groups uses.  The value is a tuple."""
    def split(ctx: click.Context, param: click.Parameter,
              value: tuple[str, ...]) -> tuple[str, ...]:
        return split_list(value, "--group")

    return click.option(
        "--group", "--groups", "groups", multiple=True, metavar="GROUP[,GROUP...]",
        required=required, callback=split,
        help=help or f"Only these groups (repeat it, or separate with commas): "
                     f"{', '.join(GROUPS)}.")


class Duration(click.ParamType[float, Any]):
    """A duration option: ``5s``, ``2m``, ``1h30m``, ``1500ms`` or whole seconds, read by
    :func:`dtnkit.units.parse_duration` (one parser for every duration flag) -> seconds."""

    name = "duration"

    def __init__(self, lo: float = 0.0, hi: float = 86400.0, *, whole: bool = False) -> None:
        self.lo, self.hi, self.whole = lo, hi, whole

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float | int:
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
    return click.option("--wide", is_flag=True, expose_value=False, callback=_keep_wide,
                        help="Show every column; do not wrap to the terminal's width.")(f)


def wide_requested() -> bool:
    """Whether the command being run was given ``--wide``."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(WIDE_KEY))


# ---- what a host is judged by (dtnkit.tune.judging) ----------------------------------------

_JUDGING_KEYS = ("profile", "profile_dirs", "rtt", "speed", "ifaces", "exact", "tree")


def judging_options(*, iface: bool = True, exact: bool = False, netns: bool = True,
                    tree: bool = False) -> Callable[[F], F]:
    """The flags every command that judges a host takes, declared once: ``--profile``,
    ``--profile-dir``, ``--rtt``, ``--speed``, and where they apply ``--iface``, ``--exact``,
    ``--netns``, ``--tree``.  The command gets one ``judging`` argument
    (:class:`~dtnkit.tune.judging.Judging`), parsed once, bad values refused (exit 9) before
    anything runs.  ``netns=False``: the command declares ``--netns`` itself (its help says
    what it does there); its value still goes into the judging and on to the command."""
    options: list[Callable[[F], F]] = [
        click.option("--profile", default=DEFAULT_PROFILE, show_default=True,
                     help="Profile name (dtn, measurement, or one in --profile-dir) or a path."),
        click.option("--profile-dir", "profile_dirs", type=click.Path(path_type=Path),
                     multiple=True, metavar="DIR",
                     help="Directory of user profiles (default /etc/dtnkit/profiles)."),
        click.option("--rtt", default=f"{DEFAULT_RTT_MS:g}ms", show_default=True,
                     help="Longest RTT the host must serve, e.g. 150ms (sizes the buffers)."),
        click.option("--speed", "speed", metavar="SPEED",
                     help="Size every speed-dependent item for this link speed, e.g. 25gbit, "
                          "100G, 10000mbit (a bare number is Gbit/s; at most 1000)."),
    ]
    if iface:
        options.append(click.option(
            "--iface", "ifaces", multiple=True, metavar="IF",
            help="Only these interfaces (a bond or VLAN means its members)."))
    if exact:
        options.append(click.option(
            "--exact", is_flag=True,
            help="Flag and set values above the recommendation too (not raise-only)."))
    if netns:
        options.append(click.option("--netns", metavar="NAME",
                                    help="Work inside this network namespace (ip netns)."))
    if tree:
        options.append(click.option(
            "--tree", type=click.Path(path_type=Path), metavar="DIR",
            help="Read a captured host tree (proc/, sys/, cmd/) instead of this host."))

    def deco(f: F) -> F:
        @functools.wraps(f)
        def judged(*args: Any, **kwargs: Any) -> Any:
            own = {k: kwargs.pop(k) for k in _JUDGING_KEYS if k in kwargs}
            ns = kwargs.pop("netns", None) if netns else kwargs.get("netns")
            speed = own.get("speed")
            kwargs["judging"] = Judging(
                profile=own.get("profile", DEFAULT_PROFILE),
                profile_dirs=tuple(own.get("profile_dirs", ())),
                rtt_ms=parse_ms(own.get("rtt", "100ms"), "RTT", lo=0.1, hi=10000.0),
                speed_mbps=None if speed is None else parse_speed(speed),
                ifaces=tuple(own.get("ifaces", ())),
                exact=bool(own.get("exact", False)),
                netns=ns, tree=own.get("tree"))
            return f(*args, **kwargs)

        out: F = judged
        for opt in reversed(options):
            out = opt(out)
        return out

    return deco
