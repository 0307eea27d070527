"""A recorded qdisc in words (``dtnkit.tune.kinds.qdisc.words``, what the fleet report shows)
says what ``tc qdisc show`` says: real qdiscs made with tc in a namespace, recorded by the
audit, each parameter shown equal to tc's own text; and anything a document holds instead of
a qdisc gives one line."""

from __future__ import annotations

import itertools
import os
import shutil
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import Netns, sh
from tests.support.cli import run

from dtnkit.tune.kinds.qdisc import WORDS_MOST, qdisc_words, rate_text, time_text, words
from dtnkit.tune.kinds.qdisc import size_text as tc_size

#: device -> tc commands after `tc qdisc add dev DEV` (rates and sizes tc rounds its own way)
SETUPS = {
    "q0": [["root", "tbf", "rate", "1500mbit", "burst", "100000", "latency", "25ms"]],
    "q1": [
        ["root", "handle", "1:", "htb", "default", "10", "r2q", "20"],
        ["parent", "1:10", "handle", "10:", "pfifo", "limit", "500"],
    ],
    "q2": [["root", "bfifo", "limit", "100kb"]],
    "q3": [["root", "tbf", "rate", "123456789bit", "burst", "3mb", "latency", "12345us"]],
    "q4": [],  # noqueue, the kernel's
}


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_every_parameter_shown_is_what_tc_shows(capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() != 0 or shutil.which("tc") is None:
        pytest.skip("needs root and tc")
    with Netns(prefix="qw") as ns:
        for a, b in (("q0", "q1"), ("q2", "q3"), ("q4", "q5")):
            sh("ip", "-n", ns.name, "link", "add", a, "type", "veth", "peer", "name", b)
            sh("ip", "-n", ns.name, "link", "set", a, "up")
            sh("ip", "-n", ns.name, "link", "set", b, "up")
        for dev, steps in SETUPS.items():
            for k, step in enumerate(steps):
                sh("tc", "-n", ns.name, "qdisc", "add", "dev", dev, *step)
                if dev == "q1" and k == 0:  # the class, before the qdisc under it
                    sh(
                        "tc",
                        "-n",
                        ns.name,
                        "class",
                        "add",
                        "dev",
                        dev,
                        "parent",
                        "1:",
                        "classid",
                        "1:10",
                        "htb",
                        "rate",
                        "100mbit",
                        "ceil",
                        "1gbit",
                    )
        code, audit = run(capsys, "tune", "audit", "--netns", ns.name, "--format", "json")
        assert code in (0, 3), audit
        trees = {
            f["device"]: f["current"] for f in audit["findings"] if f["key"].startswith("qdisc/")
        }
        for dev in SETUPS:
            text = sh("tc", "-n", ns.name, "qdisc", "show", "dev", dev).stdout
            lines = {line.split()[2]: line.split() for line in text.splitlines()}
            tree = trees[dev]
            for q in [tree, *tree["children"]]:
                shown = qdisc_words(q["kind"], q["options"]).split()
                tc = lines[q["handle"]]
                assert shown[0] == tc[1] == q["kind"]
                pairs = dict(zip(shown[1::2], shown[2::2], strict=True))
                told = dict(itertools.pairwise(tc))
                assert (pairs and all(told[k] == v for k, v in pairs.items())) or q[
                    "kind"
                ] == "noqueue", (pairs, tc)
            line = words(tree)
            assert "{" not in line and "\n" not in line
        assert words(trees["q1"]) == (
            "htb r2q 20 default 0x10; class 1:10 rate 100Mbit ceil "
            "1Gbit; pfifo limit 500p under 1:10"
        )
        assert words(trees["q4"]) == "noqueue"


def test_tcs_own_number_formats() -> None:
    """tc_print_rate, print_size and the times tc 6.1 prints (lat of a tbf given 4999us,
    99999us, 67947us, 12345us, 123456us, 999us and 1500ms, read on this machine)."""
    assert [rate_text(b // 8) for b in (10**9, 15 * 10**8, 123456789, 550000, 999, 8 * 10**12)] == [
        "1Gbit",
        "1500Mbit",
        "123456Kbit",
        "550Kbit",
        "992bit",
        "8Tbit",
    ]
    assert [tc_size(n) for n in (65500, 65536, 99937, 2**25, 1600)] == [
        "65500b",
        "64Kb",
        "99937b",
        "32Mb",
        "1600b",
    ]
    assert [time_text(us) for us in (25000, 4999, 99999, 67947, 12345, 123456, 999, 1500000)] == [
        "25ms",
        "5ms",
        "100ms",
        "67.9ms",
        "12.3ms",
        "123ms",
        "999us",
        "1.5s",
    ]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(
    value=json_values
    | st.fixed_dictionaries(
        {
            "kind": json_values,
            "options": json_values,
            "children": json_values,
            "classes": json_values,
            "untouched": json_values,
        }
    )
)
def test_anything_is_one_line(value: Any) -> None:
    line = words(value)
    assert isinstance(line, str) and len(line) <= WORDS_MOST
    assert line == " ".join(line.split())  # one line: no newline, tab or run of spaces
