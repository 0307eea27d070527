"""Parsers for ``ip -d -j link show``, ``ip [-6] -j addr show`` and ``ip [-6] -j route show``.

The format, as printed by iproute2 6.1 (Debian 12) and by newer releases, checked against
the real captures under ``tests/fixtures/captured``:

``ip -d -j link show``
    A JSON list of link objects: ``ifindex``, ``ifname``, ``flags``, ``mtu``, ``operstate``,
    ``link_type``, ``master``, ``link`` (lower device, or veth peer in the same namespace; a peer
    in another namespace shows ``link_index`` + ``link_netnsid`` instead), ``txqlen`` (omitted
    when 0), ``min_mtu``/``max_mtu`` (0 = not reported), ``num_tx_queues``/``num_rx_queues``,
    ``linkinfo`` (``info_kind``, ``info_data``, ``info_slave_kind``, ``info_slave_data``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dtnkit.host.parsers import (
    ParseError,
    json_int,
    load_json,
    opt_str,
    req_str,
)


@dataclass(frozen=True, slots=True)
class Link:
    """One network link from ``ip -d -j link show``.

    ``kind`` is ``linkinfo.info_kind`` (veth, bond, vlan, bridge ...; ``None`` for a physical
    NIC or loopback); ``slave_kind`` is ``linkinfo.info_slave_kind`` ("bond" on a bond member);
    ``lower`` is the ``link`` field (a VLAN's lower device, a veth peer in the same namespace).
    ``max_mtu`` is ``None`` when absent or 0 (not reported); ``txqlen`` is 0 when absent, since
    ip omits it exactly when it is 0. ``info_data`` is ``linkinfo.info_data`` or ``{}``.
    """

    name: str
    index: int
    kind: str | None
    slave_kind: str | None
    master: str | None
    lower: str | None
    mtu: int
    min_mtu: int | None
    max_mtu: int | None
    txqlen: int | None
    operstate: str
    flags: tuple[str, ...]
    link_type: str
    num_tx_queues: int | None
    num_rx_queues: int | None
    info_data: dict[str, object]


def opt_int(obj: dict[str, Any], key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not json_int(value):
        raise ParseError(f"{where}: {key!r} is not an integer: {value!r}")
    return int(value)


def req_int(obj: dict[str, Any], key: str, where: str) -> int:
    value = opt_int(obj, key, where)
    if value is None:
        raise ParseError(f"{where}: missing {key!r}")
    return value


def _parse_link(entry: Any, position: int) -> Link:
    source = "ip -j link"
    if not isinstance(entry, dict):
        raise ParseError(f"{source}: item {position} is not an object: {entry!r}")
    name = entry.get("ifname")
    where = f"{source}: item {position}"
    if isinstance(name, str):
        where += f" ({name})"
    linkinfo = entry.get("linkinfo", {})
    if not isinstance(linkinfo, dict):
        raise ParseError(f"{where}: 'linkinfo' is not an object")
    info_data = linkinfo.get("info_data", {})
    if info_data is None:
        info_data = {}
    if not isinstance(info_data, dict):
        raise ParseError(f"{where}: 'linkinfo.info_data' is not an object")
    flags = entry.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(flag, str) for flag in flags):
        raise ParseError(f"{where}: 'flags' is not a list of strings")
    txqlen = opt_int(entry, "txqlen", where)
    return Link(
        name=req_str(entry, "ifname", where),
        index=req_int(entry, "ifindex", where),
        kind=opt_str(linkinfo, "info_kind", where),
        slave_kind=opt_str(linkinfo, "info_slave_kind", where),
        master=opt_str(entry, "master", where),
        lower=opt_str(entry, "link", where),
        mtu=req_int(entry, "mtu", where),
        min_mtu=opt_int(entry, "min_mtu", where),
        max_mtu=opt_int(entry, "max_mtu", where) or None,
        txqlen=0 if txqlen is None else txqlen,
        operstate=req_str(entry, "operstate", where),
        flags=tuple(flags),
        link_type=req_str(entry, "link_type", where),
        num_tx_queues=opt_int(entry, "num_tx_queues", where),
        num_rx_queues=opt_int(entry, "num_rx_queues", where),
        info_data=dict(info_data),
    )


def parse_ip_link_json(text: str) -> list[Link]:
    """Parse ``ip -j link show`` / ``ip -d -j link show`` (all links or one), in order."""
    source = "ip -j link"
    data = load_json(text, source)
    if not isinstance(data, list):
        raise ParseError(f"{source}: expected a JSON list, got {type(data).__name__}")
    return [_parse_link(entry, position) for position, entry in enumerate(data)]


@dataclass(frozen=True, slots=True)
class Address:
    """One address of one link from ``ip -j addr show`` (``ip -6 -j addr`` for IPv6 only).

    ``scope`` is as ip prints it: ``global``, ``link``, ``host`` (or a number for a custom one).
    """

    ifname: str
    family: str  # "inet" or "inet6"
    local: str
    prefixlen: int
    scope: str


def parse_ip_addr_json(text: str) -> list[Address]:
    """Parse ``ip [-6] -j addr show``: a JSON list of links, each with ``addr_info``.

    A link with no address has no ``addr_info`` (or an empty list); ip prints ``[{}]`` entries
    for links filtered out by ``-6`` on some releases, which are skipped.
    """
    source = "ip -j addr"
    data = load_json(text, source)
    if not isinstance(data, list):
        raise ParseError(f"{source}: expected a JSON list, got {type(data).__name__}")
    out: list[Address] = []
    for position, entry in enumerate(data):
        where = f"{source}: item {position}"
        if not isinstance(entry, dict):
            raise ParseError(f"{where} is not an object: {entry!r}")
        if not entry:
            continue
        name = req_str(entry, "ifname", where)
        infos = entry.get("addr_info", [])
        if not isinstance(infos, list):
            raise ParseError(f"{where} ({name}): 'addr_info' is not a list")
        for info in infos:
            if not isinstance(info, dict):
                raise ParseError(f"{where} ({name}): an addr_info item is not an object")
            if not info:
                continue
            scope = info.get("scope", "global")
            out.append(
                Address(
                    ifname=name,
                    family=req_str(info, "family", where),
                    local=req_str(info, "local", where),
                    prefixlen=req_int(info, "prefixlen", where),
                    scope=str(scope),
                )
            )
    return out


@dataclass(frozen=True, slots=True)
class Route:
    """One route from ``ip [-6] -j route show``; a multipath route lists every nexthop device."""

    dst: str
    devs: tuple[str, ...]
    gateway: str | None
    metric: int | None

    @property
    def default(self) -> bool:
        return self.dst == "default"


def parse_ip_route_json(text: str) -> list[Route]:
    """Parse ``ip [-6] -j route show [default]``, in order."""
    source = "ip -j route"
    data = load_json(text, source)
    if not isinstance(data, list):
        raise ParseError(f"{source}: expected a JSON list, got {type(data).__name__}")
    out: list[Route] = []
    for position, entry in enumerate(data):
        where = f"{source}: item {position}"
        if not isinstance(entry, dict):
            raise ParseError(f"{where} is not an object: {entry!r}")
        devs: list[str] = []
        dev = opt_str(entry, "dev", where)
        if dev:
            devs.append(dev)
        hops = entry.get("nexthops", [])
        if not isinstance(hops, list):
            raise ParseError(f"{where}: 'nexthops' is not a list")
        for hop in hops:
            if not isinstance(hop, dict):
                raise ParseError(f"{where}: a nexthop is not an object")
            hop_dev = opt_str(hop, "dev", where)
            if hop_dev and hop_dev not in devs:
                devs.append(hop_dev)
        out.append(
            Route(
                dst=req_str(entry, "dst", where),
                devs=tuple(devs),
                gateway=opt_str(entry, "gateway", where),
                metric=opt_int(entry, "metric", where),
            )
        )
    return out
