"""Unit tests for dtnkit.host.parsers.sysctl.

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
from dtnkit.host.parsers.sysctl import normalize_sysctl, parse_sysctl_conf

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
    assert normalize_sysctl(raw) == expected


def test_sysctl_conf_synthetic_dtn_file() -> None:
    assert parse_sysctl_conf(synthetic("sysctl.d-90-dtn.synthetic.conf")) == {
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
    assert parse_sysctl_conf(local("debian12.etc-sysctl.conf")) == {}


def test_sysctl_conf_systemd_file() -> None:
    assert parse_sysctl_conf(local("systemd.50-pid-max.conf")) == {"kernel.pid_max": "4194304"}


def test_sysctl_keys_output_keeps_tabs_which_are_normalized() -> None:
    text = local("sysctl.tcp-keys.txt")
    assert "\t" in text  # sysctl(8) prints multi-value keys with the /proc/sys TABs
    parsed = parse_sysctl_conf(text)
    assert parsed["net.ipv4.tcp_rmem"] == normalize_sysctl(local("proc-sys-net-ipv4-tcp_rmem.txt"))
    assert parsed["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert parsed["net.core.rmem_max"] == "4194304"
    assert parsed["net.ipv4.tcp_congestion_control"] == "bbr"


def test_sysctl_a_full_output() -> None:
    text = local("dkparse.sysctl-a.txt")
    parsed = parse_sysctl_conf(text)
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
    assert parse_sysctl_conf(line) == {key: "1"}


def test_sysctl_conf_value_may_contain_equals_and_comment_chars() -> None:
    parsed = parse_sysctl_conf("kernel.core_pattern = |/usr/bin/x a=b # c\n")
    assert parsed == {"kernel.core_pattern": "|/usr/bin/x a=b # c"}


@pytest.mark.parametrize("text", ["", "\n\n", "# only\n; comments\n   # indented\n"])
def test_sysctl_conf_empty(text: str) -> None:
    assert parse_sysctl_conf(text) == {}


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
        parse_sysctl_conf(text)
    assert info.value.lineno == lineno
