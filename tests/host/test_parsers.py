"""Unit tests for dtnkit.host.parsers against real and synthetic tool output.

Fixtures: ``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local``
(captured on the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail)
and ``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dtnkit.host import parsers as p
from dtnkit.host.parsers import (
    Bond,
    Channels,
    Coalesce,
    Feature,
    Interrupt,
    ParseError,
    Pause,
    Rings,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CAPTURED = FIXTURES / "captured"
LOCAL = CAPTURED / "local"
MAIL = CAPTURED / "mail"
SYNTHETIC = FIXTURES / "synthetic"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def captured(name: str) -> str:
    return read(CAPTURED / name)


def local(name: str) -> str:
    return read(LOCAL / name)


def synthetic(name: str) -> str:
    return read(SYNTHETIC / name)


# --------------------------------------------------------------------------- fixtures sanity


def test_fixture_dirs_document_their_files() -> None:
    sources = read(CAPTURED / "SOURCES.md")
    for path in CAPTURED.glob("*.*"):
        if path.name != "SOURCES.md":
            assert path.name in sources, path.name
    for folder in (LOCAL, MAIL, SYNTHETIC):
        readme = read(folder / "README.md")
        for path in folder.iterdir():
            if path.name != "README.md":
                assert path.name.split(".stdout")[0].split(".stderr")[0] in readme, path
    assert all("synthetic" in path.name for path in SYNTHETIC.iterdir() if path.suffix != ".md")


def test_parse_error_is_value_error_with_line_number() -> None:
    with pytest.raises(ParseError) as info:
        p.parse_sysctl_conf("a = 1\n\nbroken line\n")
    assert isinstance(info.value, ValueError)
    assert info.value.lineno == 3
    assert "line 3" in str(info.value)
    assert "broken line" in str(info.value)


def test_dataclasses_are_frozen() -> None:
    rings = p.parse_ethtool_rings_text(captured("unknown-eth0.ethtool-g.4096.txt"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        rings.rx = 1  # type: ignore[misc]


# --------------------------------------------------------------------------- sysctl


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("4096\t131072\t33554432\n", "4096 131072 33554432"),
        ("  4096   87380    268435456 ", "4096 87380 268435456"),
        ("bbr", "bbr"),
        ("", ""),
        (" \t\n", ""),
    ],
)
def test_normalize_sysctl(raw: str, expected: str) -> None:
    assert p.normalize_sysctl(raw) == expected


def test_sysctl_conf_synthetic_dtn_file() -> None:
    assert p.parse_sysctl_conf(synthetic("sysctl.d-90-dtn.synthetic.conf")) == {
        "net.core.rmem_max": "1073741824",  # assigned twice: the later one wins
        "net.core.wmem_max": "536870912",
        "net.ipv4.tcp_rmem": "4096 87380 268435456",
        "net.ipv4.tcp_wmem": "4096 65536 268435456",
        "net.ipv4.tcp_congestion_control": "bbr",  # leading '-' dropped
        "net.core.default_qdisc": "fq",  # path form converted
        "net.ipv4.conf.bond0/111.rp_filter": "2",  # dot inside an interface name
        "net.ipv4.tcp_mtu_probing": "1",
    }


def test_sysctl_conf_debian_default_is_all_comments() -> None:
    assert p.parse_sysctl_conf(local("debian12.etc-sysctl.conf")) == {}


def test_sysctl_conf_systemd_file() -> None:
    assert p.parse_sysctl_conf(local("systemd.50-pid-max.conf")) == {"kernel.pid_max": "4194304"}


def test_sysctl_keys_output_keeps_tabs_which_are_normalized() -> None:
    text = local("sysctl.tcp-keys.txt")
    assert "\t" in text  # sysctl(8) prints multi-value keys with the /proc/sys TABs
    parsed = p.parse_sysctl_conf(text)
    assert parsed["net.ipv4.tcp_rmem"] == p.normalize_sysctl(
        local("proc-sys-net-ipv4-tcp_rmem.txt")
    )
    assert parsed["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert parsed["net.core.rmem_max"] == "4194304"
    assert parsed["net.ipv4.tcp_congestion_control"] == "bbr"


def test_sysctl_a_full_output() -> None:
    text = local("dkparse.sysctl-a.txt")
    parsed = p.parse_sysctl_conf(text)
    keys = [line.partition(" = ")[0] for line in text.splitlines()]
    assert len(parsed) == len(set(keys)) > 1000
    assert parsed["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    # a multi-line value is printed as one row per line; the last one wins
    assert keys.count("kernel.core_modes") == 3
    assert parsed["kernel.core_modes"] == "socket"
    assert parsed["kernel.panic_sys_info"] == ""  # "key = " with nothing after it
    assert all(" " not in key and "\t" not in key for key in parsed)


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("kernel/pid_max = 1", "kernel.pid_max"),
        ("net/ipv4/conf/eth0.111/rp_filter = 1", "net.ipv4.conf.eth0/111.rp_filter"),
        ("net.ipv4.conf.eth0/111.rp_filter = 1", "net.ipv4.conf.eth0/111.rp_filter"),
        ("-net/core/rmem_max=1", "net.core.rmem_max"),
        ("- net.core.rmem_max = 1", "net.core.rmem_max"),
        ("net.ipv4.conf.*.rp_filter = 1", "net.ipv4.conf.*.rp_filter"),
        ("vm.swappiness=1", "vm.swappiness"),
    ],
)
def test_sysctl_conf_key_forms(line: str, key: str) -> None:
    assert p.parse_sysctl_conf(line) == {key: "1"}


def test_sysctl_conf_value_may_contain_equals_and_comment_chars() -> None:
    parsed = p.parse_sysctl_conf("kernel.core_pattern = |/usr/bin/x a=b # c\n")
    assert parsed == {"kernel.core_pattern": "|/usr/bin/x a=b # c"}


@pytest.mark.parametrize("text", ["", "\n\n", "# only\n; comments\n   # indented\n"])
def test_sysctl_conf_empty(text: str) -> None:
    assert p.parse_sysctl_conf(text) == {}


@pytest.mark.parametrize(
    ("text", "lineno"),
    [
        ("net.core.rmem_max = 1\nnet.core.wmem_max 2\n", 2),
        ("# c\n\n= 5\n", 3),
        ("- = 5\n", 1),
        ("justaword", 1),
    ],
)
def test_sysctl_conf_malformed(text: str, lineno: int) -> None:
    with pytest.raises(ParseError, match=f"line {lineno}") as info:
        p.parse_sysctl_conf(text)
    assert info.value.lineno == lineno


# --------------------------------------------------------------------------- ethtool -g


def test_rings_text_old_layout_4096() -> None:
    assert p.parse_ethtool_rings_text(captured("unknown-eth0.ethtool-g.4096.txt")) == Rings(
        rx=4096,
        rx_mini=None,
        rx_jumbo=None,
        tx=4096,
        rx_max=4096,
        rx_mini_max=None,
        rx_jumbo_max=None,
        tx_max=4096,
    )


EXPECTED_8192 = Rings(
    rx=1024,
    rx_mini=None,
    rx_jumbo=None,
    tx=1024,
    rx_max=8192,
    rx_mini_max=None,
    rx_jumbo_max=None,
    tx_max=8192,
)


def test_rings_json_capture() -> None:
    assert p.parse_ethtool_rings_json(captured("unknown-ens5f1np1.ethtool-json-g.json")) == (
        EXPECTED_8192
    )


def test_rings_text_ethtool_61_layout_ignores_extra_rows() -> None:
    text = synthetic("ethtool-g.8192.ethtool-6.1.synthetic.txt")
    assert "CQE Size" in text and "TX Push" in text
    assert p.parse_ethtool_rings_text(text) == EXPECTED_8192


def test_rings_text_and_json_agree() -> None:
    text = p.parse_ethtool_rings_text(synthetic("ethtool-g.8192.ethtool-6.1.synthetic.txt"))
    json_ = p.parse_ethtool_rings_json(captured("unknown-ens5f1np1.ethtool-json-g.json"))
    assert text == json_


def test_rings_text_newer_layout() -> None:
    rings = p.parse_ethtool_rings_text(synthetic("ethtool-g.8192.newer-ethtool.synthetic.txt"))
    assert (rings.rx_max, rings.tx_max, rings.rx, rings.tx) == (8192, 8192, 8192, 4096)
    assert rings.rx_mini is None and rings.rx_jumbo_max is None


def test_rings_json_missing_keys_are_none() -> None:
    rings = p.parse_ethtool_rings_json('[{"ifname": "x", "rx": 512}]')
    assert rings == Rings(
        rx=512,
        rx_mini=None,
        rx_jumbo=None,
        tx=None,
        rx_max=None,
        rx_mini_max=None,
        rx_jumbo_max=None,
        tx_max=None,
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "netlink error: Operation not supported\n",
        "Ring parameters for eth0:\nRX:\t\t4096\n",
    ],
)
def test_rings_text_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_rings_text(text)


def test_rings_text_real_unsupported_error() -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_rings_text(local("veth-dkmq0.ethtool-g.stderr.txt"))


def test_rings_text_bad_value_names_line() -> None:
    text = "Ring parameters for eth0:\nPre-set maximums:\nRX:\t\tlots\n"
    with pytest.raises(ParseError, match="line 3"):
        p.parse_ethtool_rings_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[ {",
        "{}",
        "[ ]",
        "[1]",
        '[{"rx": 1}, {"rx": 2}]',
        '[{"rx": "1024"}]',
        '[{"rx": true}]',
        '[{"rx-max": -1}]',
        '[{"tx": 1.5}]',
    ],
)
def test_rings_json_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_rings_json(text)


# --------------------------------------------------------------------------- ethtool -l


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("i40e-ens801f0.ethtool-l.txt", Channels(0, 0, 1, 64, 0, 0, 1, 64)),
        ("unknown-ens3f0.ethtool-l.txt", Channels(None, None, 1, 1, None, None, 1, 64)),
        (
            "unknown-eno1.ethtool-l.separate-rx-tx.txt",
            Channels(4, 1, None, None, 4, 4, None, None),
        ),
        ("local/veth-dkmq0.ethtool-l.txt", Channels(4, 4, None, None, 4, 4, None, None)),
        ("local/veth-dkv0.ethtool-l.txt", Channels(1, 1, None, None, 2, 2, None, None)),
    ],
)
def test_channels_captures(name: str, expected: Channels) -> None:
    assert p.parse_ethtool_channels_text(captured(name)) == expected


def test_channels_field_order() -> None:
    channels = p.parse_ethtool_channels_text(captured("unknown-ens3f0.ethtool-l.txt"))
    assert channels.combined == 1 and channels.combined_max == 64
    assert channels.other == 1 and channels.other_max == 1
    assert channels.rx is None and channels.tx_max is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "netlink error: Operation not supported",
        "Channel parameters for x:\nPre-set maximums:\nCombined:\tmany\n",
    ],
)
def test_channels_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_channels_text(text)


# --------------------------------------------------------------------------- ethtool -k / -K


def test_features_text_capture() -> None:
    features = p.parse_ethtool_features_text(local("veth-dkmq0.ethtool-k.txt"))
    assert len(features) == 63
    assert "Features for dkmq0" not in features
    assert features["rx-checksumming"] == Feature("rx-checksumming", on=True, fixed=False)
    assert features["tx-checksum-ipv4"] == Feature("tx-checksum-ipv4", on=False, fixed=True)
    # indented sub-features of a legacy group are included by name
    assert features["tx-tcp6-segmentation"].on is True
    assert features["tx-scatter-gather-fraglist"].on is True
    assert features["generic-receive-offload"] == Feature("generic-receive-offload", False, False)
    assert features["large-receive-offload"].fixed is True
    assert all(feature.requested is None for feature in features.values())


def test_features_json_capture() -> None:
    features = p.parse_ethtool_features_json(local("veth-dkmq0.ethtool-json-k.json"))
    assert "ifname" not in features
    assert len(features) == 63
    # legacy group names carry "fixed": null and "requested": null
    assert features["tx-checksumming"] == Feature("tx-checksumming", True, False, None)
    assert features["rx-checksumming"] == Feature("rx-checksumming", True, False, True)
    assert features["tx-checksum-ipv4"] == Feature("tx-checksum-ipv4", False, True, False)


def test_features_text_and_json_agree() -> None:
    text = p.parse_ethtool_features_text(local("veth-dkmq0.ethtool-k.txt"))
    json_ = p.parse_ethtool_features_json(local("veth-dkmq0.ethtool-json-k.json"))
    assert list(text) == list(json_)
    for name, feature in text.items():
        assert (feature.on, feature.fixed) == (json_[name].on, json_[name].fixed), name
        if feature.requested is not None:
            assert feature.requested == json_[name].requested, name


def test_features_json_bare_object_accepted() -> None:
    text = '{"ifname": "x", "rx-gro": {"active": true, "fixed": false, "requested": true}}'
    assert p.parse_ethtool_features_json(text) == {"rx-gro": Feature("rx-gro", True, False, True)}


def test_features_text_requested_annotations() -> None:
    text = (
        "Features for eth0:\n"
        "tx-checksumming: off\n"
        "\ttx-checksum-ipv4: off [requested on]\n"
        "\ttx-checksum-ip-generic: on [requested off]\n"
        "rx-lro: off [fixed]\n"
    )
    features = p.parse_ethtool_features_text(text)
    assert features["tx-checksum-ipv4"] == Feature("tx-checksum-ipv4", False, False, True)
    assert features["tx-checksum-ip-generic"] == Feature(
        "tx-checksum-ip-generic", True, False, False
    )
    assert features["rx-lro"] == Feature("rx-lro", False, True, None)
    assert features["tx-checksumming"].requested is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "netlink error: Operation not supported\n",
        "Features for eth0:\nrx-gro: maybe\n",
        "Features for eth0:\nrx-gro: on [sideways]\n",
        "Features for eth0:\nrx-gro on\n",
    ],
)
def test_features_text_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_features_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[ ]",
        "not json",
        '[{"ifname": "x", "rx-gro": true}]',
        '[{"ifname": "x", "rx-gro": {"fixed": false}}]',
        '[{"ifname": "x", "rx-gro": {"active": "on"}}]',
        '[{"ifname": "x", "rx-gro": {"active": true, "fixed": 1}}]',
        '[{"ifname": "x", "rx-gro": {"active": true, "requested": "yes"}}]',
        '"string"',
    ],
)
def test_features_json_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_features_json(text)


def test_feature_changes_tx_off() -> None:
    changes = p.parse_ethtool_feature_changes(local("veth-dkmq0.ethtool-K-tx-off.stdout.txt"))
    assert changes["tx-checksum-ip-generic"] == Feature(
        "tx-checksum-ip-generic", False, False, False
    )
    # turned off as a side effect (TSO needs checksumming)
    assert changes["tx-tcp-segmentation"] == Feature("tx-tcp-segmentation", False, False, None)
    assert len(changes) == 7


def test_feature_changes_tx_on_reports_refusals_despite_exit_0() -> None:
    changes = p.parse_ethtool_feature_changes(local("veth-dkmq0.ethtool-K-tx-on.stdout.txt"))
    refused = {
        name for name, f in changes.items() if f.requested is not None and f.on != f.requested
    }
    assert refused == {"tx-checksum-ipv4", "tx-checksum-ipv6", "tx-checksum-fcoe-crc"}
    assert changes["tx-checksum-ip-generic"] == Feature("tx-checksum-ip-generic", True, False, True)
    assert changes["tx-udp-segmentation"].requested is None


def test_feature_changes_use_kernel_names() -> None:
    for name in ("gro-off-lro-on", "lro-on"):
        changes = p.parse_ethtool_feature_changes(local(f"veth-dkmq0.ethtool-K-{name}.stdout.txt"))
        assert changes == {"rx-lro": Feature("rx-lro", on=False, fixed=False, requested=True)}


def test_feature_changes_none() -> None:
    assert local("veth-dkmq0.ethtool-K-gro-off.noop.stdout.txt") == ""
    assert (
        p.parse_ethtool_feature_changes(local("veth-dkmq0.ethtool-K-gro-off.noop.stdout.txt")) == {}
    )
    assert p.parse_ethtool_feature_changes("\n") == {}
    assert p.parse_ethtool_feature_changes("Actual changes:\n") == {}


def test_feature_changes_tolerates_stderr_mixed_in() -> None:
    text = local("veth-dkmq0.ethtool-K-lro-on.stdout.txt") + local(
        "veth-dkmq0.ethtool-K-lro-on.stderr.txt"
    )
    assert list(p.parse_ethtool_feature_changes(text)) == ["rx-lro"]


@pytest.mark.parametrize(
    "text",
    [
        "rx-gro: off\n",
        "Actual changes:\nrx-gro: sideways\n",
        "Actual changes:\nrx-gro: off [whatever]\n",
        "netlink error: Operation not permitted\n",
    ],
)
def test_feature_changes_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_feature_changes(text)


# --------------------------------------------------------------------------- ethtool -c


def test_coalesce_text_capture_cqe_mode() -> None:
    coalesce = p.parse_ethtool_coalesce_text(captured("unknown-enp1s0.ethtool-c.cqe-mode.txt"))
    assert coalesce.adaptive_rx is None and coalesce.adaptive_tx is None
    assert coalesce.values["rx-usecs"] == 3
    assert coalesce.values["tx-usecs"] == 3
    assert coalesce.values["rx-frames"] == "n/a"
    assert coalesce.values["CQE mode RX"] == "n/a"
    assert coalesce.values["CQE mode TX"] == "n/a"
    assert len(coalesce.values) == 22
    assert "Adaptive RX" not in coalesce.values


def test_coalesce_text_ethtool_61_adaptive_on() -> None:
    coalesce = p.parse_ethtool_coalesce_text(
        synthetic("ethtool-c.adaptive-on.ethtool-6.1.synthetic.txt")
    )
    assert (coalesce.adaptive_rx, coalesce.adaptive_tx) == (True, True)
    assert coalesce.values["rx-usecs"] == 8
    assert coalesce.values["rx-frames"] == 128
    assert coalesce.values["tx-frames"] == 32
    assert coalesce.values["CQE mode RX"] == "on"
    assert coalesce.values["CQE mode TX"] == "off"


def test_coalesce_text_newer_layout_with_colonless_row() -> None:
    coalesce = p.parse_ethtool_coalesce_text(
        synthetic("ethtool-c.tx-aggr.newer-ethtool.synthetic.txt")
    )
    assert (coalesce.adaptive_rx, coalesce.adaptive_tx) == (False, None)
    assert coalesce.values["rx-frames"] == 0
    assert coalesce.values["tx-frames-irq"] == 256
    assert coalesce.values["tx-aggr-time-usecs"] == "n/a"
    assert coalesce.values["tx-aggr-max-bytes"] == "n/a"


def test_coalesce_json_current_keys() -> None:
    assert p.parse_ethtool_coalesce_json(
        synthetic("ethtool-json-c.adaptive-on.synthetic.json")
    ) == Coalesce(
        adaptive_rx=True,
        adaptive_tx=True,
        values={
            "rx-usecs": 8,
            "rx-frames": 128,
            "tx-usecs": 16,
            "tx-frames": 32,
            "cqe-mode-rx": "on",
            "cqe-mode-tx": "off",
        },
    )


def test_coalesce_json_old_duplicate_keys() -> None:
    coalesce = p.parse_ethtool_coalesce_json(
        read(MAIL / "netdev-2025-01.ethtool-json-c.duplicate-rx-tx.json")
    )
    assert (coalesce.adaptive_rx, coalesce.adaptive_tx) == (False, False)
    assert coalesce.values["cqe-mode-rx"] == "on"
    assert coalesce.values["cqe-mode-tx"] == "off"
    assert coalesce.values["rx-usecs"] == 33
    assert coalesce.values["tx-usecs"] == 158


def test_coalesce_text_and_json_agree() -> None:
    text = p.parse_ethtool_coalesce_text(
        synthetic("ethtool-c.adaptive-on.ethtool-6.1.synthetic.txt")
    )
    json_ = p.parse_ethtool_coalesce_json(synthetic("ethtool-json-c.adaptive-on.synthetic.json"))
    assert (text.adaptive_rx, text.adaptive_tx) == (json_.adaptive_rx, json_.adaptive_tx)
    for key, value in json_.values.items():
        text_key = {"cqe-mode-rx": "CQE mode RX", "cqe-mode-tx": "CQE mode TX"}.get(key, key)
        assert text.values[text_key] == value, key


def test_coalesce_text_skips_dim_profile_rows() -> None:
    text = (
        "Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nrx-usecs: 8\n\n"
        "rx-profile:\n{.usec =   1, .pkts = 256, .comps = n/a,},\n\n"
    )
    coalesce = p.parse_ethtool_coalesce_text(text)
    assert coalesce.values == {"rx-usecs": 8, "rx-profile": ""}


def test_coalesce_json_skips_nested_values() -> None:
    coalesce = p.parse_ethtool_coalesce_json(
        '[{"ifname": "x", "adaptive-rx": true, "rx-profile": [{"usec": 1}], "mode": "x"}]'
    )
    assert coalesce == Coalesce(True, None, {"mode": "x"})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "netlink error: Operation not supported\n",
        "rx-usecs: 3\n",
        "Coalesce parameters for x:\nAdaptive RX: maybe  TX: on\n",
        "Coalesce parameters for x:\nthree words here\n",
        "Coalesce parameters for x:\n: 5\n",
    ],
)
def test_coalesce_text_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_coalesce_text(text)


def test_coalesce_text_real_unsupported_error() -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_coalesce_text(local("veth-dkmq0.ethtool-c.stderr.txt"))


def test_coalesce_text_malformed_names_line() -> None:
    with pytest.raises(ParseError, match="line 4"):
        p.parse_ethtool_coalesce_text(
            "Coalesce parameters for x:\nAdaptive RX: on  TX: on\n\nbad row here\n"
        )


@pytest.mark.parametrize(
    "text", ["", "[ ]", "{", '{"adaptive-rx": true}', '[{"adaptive-rx": "on"}]', "[[]]"]
)
def test_coalesce_json_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_coalesce_json(text)


# --------------------------------------------------------------------------- ethtool -a


def test_pause_text_and_json_agree() -> None:
    text = p.parse_ethtool_pause_text(synthetic("ethtool-a.autoneg-on.synthetic.txt"))
    json_ = p.parse_ethtool_pause_json(synthetic("ethtool-json-a.autoneg-on.synthetic.json"))
    assert text == json_ == Pause(autoneg=True, rx=True, tx=True)


def test_pause_text_with_statistics() -> None:
    assert p.parse_ethtool_pause_text(
        synthetic("ethtool-I-a.autoneg-off.stats.synthetic.txt")
    ) == Pause(autoneg=False, rx=False, tx=True)


def test_pause_negotiated_rows_do_not_override() -> None:
    text = (
        "Pause parameters for x:\nAutonegotiate:\ton\nRX:\t\toff\nTX:\t\toff\nRX negotiated: on\n"
    )
    assert p.parse_ethtool_pause_text(text) == Pause(True, False, False)


def test_pause_text_na() -> None:
    text = "Pause parameters for x:\nAutonegotiate:\tn/a\nRX:\t\ton\nTX:\t\ton\n"
    assert p.parse_ethtool_pause_text(text) == Pause(None, True, True)


def test_pause_json_missing_keys() -> None:
    assert p.parse_ethtool_pause_json('[{"ifname": "x", "rx": true}]') == Pause(None, True, None)


def test_pause_real_unsupported_outputs() -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_pause_text(local("veth-dkmq0.ethtool-a.stderr.txt"))
    json_stdout = local("veth-dkmq0.ethtool-json-a.stdout.json")
    assert json_stdout.strip() == "[ ]"
    with pytest.raises(ParseError):
        p.parse_ethtool_pause_json(json_stdout)


@pytest.mark.parametrize(
    "text", ["", "Pause parameters for x:\n", "Pause parameters for x:\nRX:\t\tyes\n"]
)
def test_pause_text_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_pause_text(text)


@pytest.mark.parametrize(
    "text", ["", "[ ]", "[", '[{"ifname": "x"}]', '[{"rx": "on"}]', '{"rx": true}']
)
def test_pause_json_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_pause_json(text)


# --------------------------------------------------------------------------- ethtool -i / IF


DRIVER_CAPTURES = {
    "bnxt.ethtool-i.txt": ("bnxt_en", "220.0.59.0/pkg 220.0.83.0", "0000:c1:00.0"),
    "i40e.ethtool-i.txt": ("i40e", "6.00 0x800036cb 1.1747.0", "0000:d8:00.0"),
    "iavf-vf-of-ice.ethtool-i.fedora-5.19.txt": ("iavf", "N/A", "0000:3b:01.0"),
    "ice-25g-e810xxv.ethtool-i.txt": ("ice", "4.30 0x8001af27 1.3429.0", "0000:27:00.0"),
    "ice-e810.ethtool-i.fedora-5.19.txt": ("ice", "4.22 0x80010446 1.3197.0", "0000:3b:00.0"),
    "ice-e810.ethtool-i.kernel-6.6.txt": ("ice", "2.50 0x800077a8 1.2960.0", "0000:e1:00.0"),
    "mlx5-25g-cx4lx.ethtool-i.ubuntu-16.04.txt": ("mlx5_core", "14.23.1020", "0000:af:00.0"),
    "mlx5-25g-cx4lx.ethtool-i.ubuntu-18.04.txt": (
        "mlx5_core",
        "14.23.1020 (MT_2420110034)",
        "0000:af:00.0",
    ),
    "local/veth-dkmq0.ethtool-i.txt": ("veth", "", ""),
    "local/bridge-dkbr0.ethtool-i.txt": ("bridge", "N/A", "N/A"),
}


@pytest.mark.parametrize(("name", "expected"), sorted(DRIVER_CAPTURES.items()))
def test_driver_captures(name: str, expected: tuple[str, str, str]) -> None:
    info = p.parse_ethtool_driver(captured(name))
    assert (info["driver"], info["firmware-version"], info["bus-info"]) == expected
    assert info["expansion-rom-version"] == ""  # empty (trailing space or not)
    assert set(info) == {
        "driver",
        "version",
        "firmware-version",
        "expansion-rom-version",
        "bus-info",
        "supports-statistics",
        "supports-test",
        "supports-eeprom-access",
        "supports-register-dump",
        "supports-priv-flags",
    }


def test_driver_version_with_spaces() -> None:
    info = p.parse_ethtool_driver(captured("mlx5-25g-cx4lx.ethtool-i.ubuntu-16.04.txt"))
    assert info["version"] == "3.0-1 (January 2015)"
    assert info["supports-test"] == "no"


@pytest.mark.parametrize("text", ["", "no colon here\n", "version: 1.0\n", "driver: x\n: value\n"])
def test_driver_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_driver(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("veth-dkmq0.ethtool.txt", 10000),
        ("bridge-noports-dkbr1.ethtool.txt", None),  # "Speed: Unknown!"
        ("lo.ethtool.txt", None),  # no Speed row at all
    ],
)
def test_speed_captures(name: str, expected: int | None) -> None:
    assert p.parse_ethtool_speed(local(name)) == expected


def test_speed_25g() -> None:
    assert p.parse_ethtool_speed("Settings for ens5f0np0:\n\tSpeed: 25000Mb/s\n") == 25000


@pytest.mark.parametrize("text", ["", "Settings for x:\n\tSpeed: fast\n", "\tSpeed: 25Gb/s\n"])
def test_speed_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_ethtool_speed(text)


# --------------------------------------------------------------------------- ip -j link


def test_ip_link_local_capture() -> None:
    links = {
        link.name: link for link in p.parse_ip_link_json(local("dkparse.ip-d-j-link-show.json"))
    }
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
    [dkv1] = p.parse_ip_link_json(local("dkv1.ip-d-j-link-show.txqlen0.json"))
    assert (dkv1.name, dkv1.txqlen, dkv1.num_tx_queues) == ("dkv1", 0, 2)
    [dkz0] = p.parse_ip_link_json(local("dkz0.ip-d-j-link-show.peer-in-other-netns.json"))
    assert (dkz0.name, dkz0.index, dkz0.lower, dkz0.kind) == ("dkz0", 8, None, "veth")


def test_ip_link_bond_and_vlan_synthetic() -> None:
    links = {
        link.name: link
        for link in p.parse_ip_link_json(
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
    assert p.parse_ip_link_json("[]") == []
    [link] = p.parse_ip_link_json(
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
        p.parse_ip_link_json(text)


# --------------------------------------------------------------------------- tc qdisc


TC_DEVICES = ["dkmq0", "dkmq1", "dkv1", "dkv0"]


@pytest.mark.parametrize("device", TC_DEVICES)
def test_tc_text_and_json_agree(device: str) -> None:
    json_ = p.parse_tc_qdisc_json(local(f"{device}.tc-j-qdisc-show.json"))
    text = p.parse_tc_qdisc_text(local(f"{device}.tc-qdisc-show.txt"))
    assert [(q.kind, q.handle, q.parent, q.root) for q in text] == [
        (q.kind, q.handle, q.parent, q.root) for q in json_
    ]


def test_tc_json_mq_children() -> None:
    qdiscs = p.parse_tc_qdisc_json(local("dkmq0.tc-j-qdisc-show.json"))
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
    [tbf] = p.parse_tc_qdisc_json(local("dkv1.tc-j-qdisc-show.json"))
    assert tbf.options == {"rate": 125000000, "burst": 131000, "lat": 50000}
    htb, pfifo = p.parse_tc_qdisc_json(local("dkmq1.tc-j-qdisc-show.json"))
    assert htb.options["default"] == "0x10"
    assert (pfifo.kind, pfifo.handle, pfifo.parent, pfifo.options) == (
        "pfifo",
        "10:",
        "1:10",
        {"limit": 500},
    )


def test_tc_text_options() -> None:
    [tbf] = p.parse_tc_qdisc_text(local("dkv1.tc-qdisc-show.txt"))
    assert tbf.options == {
        "raw": "rate 1Gbit burst 131000b lat 50ms",
        "rate": "1Gbit",
        "burst": "131000b",
        "lat": "50ms",
    }
    [noqueue] = p.parse_tc_qdisc_text(local("dkv0.tc-qdisc-show.txt"))
    assert noqueue.options == {"raw": ""}
    htb, _ = p.parse_tc_qdisc_text(local("dkmq1.tc-qdisc-show.txt"))
    assert htb.options["r2q"] == 10 and htb.options["default"] == "0x10"


def test_tc_text_mq_fq_capture() -> None:
    qdiscs = p.parse_tc_qdisc_text(captured("mq-fq.tc-qdisc-show.excerpt.txt"))
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
    noqueue, fq, ingress = p.parse_tc_qdisc_text(text)
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
        p.parse_tc_qdisc_text(text)


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
        p.parse_tc_qdisc_json(text)


# --------------------------------------------------------------------------- cpus, governors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
        ("", []),
        ("\n", []),
        ("5", [5]),
        ("3,1,1-2", [1, 2, 3]),
        (local("sys-cpu-online.txt"), [0, 1]),
    ],
)
def test_cpu_list(text: str, expected: list[int]) -> None:
    assert p.parse_cpu_list(text) == expected


@pytest.mark.parametrize("text", ["a", "3-1", "0-", "1,,2", "0-7:2", "-1", "1 2"])
def test_cpu_list_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_cpu_list(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "intel-pstate.procfs-fixture.cpu1.scaling_available_governors.txt",
            ["performance", "powersave"],
        ),
        ("intel-pstate.procfs-fixture.cpu1.scaling_governor.txt", ["powersave"]),
        # 16 files concatenated by `cat cpu*/...`: duplicates are dropped
        ("amd-pstate-active.scaling_available_governors.16cpus.txt", ["performance", "powersave"]),
    ],
)
def test_governors(name: str, expected: list[str]) -> None:
    assert p.parse_governors(captured(name)) == expected


def test_governors_acpi_cpufreq_and_empty() -> None:
    text = "conservative ondemand userspace powersave performance schedutil \n"
    assert p.parse_governors(text) == [
        "conservative",
        "ondemand",
        "userspace",
        "powersave",
        "performance",
        "schedutil",
    ]
    assert p.parse_governors("") == []


# --------------------------------------------------------------------------- meminfo


def test_meminfo_capture() -> None:
    info = p.parse_meminfo(local("proc-meminfo.txt"))
    assert info["MemTotal"] == 24683656 * 1024
    assert info["MemFree"] == 24406744 * 1024
    assert info["HugePages_Total"] == 0  # no unit: kept as is
    assert info["Hugepagesize"] == 2048 * 1024
    assert "Active(anon)" in info
    assert len(info) == len(local("proc-meminfo.txt").splitlines())


@pytest.mark.parametrize("text", ["", "MemTotal: lots kB\n", "MemTotal 5 kB\n", "MemTotal: 5 MB\n"])
def test_meminfo_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_meminfo(text)


def test_meminfo_malformed_names_line() -> None:
    with pytest.raises(ParseError, match="line 2"):
        p.parse_meminfo("MemTotal: 1 kB\nbroken\n")


# --------------------------------------------------------------------------- /proc/interrupts


def test_interrupts_local_capture() -> None:
    text = local("proc-interrupts.firecracker-2cpu.txt")
    interrupts = p.parse_proc_interrupts(text)
    numeric = [line for line in text.splitlines()[1:] if line.split(":")[0].strip().isdigit()]
    assert len(interrupts) == len(numeric) == 19
    assert all(irq.irq.isdigit() and len(irq.counts) == 2 for irq in interrupts)
    by_irq = {irq.irq: irq for irq in interrupts}
    assert by_irq["36"] == Interrupt("36", (0, 32484), "PCI-MSIX-0000:00:02.0", "virtio1-req.0")
    assert by_irq["24"] == Interrupt("24", (1, 0), "IO-APIC", "ACPI:Ged")


def test_interrupts_mlx5_synthetic() -> None:
    interrupts = p.parse_proc_interrupts(synthetic("proc-interrupts.mlx5-4cpu.synthetic.txt"))
    assert [irq.irq for irq in interrupts] == [
        "0",
        "8",
        "9",
        "16",
        "120",
        "121",
        "122",
        "123",
        "124",
    ]
    comp = [irq for irq in interrupts if irq.name.startswith("mlx5_comp")]
    assert [irq.name for irq in comp] == [f"mlx5_comp{i}@pci:0000:3b:00.0" for i in range(4)]
    assert comp[1] == Interrupt("122", (0, 4987654, 0, 0), "IR-PCI-MSIX-0000:3b:00.0", comp[1].name)
    shared = next(irq for irq in interrupts if irq.irq == "16")
    assert (shared.chip, shared.name) == ("IO-APIC", "i801_smbus, ehci_hcd:usb1")


def test_interrupts_arm_gic_layout() -> None:
    text = (
        "           CPU0       CPU1       \n"
        " 11:      12345       6789     GICv3  27 Level     arch_timer\n"
        " 45:          7          0     GICv3 160 Edge      eth0\n"
        " 50:          0          0  ITS-MSI 524288 Edge      mlx5_comp0@pci:0000:01:00.0\n"
        "IPI0:       100        200       Rescheduling interrupts\n"
        " 60:          1          2\n"
    )
    irqs = p.parse_proc_interrupts(text)
    assert [(irq.irq, irq.chip, irq.name) for irq in irqs] == [
        ("11", "GICv3", "arch_timer"),
        ("45", "GICv3", "eth0"),
        ("50", "ITS-MSI", "mlx5_comp0@pci:0000:01:00.0"),
        ("60", "", ""),
    ]


def test_interrupts_old_chip_type_layout() -> None:
    text = "           CPU0\n 50:     123456   PCI-MSI-edge      eth0-TxRx-0\n"
    assert p.parse_proc_interrupts(text) == [
        Interrupt("50", (123456,), "PCI-MSI-edge", "eth0-TxRx-0")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 24: 1 0 IO-APIC 5-edge x\n",
        "           CPU0       CPU1\n 24:  1  IO-APIC 5-edge x\n",
        "           CPU0       CPU1\n 24  1  0  IO-APIC 5-edge x\n",
    ],
)
def test_interrupts_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_proc_interrupts(text)


# --------------------------------------------------------------------------- bonding


def test_bonding_capture() -> None:
    assert p.parse_proc_net_bonding(captured("bond0-802.3ad.proc-net-bonding.txt")) == Bond(
        mode="802.3ad", slaves=("eth1", "eth2")
    )


@pytest.mark.parametrize(
    ("mode_line", "mode"),
    [
        ("fault-tolerance (active-backup)", "active-backup"),
        ("load balancing (round-robin)", "balance-rr"),
        ("load balancing (xor)", "balance-xor"),
        ("adaptive load balancing", "balance-alb"),
        ("some future mode", "some future mode"),
    ],
)
def test_bonding_modes(mode_line: str, mode: str) -> None:
    text = (
        "Ethernet Channel Bonding Driver: v6.1.0\n\n"
        f"Bonding Mode: {mode_line}\nPrimary Slave: None\nCurrently Active Slave: ens1\n\n"
        "Slave Interface: ens1\nMII Status: up\n"
    )
    assert p.parse_proc_net_bonding(text) == Bond(mode=mode, slaves=("ens1",))


@pytest.mark.parametrize("text", ["", "Slave Interface: eth1\n", "Bonding Mode: \n"])
def test_bonding_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_proc_net_bonding(text)


# --------------------------------------------------------------------------- tuned


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("tuned-adm-active.network-throughput.synthetic.txt", "network-throughput"),
        ("tuned-adm-active.none.synthetic.txt", None),
        ("tuned-adm-active.daemon-not-running.synthetic.txt", None),
    ],
)
def test_tuned_active(name: str, expected: str | None) -> None:
    assert p.parse_tuned_active(synthetic(name)) == expected


def test_tuned_active_merged_profile() -> None:
    text = "Current active profile: network-throughput dtn-extra\nCurrent post-loaded profile: x\n"
    assert p.parse_tuned_active(text) == "network-throughput dtn-extra"


@pytest.mark.parametrize("text", ["", "Cannot talk to TuneD daemon\n", "Current active profile:\n"])
def test_tuned_active_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_tuned_active(text)


def test_tuned_verify_failed_capture() -> None:
    passed, lines = p.parse_tuned_verify(captured("tuned-adm-verify.failed.txt"))
    assert passed is False
    assert lines[0].startswith("Verification failed")
    assert "  systemctl restart tuned" in lines
    assert len(lines) == 7


def test_tuned_verify_succeeded() -> None:
    passed, lines = p.parse_tuned_verify(synthetic("tuned-adm-verify.succeeded.synthetic.txt"))
    assert passed is True
    assert lines == [
        "Verification succeeded, current system settings match the preset profile.",
        "See TuneD log file ('/var/log/tuned/tuned.log') for details.",
    ]


@pytest.mark.parametrize("text", ["", "\n", "See TuneD log file for details.\n"])
def test_tuned_verify_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        p.parse_tuned_verify(text)


# --------------------------------------------------------------------------- robustness


PARSERS: list[Callable[[str], Any]] = [
    p.parse_sysctl_conf,
    p.parse_ethtool_rings_text,
    p.parse_ethtool_rings_json,
    p.parse_ethtool_features_text,
    p.parse_ethtool_features_json,
    p.parse_ethtool_feature_changes,
    p.parse_ethtool_coalesce_text,
    p.parse_ethtool_coalesce_json,
    p.parse_ethtool_pause_text,
    p.parse_ethtool_pause_json,
    p.parse_ethtool_channels_text,
    p.parse_ethtool_driver,
    p.parse_ethtool_speed,
    p.parse_ip_link_json,
    p.parse_tc_qdisc_json,
    p.parse_tc_qdisc_text,
    p.parse_cpu_list,
    p.parse_governors,
    p.parse_meminfo,
    p.parse_tuned_active,
    p.parse_tuned_verify,
    p.parse_proc_interrupts,
    p.parse_proc_net_bonding,
]

JUNK = [
    "",
    " ",
    "\n\n",
    ":",
    "::::",
    "=",
    "[",
    "]",
    "[]",
    "{}",
    "null",
    "0",
    '"x"',
    "[null]",
    "[{}]",
    "[[]]",
    '[{"ifname": null}]',
    "\t\t",
    "\x00",
    "qdisc",
    "qdisc a",
    "CPU0\n",
    "CPU0\n 1:\n",
    "CPU0\n:\n",
    "x: y\n",
    "Pre-set maximums:\nRX:\n",
    "Actual changes:\n:\n",
    "Adaptive RX:",
    "Speed:",
    "Bonding Mode:",
    "Slave Interface:",
]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda parser: parser.__name__)
def test_junk_raises_only_parse_error(parser: Callable[[str], Any]) -> None:
    for text in JUNK:
        with contextlib.suppress(ParseError):
            parser(text)


def _all_fixture_texts() -> list[str]:
    paths = [path for path in FIXTURES.rglob("*") if path.is_file() and path.suffix != ".md"]
    return [read(path) for path in sorted(paths)]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda parser: parser.__name__)
def test_mutated_fixtures_raise_only_parse_error(parser: Callable[[str], Any]) -> None:
    """Every fixture, cut short or with characters changed, fed to every parser."""
    rng = random.Random(20240601)
    for text in _all_fixture_texts():
        variants = [text, text[: len(text) // 2], text[: rng.randrange(len(text) + 1)]]
        for _ in range(3):
            chars = list(text)
            for _ in range(3):
                if chars:
                    chars[rng.randrange(len(chars))] = rng.choice(':[]{}"\n\t -0a/,=')
            variants.append("".join(chars))
        for variant in variants:
            with contextlib.suppress(ParseError):
                parser(variant)
