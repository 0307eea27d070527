"""Persist files: what they say, for the settings no namespace here can apply (fq pacing)."""

from __future__ import annotations

import pytest

from dtnkit.errors import DtnkitError
from dtnkit.tune import persist
from dtnkit.tune.kinds.ethtool import RingTunable
from dtnkit.tune.kinds.qdisc import QdiscTunable
from dtnkit.tune.registry import tunable_for_key


def test_pacing_is_persisted_as_mq_with_fq_under_each_queue() -> None:
    want = {"maxrate_bps": 20_000_000_000, "mq": True, "queues": 3}
    cmds = QdiscTunable("ens5f1np1").boot_commands(want)
    assert cmds == [
        ["/sbin/tc", "qdisc", "replace", "dev", "ens5f1np1", "root", "handle", "1:", "mq"],
        *[
            [
                "/sbin/tc",
                "qdisc",
                "replace",
                "dev",
                "ens5f1np1",
                "parent",
                f"1:{q}",
                "fq",
                "maxrate",
                "20000000000bit",
            ]
            for q in (1, 2, 3)
        ],
    ]
    # the same commands apply uses, without the absolute path
    assert QdiscTunable.pacing_commands("ens5f1np1", want)[0][0] == "tc"
    single = QdiscTunable("eth0").boot_commands({"maxrate_bps": 0, "mq": False, "queues": 1})
    assert single == [["/sbin/tc", "qdisc", "replace", "dev", "eth0", "root", "fq"]]


def test_an_arbitrary_qdisc_is_not_persisted() -> None:
    tbf = {"kind": "tbf", "handle": "8001:", "options": {"rate": 1}, "children": []}
    assert QdiscTunable("eth0").boot_commands(tbf) == []


def test_udev_rule_runs_on_add_for_that_interface_only() -> None:
    text = persist.render_udev(
        {
            "eth0": RingTunable("eth0", "rx").boot_commands(4096)
            + tunable_for_key("feature/eth0/lro").boot_commands(False)
        }
    )
    lines = text.splitlines()
    assert (
        lines[1] == 'ACTION=="add", SUBSYSTEM=="net", KERNEL=="eth0", '
        'RUN+="/sbin/ethtool -G eth0 rx 4096"'
    )
    assert lines[2].endswith('RUN+="/sbin/ethtool -K eth0 lro off"')


def test_a_hostile_interface_name_is_refused() -> None:
    with pytest.raises(DtnkitError, match="cannot persist"):
        persist.render_udev({'x", RUN+="/bin/sh': [["/sbin/ethtool", "-K", "x", "lro", "off"]]})
