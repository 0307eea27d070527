"""rtnetlink, sans I/O: the dump requests for links, routes and addresses, and parsers of the
kernel's replies into what ``ip -d -j link show``, ``ip [-6] -j route show default`` and
``ip -6 -j addr show`` print (:mod:`dtnkit.host.parsers.iproute`'s Route and Address), and
of the qdisc dump into what ``tc -j qdisc show dev DEV`` prints for the kinds a host has before
anyone tunes it (:func:`parse_qdiscs`).

The kernel answers these in microseconds, where each ``ip`` is a process start (5-10 ms on a
loaded host), so a live Host asks the kernel itself
(:meth:`dtnkit.host.kernel.KernelView.rtnl_dumps`: one socket in this process, or in the
namespace's helper process) and a captured tree replays the ``ip`` commands as before.  The
names and rules follow iproute2 6.1 (``ip/ipaddress.c``, ``ip/iproute.c``,
``lib/rt_names.c``), so both paths give the same answer; the tests compare them on real
namespaces.

Formats (``include/uapi/linux/rtnetlink.h``, ``if_link.h``, ``if_addr.h``): after the
netlink header (:mod:`.netlink`, which frames and walks every message), a family
header (``ifinfomsg`` 16 bytes, ``rtmsg`` 12, ``ifaddrmsg`` 8, ``tcmsg`` 20), then
attributes, in host byte order (little-endian on every host dtnkit targets: x86_64 and
aarch64).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.iproute import Address, Route
from dtnkit.host.parsers.netlink import (
    NLM_F_DUMP,
    NLM_F_REQUEST,
    attributes,
    message,
    sint,
    text,
    uint,
)
from dtnkit.host.parsers.netlink import messages as _messages
from dtnkit.host.parsers.tc import Qdisc

RTM_GETLINK, RTM_NEWLINK = 18, 16
RTM_GETADDR, RTM_NEWADDR = 22, 20
RTM_GETROUTE, RTM_NEWROUTE = 26, 24
RTM_GETQDISC, RTM_NEWQDISC = 38, 36
AF_INET, AF_INET6 = 2, 10

#: name -> (request type, family, size of the family header): what a live Host dumps at once
DUMPS: dict[str, tuple[int, int, int]] = {
    "link": (RTM_GETLINK, 0, 16),
    "route4": (RTM_GETROUTE, AF_INET, 12),
    "route6": (RTM_GETROUTE, AF_INET6, 12),
    "addr6": (RTM_GETADDR, AF_INET6, 8),
    "qdisc": (RTM_GETQDISC, 0, 20),
}

_IFLA_IFNAME, _IFLA_MTU, _IFLA_LINK, _IFLA_MASTER, _IFLA_TXQLEN = 3, 4, 5, 10, 13
_IFLA_OPERSTATE, _IFLA_LINKINFO, _IFLA_NUM_TX_QUEUES = 16, 18, 31
_IFLA_LINK_NETNSID, _IFLA_MAX_MTU = 37, 51
_IFLA_INFO_KIND = 1
_RTA_DST, _RTA_OIF, _RTA_GATEWAY, _RTA_PRIORITY, _RTA_MULTIPATH, _RTA_TABLE = 1, 4, 5, 6, 9, 15
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_RT_TABLE_MAIN = 254
_RTM_F_CLONED = 0x200
# ip's names (ip/ipaddress.c oper_states, lib/rt_names.c rtnl_rtscope_tab)
_OPERSTATES = ("UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP")
_SCOPES = {0: "global", 200: "site", 253: "link", 254: "host", 255: "nowhere"}


def dump_request(name: str, seq: int) -> bytes:
    """The request for dump ``name`` (a key of :data:`DUMPS`), with sequence number ``seq``."""
    msg_type, family, size = DUMPS[name]
    return message(msg_type, NLM_F_REQUEST | NLM_F_DUMP, seq, bytes([family]) + bytes(size - 1))


def messages(data: bytes, want: int) -> Iterator[bytes]:
    """The body (family header and attributes) of each message of type ``want`` in a dump's
    reply.  A truncated message or an error message is a ParseError."""
    return _messages(data, want, "rtnetlink")


def _attributes(data: bytes) -> dict[int, bytes]:
    return attributes(data, "rtnetlink")


class NlLink:
    """The fields of a link that :func:`dtnkit.host.facts.interfaces` reads, named as in
    :class:`~dtnkit.host.parsers.iproute.Link` (a plain class: a dataclass costs a millisecond
    of start-up, which the audit is short of)."""

    __slots__ = (
        "index",
        "kind",
        "lower",
        "master",
        "max_mtu",
        "mtu",
        "name",
        "num_tx_queues",
        "operstate",
        "txqlen",
    )

    def __init__(
        self,
        name: str,
        index: int,
        kind: str | None,
        master: str | None,
        lower: str | None,
        mtu: int,
        max_mtu: int | None,
        txqlen: int,
        operstate: str,
        num_tx_queues: int | None,
    ) -> None:
        self.name, self.index, self.kind, self.master, self.lower = name, index, kind, master, lower
        self.mtu, self.max_mtu, self.txqlen = mtu, max_mtu, txqlen
        self.operstate, self.num_tx_queues = operstate, num_tx_queues

    def as_tuple(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __repr__(self) -> str:
        return f"NlLink{self.as_tuple()!r}"


def parse_links(data: bytes) -> list[NlLink]:
    """The links of an RTM_GETLINK dump, in the kernel's order (as ``ip link show``)."""
    raw: list[tuple[int, dict[int, bytes]]] = []
    for body in messages(data, RTM_NEWLINK):
        if len(body) < 16:
            raise ParseError("rtnetlink: short ifinfomsg")
        raw.append((sint(body[4:8]), _attributes(body[16:])))
    names = {index: text(attrs.get(_IFLA_IFNAME, b"")) for index, attrs in raw}
    out: list[NlLink] = []
    for index, attrs in raw:
        if _IFLA_IFNAME not in attrs or _IFLA_MTU not in attrs:
            raise ParseError(f"rtnetlink: link {index} has no name or MTU")
        kind = None
        if _IFLA_LINKINFO in attrs:
            info = _attributes(attrs[_IFLA_LINKINFO])
            kind = text(info[_IFLA_INFO_KIND]) if _IFLA_INFO_KIND in info else None
        master = _name(names, uint(attrs[_IFLA_MASTER])) if _IFLA_MASTER in attrs else None
        lower = None  # ip prints "link" only for a lower device in this namespace
        if _IFLA_LINK in attrs and _IFLA_LINK_NETNSID not in attrs:
            iflink = uint(attrs[_IFLA_LINK])
            lower = _name(names, iflink) if iflink else None
        state = uint(attrs[_IFLA_OPERSTATE]) if _IFLA_OPERSTATE in attrs else 0
        out.append(
            NlLink(
                name=names[index],
                index=index,
                kind=kind,
                master=master,
                lower=lower,
                mtu=uint(attrs[_IFLA_MTU]),
                max_mtu=uint(attrs[_IFLA_MAX_MTU]) or None if _IFLA_MAX_MTU in attrs else None,
                txqlen=uint(attrs[_IFLA_TXQLEN]) if _IFLA_TXQLEN in attrs else 0,
                operstate=_OPERSTATES[state] if state < len(_OPERSTATES) else str(state),
                num_tx_queues=(
                    uint(attrs[_IFLA_NUM_TX_QUEUES]) if _IFLA_NUM_TX_QUEUES in attrs else None
                ),
            )
        )
    return out


def _name(names: dict[int, str], index: int) -> str:
    return names.get(index, f"if{index}")  # ip's ll_index_to_name for an unknown index


def link_names(links: list[NlLink]) -> dict[int, str]:
    return {link.index: link.name for link in links}


def _address(family: int, data: bytes) -> str:
    if family == AF_INET6 and len(data) == 16:
        return str(ipaddress.IPv6Address(data))
    if family == AF_INET and len(data) == 4:
        return str(ipaddress.IPv4Address(data))
    return data.hex()


def parse_default_routes(data: bytes, names: dict[int, str]) -> list[Route]:
    """The default routes of the main table in an RTM_GETROUTE dump, as
    ``ip [-6] -j route show default`` lists them (cached clones left out, as ip does)."""
    out: list[Route] = []
    for body in messages(data, RTM_NEWROUTE):
        if len(body) < 12:
            raise ParseError("rtnetlink: short rtmsg")
        family, dst_len, table = body[0], body[1], body[4]
        flags = uint(body[8:12])
        attrs = _attributes(body[12:])
        if _RTA_TABLE in attrs:
            table = uint(attrs[_RTA_TABLE])
        if dst_len != 0 or table != _RT_TABLE_MAIN or flags & _RTM_F_CLONED:
            continue
        devs: list[str] = []
        if _RTA_OIF in attrs:
            devs.append(_name(names, uint(attrs[_RTA_OIF])))
        gateway = _address(family, attrs[_RTA_GATEWAY]) if _RTA_GATEWAY in attrs else None
        hops = attrs.get(_RTA_MULTIPATH, b"")
        pos = 0
        while pos + 8 <= len(hops):  # struct rtnexthop: len, flags, hops, ifindex; attributes
            length = uint(hops[pos : pos + 2])
            if length < 8:
                raise ParseError("rtnetlink: bad nexthop length")
            dev = _name(names, uint(hops[pos + 4 : pos + 8]))
            if dev not in devs:
                devs.append(dev)
            pos += (length + 3) & ~3
        out.append(
            Route(
                dst="default",
                devs=tuple(devs),
                gateway=gateway,
                metric=uint(attrs[_RTA_PRIORITY]) if _RTA_PRIORITY in attrs else None,
            )
        )
    return out


def parse_addresses(data: bytes, names: dict[int, str]) -> list[Address]:
    """The addresses of an RTM_GETADDR dump, as ``ip -j addr show`` gives them."""
    out: list[Address] = []
    for body in messages(data, RTM_NEWADDR):
        if len(body) < 8:
            raise ParseError("rtnetlink: short ifaddrmsg")
        family, prefixlen, scope, index = body[0], body[1], body[3], uint(body[4:8])
        attrs = _attributes(body[8:])
        local = attrs.get(_IFA_LOCAL, attrs.get(_IFA_ADDRESS))
        if local is None:
            continue
        out.append(
            Address(
                ifname=_name(names, index),
                family="inet6" if family == AF_INET6 else "inet",
                local=_address(family, local),
                prefixlen=prefixlen,
                scope=_SCOPES.get(scope, str(scope)),
            )
        )
    return out


_TCA_KIND, _TCA_OPTIONS = 1, 2
_TC_H_ROOT = 0xFFFFFFFF
#: the kinds whose ``tc -j`` options :func:`parse_qdiscs` prints as tc does (iproute2 6.1
#: tc/tc_qdisc.c ``print_qdisc``; pfifo_fast through q_prio.c); with any other kind on the
#: device the caller runs tc
QDISC_KINDS = frozenset({"pfifo_fast", "noqueue", "mq", "ingress", "clsact"})


def _tc_handle(h: int) -> str:
    """tc's print_tc_classid."""
    if h == _TC_H_ROOT:
        return "root"
    if h == 0:
        return "none"
    major, minor = h >> 16, h & 0xFFFF
    if major == 0:
        return f":{minor:x}"
    return f"{major:x}:" if minor == 0 else f"{major:x}:{minor:x}"


def parse_qdiscs(data: bytes, ifindex: int) -> list[Qdisc] | None:
    """The qdiscs of link ``ifindex`` in an RTM_GETQDISC dump, in the kernel's order, as
    ``tc -j qdisc show dev DEV`` prints them; None when one is of a kind outside
    :data:`QDISC_KINDS` (tc knows how to print its options)."""
    out: list[Qdisc] = []
    for body in messages(data, RTM_NEWQDISC):
        if len(body) < 20:
            raise ParseError("rtnetlink: short tcmsg")
        if sint(body[4:8]) != ifindex:
            continue
        handle, parent = uint(body[8:12]), uint(body[12:16])
        attrs = _attributes(body[20:])
        if _TCA_KIND not in attrs:
            raise ParseError("rtnetlink: a qdisc without a kind")
        kind = text(attrs[_TCA_KIND])
        if kind not in QDISC_KINDS:
            return None
        raw = attrs.get(_TCA_OPTIONS, b"")
        options: dict[str, object] = {}
        if kind == "pfifo_fast" and raw:
            if len(raw) < 20:
                raise ParseError("rtnetlink: short pfifo_fast options")
            options = {"bands": uint(raw[0:4]), "priomap": list(raw[4:20]), "multiqueue": False}
        elif raw:
            return None  # options tc would print some way of its own
        out.append(
            Qdisc(
                kind=kind,
                handle=f"{handle >> 16:x}:",
                parent=None if parent == _TC_H_ROOT or parent == 0 else _tc_handle(parent),
                root=parent == _TC_H_ROOT,
                options=options,
            )
        )
    return out
