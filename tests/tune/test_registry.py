"""Kinds registered by key prefix, checks registered by name, and the one argv declaration
that apply and persist share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dtnkit.errors import BadInput, ExitStatus
from dtnkit.host.facts import Interface, KernelCaps, Placement
from dtnkit.host.host import Host
from dtnkit.host.runner import Result
from dtnkit.tune import persist
from dtnkit.tune.audit import expand
from dtnkit.tune.checks import CHECKS, check_for_key
from dtnkit.tune.context import Context
from dtnkit.tune.kinds.base import CommandTunable
from dtnkit.tune.profile import KNOWN_KEYS, ItemSpec, load_profile
from dtnkit.tune.registry import KINDS, kind_for_key, tunable_for_key
from dtnkit.tune.snapshot import KIND_ORDER

SETTING_KEYS = [k.replace("*", "eth0") for k in KNOWN_KEYS if not k.startswith("check/")]
CHECK_KEYS = [k for k in KNOWN_KEYS if k.startswith("check/")]


def ctx() -> Context:
    eth0 = Interface("eth0", None, True, 100_000, "UP", 1500, 9000, 1000, None, None, (), 0, 4)
    env = Placement(True, None, None, False, True, 64 * 2**30)
    caps = KernelCaps({"fq": True}, "test", ("cubic", "bbr"), ("cubic", "bbr"))
    return Context(load_profile("dtn", ()), 100.0, env, caps, {"eth0": eth0}, [("eth0", "")])


@pytest.mark.parametrize("key", [*SETTING_KEYS, "sysctl/vm.swappiness", "ring/bond0.100/rx"])
def test_every_kind_round_trips_key_to_kind_to_key(key: str) -> None:
    tunable = tunable_for_key(key)
    assert tunable.key == key
    assert type(tunable) is KINDS[key.split("/", 1)[0]]
    assert kind_for_key(key) is KINDS[tunable.kind]
    assert tunable_for_key(tunable.key).key == key


def test_every_registered_kind_has_a_profile_key() -> None:
    """... but the kinds only snapshots hold (the IPv6 state an MTU below 1280 drops), which
    no profile may name."""
    profiled = {kind for kind, cls in KINDS.items() if not cls.snapshot_only}
    assert {key.split("/", 1)[0] for key in SETTING_KEYS} == profiled
    assert set(KINDS) - profiled == {"ipv6"}


def test_the_registry_order_is_the_write_order() -> None:
    assert KIND_ORDER == (
        "sysctl",
        "link",
        "qdisc",
        "ring",
        "feature",
        "coalesce",
        "pause",
        "cpu",
        "tuned",
        "ipv6",
    )


@pytest.mark.parametrize(
    "key", ["evil/../../key", "nosuch/eth0/rx", "check/smt", "Sysctl/vm.swappiness", ""]
)
def test_an_unknown_prefix_is_bad_input(key: str) -> None:
    with pytest.raises(BadInput) as err:
        tunable_for_key(key)
    assert err.value.status is ExitStatus.BAD_INPUT
    assert "unknown setting" in err.value.what
    assert "sysctl/" in err.value.why  # names the kinds there are


@pytest.mark.parametrize(
    "key",
    [
        "sysctl",
        "sysctl/",
        "ring/eth0/rx-mini",
        "ring/rx",
        "feature/eth0/ntuple",
        "cpu/frequency",
        "tuned/off",
        "qdisc/eth0/ingress",
    ],
)
def test_an_unknown_name_under_a_known_prefix_is_bad_input(key: str) -> None:
    with pytest.raises(BadInput, match="unknown setting"):
        tunable_for_key(key)


@pytest.mark.parametrize("key", CHECK_KEYS)
def test_every_check_key_maps_to_its_check(key: str) -> None:
    check = check_for_key(key, ctx())
    assert check.key == key
    assert type(check) is CHECKS[key.removeprefix("check/")]
    assert not check.restorable


@pytest.mark.parametrize("key", ["check/nosuch", "check/", "check/IPV6", "sysctl/x"])
def test_an_unknown_check_key_is_an_error_not_ipv6(key: str) -> None:
    with pytest.raises(BadInput) as err:
        check_for_key(key, ctx())
    assert err.value.status is ExitStatus.BAD_INPUT
    assert "unknown check" in err.value.what


# ---- persist from values ---------------------------------------------------------------------
# The files persist wrote before it took values (from an audit and steps), for these values in
# this order; the timestamp is masked.
VALUES: dict[str, Any] = {
    "sysctl/net.core.rmem_max": 536870912,
    "sysctl/net.ipv4.tcp_rmem": "4096 131072 536870912",
    "sysctl/net.ipv4.tcp_congestion_control": "bbr",
    "link/eth0/txqueuelen": 10000,
    "link/eth0/mtu": 9000,
    "qdisc/eth0/root": {"maxrate_bps": 20_000_000_000, "mq": True, "queues": 2},
    "ring/eth0/rx": 8192,
    "ring/eth0/tx": 8192,
    "feature/eth0/lro": False,
    "feature/eth0/gro": True,
    "coalesce/eth0/adaptive-rx": True,
    "pause/eth0/tx": False,
    "qdisc/eth1/root": {"kind": "tbf", "handle": "8001:", "options": {"rate": 1}, "children": []},
    "ring/eth1/rx": 4096,
    "qdisc/ens5f1np1/root": {"maxrate_bps": 0, "mq": False, "queues": 1},
    "cpu/governor": {"cpu0": "performance"},
    "tuned/profile": "network-throughput",
}
SYSCTL_D = """\
# Written by dtnkit tune apply --persist (profile dtn, rtt 150 ms) at <now>.
# `dtnkit tune restore` removes or reverts this file. If TuneD runs with
# reapply_sysctl=1 (its default) it re-applies /etc/sysctl.d after its own profile.
net.core.rmem_max = 536870912
net.ipv4.tcp_rmem = 4096 131072 536870912
net.ipv4.tcp_congestion_control = bbr
"""
UDEV = "# Written by dtnkit tune apply --persist; `dtnkit tune restore` removes it.\n" + "".join(
    f'ACTION=="add", SUBSYSTEM=="net", KERNEL=="{dev}", RUN+="{run}"\n'
    for dev, run in [
        ("eth0", "/sbin/ip link set dev eth0 txqueuelen 10000"),
        ("eth0", "/sbin/ip link set dev eth0 mtu 9000"),
        ("eth0", "/sbin/tc qdisc replace dev eth0 root handle 1: mq"),
        ("eth0", "/sbin/tc qdisc replace dev eth0 parent 1:1 fq maxrate 20000000000bit"),
        ("eth0", "/sbin/tc qdisc replace dev eth0 parent 1:2 fq maxrate 20000000000bit"),
        ("eth0", "/sbin/ethtool -G eth0 rx 8192"),
        ("eth0", "/sbin/ethtool -G eth0 tx 8192"),
        ("eth0", "/sbin/ethtool -K eth0 lro off"),
        ("eth0", "/sbin/ethtool -K eth0 gro on"),
        ("eth0", "/sbin/ethtool -C eth0 adaptive-rx on"),
        ("eth0", "/sbin/ethtool -A eth0 tx off"),
        ("eth1", "/sbin/ethtool -G eth1 rx 4096"),
        ("ens5f1np1", "/sbin/tc qdisc replace dev ens5f1np1 root fq"),
    ]
)


class Recorder:
    """A runner that succeeds at everything and remembers what it ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        self.ran.append(tuple(argv))
        return Result(tuple(argv), 0, "", "")


def test_persist_from_values_writes_the_same_files_as_before(tmp_path: Path) -> None:
    host = Host(tmp_path, runner=Recorder())
    written = persist.write(host, VALUES, "profile dtn, rtt 150 ms")
    assert written == [persist.SYSCTL_FILE, persist.UDEV_FILE]
    sysctl_d = (tmp_path / persist.SYSCTL_FILE.lstrip("/")).read_text()
    assert re.sub(r" at \S+\.$", " at <now>.", sysctl_d, count=1, flags=re.M) == SYSCTL_D
    assert (tmp_path / persist.UDEV_FILE.lstrip("/")).read_text() == UDEV


def test_persist_writes_nothing_for_kinds_that_do_not_persist(tmp_path: Path) -> None:
    host = Host(tmp_path, runner=Recorder())
    assert (
        persist.write(
            host,
            {"cpu/governor": {"cpu0": "performance"}, "tuned/profile": "throughput-performance"},
            "x",
        )
        == []
    )
    assert host.writes == []


SAMPLES: list[tuple[str, Any]] = [
    ("link/eth0/mtu", 9000),
    ("link/eth0/txqueuelen", 10000),
    ("ring/eth0/rx", 8192),
    ("ring/eth0/tx", 4096),
    ("feature/eth0/gro", True),
    ("feature/eth0/lro", False),
    ("coalesce/eth0/adaptive-rx", True),
    ("coalesce/eth0/adaptive-tx", False),
    ("pause/eth0/rx", False),
    ("pause/eth0/tx", True),
]


@pytest.mark.parametrize(("key", "value"), SAMPLES)
def test_apply_and_persist_run_the_one_declared_argv(tmp_path: Path, key: str, value: Any) -> None:
    tunable = tunable_for_key(key)
    assert isinstance(tunable, CommandTunable)
    declared = tunable.commands(value)
    # apply (and restore, and undo) write through the declaration ...
    recorder = Recorder()
    tunable.write(Host(tmp_path / "apply", runner=recorder), value)
    assert [list(argv) for argv in recorder.ran] == declared
    # ... and the boot-time udev rule runs the same argv, with the binary's absolute path
    host = Host(tmp_path / "persist", runner=Recorder())
    assert persist.write(host, {key: value}, "x") == [persist.UDEV_FILE]
    rule = host.read(persist.UDEV_FILE) or ""
    runs = [line.split('RUN+="', 1)[1].rstrip('"') for line in rule.splitlines()[1:]]
    assert runs == [" ".join([f"/sbin/{argv[0]}", *argv[1:]]) for argv in declared]


def test_pacing_is_one_declaration_for_apply_and_persist(tmp_path: Path) -> None:
    want = {"maxrate_bps": 10_000_000_000, "mq": True, "queues": 2}
    tunable = tunable_for_key("qdisc/eth0/root")
    recorder = Recorder()
    tunable.write(Host(tmp_path, runner=recorder), want)
    assert [["/sbin/" + a[0], *a[1:]] for a in recorder.ran] == tunable.boot_commands(want)


def test_an_audit_with_an_unknown_check_key_fails_instead_of_checking_ipv6() -> None:
    c = ctx()
    spec = ItemSpec(key="check/nosuch", group="checks", source="test", value="x")
    c.profile = replace(c.profile, items={"check/nosuch": spec})
    with pytest.raises(BadInput, match="unknown check"):
        expand(c, ["checks"])
