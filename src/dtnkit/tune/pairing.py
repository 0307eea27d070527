"""Pairing the interfaces of two snapshots whose names differ (two hosts, or one host whose
NICs were renamed), so `tune diff` compares a host's data NIC with the other's, not every
interface item with nothing.

Devices with the same name pair with each other.  The rest pair by role (``nic``, ``member``
of a bond, ``bond``, ``vlan``, ``bridge``, ...) when each side has as many of that role left:
in name order, and the output says so, so a wrong guess is seen and fixed with
``--map A_DEV=B_DEV`` (which wins over everything).  The roles come from the snapshot's
``host.interfaces`` (recorded by `tune save` and every baseline), or, for an older snapshot,
from its keys: a device with ring, offload, coalescing or pause settings is a NIC, one whose
name has a dot a VLAN, any other one ``virtual``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.host.facts import interfaces
from dtnkit.host.host import Host
from dtnkit.tune.keys import device_of, with_device

#: a Linux interface name: 1-15 bytes, no '/', ':', whitespace or '=' (IFNAMSIZ, dev_valid_name)
_IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,14}")
_NIC_KINDS = ("ring", "feature", "coalesce", "pause")


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    by: str  # map | role
    role: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"a": self.a, "b": self.b, "by": self.by, "role": self.role}


@dataclass
class Pairing:
    pairs: list[Pair] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def b_to_a(self) -> dict[str, str]:
        return {p.b: p.a for p in self.pairs}


def parse_map(items: Iterable[str]) -> dict[str, str]:
    """``--map eth0=ens1f0`` (repeatable, or comma-separated) -> {"eth0": "ens1f0"}: A's
    device = B's device.  Each device appears once on each side."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for item in items:
        for part in item.split(","):
            a, sep, b = part.strip().partition("=")
            a, b = a.strip(), b.strip()
            if not sep or not _IFNAME.fullmatch(a) or not _IFNAME.fullmatch(b):
                raise BadInput(
                    f"bad --map {part.strip()!r}",
                    "give A_DEV=B_DEV: an interface of A, '=', the one of B it "
                    "stands for (names of up to 15 letters, digits, '.', '_', '-')",
                    "e.g. --map eth0=ens1f0np0",
                )
            if a in out or b in taken:
                raise BadInput(
                    f"--map names {a if a in out else b} twice",
                    "each interface pairs with one other",
                    "give each once",
                )
            out[a] = b
            taken.add(b)
    return out


def devices(values: Mapping[str, Any]) -> set[str]:
    return {d for d in (device_of(k) for k in values) if d is not None}


def recorded_roles(host: Mapping[str, Any]) -> dict[str, str]:
    """The roles a snapshot recorded (``host.interfaces``: ``"bond0=bond ens1f0=member"``)."""
    text = host.get("interfaces")
    if not isinstance(text, str):
        return {}
    out: dict[str, str] = {}
    for word in text.split():
        dev, sep, role = word.partition("=")
        if sep and dev and role:
            out[dev] = role
    return out


def format_roles(roles: Mapping[str, str]) -> str:
    return " ".join(f"{dev}={role}" for dev, role in sorted(roles.items()))


def inferred_role(values: Mapping[str, Any], device: str) -> str:
    """A device's role from its keys alone (snapshots that recorded none)."""
    if any(k.partition("/")[0] in _NIC_KINDS and device_of(k) == device for k in values):
        return "nic"
    return "vlan" if "." in device else "virtual"


def roles_of(values: Mapping[str, Any], recorded: Mapping[str, str]) -> dict[str, str]:
    return {d: recorded.get(d) or inferred_role(values, d) for d in devices(values)}


def pair(
    a_values: Mapping[str, Any],
    b_values: Mapping[str, Any],
    *,
    a_roles: Mapping[str, str] | None = None,
    b_roles: Mapping[str, str] | None = None,
    manual: Mapping[str, str] | None = None,
) -> Pairing:
    """Pair A's devices with B's whose names differ: ``manual`` first, then by role."""
    devs_a, devs_b = devices(a_values), devices(b_values)
    roles_a = roles_of(a_values, a_roles or {})
    roles_b = roles_of(b_values, b_roles or {})
    out = Pairing()
    for a, b in (manual or {}).items():
        if a not in devs_a:
            raise BadInput(
                f"--map {a}={b}: A has no interface {a}",
                f"its interfaces: {', '.join(sorted(devs_a)) or 'none'}",
                "map one of those",
            )
        if b not in devs_b:
            raise BadInput(
                f"--map {a}={b}: B has no interface {b}",
                f"its interfaces: {', '.join(sorted(devs_b)) or 'none'}",
                "map to one of those",
            )
        out.pairs.append(Pair(a, b, "map", roles_a[a]))
    taken_a = {p.a for p in out.pairs}
    taken_b = {p.b for p in out.pairs}
    same = (devs_a - taken_a) & (devs_b - taken_b)
    left_a = sorted(devs_a - taken_a - same)
    left_b = sorted(devs_b - taken_b - same)
    for role in sorted({roles_a[d] for d in left_a} | {roles_b[d] for d in left_b}):
        these_a = [d for d in left_a if roles_a[d] == role]
        these_b = [d for d in left_b if roles_b[d] == role]
        if these_a and len(these_a) == len(these_b):
            out.pairs += [Pair(a, b, "role", role) for a, b in zip(these_a, these_b, strict=True)]
        elif these_a and these_b:
            out.notes.append(
                f"{role}: A has {', '.join(these_a)} and B has {', '.join(these_b)}; not paired "
                f"(pair them with --map, e.g. --map {these_a[0]}={these_b[0]})"
            )
    return out


def rename(values: Mapping[str, Any], b_to_a: Mapping[str, str]) -> dict[str, Any]:
    """B's values with each paired device under A's name."""
    out: dict[str, Any] = {}
    moved = set(b_to_a)
    for key, value in values.items():
        dev = device_of(key)
        new = with_device(key, b_to_a[dev]) if dev in moved and dev is not None else key
        if new in out or (new != key and new in values and device_of(new) not in moved):
            raise BadInput(
                f"B's {key} would be compared as {new}, which B also has",
                f"B has an interface named {device_of(new)} too",
                "pair that one as well with --map",
            )
        out[new] = value
    return out


def interface_roles(host: Host, devs: Iterable[str]) -> dict[str, str]:
    """The role of each of ``devs`` on ``host`` now (recorded in snapshots): ``nic``,
    ``member`` (of a bond or bridge), or the link kind (``bond``, ``vlan``, ``bridge``,
    ``veth``, ...)."""
    links = interfaces(host)
    out: dict[str, str] = {}
    for dev in devs:
        link = links.get(dev)
        if link is None:
            continue
        if link.kind is None or link.physical:
            out[dev] = "member" if link.master else "nic"
        else:
            out[dev] = link.kind
    return out
