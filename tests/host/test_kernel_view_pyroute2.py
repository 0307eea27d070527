"""The kernel view's netlink decoding agrees with pyroute2's reading of the same kernel.

dtnkit frames and decodes its netlink messages itself (importing pyroute2 costs more than a
live audit: docs/architecture.md), so pyroute2 is the independent reading here: the links,
default routes, IPv6 addresses and qdiscs of a namespace with a bridge, a macvlan, a veth whose
peer is elsewhere, a multipath route and a multi-queue device, and the rings of every device
of the root namespace, decoded from the bytes `Host.kernel` got, field by field against what
pyroute2's IPRoute and NlEthtool decode for the same objects.
"""

from __future__ import annotations

import os
import select
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.generic.ethtool import NlEthtool
from pyroute2.netlink.rtnl import rt_scope
from pyroute2.netns import popns, pushns
from tests.conftest import sh

from dtnkit.host.host import Host
from dtnkit.host.kernel import KernelView
from dtnkit.host.parsers import ethtool_nl
from dtnkit.host.parsers.netlink import KernelRefused
from dtnkit.host.parsers.rtnetlink import (
    link_names,
    parse_addresses,
    parse_default_routes,
    parse_links,
    parse_qdiscs,
)

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]

AF_INET, AF_INET6, MAIN_TABLE = 2, 10, 254


def ns_sh(ns: str, *argv: str) -> None:
    sh("ip", "-n", ns, *argv)


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    name = f"kvp{uuid.uuid4().hex[:8]}"
    peer = f"{name}p"
    try:
        for made in (name, peer):
            sh("ip", "netns", "add", made)
        ns_sh(name, "link", "add", "kv0", "type", "veth", "peer", "name", "kv0p")
        ns_sh(name, "link", "add", "kv1", "type", "veth", "peer", "name", "kv1p")
        ns_sh(name, "link", "add", "br0", "type", "bridge")
        ns_sh(name, "link", "add", "mv0", "link", "br0", "type", "macvlan", "mode", "bridge")
        ns_sh(name, "link", "add", "kvx", "type", "veth", "peer", "name", "kvxp", "netns", peer)
        ns_sh(
            name,
            "link",
            "add",
            "mq0",
            "numtxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "mq1",
            "numtxqueues",
            "4",
        )
        for dev in ("kv0", "kv1"):
            ns_sh(name, "link", "set", dev, "master", "br0")
        ns_sh(name, "link", "set", "kv1", "mtu", "9000")
        ns_sh(name, "link", "set", "mq0", "txqueuelen", "0")
        for dev in ("lo", "kv0", "kv0p", "kv1", "kv1p", "br0", "mv0", "kvx", "mq0", "mq1"):
            ns_sh(name, "link", "set", dev, "up")
        ns_sh(peer, "link", "set", "kvxp", "up")
        sh("tc", "-n", name, "qdisc", "replace", "dev", "mq0", "root", "handle", "1:", "mq")
        for q in range(1, 5):
            sh("tc", "-n", name, "qdisc", "replace", "dev", "mq0", "parent", f"1:{q}", "pfifo_fast")
        sh("tc", "-n", name, "qdisc", "add", "dev", "kvx", "ingress")
        ns_sh(name, "addr", "add", "10.77.0.1/24", "dev", "mv0")
        ns_sh(name, "addr", "add", "10.77.1.1/24", "dev", "mq0")
        ns_sh(name, "-6", "addr", "add", "2001:db8:77::1/64", "dev", "mv0", "nodad")
        ns_sh(name, "-6", "addr", "add", "fd00:77::1/64", "dev", "mq0", "nodad")
        ns_sh(
            name,
            "route",
            "add",
            "default",
            "nexthop",
            "via",
            "10.77.0.2",
            "dev",
            "mv0",
            "nexthop",
            "via",
            "10.77.1.2",
            "dev",
            "mq0",
        )
        ns_sh(
            name,
            "-6",
            "route",
            "add",
            "default",
            "via",
            "2001:db8:77::2",
            "dev",
            "mv0",
            "metric",
            "10",
        )
        ns_sh(name, "route", "add", "default", "via", "10.77.1.2", "table", "100")  # not main
        settled(name)
        yield name
    finally:
        for made in (name, peer):
            sh("ip", "netns", "del", made, check=False)


@contextmanager
def iproute(netns: str | None) -> Iterator[IPRoute]:
    """pyroute2's IPRoute on a socket opened inside ``netns`` (a socket stays in the
    namespace it was opened in).  Not ``IPRoute(netns=...)``: that forks a copy of this
    process and ends it with SIGTERM, which the test session turns into a KeyboardInterrupt,
    so the copy would run the fixtures' clean-ups and delete the namespace."""
    if netns:
        pushns(netns)
    try:
        ipr = IPRoute()
    finally:
        if netns:
            popns()
    try:
        yield ipr
    finally:
        ipr.close()


def settled(ns: str) -> None:
    """Until no link is still coming up (the kernel sets operstate asynchronously): both
    reads must see the same state."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with iproute(ns) as ipr:
            states = [
                link.get("IFLA_OPERSTATE") for link in ipr.get_links() if link["flags"] & 1
            ]  # IFF_UP
        if all(state in ("UP", "UNKNOWN") for state in states):
            return
        select.select([], [], [], 0.05)  # poll the condition, not a fixed sleep
    raise AssertionError(f"links in {ns} did not come up: {states}")


def view(netns: str | None) -> KernelView:
    kernel = Host.live(netns, read_only=True).kernel
    assert kernel is not None
    return kernel


def dumps(netns: str | None) -> dict[str, bytes]:
    got = view(netns).rtnl_dumps()
    assert got is not None, "the live Host did not get the kernel's dumps"
    return got


def theirs_links(ipr: IPRoute) -> list[tuple[object, ...]]:
    """pyroute2's links with ip's naming rules (as NlLink.as_tuple orders its fields)."""
    links = list(ipr.get_links())
    names = {link["index"]: link.get("IFLA_IFNAME") for link in links}
    out = []
    for link in links:
        iflink = link.get("IFLA_LINK")
        lower = (
            names.get(iflink, f"if{iflink}")
            if iflink and link.get("IFLA_LINK_NETNSID") is None
            else None
        )
        master = link.get("IFLA_MASTER")
        out.append(
            (
                link["index"],
                link.get(("IFLA_LINKINFO", "IFLA_INFO_KIND")),
                lower,
                names.get(master, f"if{master}") if master else None,
                link.get("IFLA_MAX_MTU") or None,
                link.get("IFLA_MTU"),
                link.get("IFLA_IFNAME"),
                link.get("IFLA_NUM_TX_QUEUES"),
                link.get("IFLA_OPERSTATE"),
                link.get("IFLA_TXQLEN") or 0,
            )
        )
    return out


@pytest.mark.parametrize("where", ["namespace", "root"])
def test_links_decode_as_pyroute2_reads_them(ns: str, where: str) -> None:
    netns = ns if where == "namespace" else None
    ours = [link.as_tuple() for link in parse_links(dumps(netns)["link"])]
    with iproute(netns) as ipr:
        theirs = theirs_links(ipr)
    if netns is None:  # the root namespace is shared: compare the links both saw
        common = {t[0] for t in ours} & {t[0] for t in theirs}
        ours = [t for t in ours if t[0] in common and t[8] in ("UP", "UNKNOWN", "DOWN")]
        theirs = [t for t in theirs if t[0] in common and t[8] in ("UP", "UNKNOWN", "DOWN")]
    assert ours == theirs
    if netns:
        by_name = {t[6]: t for t in ours}
        assert by_name["mv0"][1:3] == ("macvlan", "br0") and by_name["kv1"][3] == "br0"
        assert by_name["kvx"][2] is None and by_name["mq0"][7] == 4


def test_default_routes_and_addresses_decode_as_pyroute2_reads_them(ns: str) -> None:
    got = dumps(ns)
    names = link_names(parse_links(got["link"]))
    with iproute(ns) as ipr:
        for family, dump in ((AF_INET, "route4"), (AF_INET6, "route6")):
            theirs = []
            for route in ipr.get_default_routes(family=family):
                if route.get("RTA_TABLE") != MAIN_TABLE:
                    continue  # (its table= filter lets table 100's through)
                devs = [names[route.get("RTA_OIF")]] if route.get("RTA_OIF") else []
                for hop in route.get("RTA_MULTIPATH") or []:
                    if names[hop["oif"]] not in devs:
                        devs.append(names[hop["oif"]])
                theirs.append((tuple(devs), route.get("RTA_GATEWAY"), route.get("RTA_PRIORITY")))
            ours = [(r.devs, r.gateway, r.metric) for r in parse_default_routes(got[dump], names)]
            assert ours == theirs, family
            assert ours, f"no default route of family {family}"
        scopes = {
            number: ("global" if name == "universe" else name)
            for name, number in rt_scope.items()
            if isinstance(name, str)
        }
        theirs_addrs = sorted(
            (
                names[a["index"]],
                a.get("IFA_LOCAL") or a.get("IFA_ADDRESS"),
                a["prefixlen"],
                scopes[a["scope"]],
            )
            for a in ipr.get_addr(family=AF_INET6)
        )
    ours_addrs = sorted(
        (a.ifname, a.local, a.prefixlen, a.scope) for a in parse_addresses(got["addr6"], names)
    )
    assert ours_addrs == theirs_addrs
    assert ("mv0", "2001:db8:77::1", 64, "global") in ours_addrs


def _handle(h: int) -> str:
    return f"{h >> 16:x}:" if h & 0xFFFF == 0 else f"{h >> 16:x}:{h & 0xFFFF:x}"


def test_qdiscs_decode_as_pyroute2_reads_them(ns: str) -> None:
    got = dumps(ns)
    links = parse_links(got["link"])
    compared = 0
    with iproute(ns) as ipr:
        for link in links:
            ours = parse_qdiscs(got["qdisc"], link.index)
            assert ours is not None, link.name  # only kinds the decoder prints, here
            theirs = [
                (
                    q.get("TCA_KIND"),
                    _handle(q["handle"]),
                    None if q["parent"] in (0, 0xFFFFFFFF) else _handle(q["parent"]),
                    q["parent"] == 0xFFFFFFFF,
                )
                for q in ipr.get_qdiscs(index=link.index)
            ]
            assert [(q.kind, q.handle, q.parent, q.root) for q in ours] == theirs, link.name
            compared += len(ours)
    by_dev = {link.name: parse_qdiscs(got["qdisc"], link.index) for link in links}
    assert [q.kind for q in by_dev["mq0"] or []] == ["mq"] + ["pfifo_fast"] * 4
    assert [q.kind for q in by_dev["kvx"] or []][-1:] == ["ingress"]
    assert compared >= 6


RINGS = ("rx_max", "rx_mini_max", "rx_jumbo_max", "tx_max", "rx", "rx_mini", "rx_jumbo", "tx")


def theirs_rings(dev: str) -> tuple[object, ...] | int:
    """pyroute2's ETHTOOL_MSG_RINGS_GET reply in the order of RINGS, or its errno."""
    try:
        with NlEthtool() as nl:
            reply: Any = nl.get_rings(ifname=dev)[0]
    except NetlinkError as exc:
        return int(exc.code)
    return tuple(reply.get(f"ETHTOOL_A_RINGS_{name.upper()}") for name in RINGS)


def test_rings_decode_as_pyroute2_reads_them() -> None:
    """Every device of the root namespace (pyroute2's ethtool socket works there): the
    same ring sizes, or the same refusal."""
    kernel = view(None)
    with_rings = 0
    for dev in sorted(os.listdir("/sys/class/net")):
        replies = kernel.ethtool_replies(dev)
        assert replies is not None and isinstance(replies["rings"], bytes), dev
        try:
            rings = ethtool_nl.parse_rings(replies["rings"])
            ours: tuple[object, ...] | int = tuple(getattr(rings, name) for name in RINGS)
            with_rings += 1
        except KernelRefused as exc:
            ours = exc.errno
        assert ours == theirs_rings(dev), dev
    if not with_rings:
        pytest.skip("no device here has rings to compare (each refusal matched)")
