"""Unit tests for dtnkit.host.parsers.ethtool.

Fixtures: ``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local``
(captured on the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail)
and ``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

import pytest
from tests.support.captures import (
    MAIL,
    captured,
    local,
    read,
    synthetic,
)

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.ethtool import (
    Channels,
    Coalesce,
    Feature,
    Pause,
    Rings,
    parse_ethtool_channels_text,
    parse_ethtool_coalesce_json,
    parse_ethtool_coalesce_text,
    parse_ethtool_driver,
    parse_ethtool_feature_changes,
    parse_ethtool_features_json,
    parse_ethtool_features_text,
    parse_ethtool_pause_json,
    parse_ethtool_pause_text,
    parse_ethtool_rings_json,
    parse_ethtool_rings_text,
    parse_ethtool_speed,
)

# --------------------------------------------------------------------------- ethtool -g


def test_rings_text_old_layout_4096() -> None:
    assert parse_ethtool_rings_text(captured("unknown-eth0.ethtool-g.4096.txt")) == Rings(
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
    assert parse_ethtool_rings_json(captured("unknown-ens5f1np1.ethtool-json-g.json")) == (
        EXPECTED_8192
    )


def test_rings_text_ethtool_61_layout_ignores_extra_rows() -> None:
    text = synthetic("ethtool-g.8192.ethtool-6.1.synthetic.txt")
    assert "CQE Size" in text and "TX Push" in text
    assert parse_ethtool_rings_text(text) == EXPECTED_8192


def test_rings_text_and_json_agree() -> None:
    text = parse_ethtool_rings_text(synthetic("ethtool-g.8192.ethtool-6.1.synthetic.txt"))
    json_ = parse_ethtool_rings_json(captured("unknown-ens5f1np1.ethtool-json-g.json"))
    assert text == json_


def test_rings_text_newer_layout() -> None:
    rings = parse_ethtool_rings_text(synthetic("ethtool-g.8192.newer-ethtool.synthetic.txt"))
    assert (rings.rx_max, rings.tx_max, rings.rx, rings.tx) == (8192, 8192, 8192, 4096)
    assert rings.rx_mini is None and rings.rx_jumbo_max is None


def test_rings_json_missing_keys_are_none() -> None:
    rings = parse_ethtool_rings_json('[{"ifname": "x", "rx": 512}]')
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
        parse_ethtool_rings_text(text)


def test_rings_text_real_unsupported_error() -> None:
    with pytest.raises(ParseError):
        parse_ethtool_rings_text(local("veth-dkmq0.ethtool-g.stderr.txt"))


def test_rings_text_bad_value_names_line() -> None:
    text = "Ring parameters for eth0:\nPre-set maximums:\nRX:\t\tlots\n"
    with pytest.raises(ParseError, match="line 3"):
        parse_ethtool_rings_text(text)


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
        parse_ethtool_rings_json(text)


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
    assert parse_ethtool_channels_text(captured(name)) == expected


def test_channels_field_order() -> None:
    channels = parse_ethtool_channels_text(captured("unknown-ens3f0.ethtool-l.txt"))
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
        parse_ethtool_channels_text(text)


# --------------------------------------------------------------------------- ethtool -k / -K


def test_features_text_capture() -> None:
    features = parse_ethtool_features_text(local("veth-dkmq0.ethtool-k.txt"))
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
    features = parse_ethtool_features_json(local("veth-dkmq0.ethtool-json-k.json"))
    assert "ifname" not in features
    assert len(features) == 63
    # legacy group names carry "fixed": null and "requested": null
    assert features["tx-checksumming"] == Feature("tx-checksumming", True, False, None)
    assert features["rx-checksumming"] == Feature("rx-checksumming", True, False, True)
    assert features["tx-checksum-ipv4"] == Feature("tx-checksum-ipv4", False, True, False)


def test_features_text_and_json_agree() -> None:
    text = parse_ethtool_features_text(local("veth-dkmq0.ethtool-k.txt"))
    json_ = parse_ethtool_features_json(local("veth-dkmq0.ethtool-json-k.json"))
    assert list(text) == list(json_)
    for name, feature in text.items():
        assert (feature.on, feature.fixed) == (json_[name].on, json_[name].fixed), name
        if feature.requested is not None:
            assert feature.requested == json_[name].requested, name


def test_features_json_bare_object_accepted() -> None:
    text = '{"ifname": "x", "rx-gro": {"active": true, "fixed": false, "requested": true}}'
    assert parse_ethtool_features_json(text) == {"rx-gro": Feature("rx-gro", True, False, True)}


def test_features_text_requested_annotations() -> None:
    text = (
        "Features for eth0:\n"
        "tx-checksumming: off\n"
        "\ttx-checksum-ipv4: off [requested on]\n"
        "\ttx-checksum-ip-generic: on [requested off]\n"
        "rx-lro: off [fixed]\n"
    )
    features = parse_ethtool_features_text(text)
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
        parse_ethtool_features_text(text)


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
        parse_ethtool_features_json(text)


def test_feature_changes_tx_off() -> None:
    changes = parse_ethtool_feature_changes(local("veth-dkmq0.ethtool-K-tx-off.stdout.txt"))
    assert changes["tx-checksum-ip-generic"] == Feature(
        "tx-checksum-ip-generic", False, False, False
    )
    # turned off as a side effect (TSO needs checksumming)
    assert changes["tx-tcp-segmentation"] == Feature("tx-tcp-segmentation", False, False, None)
    assert len(changes) == 7


def test_feature_changes_tx_on_reports_refusals_despite_exit_0() -> None:
    changes = parse_ethtool_feature_changes(local("veth-dkmq0.ethtool-K-tx-on.stdout.txt"))
    refused = {
        name for name, f in changes.items() if f.requested is not None and f.on != f.requested
    }
    assert refused == {"tx-checksum-ipv4", "tx-checksum-ipv6", "tx-checksum-fcoe-crc"}
    assert changes["tx-checksum-ip-generic"] == Feature("tx-checksum-ip-generic", True, False, True)
    assert changes["tx-udp-segmentation"].requested is None


def test_feature_changes_use_kernel_names() -> None:
    for name in ("gro-off-lro-on", "lro-on"):
        changes = parse_ethtool_feature_changes(local(f"veth-dkmq0.ethtool-K-{name}.stdout.txt"))
        assert changes == {"rx-lro": Feature("rx-lro", on=False, fixed=False, requested=True)}


def test_feature_changes_none() -> None:
    assert local("veth-dkmq0.ethtool-K-gro-off.noop.stdout.txt") == ""
    assert (
        parse_ethtool_feature_changes(local("veth-dkmq0.ethtool-K-gro-off.noop.stdout.txt")) == {}
    )
    assert parse_ethtool_feature_changes("\n") == {}
    assert parse_ethtool_feature_changes("Actual changes:\n") == {}


def test_feature_changes_tolerates_stderr_mixed_in() -> None:
    text = local("veth-dkmq0.ethtool-K-lro-on.stdout.txt") + local(
        "veth-dkmq0.ethtool-K-lro-on.stderr.txt"
    )
    assert list(parse_ethtool_feature_changes(text)) == ["rx-lro"]


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
        parse_ethtool_feature_changes(text)


# --------------------------------------------------------------------------- ethtool -c


def test_coalesce_text_capture_cqe_mode() -> None:
    coalesce = parse_ethtool_coalesce_text(captured("unknown-enp1s0.ethtool-c.cqe-mode.txt"))
    assert coalesce.adaptive_rx is None and coalesce.adaptive_tx is None
    assert coalesce.values["rx-usecs"] == 3
    assert coalesce.values["tx-usecs"] == 3
    assert coalesce.values["rx-frames"] == "n/a"
    assert coalesce.values["CQE mode RX"] == "n/a"
    assert coalesce.values["CQE mode TX"] == "n/a"
    assert len(coalesce.values) == 22
    assert "Adaptive RX" not in coalesce.values


def test_coalesce_text_ethtool_61_adaptive_on() -> None:
    coalesce = parse_ethtool_coalesce_text(
        synthetic("ethtool-c.adaptive-on.ethtool-6.1.synthetic.txt")
    )
    assert (coalesce.adaptive_rx, coalesce.adaptive_tx) == (True, True)
    assert coalesce.values["rx-usecs"] == 8
    assert coalesce.values["rx-frames"] == 128
    assert coalesce.values["tx-frames"] == 32
    assert coalesce.values["CQE mode RX"] == "on"
    assert coalesce.values["CQE mode TX"] == "off"


def test_coalesce_text_newer_layout_with_colonless_row() -> None:
    coalesce = parse_ethtool_coalesce_text(
        synthetic("ethtool-c.tx-aggr.newer-ethtool.synthetic.txt")
    )
    assert (coalesce.adaptive_rx, coalesce.adaptive_tx) == (False, None)
    assert coalesce.values["rx-frames"] == 0
    assert coalesce.values["tx-frames-irq"] == 256
    assert coalesce.values["tx-aggr-time-usecs"] == "n/a"
    assert coalesce.values["tx-aggr-max-bytes"] == "n/a"


def test_coalesce_json_current_keys() -> None:
    assert parse_ethtool_coalesce_json(
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
    coalesce = parse_ethtool_coalesce_json(
        read(MAIL / "netdev-2025-01.ethtool-json-c.duplicate-rx-tx.json")
    )
    assert (coalesce.adaptive_rx, coalesce.adaptive_tx) == (False, False)
    assert coalesce.values["cqe-mode-rx"] == "on"
    assert coalesce.values["cqe-mode-tx"] == "off"
    assert coalesce.values["rx-usecs"] == 33
    assert coalesce.values["tx-usecs"] == 158


def test_coalesce_text_and_json_agree() -> None:
    text = parse_ethtool_coalesce_text(synthetic("ethtool-c.adaptive-on.ethtool-6.1.synthetic.txt"))
    json_ = parse_ethtool_coalesce_json(synthetic("ethtool-json-c.adaptive-on.synthetic.json"))
    assert (text.adaptive_rx, text.adaptive_tx) == (json_.adaptive_rx, json_.adaptive_tx)
    for key, value in json_.values.items():
        text_key = {"cqe-mode-rx": "CQE mode RX", "cqe-mode-tx": "CQE mode TX"}.get(key, key)
        assert text.values[text_key] == value, key


def test_coalesce_text_skips_dim_profile_rows() -> None:
    text = (
        "Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nrx-usecs: 8\n\n"
        "rx-profile:\n{.usec =   1, .pkts = 256, .comps = n/a,},\n\n"
    )
    coalesce = parse_ethtool_coalesce_text(text)
    assert coalesce.values == {"rx-usecs": 8, "rx-profile": ""}


def test_coalesce_json_skips_nested_values() -> None:
    coalesce = parse_ethtool_coalesce_json(
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
        parse_ethtool_coalesce_text(text)


def test_coalesce_text_real_unsupported_error() -> None:
    with pytest.raises(ParseError):
        parse_ethtool_coalesce_text(local("veth-dkmq0.ethtool-c.stderr.txt"))


def test_coalesce_text_malformed_names_line() -> None:
    with pytest.raises(ParseError, match="line 4"):
        parse_ethtool_coalesce_text(
            "Coalesce parameters for x:\nAdaptive RX: on  TX: on\n\nbad row here\n"
        )


@pytest.mark.parametrize(
    "text", ["", "[ ]", "{", '{"adaptive-rx": true}', '[{"adaptive-rx": "on"}]', "[[]]"]
)
def test_coalesce_json_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool_coalesce_json(text)


# --------------------------------------------------------------------------- ethtool -a


def test_pause_text_and_json_agree() -> None:
    text = parse_ethtool_pause_text(synthetic("ethtool-a.autoneg-on.synthetic.txt"))
    json_ = parse_ethtool_pause_json(synthetic("ethtool-json-a.autoneg-on.synthetic.json"))
    assert text == json_ == Pause(autoneg=True, rx=True, tx=True)


def test_pause_text_with_statistics() -> None:
    assert parse_ethtool_pause_text(
        synthetic("ethtool-I-a.autoneg-off.stats.synthetic.txt")
    ) == Pause(autoneg=False, rx=False, tx=True)


def test_pause_negotiated_rows_do_not_override() -> None:
    text = (
        "Pause parameters for x:\nAutonegotiate:\ton\nRX:\t\toff\nTX:\t\toff\nRX negotiated: on\n"
    )
    assert parse_ethtool_pause_text(text) == Pause(True, False, False)


def test_pause_text_na() -> None:
    text = "Pause parameters for x:\nAutonegotiate:\tn/a\nRX:\t\ton\nTX:\t\ton\n"
    assert parse_ethtool_pause_text(text) == Pause(None, True, True)


def test_pause_json_missing_keys() -> None:
    assert parse_ethtool_pause_json('[{"ifname": "x", "rx": true}]') == Pause(None, True, None)


def test_pause_real_unsupported_outputs() -> None:
    with pytest.raises(ParseError):
        parse_ethtool_pause_text(local("veth-dkmq0.ethtool-a.stderr.txt"))
    json_stdout = local("veth-dkmq0.ethtool-json-a.stdout.json")
    assert json_stdout.strip() == "[ ]"
    with pytest.raises(ParseError):
        parse_ethtool_pause_json(json_stdout)


@pytest.mark.parametrize(
    "text", ["", "Pause parameters for x:\n", "Pause parameters for x:\nRX:\t\tyes\n"]
)
def test_pause_text_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool_pause_text(text)


@pytest.mark.parametrize(
    "text", ["", "[ ]", "[", '[{"ifname": "x"}]', '[{"rx": "on"}]', '{"rx": true}']
)
def test_pause_json_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool_pause_json(text)


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
    info = parse_ethtool_driver(captured(name))
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
    info = parse_ethtool_driver(captured("mlx5-25g-cx4lx.ethtool-i.ubuntu-16.04.txt"))
    assert info["version"] == "3.0-1 (January 2015)"
    assert info["supports-test"] == "no"


@pytest.mark.parametrize("text", ["", "no colon here\n", "version: 1.0\n", "driver: x\n: value\n"])
def test_driver_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool_driver(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("veth-dkmq0.ethtool.txt", 10000),
        ("bridge-noports-dkbr1.ethtool.txt", None),  # "Speed: Unknown!"
        ("lo.ethtool.txt", None),  # no Speed row at all
    ],
)
def test_speed_captures(name: str, expected: int | None) -> None:
    assert parse_ethtool_speed(local(name)) == expected


def test_speed_25g() -> None:
    assert parse_ethtool_speed("Settings for ens5f0np0:\n\tSpeed: 25000Mb/s\n") == 25000


@pytest.mark.parametrize("text", ["", "Settings for x:\n\tSpeed: fast\n", "\tSpeed: 25Gb/s\n"])
def test_speed_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ethtool_speed(text)
