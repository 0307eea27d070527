"""The base of every kind of setting: read, write, compare, show, and the per-kind hooks.

Each tunable has a flat key (``sysctl/net.core.rmem_max``, ``ring/ens5f1np1/rx``,
``qdisc/eth0/root``) that is also its key in snapshots; :mod:`dtnkit.tune.registry` maps a key
back to its kind by its prefix.  Apply and verify share one comparison
(:meth:`Tunable.satisfies`), so they cannot drift apart.
"""

from __future__ import annotations

import enum
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from dtnkit.errors import DtnkitError
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.profile import ItemSpec

Value = Any  # JSON-able: str, int, bool, dict, None
Argv = list[str]


class Scope(enum.StrEnum):
    HOST = "host"  # global to the kernel: one value for every namespace
    NETNS = "netns"  # per network namespace
    INTERFACE = "interface"


class Tunable(ABC):
    kind: ClassVar[str]  # the key prefix the registry files it under
    restorable: ClassVar[bool] = True
    # persist writes the recommendation rather than the value read (fq pacing: the qdisc tree
    # the kernel shows is not what the boot-time commands take)
    persist_recommended: ClassVar[bool] = False
    # held only in snapshots, for what the kernel drops with another setting (never audited,
    # never in a profile): the IPv6 state an MTU below 1280 takes off an interface
    snapshot_only: ClassVar[bool] = False

    def __init__(self, key: str, scope: Scope, device: str | None, label: str) -> None:
        self.key = key
        self.scope = scope
        self.device = device
        self.label = label

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.key}>"

    @classmethod
    @abstractmethod
    def from_key(cls, rest: str) -> Tunable | None:
        """The tunable for the part of a key after ``kind/``; None when this kind has none."""

    @abstractmethod
    def read(self, host: Host) -> Value | Unavailable: ...

    def write(self, host: Host, value: Value) -> None:
        raise DtnkitError(f"{self.key} cannot be set", "it is audit-only")

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        if mode == "raise" and isinstance(current, int) and isinstance(want, int):
            return current >= want
        return bool(current == want)

    def target(self, current: Value, want: Value, mode: str) -> Value:
        """The value to write so that ``satisfies`` holds (raise-only keeps larger parts)."""
        return want

    def show(self, value: Value) -> str:
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "on" if value else "off"
        return str(value)

    # ---- per-kind hooks -------------------------------------------------------------------
    def scope_on(self, host: Host) -> tuple[Scope, str]:
        """This setting's scope as ``host``'s kernel treats it, and why (asked only when a
        namespace is targeted; kinds whose scope the kernel decides override it)."""
        return self.scope, ""

    @classmethod
    def prepare_scopes(cls, host: Host, tunables: Sequence[Tunable]) -> None:
        """Learn the scope of many settings of this kind at once (one probe, not one each)."""
        return None

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        """The recommendation for a literal profile value (kinds add their special cases)."""
        return Want(spec.value, mode, "")

    def fixed(self, host: Host) -> bool:
        """Whether the driver pins this setting, so a difference cannot be changed."""
        return False

    def boot_commands(self, value: Value) -> list[Argv]:
        """Commands a udev rule runs when the device appears, to set ``value`` again at boot."""
        return []

    def unsafe(self, value: Value, host: Host | None = None) -> str | None:
        """Why writing ``value`` would weaken the host's security or break its connectivity
        (None: it would not), though the kernel takes it: the audit and the plan mark such a
        value, and apply and restore refuse it unless ``--allow-unsafe KEY`` names the key.
        ``host`` (when given) lets a kind look at the device (an MTU below 1280 matters only
        where IPv6 runs).  docs/profiles.md lists every kind's unsafe values."""
        return None

    def drops(self, value: Value, host: Host) -> list[Tunable]:
        """The settings the kernel removes from ``host`` when ``value`` is written here and
        does not bring back when it is written back (an MTU below 1280 takes IPv6 off the
        interface): apply records them in its baseline, and the undo of a step puts them back
        once the step's old value is back."""
        return []

    def validate(self, value: Value) -> str | None:
        """Why ``value`` cannot be this setting's value (None: it can).

        Snapshot and profile loading call it for every value before anything is written, so a
        bad value is refused as bad input rather than written or crashed on.  The base accepts
        one plain scalar; kinds narrow it (types, ranges, names).
        """
        return check_scalar(value)


# ---- value checks the kinds' validate hooks are built from (each: None or why not) ---------
_TEXT = re.compile(r"[\t\x20-\x7e]*")


def check_int(value: Value, lo: int, hi: int) -> str | None:
    """An integer (not a boolean) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"it must be an integer, not {type_name(value)}"
    if not lo <= value <= hi:
        return f"{value} is out of range ({lo} to {hi})"
    return None


def check_bool(value: Value) -> str | None:
    return None if isinstance(value, bool) else f"it must be true or false, not {type_name(value)}"


def check_name(value: Value, pattern: re.Pattern[str], example: str) -> str | None:
    """A string matching ``pattern`` (names of qdiscs, governors, profiles...)."""
    if not isinstance(value, str):
        return f"it must be a name such as {example}, not {type_name(value)}"
    if not pattern.fullmatch(value):
        return f"{value[:40]!r} is not a valid name (e.g. {example})"
    return None


def check_scalar(value: Value) -> str | None:
    """A printable one-line string, a 64-bit integer, a boolean or null."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return check_int(value, -(2**63), 2**64 - 1)
    if isinstance(value, float):
        return "it must not be a fraction" if math.isfinite(value) else "it must be finite"
    if isinstance(value, str):
        if len(value) > 4096 or not _TEXT.fullmatch(value):
            return "it must be printable text on one line (at most 4096 characters)"
        return None
    return f"it must be a plain value, not {type_name(value)}"


def type_name(value: Value) -> str:
    """A value's type as JSON and TOML users know it."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def valid_ifname(name: str) -> bool:
    """Whether the kernel would take ``name`` as an interface name (``dev_valid_name``: 1-15
    bytes, not ``.`` or ``..``, no ``/``, ``:`` or blank), so a snapshot key cannot name a
    path such as ``link/../../etc/mtu``."""
    return (
        0 < len(name.encode()) < 16
        and name not in (".", "..")
        and not any(c in name for c in "/:")
        and not any(c.isspace() for c in name)
    )


class DeviceTunable(Tunable):
    """A setting of one interface, keyed ``kind/DEVICE/NAME`` with NAME one of ``names``."""

    names: ClassVar[tuple[str, ...]]

    @classmethod
    def from_key(cls, rest: str) -> Tunable | None:
        device, _, name = rest.rpartition("/")
        return cls.build(device, name) if valid_ifname(device) and name in cls.names else None

    @classmethod
    @abstractmethod
    def build(cls, device: str, name: str) -> Tunable: ...


class CommandTunable(Tunable):
    """A setting written by running commands whose argv :meth:`commands` declares once.

    That declaration is what :meth:`write` runs (apply, restore and the undo of both) and what
    the udev rule of ``--persist`` runs at boot, with absolute paths since udev has no PATH.
    """

    ok_returncodes: ClassVar[frozenset[int]] = frozenset({0})

    @abstractmethod
    def commands(self, value: Value) -> list[Argv]: ...

    @abstractmethod
    def failure(self, value: Value) -> str:
        """What could not be done, for the error when a command fails."""

    def write(self, host: Host, value: Value) -> None:
        for argv in self.commands(value):
            res = host.change(argv)
            if res.returncode not in self.ok_returncodes:
                raise DtnkitError(self.failure(value), res.message())

    def boot_commands(self, value: Value) -> list[Argv]:
        return [absolute(argv) for argv in self.commands(value)]


def absolute(argv: Argv) -> Argv:
    """The argv with the binary's absolute path, for udev (``ip``, ``tc``, ``ethtool``)."""
    return [f"/sbin/{argv[0]}", *argv[1:]]


def on_off(value: Value) -> str:
    return "on" if value else "off"
