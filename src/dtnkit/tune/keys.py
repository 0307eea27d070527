"""What a flat setting key (``kind/[device/]name``) means to people and scripts: its group, its
unit, and its value typed for JSON (numbers as numbers).

Pure functions over keys and values; the tunables still read and write the values as they are.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from dtnkit.tune.profile import KNOWN_KEYS

#: the unit of a key's numbers (a list's numbers share it); a key not here has none
UNITS: dict[str, str] = {
    "sysctl/net.core.rmem_max": "bytes",
    "sysctl/net.core.wmem_max": "bytes",
    "sysctl/net.core.rmem_default": "bytes",
    "sysctl/net.core.wmem_default": "bytes",
    "sysctl/net.core.optmem_max": "bytes",
    "sysctl/net.ipv4.tcp_rmem": "bytes",
    "sysctl/net.ipv4.tcp_wmem": "bytes",
    "sysctl/net.ipv4.tcp_mem": "pages",
    "sysctl/net.core.netdev_max_backlog": "packets",
    "link/*/txqueuelen": "packets",
    "link/*/mtu": "bytes",
    "ring/*/rx": "descriptors",
    "ring/*/tx": "descriptors",
}

#: the kinds of key that name a device in their middle part
DEVICE_KINDS = ("link", "qdisc", "ring", "feature", "coalesce", "pause", "ipv6")

#: the groups of keys only a snapshot holds (no profile names them): the IPv6 state an MTU
#: below 1280 takes off an interface goes with the MTU
SNAPSHOT_ONLY_GROUPS: dict[str, str] = {
    "ipv6/*/addresses": "nic",
    "ipv6/*/conf": "nic",
    "ipv6/*/routes": "nic",
}

_INTS = re.compile(r"-?[0-9]+(?:[ \t]+-?[0-9]+)*")


def _match(key: str, table: Mapping[str, str]) -> str | None:
    if key in table:
        return table[key]
    for pattern, value in table.items():
        if "*" in pattern and fnmatch.fnmatchcase(key, pattern.replace("*", "[!/]*")):
            return value
    return None


def group_of(key: str, profile_groups: Mapping[str, str] | None = None) -> str:
    """The tuning group a key belongs to (``buffers``, ``nic``, ...): the profile's when it
    names the key, else the built-in table's; a site sysctl no profile names is ``site``."""
    if profile_groups and key in profile_groups:
        return profile_groups[key]
    return _match(key, KNOWN_KEYS) or _match(key, SNAPSHOT_ONLY_GROUPS) or "site"


def unit_of(key: str) -> str | None:
    """The unit of a key's numbers: bytes, pages, packets, descriptors; None for none."""
    return _match(key, UNITS)


def typed(value: Any) -> Any:
    """A value for JSON with numbers as numbers: ``"4096 131072 6291456"`` (a sysctl triple, or
    any value a sysctl.conf file gives as text) -> ``[4096, 131072, 6291456]``, ``"212992"``
    -> ``212992``; anything else as it is."""
    if isinstance(value, str) and _INTS.fullmatch(value.strip()):
        numbers = [int(part) for part in value.split()]
        return numbers[0] if len(numbers) == 1 else numbers
    return value


def as_kept(key: str, value: Any) -> Any:
    """A value from JSON as the tunables keep it: a sysctl's list of integers (a triple in
    a snapshot) as the text the kernel prints, ``[4096, 131072, 6291456]`` -> ``"4096 131072
    6291456"``; anything else as it is (a list that is not all integers is left for the
    kind's validation to refuse)."""
    if (
        key.startswith("sysctl/")
        and isinstance(value, list)
        and len(value) > 1
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return " ".join(str(v) for v in value)
    return value


def device_of(key: str) -> str | None:
    """The device a key is about (``ring/eth0/rx`` -> ``eth0``), or None for host keys."""
    kind, _, rest = key.partition("/")
    if kind not in DEVICE_KINDS:
        return None
    device, sep, _name = rest.rpartition("/")
    return device if sep and device else None


def with_device(key: str, device: str) -> str:
    """``key`` about ``device`` instead (``ring/eth0/rx``, ``ens1f0`` -> ``ring/ens1f0/rx``)."""
    kind, _, rest = key.partition("/")
    _old, _, name = rest.rpartition("/")
    return f"{kind}/{device}/{name}"
