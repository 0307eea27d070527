"""The options of the commands that judge a host against a tuning profile (tune, probe,
diagnose, experiment, exporter, metrics, checklist): ``--group`` and the judging flags,
declared once.  Apart from :mod:`dtnkit.cli.options` because they need tune's profiles, which
the commands that judge nothing (cp, serve) do not."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from dtnkit.cli.options import split_list
from dtnkit.tune.judging import DEFAULT_PROFILE, DEFAULT_RTT_MS, Judging
from dtnkit.tune.profile import GROUPS
from dtnkit.units import parse_ms, parse_speed

F = Callable[..., Any]


def group_option(*, required: bool = False, help: str | None = None) -> Callable[[F], F]:
    """``--group G`` (repeatable and comma-separated; ``--groups`` is the same option): the
    one declaration every command that selects tuning groups uses.  The value is a tuple."""

    def split(
        ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
    ) -> tuple[str, ...]:
        return split_list(value, "--group")

    return click.option(
        "--group",
        "--groups",
        "groups",
        multiple=True,
        metavar="GROUP[,GROUP...]",
        required=required,
        callback=split,
        help=help
        or f"Only these groups (repeat it, or separate with commas): {', '.join(GROUPS)}.",
    )


_JUDGING_KEYS = ("profile", "profile_dirs", "rtt", "speed", "ifaces", "exact", "tree")


def judging_options(
    *, iface: bool = True, exact: bool = False, netns: bool = True, tree: bool = False
) -> Callable[[F], F]:
    """The flags every command that judges a host takes, declared once: ``--profile``,
    ``--profile-dir``, ``--rtt``, ``--speed``, and where they apply ``--iface``, ``--exact``,
    ``--netns``, ``--tree``.  The command gets one ``judging`` argument
    (:class:`~dtnkit.tune.judging.Judging`), parsed once, bad values refused (exit 9) before
    anything runs.  ``netns=False``: the command declares ``--netns`` itself (its help says
    what it does there); its value still goes into the judging and on to the command."""
    options: list[Callable[[F], F]] = [
        click.option(
            "--profile",
            default=DEFAULT_PROFILE,
            show_default=True,
            help="Profile name (dtn, measurement, or one in --profile-dir) or a path.",
        ),
        click.option(
            "--profile-dir",
            "profile_dirs",
            type=click.Path(path_type=Path),
            multiple=True,
            metavar="DIR",
            help="Directory of user profiles (default /etc/dtnkit/profiles).",
        ),
        click.option(
            "--rtt",
            default=f"{DEFAULT_RTT_MS:g}ms",
            show_default=True,
            help="Longest RTT the host must serve, e.g. 150ms (sizes the buffers).",
        ),
        click.option(
            "--speed",
            "speed",
            metavar="SPEED",
            help="Size every speed-dependent item for this link speed, e.g. 25gbit, "
            "100G, 10000mbit (a bare number is Gbit/s; at most 1000).",
        ),
    ]
    if iface:
        options.append(
            click.option(
                "--iface",
                "ifaces",
                multiple=True,
                metavar="IF",
                help="Only these interfaces (a bond or VLAN means its members).",
            )
        )
    if exact:
        options.append(
            click.option(
                "--exact",
                is_flag=True,
                help="Flag and set values above the recommendation too (not raise-only).",
            )
        )
    if netns:
        options.append(
            click.option(
                "--netns", metavar="NAME", help="Work inside this network namespace (ip netns)."
            )
        )
    if tree:
        options.append(
            click.option(
                "--tree",
                type=click.Path(path_type=Path),
                metavar="DIR",
                help="Read a captured host tree (proc/, sys/, cmd/) instead of this host.",
            )
        )

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
                netns=ns,
                tree=own.get("tree"),
            )
            return f(*args, **kwargs)

        out: F = judged
        for opt in reversed(options):
            out = opt(out)
        return out

    return deco
