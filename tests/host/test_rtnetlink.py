"""The kernel's rtnetlink dumps give what `ip -j` gives, on real namespaces.

A live Host reads links, default routes and IPv6 addresses from rtnetlink (in this process,
or in a namespace's helper); a Host with a runner of the caller's own runs `ip -j` as a tree
replays it.  Both must agree field by field: a bridge with veth members and a macvlan on top
(this kernel has no bonding or 8021q: the same master/lower rules), a veth whose peer is in
another namespace, IPv4 and IPv6 default routes (one of them multipath), global and
link-local IPv6 addresses; and the root namespace as it is.
"""

from __future__ import annotations

import select
import time
import uuid
from collections.abc import Iterator

import pytest
from tests.conftest import sh

from dtnkit.host import facts
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.iproute import Address, parse_ip_link_json
from dtnkit.host.parsers.rtnetlink import (
    DUMPS,
    dump_request,
    messages,
    parse_default_routes,
    parse_links,
)
from dtnkit.host.runner import SubprocessRunner

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]


class OwnRunner(SubprocessRunner):
    """Not the plain runner: the Host runs every `ip` command itself (as a tree replays)."""


def ns_sh(ns: str, *argv: str) -> None:
    sh("ip", "-n", ns, *argv)


@pytest.fixture(scope="module")
def stacked() -> Iterator[str]:
    """A namespace with br0 (members rtn0, rtn1), a macvlan on br0, a veth whose peer is in
    a second namespace, addresses and default routes of both families."""
    name = f"rtn{uuid.uuid4().hex[:8]}"
    peer = f"{name}p"
    try:
        for ns in (name, peer):
            sh("ip", "netns", "add", ns)
        ns_sh(name, "link", "add", "rtn0", "type", "veth", "peer", "name", "rtn0p")
        ns_sh(name, "link", "add", "rtn1", "type", "veth", "peer", "name", "rtn1p")
        ns_sh(name, "link", "add", "br0", "type", "bridge")
        ns_sh(name, "link", "add", "mv0", "link", "br0", "type", "macvlan", "mode", "bridge")
        ns_sh(name, "link", "add", "rtnx", "type", "veth", "peer", "name", "rtnxp", "netns", peer)
        ns_sh(name, "link", "add", "up0", "type", "veth", "peer", "name", "up1")
        for dev in ("rtn0", "rtn1"):
            ns_sh(name, "link", "set", dev, "master", "br0")
        ns_sh(name, "link", "set", "rtn1", "mtu", "9000")
        ns_sh(name, "link", "set", "up0", "txqueuelen", "0")
        for dev in ("lo", "rtn0", "rtn0p", "rtn1", "rtn1p", "br0", "mv0", "rtnx", "up0", "up1"):
            ns_sh(name, "link", "set", dev, "up")
        ns_sh(peer, "link", "set", "rtnxp", "up")
        ns_sh(name, "addr", "add", "10.18.0.1/24", "dev", "mv0")
        ns_sh(name, "addr", "add", "10.18.1.1/24", "dev", "up0")
        ns_sh(name, "-6", "addr", "add", "2001:db8:18::1/64", "dev", "mv0", "nodad")
        ns_sh(name, "-6", "addr", "add", "2001:db8:19::1/64", "dev", "up0", "nodad")
        ns_sh(
            name,
            "route",
            "add",
            "default",
            "nexthop",
            "via",
            "10.18.0.2",
            "dev",
            "mv0",
            "nexthop",
            "via",
            "10.18.1.2",
            "dev",
            "up0",
        )
        ns_sh(
            name,
            "-6",
            "route",
            "add",
            "default",
            "via",
            "2001:db8:18::2",
            "dev",
            "mv0",
            "metric",
            "10",
        )
        ns_sh(name, "route", "add", "default", "via", "10.18.1.2", "table", "100")  # not main
        settled(name)
        yield name
    finally:
        for ns in (name, peer):
            sh("ip", "netns", "del", ns, check=False)


def settled(ns: str) -> None:
    """Wait until every link that is up says so: the kernel sets a new link's operstate
    asynchronously (linkwatch), and the two reads under test must see the same state."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        links = parse_ip_link_json(sh("ip", "-n", ns, "-j", "link", "show").stdout)
        if all(link.operstate in ("UP", "UNKNOWN") for link in links if "UP" in link.flags):
            return
        select.select([], [], [], 0.05)  # poll the condition, not a fixed sleep
    raise AssertionError(f"links in {ns} did not come up: {links}")


def dumps_of(host: Host) -> dict[str, bytes] | None:
    view = host.kernel
    assert view is not None, "a live Host has a view of the kernel"
    return view.rtnl_dumps()


def both(netns: str | None) -> tuple[Host, Host]:
    """(a live Host that asks the kernel, a Host that runs `ip -j`)."""
    kernel = Host.live(netns, read_only=True)
    assert dumps_of(kernel) is not None, "the live Host did not get the kernel's dumps"
    ip = Host(netns=netns, runner=OwnRunner(), read_only=True)
    assert ip.kernel is None
    return kernel, ip


def addr_key(a: Address) -> tuple[str, str, str, int, str]:
    return (a.ifname, a.family, a.local, a.prefixlen, a.scope)


@pytest.mark.parametrize("where", ["namespace", "root"])
def test_links_routes_and_addresses_match_ip(stacked: str, where: str) -> None:
    netns = stacked if where == "namespace" else None
    kernel, ip = both(netns)
    got, want = facts.interfaces(kernel), facts.interfaces(ip)
    assert got == want
    if netns:
        assert want["rtn1"].master == "br0" and want["br0"].members == ("rtn0", "rtn1")
        assert want["mv0"].lower == "br0" and want["mv0"].kind == "macvlan"
        assert want["rtn1"].mtu == 9000 and want["up0"].txqlen == 0
        assert want["rtnx"].lower is None  # its peer is in another namespace
    for family in ("-4", "-6"):
        routes = facts.default_routes(kernel, family)
        assert routes == facts.default_routes(ip, family)
    assert facts.default_route_devices(kernel) == facts.default_route_devices(ip)
    if netns:
        v4 = facts.default_routes(kernel, "-4")
        assert not isinstance(v4, Unavailable) and [r.devs for r in v4] == [("mv0", "up0")]
        v6 = facts.default_routes(kernel, "-6")
        assert not isinstance(v6, Unavailable)
        assert [(r.devs, r.gateway, r.metric) for r in v6] == [(("mv0",), "2001:db8:18::2", 10)]
    got_a, want_a = facts.addresses(kernel), facts.addresses(ip)
    assert not isinstance(got_a, Unavailable) and not isinstance(want_a, Unavailable)
    assert sorted(map(addr_key, got_a)) == sorted(map(addr_key, want_a))
    if netns:
        scopes = {(a.ifname, a.scope) for a in got_a if a.ifname == "mv0"}
        assert scopes == {("mv0", "global"), ("mv0", "link")}


def test_every_link_field_matches_ip_json(stacked: str) -> None:
    """Beyond what facts keeps: each parsed field against `ip -d -j link show` itself."""
    kernel = Host.live(stacked, read_only=True)
    dumps = dumps_of(kernel)
    assert dumps is not None
    ours = parse_links(dumps["link"])
    theirs = parse_ip_link_json(sh("ip", "-n", stacked, "-d", "-j", "link", "show").stdout)
    assert [link.name for link in ours] == [link.name for link in theirs]
    for mine, ip in zip(ours, theirs, strict=True):
        for name in (
            "index",
            "kind",
            "master",
            "lower",
            "mtu",
            "max_mtu",
            "txqlen",
            "operstate",
            "num_tx_queues",
        ):
            assert getattr(mine, name) == getattr(ip, name), (mine.name, name)


def test_a_write_drops_the_dumps(stacked: str) -> None:
    host = Host.live(stacked)
    assert facts.interfaces(host)["up1"].mtu == 1500
    try:
        host.change(["ip", "link", "set", "up1", "mtu", "1400"])
        assert facts.interfaces(host)["up1"].mtu == 1400
    finally:
        ns_sh(stacked, "link", "set", "up1", "mtu", "1500")


def test_requests_and_replies_without_a_socket() -> None:
    """The sans-I/O half: request layout, message walking, and damaged replies refused."""
    req = dump_request("route6", 7)
    assert len(req) == 28 and req[16] == 10 and int.from_bytes(req[8:12], "little") == 7
    assert set(DUMPS) == {"link", "route4", "route6", "addr6", "qdisc"}
    done = (20).to_bytes(4, "little") + (3).to_bytes(2, "little") + bytes(14)
    assert list(messages(done, 16)) == []
    with pytest.raises(ParseError, match="truncated"):
        list(messages((64).to_bytes(4, "little") + bytes(16), 16))
    error = (
        (20).to_bytes(4, "little")
        + (2).to_bytes(2, "little")
        + bytes(10)
        + ((-1) & 0xFFFFFFFF).to_bytes(4, "little")
    )
    with pytest.raises(ParseError, match="errno 1"):
        parse_default_routes(error, {})
    with pytest.raises(ParseError, match="no name"):
        link = (32).to_bytes(4, "little") + (16).to_bytes(2, "little") + bytes(10) + bytes(16)
        parse_links(link + done)
