"""Unit tests for dtnkit.host.parsers.iproute.

Fixtures: ``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local``
(captured on the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail)
and ``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

import pytest
from tests.support.captures import (
    local,
    synthetic,
)

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.iproute import (
    parse_ip_addr_json,
    parse_ip_link_json,
    parse_ip_route_json,
)

# --------------------------------------------------------------------------- ip -j link


def test_ip_link_local_capture() -> None:
    links = {link.name: link for link in parse_ip_link_json(local("dkparse.ip-d-j-link-show.json"))}
    assert list(links) == ["lo", "dkv1", "dkv0", "dkbr0", "dkmq1", "dkmq0", "dkz0"]

    lo = links["lo"]
    assert (lo.index, lo.kind, lo.link_type, lo.operstate) == (1, None, "loopback", "UNKNOWN")
    assert (lo.min_mtu, lo.max_mtu, lo.mtu) == (0, None, 65536)  # max_mtu 0 = not reported
    assert lo.flags == ("LOOPBACK", "UP", "LOWER_UP")
    assert lo.info_data == {}

    dkv1 = links["dkv1"]
    assert dkv1.txqlen == 0  # txqueuelen 0: ip omits "txqlen"
    assert (dkv1.kind, dkv1.lower, dkv1.master, dkv1.max_mtu) == ("veth", "dkv0", None, 65535)

    dkv0 = links["dkv0"]
    assert (dkv0.master, dkv0.slave_kind, dkv0.lower, dkv0.txqlen) == (
        "dkbr0",
        "bridge",
        "dkv1",
        1000,
    )

    dkbr0 = links["dkbr0"]
    assert dkbr0.kind == "bridge"
    assert dkbr0.info_data["stp_state"] == 0

    assert links["dkmq0"].num_tx_queues == 4 and links["dkmq0"].num_rx_queues == 4
    # peer moved to another namespace: "link_index" + "link_netnsid", no "link"
    assert links["dkz0"].lower is None
    assert links["dkz0"].txqlen == 0


def test_ip_link_single_link_captures() -> None:
    [dkv1] = parse_ip_link_json(local("dkv1.ip-d-j-link-show.txqlen0.json"))
    assert (dkv1.name, dkv1.txqlen, dkv1.num_tx_queues) == ("dkv1", 0, 2)
    [dkz0] = parse_ip_link_json(local("dkz0.ip-d-j-link-show.peer-in-other-netns.json"))
    assert (dkz0.name, dkz0.index, dkz0.lower, dkz0.kind) == ("dkz0", 8, None, "veth")


def test_ip_link_bond_and_vlan_synthetic() -> None:
    links = {
        link.name: link
        for link in parse_ip_link_json(
            synthetic("ip-d-j-link-show.bond-802.3ad-vlan.synthetic.json")
        )
    }
    bond = links["bond0"]
    assert (bond.kind, bond.slave_kind, bond.master) == ("bond", None, None)
    assert bond.info_data["mode"] == "802.3ad"
    assert bond.info_data["xmit_hash_policy"] == "layer3+4"
    for name in ("ens5f0np0", "ens5f1np1"):
        member = links[name]
        assert (member.kind, member.slave_kind, member.master) == (None, "bond", "bond0")
        assert (member.mtu, member.max_mtu, member.txqlen) == (9000, 9978, 10000)
        assert "SLAVE" in member.flags
    vlan = links["bond0.111"]
    assert (vlan.kind, vlan.lower) == ("vlan", "bond0")
    assert vlan.info_data["id"] == 111 and vlan.info_data["protocol"] == "802.1Q"


def test_ip_link_minimal_and_empty() -> None:
    assert parse_ip_link_json("[]") == []
    [link] = parse_ip_link_json(
        '[{"ifindex": 9, "ifname": "x", "flags": [], "mtu": 1500, "operstate": "DOWN",'
        ' "link_type": "none", "link": null}]'
    )
    assert (link.min_mtu, link.max_mtu, link.num_tx_queues, link.lower) == (None, None, None, None)
    assert link.txqlen == 0 and link.info_data == {} and link.flags == ()


BASE_LINK = (
    '"ifindex": 1, "ifname": "x", "flags": [], "mtu": 1500, "operstate": "UP", "link_type": "ether"'
)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[",
        "{}",
        "[1]",
        '[{"ifname": "x"}]',
        "[{" + BASE_LINK.replace('"mtu": 1500', '"mtu": "1500"') + "}]",
        "[{" + BASE_LINK.replace('"flags": []', '"flags": "UP"') + "}]",
        "[{" + BASE_LINK + ', "linkinfo": []}]',
        "[{" + BASE_LINK + ', "linkinfo": {"info_data": 5}}]',
        "[{" + BASE_LINK + ', "txqlen": true}]',
        "[{" + BASE_LINK + ', "master": 3}]',
    ],
)
def test_ip_link_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ip_link_json(text)


# --------------------------------------------------------------------------- ip -j addr / route


def test_ip_addr_local_capture_scopes() -> None:
    addrs = parse_ip_addr_json(local("dkab-cap.ip-6-j-addr-show.json"))
    by = {(a.ifname, a.scope): a for a in addrs}
    assert by[("a0", "global")].local == "2001:db8:10::10"
    assert by[("a0", "global")].prefixlen == 64
    assert by[("a0", "link")].local.startswith("fe80::")
    assert by[("lo", "host")].local == "::1"
    assert {a.scope for a in addrs if a.ifname in ("a1", "b0", "b1")} == {"link"}
    assert all(a.family == "inet6" for a in addrs)


def test_ip_route_local_captures() -> None:
    two = parse_ip_route_json(local("dkab-cap.ip-j-route-show-default.two-metrics.json"))
    assert [(r.dst, r.devs, r.gateway, r.metric) for r in two] == [
        ("default", ("a0",), "198.51.100.1", 100),
        ("default", ("b0",), "203.0.113.1", 200),
    ]
    multi = parse_ip_route_json(local("dkab-cap.ip-j-route-show-default.multipath.json"))
    assert len(multi) == 1 and multi[0].default and multi[0].devs == ("a0", "b0")
    six = parse_ip_route_json(local("dkab-cap.ip-6-j-route-show-default.json"))
    assert six[0].devs == ("a0",) and six[0].gateway == "2001:db8:10::1"
    assert parse_ip_route_json(local("dkab-cap.ip-6-j-route-show-default.none.json")) == []


@pytest.mark.parametrize(
    "text", ["{}", '[{"dev": "a0"}]', '[{"dst": "default", "nexthops": 3}]', "[1]", "not json"]
)
def test_ip_route_refuses_bad_shapes(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ip_route_json(text)


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        '[{"ifname": "a0", "addr_info": {}}]',
        '[{"ifname": "a0", "addr_info": [{"family": "inet6"}]}]',
    ],
)
def test_ip_addr_refuses_bad_shapes(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ip_addr_json(text)
