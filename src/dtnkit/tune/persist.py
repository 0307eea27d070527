"""Make applied settings survive a reboot: sysctl.d for sysctls, a udev rule per interface.

A udev rule (not a oneshot unit with a fixed list) re-applies per-interface settings whenever
the NIC appears, so hot-plug and renames are covered.  The files' previous content is kept in
the baseline snapshot, so restore removes or reverts them.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dtnkit.errors import DtnkitError
from dtnkit.host.host import Host
from dtnkit.tune.tunables import (
    CoalesceTunable,
    FeatureTunable,
    LinkTunable,
    PauseTunable,
    QdiscTunable,
    RingTunable,
    SysctlTunable,
    Tunable,
)

if TYPE_CHECKING:
    from dtnkit.tune.apply import Step
    from dtnkit.tune.audit import Audit

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


def _commands(tunable: Tunable, value: Any) -> list[list[str]]:
    """The commands that set ``value`` at boot, with absolute paths for udev."""
    if isinstance(tunable, QdiscTunable):
        if not (isinstance(value, dict) and "maxrate_bps" in value):
            return []  # only dtnkit's own pacing is persisted, not an arbitrary qdisc
        return [[f"/sbin/{argv[0]}", *argv[1:]]
                for argv in QdiscTunable.pacing_commands(str(tunable.device), value)]
    argv = _command(tunable, value)
    return [argv] if argv is not None else []


def _command(tunable: Tunable, value: Any) -> list[str] | None:
    dev = str(tunable.device)
    if isinstance(tunable, LinkTunable):
        return ["/sbin/ip", "link", "set", "dev", dev, tunable.attr, str(value)]
    if isinstance(tunable, RingTunable):
        return ["/sbin/ethtool", "-G", dev, tunable.which, str(value)]
    if isinstance(tunable, FeatureTunable):
        return ["/sbin/ethtool", "-K", dev, tunable.short, "on" if value else "off"]
    if isinstance(tunable, CoalesceTunable):
        return ["/sbin/ethtool", "-C", dev, tunable.which, "on" if value else "off"]
    if isinstance(tunable, PauseTunable):
        return ["/sbin/ethtool", "-A", dev, tunable.which, "on" if value else "off"]
    return None


def render_sysctl(audit: Audit, values: dict[str, str]) -> str:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    lines = [
        f"# Written by dtnkit tune apply --persist (profile {audit.profile.name}, "
        f"rtt {audit.ctx.rtt_ms:g} ms) at {now}.",
        "# `dtnkit tune restore` removes or reverts this file. If TuneD runs with",
        "# reapply_sysctl=1 (its default) it re-applies /etc/sysctl.d after its own profile.",
    ]
    lines += [f"{key} = {value}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def render_udev(commands: dict[str, list[list[str]]]) -> str:
    lines = ["# Written by dtnkit tune apply --persist; `dtnkit tune restore` removes it."]
    for dev, cmds in commands.items():
        if not _SAFE_NAME.match(dev):
            raise DtnkitError(f"cannot persist settings of interface {dev!r}",
                              "its name has characters a udev rule cannot hold safely",
                              "rename the interface, or apply without --persist")
        for argv in cmds:
            run = " ".join(shlex.quote(a) for a in argv)
            lines.append(f'ACTION=="add", SUBSYSTEM=="net", KERNEL=="{dev}", RUN+="{run}"')
    return "\n".join(lines) + "\n"


def write(host: Host, audit: Audit, steps: Sequence[Step]) -> list[str]:
    """Write the persist files for everything the profile wants that is now in force."""
    sysctls: dict[str, str] = {}
    commands: dict[str, list[list[str]]] = {}
    applied = {s.tunable.key: s.after for s in steps}
    for f in audit.findings:
        if f.tunable is None or f.status not in ("ok", "differs"):
            continue
        if f.status == "differs" and f.key not in applied:
            continue
        if f.key not in applied and f.apply != "auto":
            continue  # on-request items persist only when this run applied them
        # what is in force now: the value written, else the current one (raise-only keeps a
        # site's larger value); a qdisc that already paces is persisted as its recommendation
        value = applied.get(f.key, f.recommended if isinstance(f.tunable, QdiscTunable)
                            else f.current)
        if isinstance(f.tunable, SysctlTunable):
            sysctls[f.tunable.name] = str(value)
        elif f.device is not None:
            commands.setdefault(f.device, []).extend(_commands(f.tunable, value))
    written: list[str] = []
    if sysctls:
        host.write(SYSCTL_FILE, render_sysctl(audit, sysctls))
        written.append(SYSCTL_FILE)
    if any(commands.values()):
        host.write(UDEV_FILE, render_udev(commands))
        written.append(UDEV_FILE)
    return written
