"""Make applied settings survive a reboot: sysctl.d for sysctls, a udev rule per interface.

A udev rule (not a oneshot unit with a fixed list) re-applies per-interface settings whenever
the NIC appears, so hot-plug and renames are covered.  The files' previous content is kept in
the baseline snapshot, so restore removes or reverts them.

:func:`write` takes values (key -> value) and asks each key's kind how it persists: a sysctl
its ``name = value`` line, an interface setting the same commands apply runs
(:meth:`Tunable.boot_commands`).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections.abc import Mapping

from dtnkit.errors import DtnkitError
from dtnkit.host.host import Host
from dtnkit.tune.kinds.base import Argv, Value
from dtnkit.tune.kinds.sysctl import SysctlTunable
from dtnkit.tune.registry import tunable_for_key

SYSCTL_FILE = "/etc/sysctl.d/90-dtnkit.conf"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")
UDEV_FILE = "/etc/udev/rules.d/90-dtnkit.rules"
FILES = (SYSCTL_FILE, UDEV_FILE)


def current_files(host: Host) -> dict[str, str | None]:
    return {path: host.read(path) for path in FILES}


def restore_files(host: Host, files: dict[str, str | None]) -> None:
    for path, content in files.items():
        if path not in FILES:
            continue  # a snapshot never names other files; refuse to touch them
        if content is None:
            host.remove(path)
        else:
            host.write(path, content)


def render_sysctl(origin: str, values: dict[str, str]) -> str:
    """The sysctl.d file; ``origin`` says what chose the values (profile and RTT)."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    lines = [
        f"# Written by dtnkit tune apply --persist ({origin}) at {now}.",
        "# `dtnkit tune restore` removes or reverts this file. If TuneD runs with",
        "# reapply_sysctl=1 (its default) it re-applies /etc/sysctl.d after its own profile.",
    ]
    lines += [f"{key} = {value}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def render_udev(commands: dict[str, list[Argv]]) -> str:
    lines = ["# Written by dtnkit tune apply --persist; `dtnkit tune restore` removes it."]
    for dev, cmds in commands.items():
        if not _SAFE_NAME.match(dev):
            raise DtnkitError(
                f"cannot persist settings of interface {dev!r}",
                "its name has characters a udev rule cannot hold safely",
                "rename the interface, or apply without --persist",
            )
        for argv in cmds:
            run = " ".join(shlex.quote(a) for a in argv)
            lines.append(f'ACTION=="add", SUBSYSTEM=="net", KERNEL=="{dev}", RUN+="{run}"')
    return "\n".join(lines) + "\n"


def write(host: Host, values: Mapping[str, Value], origin: str) -> list[str]:
    """Write the persist files that set ``values`` (in their order) at boot."""
    sysctls: dict[str, str] = {}
    commands: dict[str, list[Argv]] = {}
    for key, value in values.items():
        tunable = tunable_for_key(key)
        if isinstance(tunable, SysctlTunable):
            name, text = tunable.sysctl_d_line(value)
            sysctls[name] = text
        elif tunable.device is not None:
            commands.setdefault(tunable.device, []).extend(tunable.boot_commands(value))
    written: list[str] = []
    if sysctls:
        host.write(SYSCTL_FILE, render_sysctl(origin, sysctls))
        written.append(SYSCTL_FILE)
    if any(commands.values()):
        host.write(UDEV_FILE, render_udev(commands))
        written.append(UDEV_FILE)
    return written
