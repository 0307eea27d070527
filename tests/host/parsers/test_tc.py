"""Unit tests for dtnkit.host.parsers.tc.

Fixtures: ``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local``
(captured on the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail)
and ``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

import pytest
from tests.support.captures import (
    captured,
    local,
)

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.tc import parse_tc_class_text, parse_tc_qdisc_json, parse_tc_qdisc_text

# --------------------------------------------------------------------------- tc qdisc


TC_DEVICES = ["dkmq0", "dkmq1", "dkv1", "dkv0"]


@pytest.mark.parametrize("device", TC_DEVICES)
def test_tc_text_and_json_agree(device: str) -> None:
    json_ = parse_tc_qdisc_json(local(f"{device}.tc-j-qdisc-show.json"))
    text = parse_tc_qdisc_text(local(f"{device}.tc-qdisc-show.txt"))
    assert [(q.kind, q.handle, q.parent, q.root) for q in text] == [
        (q.kind, q.handle, q.parent, q.root) for q in json_
    ]


def test_tc_json_mq_children() -> None:
    qdiscs = parse_tc_qdisc_json(local("dkmq0.tc-j-qdisc-show.json"))
    root, *children = qdiscs
    assert (root.kind, root.handle, root.parent, root.root, root.options) == (
        "mq",
        "1234:",
        None,
        True,
        {},
    )
    assert sorted(child.parent or "" for child in children) == [f"1234:{i}" for i in range(1, 5)]
    assert all(child.kind == "pfifo_fast" and not child.root for child in children)
    assert children[0].options["priomap"] == [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]


def test_tc_json_tbf_and_htb_options() -> None:
    [tbf] = parse_tc_qdisc_json(local("dkv1.tc-j-qdisc-show.json"))
    assert tbf.options == {"rate": 125000000, "burst": 131000, "lat": 50000}
    htb, pfifo = parse_tc_qdisc_json(local("dkmq1.tc-j-qdisc-show.json"))
    assert htb.options["default"] == "0x10"
    assert (pfifo.kind, pfifo.handle, pfifo.parent, pfifo.options) == (
        "pfifo",
        "10:",
        "1:10",
        {"limit": 500},
    )


def test_tc_text_options() -> None:
    [tbf] = parse_tc_qdisc_text(local("dkv1.tc-qdisc-show.txt"))
    assert tbf.options == {
        "raw": "rate 1Gbit burst 131000b lat 50ms",
        "rate": "1Gbit",
        "burst": "131000b",
        "lat": "50ms",
    }
    [noqueue] = parse_tc_qdisc_text(local("dkv0.tc-qdisc-show.txt"))
    assert noqueue.options == {"raw": ""}
    htb, _ = parse_tc_qdisc_text(local("dkmq1.tc-qdisc-show.txt"))
    assert htb.options["r2q"] == 10 and htb.options["default"] == "0x10"


def test_tc_text_mq_fq_capture() -> None:
    qdiscs = parse_tc_qdisc_text(captured("mq-fq.tc-qdisc-show.excerpt.txt"))
    assert [(q.kind, q.handle, q.parent, q.root) for q in qdiscs] == [
        ("mq", "1234:", None, True),
        ("fq", "8001:", "1234:1", False),
        ("fq", "8003:", "1234:3", False),
        ("fq", "8005:", "1234:5", False),
        ("fq", "8007:", "1234:7", False),
    ]
    fq = qdiscs[1].options
    assert str(fq["raw"]).startswith("limit 10000p flow_limit 250p")
    assert str(fq["raw"]).endswith("horizon 10s horizon_drop")
    assert fq["limit"] == "10000p"
    assert fq["buckets"] == 32768
    assert fq["weights"] == [589824, 196608, 65536]
    assert fq["low_rate_threshold"] == "550Kbit"
    assert fq["horizon"] == "10s"
    assert "horizon_drop" not in fq  # a flag without a value stays only in "raw"
    assert "maxrate" not in fq


def test_tc_text_all_devices_and_stats_rows() -> None:
    text = (
        "qdisc noqueue 0: dev lo root refcnt 2 \n"
        " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n"
        " backlog 0b 0p requeues 0\n"
        "qdisc fq 8002: dev eth0 parent 1234:2 limit 10000p maxrate 10Gbit\n"
        "qdisc ingress ffff: dev eth0 parent ffff:fff1 ----------------\n"
    )
    noqueue, fq, ingress = parse_tc_qdisc_text(text)
    assert (noqueue.kind, noqueue.root, noqueue.options) == ("noqueue", True, {"raw": ""})
    assert (fq.parent, fq.options["maxrate"]) == ("1234:2", "10Gbit")
    assert (ingress.kind, ingress.handle, ingress.parent, ingress.root) == (
        "ingress",
        "ffff:",
        "ffff:fff1",
        False,
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        'Cannot find device "nope"\n',
        "qdisc\n",
        "qdisc fq 8001:\n",
        "qdisc fq 8001: sideways 1\n",
        "qdisc fq nohandle root\n",
        "qdisc fq 8001: parent\n",
    ],
)
def test_tc_text_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_tc_qdisc_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[",
        "{}",
        "[1]",
        '[{"handle": "0:"}]',
        '[{"kind": "fq", "handle": 1}]',
        '[{"kind": "fq", "handle": "0:", "root": "yes"}]',
        '[{"kind": "fq", "handle": "0:", "options": []}]',
    ],
)
def test_tc_json_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_tc_qdisc_json(text)


# --------------------------------------------------------------------------- tc class

# `tc -d class show dev eth0` from iproute2 6.1 on the development VM (also what `tc -j -d`
# prints there: htb classes have no JSON form in 6.1).
HTB_CLASSES = (
    "class htb 1:10 parent 1:1 leaf 10: prio 2 quantum 3000 rate 123456Kbit ceil 987654Kbit "
    "linklayer ethernet burst 12314b/1 mpu 0b cburst 5185b/1 mpu 0b level 0 \n"
    "class htb 1:1 root rate 1Gbit ceil 2Gbit linklayer ethernet burst 15125b/1 mpu 0b "
    "cburst 20000b/1 mpu 0b level 7 \n"
    "class mq 7:2 root leaf 30: \n"
)


def test_tc_class_text_htb_and_mq() -> None:
    leaf, inner, mq = parse_tc_class_text(HTB_CLASSES)
    assert (leaf.kind, leaf.classid, leaf.parent, leaf.leaf) == ("htb", "1:10", "1:1", "10:")
    assert leaf.options == {
        "prio": "2",
        "quantum": "3000",
        "rate": "123456Kbit",
        "ceil": "987654Kbit",
        "linklayer": "ethernet",
        "burst": "12314b/1",
        "mpu": "0b",
        "cburst": "5185b/1",
        "level": "0",
    }
    assert (inner.parent, inner.leaf, inner.options["burst"]) == (None, None, "15125b/1")
    assert (mq.kind, mq.classid, mq.parent, mq.leaf, mq.options) == ("mq", "7:2", None, "30:", {})
    assert parse_tc_class_text("") == []


@pytest.mark.parametrize(
    "text", ["qdisc htb 1: root\n", "class htb\n", "class htb 1:1 sideways\n", "class htb 1 root\n"]
)
def test_tc_class_text_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_tc_class_text(text)
