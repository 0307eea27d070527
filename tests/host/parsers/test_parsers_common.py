"""What every parser in dtnkit.host.parsers shares: fixture sanity, the error type, and robustness
against junk and mutated captures.

Fixtures: ``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local``
(captured on the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail)
and ``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest
from tests.support.captures import (
    CAPTURED,
    FIXTURES,
    LOCAL,
    MAIL,
    SYNTHETIC,
    captured,
    read,
)

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.ethtool import (
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
from dtnkit.host.parsers.iproute import parse_ip_link_json
from dtnkit.host.parsers.proc import (
    parse_cpu_list,
    parse_governors,
    parse_meminfo,
    parse_proc_interrupts,
    parse_proc_net_bonding,
)
from dtnkit.host.parsers.sysctl import parse_sysctl_conf
from dtnkit.host.parsers.tc import parse_tc_qdisc_json, parse_tc_qdisc_text
from dtnkit.host.parsers.tuned import parse_tuned_active, parse_tuned_verify

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
        parse_sysctl_conf("a = 1\n\nbroken line\n")
    assert isinstance(info.value, ValueError)
    assert info.value.lineno == 3
    assert "line 3" in str(info.value)
    assert "broken line" in str(info.value)


def test_dataclasses_are_frozen() -> None:
    rings = parse_ethtool_rings_text(captured("unknown-eth0.ethtool-g.4096.txt"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        rings.rx = 1  # type: ignore[misc]


# --------------------------------------------------------------------------- robustness


PARSERS: list[Callable[[str], Any]] = [
    parse_sysctl_conf,
    parse_ethtool_rings_text,
    parse_ethtool_rings_json,
    parse_ethtool_features_text,
    parse_ethtool_features_json,
    parse_ethtool_feature_changes,
    parse_ethtool_coalesce_text,
    parse_ethtool_coalesce_json,
    parse_ethtool_pause_text,
    parse_ethtool_pause_json,
    parse_ethtool_channels_text,
    parse_ethtool_driver,
    parse_ethtool_speed,
    parse_ip_link_json,
    parse_tc_qdisc_json,
    parse_tc_qdisc_text,
    parse_cpu_list,
    parse_governors,
    parse_meminfo,
    parse_tuned_active,
    parse_tuned_verify,
    parse_proc_interrupts,
    parse_proc_net_bonding,
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
