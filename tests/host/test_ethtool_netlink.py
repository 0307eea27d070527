"""ethtool's reads from the kernel give what ethtool gives, on real devices.

A live Host reads rings, features, coalescing and pause through the ethtool generic-netlink
family and the driver through the SIOCETHTOOL ioctl (in this process, or in a namespace's
helper); a Host with a runner of the caller's own runs ethtool as a tree replays it.  Both
must agree: each read on every device of the root namespace (loopback included) and on a veth
and loopback in a namespace made here (veth has no pause or coalescing: "not supported" both
ways), the whole audit's findings, and damaged replies fall back to ethtool or fail cleanly.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import sh, veth_peer_netns

from dtnkit.host import facts
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError, ethtool_nl
from dtnkit.host.parsers import ethtool as text
from dtnkit.host.parsers.netlink import KernelRefused
from dtnkit.host.parsers.rtnetlink import parse_qdiscs
from dtnkit.host.runner import SubprocessRunner
from dtnkit.tune.audit import run_audit
from dtnkit.tune.profile import load_profile

F = Callable[..., None]


def needs_kernel(test: F) -> F:
    marked: F = pytest.mark.needs_root(pytest.mark.needs_netns(pytest.mark.needs_ethtool(test)))
    return marked


READS: list[tuple[str, Callable[[str], Any], Callable[[str], Any]]] = [
    ("-g", text.parse_ethtool_rings_json, text.parse_ethtool_rings_text),
    ("-k", text.parse_ethtool_features_json, text.parse_ethtool_features_text),
    ("-c", text.parse_ethtool_coalesce_json, text.parse_ethtool_coalesce_text),
    ("-a", text.parse_ethtool_pause_json, text.parse_ethtool_pause_text),
]


class OwnRunner(SubprocessRunner):
    """Not the plain runner: the Host runs ethtool itself (as a tree replays it)."""


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    """A namespace holding one end of a veth pair (its peer in a second namespace), up."""
    with veth_peer_netns("a19", ("a19v0", "a19v1")) as name:
        yield name


def both(netns: str | None) -> tuple[Host, Host]:
    """(a live Host that asks the kernel, a Host that runs ethtool)."""
    return Host.live(netns, read_only=True), Host(netns=netns, runner=OwnRunner(), read_only=True)


def compare(netns: str | None, dev: str) -> dict[str, Any]:
    kernel, tool = both(netns)
    got: dict[str, Any] = {}
    for flag, json_parser, text_parser in READS:
        mine = facts.ethtool_read(kernel, flag, dev, json_parser, text_parser)
        theirs = facts.ethtool_read(tool, flag, dev, json_parser, text_parser)
        assert mine == theirs, (dev, flag)
        got[flag] = mine
    assert facts.driver_info(kernel, dev) == facts.driver_info(tool, dev), dev
    got["-i"] = facts.driver_info(kernel, dev)
    assert replies_of(kernel, dev) is not None, "the live Host did not ask the kernel"
    assert tool.kernel is None
    ran = [key for key in tool_commands(kernel) if key[:1] == ("ethtool",)]
    assert ran == [], f"the live Host still ran {ran}"
    return got


def replies_of(host: Host, dev: str) -> dict[str, object] | None:
    view = host.kernel
    assert view is not None, "a live Host has a view of the kernel"
    return view.ethtool_replies(dev)


def tool_commands(host: Host) -> list[tuple[str, ...]]:
    """The commands a Host ran (its query cache: each query is cached until a write)."""
    return list(vars(host)["_cache"])


@needs_kernel
@pytest.mark.parametrize("where", ["root", "namespace"])
def test_each_read_matches_ethtool(ns: str, where: str) -> None:
    netns = ns if where == "namespace" else None
    devices = ["lo", "a19v0"] if netns else sorted(os.listdir("/sys/class/net"))
    for dev in devices:
        compare(netns, dev)
    if netns:
        veth = compare(netns, "a19v0")
        assert veth["-a"] == Unavailable("the driver does not support it")
        assert veth["-i"] is not None and veth["-i"]["driver"] == "veth"
        assert veth["-k"]["generic-receive-offload"].fixed is False
        lo = compare(netns, "lo")
        assert lo["-i"] is None  # loopback has no driver information: ethtool -i fails too


@needs_kernel
def test_a_missing_device_reads_as_ethtool_says(ns: str) -> None:
    got = compare(ns, "a19none")
    assert got["-g"] == Unavailable("no such device") and got["-i"] is None


@needs_kernel
@pytest.mark.parametrize("where", ["root", "namespace"])
def test_the_audit_finds_the_same(ns: str, where: str) -> None:
    netns = ns if where == "namespace" else None
    kernel, tool = both(netns)
    ifaces = ("a19v0",) if netns else None
    mine = run_audit(kernel, load_profile("dtn", ()), ifaces=ifaces).as_dict()
    theirs = run_audit(tool, load_profile("dtn", ()), ifaces=ifaces).as_dict()
    assert mine == theirs
    ethtool_items = [
        f
        for f in mine["findings"]
        if f["key"].split("/")[0] in ("ring", "feature", "coalesce", "pause")
    ]
    assert ethtool_items, "the audit read nothing through ethtool"
    assert not [k for k in tool_commands(kernel) if k[:1] == ("ethtool",)]


@needs_kernel
def test_a_write_drops_the_replies(ns: str) -> None:
    host = Host.live(ns)
    first = replies_of(host, "a19v0")
    assert first is not None and replies_of(host, "a19v0") is first
    host.change(["ethtool", "-K", "a19v0", "gro", "on"])
    try:
        again = replies_of(host, "a19v0")
        assert again is not None and again is not first
        feats = facts.ethtool_read(
            host, "-k", "a19v0", text.parse_ethtool_features_json, text.parse_ethtool_features_text
        )
        assert not isinstance(feats, Unavailable)
        assert feats["generic-receive-offload"].on is True
    finally:
        sh("ip", "netns", "exec", ns, "ethtool", "-K", "a19v0", "gro", "off", check=False)


@needs_kernel
def test_damaged_replies_fall_back_to_ethtool(ns: str) -> None:
    """Every reply cut short or flipped: the read still gives ethtool's answer."""
    kernel, tool = both(ns)
    replies = replies_of(kernel, "a19v0")
    assert replies is not None
    for damage in (lambda b: b[:10], lambda b: b[:-4], lambda b: b[:16] + b"\xff" * 8):
        host = Host.live(ns, read_only=True)
        hurt = {k: damage(v) if isinstance(v, bytes) else v for k, v in replies.items()}
        vars(host.kernel)["_ethtool"]["a19v0"] = hurt
        for flag, json_parser, text_parser in READS:
            assert facts.ethtool_read(
                host, flag, "a19v0", json_parser, text_parser
            ) == facts.ethtool_read(tool, flag, "a19v0", json_parser, text_parser)
        assert facts.driver_info(host, "a19v0") == facts.driver_info(tool, "a19v0")


# ------------------------------------------------------------------ sans I/O, no kernel needed

PARSERS: list[Callable[[bytes], object]] = [
    ethtool_nl.parse_family,
    ethtool_nl.parse_rings,
    ethtool_nl.parse_pause,
    ethtool_nl.parse_coalesce,
    ethtool_nl.parse_feature_names,
    ethtool_nl.parse_drvinfo,
    lambda b: ethtool_nl.parse_features(b, ["rx-gro", "tx-checksum-ipv4", ""]),
    lambda b: parse_qdiscs(b, 0),
]


def _message(cmd: int, attrs: bytes, msg_type: int = 30) -> bytes:
    body = bytes([cmd, 1, 0, 0]) + attrs
    return (
        (16 + len(body)).to_bytes(4, "little") + msg_type.to_bytes(2, "little") + bytes(10) + body
    )


def _attr(kind: int, value: bytes) -> bytes:
    return (
        (4 + len(value)).to_bytes(2, "little")
        + kind.to_bytes(2, "little")
        + value
        + bytes(-len(value) % 4)
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.sampled_from(range(len(PARSERS))))
def test_parsers_take_any_bytes(data: bytes, which: int) -> None:
    """Random bytes, or a valid header with random attributes: a value, a ParseError or
    KernelRefused (the caller's fallback), never another exception."""
    for blob in (data, _message(data[0] if data else 16, data)):
        with contextlib.suppress(ParseError, KernelRefused):
            PARSERS[which](blob)


def test_replies_built_by_hand() -> None:
    rings = _message(
        16,
        _attr(2, (4096).to_bytes(4, "little"))
        + _attr(6, (512).to_bytes(4, "little"))
        + _attr(5, (1024).to_bytes(4, "little"))
        + _attr(9, (256).to_bytes(4, "little")),
    )
    got = ethtool_nl.parse_rings(rings)
    assert (got.rx, got.rx_max, got.tx, got.tx_max, got.rx_mini) == (512, 4096, 256, 1024, None)
    with pytest.raises(ParseError, match="expected 16"):
        ethtool_nl.parse_rings(_message(20, b""))
    error = (
        (20).to_bytes(4, "little")
        + (2).to_bytes(2, "little")
        + bytes(10)
        + ((-95) & 0xFFFFFFFF).to_bytes(4, "little")
    )
    with pytest.raises(KernelRefused) as refused:
        ethtool_nl.parse_pause(error)
    assert refused.value.errno == ethtool_nl.EOPNOTSUPP
    coalesce = ethtool_nl.parse_coalesce(_message(20, _attr(11, b"\x01")))
    assert coalesce.adaptive_rx is True and coalesce.adaptive_tx is None
    assert coalesce.values["rx-usecs"] == "n/a" and coalesce.values["CQE mode RX"] == "n/a"
    with pytest.raises(ParseError, match="not a device name"):
        ethtool_nl.device_requests(20, "x" * 16)
    reqs = ethtool_nl.device_requests(20, "eth0", first_seq=5)
    assert [int.from_bytes(r[8:12], "little") for r in reqs] == [5, 6, 7, 8, 9]
    assert [r[16] for r in reqs] == [1, 11, 15, 19, 21]


def test_features_grouped_as_ethtool_shows_them() -> None:
    """A legacy flag with one kernel feature takes its state under the legacy name; with
    several, the legacy name is on when any is (fixed and requested unknown) and each feature
    follows; the rest under their own names."""
    names = ["tx-checksum-ipv4", "tx-checksum-ipv6", "rx-gro", "highdma", ""]
    count = len(names)

    def bits(*on: int) -> bytes:
        value = sum(1 << i for i in on).to_bytes(4, "little")
        return _attr(2, count.to_bytes(4, "little")) + _attr(4, value)

    reply = _message(
        11,
        _attr(2, bits(0, 2, 3)) + _attr(3, bits(0, 2)) + _attr(4, bits(1, 2)) + _attr(5, bits(3)),
    )
    got = ethtool_nl.parse_features(reply, names)
    assert got["tx-checksumming"] == text.Feature("tx-checksumming", True, False, None)
    assert got["tx-checksum-ipv4"] == text.Feature("tx-checksum-ipv4", False, False, True)
    assert got["tx-checksum-ipv6"] == text.Feature("tx-checksum-ipv6", True, True, False)
    assert got["generic-receive-offload"] == text.Feature(
        "generic-receive-offload", True, False, True
    )
    assert "rx-gro" not in got
    assert got["highdma"] == text.Feature("highdma", False, True, False)
    assert got["large-receive-offload"] == text.Feature("large-receive-offload", False, False, None)


# ------------------------------------------------------------------ qdiscs from rtnetlink

QDISC_SETUPS: list[tuple[str, list[list[str]], bool]] = [
    # (name, tc commands on a19q (4 tx queues), whether the kernel path answers without tc)
    ("default", [], True),
    ("mq", [["qdisc", "replace", "dev", "a19q", "root", "handle", "1:", "mq"]], True),
    (
        "mq+ingress",
        [
            ["qdisc", "replace", "dev", "a19q", "root", "handle", "1:", "mq"],
            ["qdisc", "add", "dev", "a19q", "ingress"],
        ],
        True,
    ),
    (
        "pfifo_fast+clsact",
        [
            ["qdisc", "replace", "dev", "a19q", "root", "pfifo_fast"],
            ["qdisc", "add", "dev", "a19q", "clsact"],
        ],
        True,
    ),
    (
        "pfifo",
        [["qdisc", "replace", "dev", "a19q", "root", "handle", "5:", "pfifo", "limit", "77"]],
        False,
    ),
    (
        "htb",
        [
            ["qdisc", "replace", "dev", "a19q", "root", "handle", "1:", "htb", "default", "10"],
            [
                "class",
                "add",
                "dev",
                "a19q",
                "parent",
                "1:",
                "classid",
                "1:10",
                "htb",
                "rate",
                "100mbit",
            ],
        ],
        False,
    ),
]


@needs_kernel
def test_qdiscs_match_tc(ns: str) -> None:
    """The root qdisc item reads the same from the kernel's dump as from `tc -j qdisc show`,
    for the kinds decoded here; other kinds (options only tc prints) still run tc."""
    from dtnkit.tune.kinds.qdisc import QdiscTunable

    sh(
        "ip",
        "-n",
        ns,
        "link",
        "add",
        "a19q",
        "numtxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "a19qp",
    )
    try:
        for name, commands, decoded in QDISC_SETUPS:
            sh("tc", "-n", ns, "qdisc", "del", "dev", "a19q", "root", check=False)
            sh("tc", "-n", ns, "qdisc", "del", "dev", "a19q", "ingress", check=False)
            sh("tc", "-n", ns, "qdisc", "del", "dev", "a19q", "clsact", check=False)
            for command in commands:
                sh("tc", "-n", ns, *command)
            kernel, tool = both(ns)
            mine = QdiscTunable("a19q").read(kernel)
            assert mine == QdiscTunable("a19q").read(tool), name
            assert (facts.kernel_qdiscs(kernel, "a19q") is not None) == decoded, name
            ran_tc = [k for k in tool_commands(kernel) if k[:1] == ("tc",)]
            assert (ran_tc == []) == decoded, (name, ran_tc)
            if name == "mq+ingress":
                assert isinstance(mine, dict) and mine["untouched"] == ["ingress"]
        assert facts.kernel_qdiscs(Host.live(ns, read_only=True), "a19none") is None
    finally:
        sh("ip", "-n", ns, "link", "del", "a19q", check=False)


def test_qdisc_dump_damage_is_a_parse_error() -> None:
    tcmsg = (
        bytes(4)
        + (3).to_bytes(4, "little")
        + (0x10000).to_bytes(4, "little")
        + (0xFFFFFFFF).to_bytes(4, "little")
        + bytes(4)
    )
    fifo = _attr(1, b"pfifo_fast\0") + _attr(2, (3).to_bytes(4, "little") + bytes(range(16)))
    msg = (
        (16 + 20 + len(fifo)).to_bytes(4, "little")
        + (36).to_bytes(2, "little")
        + bytes(10)
        + tcmsg
        + fifo
    )
    got = parse_qdiscs(msg, 3)
    assert got is not None and got[0].kind == "pfifo_fast" and got[0].root
    assert got[0].handle == "1:" and got[0].options["priomap"] == list(range(16))
    assert parse_qdiscs(msg, 4) == []
    with pytest.raises(ParseError):
        parse_qdiscs(msg[:30], 3)
    short = _attr(1, b"pfifo_fast\0") + _attr(2, bytes(8))
    with pytest.raises(ParseError, match="short pfifo_fast"):
        parse_qdiscs(
            (16 + 20 + len(short)).to_bytes(4, "little")
            + (36).to_bytes(2, "little")
            + bytes(10)
            + tcmsg
            + short,
            3,
        )
