"""Unit tests for dtnkit.host.parsers.tuned.

Fixtures: ``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local``
(captured on the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail)
and ``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

import pytest
from tests.support.captures import (
    captured,
    synthetic,
)

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.tuned import parse_tuned_active, parse_tuned_verify

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
    assert parse_tuned_active(synthetic(name)) == expected


def test_tuned_active_merged_profile() -> None:
    text = "Current active profile: network-throughput dtn-extra\nCurrent post-loaded profile: x\n"
    assert parse_tuned_active(text) == "network-throughput dtn-extra"


@pytest.mark.parametrize("text", ["", "Cannot talk to TuneD daemon\n", "Current active profile:\n"])
def test_tuned_active_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_tuned_active(text)


def test_tuned_verify_failed_capture() -> None:
    passed, lines = parse_tuned_verify(captured("tuned-adm-verify.failed.txt"))
    assert passed is False
    assert lines[0].startswith("Verification failed")
    assert "  systemctl restart tuned" in lines
    assert len(lines) == 7


def test_tuned_verify_succeeded() -> None:
    passed, lines = parse_tuned_verify(synthetic("tuned-adm-verify.succeeded.synthetic.txt"))
    assert passed is True
    assert lines == [
        "Verification succeeded, current system settings match the preset profile.",
        "See TuneD log file ('/var/log/tuned/tuned.log') for details.",
    ]


@pytest.mark.parametrize("text", ["", "\n", "See TuneD log file for details.\n"])
def test_tuned_verify_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_tuned_verify(text)
