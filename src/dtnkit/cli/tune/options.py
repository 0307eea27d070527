"""The flags the ``dtnkit tune`` commands share: the state directory, the selection of
groups and judging, ``--allow-unsafe`` and ``--wait``."""

from __future__ import annotations

import click

from dtnkit.cli.judging_options import group_option, judging_options
from dtnkit.cli.options import F, state_dir_option
from dtnkit.errors import BadInput
from dtnkit.tune.profile import KNOWN_KEYS
from dtnkit.tune.registry import tunable_for_key
from dtnkit.units import parse_duration

#: the longest --wait for the lock of apply and restore
MAX_WAIT_S = 600.0


def state_option(f: F) -> F:
    return state_dir_option(
        metavar="DIR",
        show_default="/var/lib/dtnkit or $DTNKIT_STATE_DIR",
        help="Where snapshots live.",
    )(f)


def selection_options(f: F) -> F:
    """--group and the judging flags (profile, RTT, speed, interfaces, --exact, the scope):
    the command gets ``groups`` and one ``judging``."""
    f = judging_options(iface=True, exact=True, netns=True, tree=True)(f)
    return group_option()(f)


def unsafe_option(f: F) -> F:
    return click.option(
        "--allow-unsafe",
        "allow_unsafe",
        multiple=True,
        metavar="KEY",
        help="Write this key's value even though it weakens security or breaks connectivity "
        "(docs/profiles.md lists them), e.g. sysctl/net.ipv4.tcp_syncookies or "
        "link/*/mtu; repeatable.",
    )(f)


def check_allow_unsafe(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Each --allow-unsafe KEY names a setting (a profile key with * for its device, or one
    key): BadInput otherwise."""
    for key in keys:
        if "*" in key:
            if key not in KNOWN_KEYS:
                raise BadInput(
                    f"--allow-unsafe {key!r} names no setting",
                    "a pattern must be a profile key such as link/*/mtu",
                    "see docs/profiles.md for the keys",
                )
        else:
            tunable_for_key(key)
    return keys


def wait_option(f: F) -> F:
    return click.option(
        "--wait",
        "wait",
        default="0s",
        show_default=True,
        metavar="DURATION",
        help="If another apply or restore holds this namespace's lock, wait up to this long "
        f"(at most {MAX_WAIT_S:g}s) instead of exiting 8 at once.",
    )(f)


def parse_wait(text: str) -> float:
    """--wait as seconds (a bare number is seconds, as every duration flag)."""
    return parse_duration(text, "--wait", lo=0.0, hi=MAX_WAIT_S)


def group_flags(groups: tuple[str, ...]) -> list[str]:
    return ["--group", ",".join(groups)] if groups else []
