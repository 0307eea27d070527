"""Recommendations: bandwidth-delay sizing, RAM cap, clamps, speed tiers, kernel checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from dtnkit.host.facts import Interface, KernelCaps, Placement
from dtnkit.host.host import Host
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.qdisc import QdiscTunable
from dtnkit.tune.profile import load_profile
from dtnkit.tune.recommend import recommend, tier_for
from dtnkit.tune.registry import tunable_for_key

GiB = 2**30
HOST = Host(Path("/nonexistent"))


def iface(
    name: str, speed: int | None, *, state: str = "UP", queues: int = 1, master: str | None = None
) -> Interface:
    return Interface(
        name=name,
        kind=None,
        physical=True,
        speed_mbps=speed,
        operstate=state,
        mtu=1500,
        max_mtu=9000,
        txqlen=1000,
        master=master,
        lower=None,
        members=(),
        numa_node=None,
        num_tx_queues=queues,
    )


def ctx(
    *ifaces: Interface,
    ram: int = 512 * GiB,
    rtt: float = 100.0,
    profile: str = "dtn",
    fq: bool | None = True,
    cc: tuple[str, ...] = ("reno", "cubic", "bbr"),
    initial: bool = True,
    exact: bool = False,
    speed: int | None = None,
) -> Context:
    env = Placement(initial, None, None, False, True, ram)
    caps = KernelCaps({"fq": fq}, "test", cc, cc)
    return Context(
        load_profile(profile, ()),
        rtt,
        env,
        caps,
        {i.name: i for i in ifaces},
        [(i.name, "") for i in ifaces],
        exact=exact,
        speed_override_mbps=speed,
    )


def want(c: Context, key: str) -> Want | NoWant:
    return recommend(c, HOST, tunable_for_key(key), c.profile.items[_pattern(key)])


def _pattern(key: str) -> str:
    parts = key.split("/")
    return f"{parts[0]}/*/{parts[2]}" if len(parts) == 3 else key


def value(c: Context, key: str) -> object:
    w = want(c, key)
    assert isinstance(w, Want), w
    return w.value


def test_100g_at_100ms_clamps_at_the_esnet_limits() -> None:
    c = ctx(iface("ens1", 100_000))
    assert value(c, "sysctl/net.core.rmem_max") == 2147483647
    assert value(c, "sysctl/net.ipv4.tcp_rmem") == "4096 131072 1073741824"
    assert value(c, "sysctl/net.ipv4.tcp_wmem") == "4096 16384 1073741824"
    assert value(c, "sysctl/net.core.netdev_max_backlog") == 500000
    assert value(c, "sysctl/net.core.optmem_max") == 1048576


def test_10g_buffers_follow_the_bandwidth_delay_product() -> None:
    c = ctx(iface("eth0", 10_000))
    # 10 Gbit/s x 100 ms = 119 MiB -> 128 MiB (next power of two); rmem_max x2
    assert value(c, "sysctl/net.ipv4.tcp_rmem") == "4096 131072 134217728"
    assert value(c, "sysctl/net.core.rmem_max") == 268435456
    short = ctx(iface("eth0", 10_000), rtt=10.0)
    assert value(short, "sysctl/net.ipv4.tcp_rmem") == "4096 131072 33554432"  # the floor


def test_buffers_are_capped_by_a_share_of_ram() -> None:
    c = ctx(iface("ens1", 100_000), ram=8 * GiB)
    w = want(c, "sysctl/net.core.rmem_max")
    assert isinstance(w, Want)
    assert w.value == 512 * 2**20  # 8 GiB / 16
    assert "of RAM" in w.why


def test_measurement_profile_sizes_single_streams_larger() -> None:
    dtn, meas = ctx(iface("eth0", 10_000)), ctx(iface("eth0", 10_000), profile="measurement")
    assert value(meas, "sysctl/net.core.rmem_max") == 2 * int(
        str(value(dtn, "sysctl/net.core.rmem_max"))
    )


@pytest.mark.parametrize(
    ("mbps", "tier", "note"),
    [
        (1000, 10, "below the smallest"),
        (10_000, 10, ""),
        (25_000, 25, ""),
        (50_000, 100, "next one up"),
        (400_000, 400, ""),
        (800_000, 400, "above the largest"),
    ],
)
def test_speed_tiers_are_explicit(mbps: int, tier: int, note: str) -> None:
    got, why = tier_for(mbps)
    assert got == tier
    assert (note in why) if note else why == ""


def test_unknown_speed_is_reported_not_mapped() -> None:
    c = ctx(iface("eth0", None))
    for key in ("sysctl/net.core.rmem_max", "sysctl/net.core.netdev_max_backlog"):
        w = want(c, key)
        assert isinstance(w, NoWant) and w.status == "unknown"
        assert "--speed" in w.why
    assert c.decisions[0].value is None
    forced = ctx(iface("eth0", None), speed=25_000)
    assert value(forced, "sysctl/net.core.netdev_max_backlog") == 300000


def test_buffer_speed_ignores_down_links_and_says_why() -> None:
    c = ctx(iface("fast", 100_000, state="DOWN"), iface("ens1", 25_000))
    assert c.buffer_speed_mbps == 25_000
    assert "ens1" in c.decisions[0].why


def test_pacing_uses_each_interfaces_own_speed_and_keeps_mq() -> None:
    c = ctx(iface("big", 100_000, queues=8), iface("small", 25_000))
    big = value(c, "qdisc/big/root")
    small = value(c, "qdisc/small/root")
    assert big == {"maxrate_bps": 20_000_000_000, "mq": True, "queues": 8}
    assert small == {"maxrate_bps": 5_000_000_000, "mq": False, "queues": 1}
    assert QdiscTunable("big").show(big) == "mq + fq maxrate 20gbit"


def test_no_fq_is_said_not_pretended() -> None:
    c = ctx(iface("eth0", 10_000), fq=False)
    w = want(c, "qdisc/eth0/root")
    assert isinstance(w, NoWant) and w.status == "unsupported"
    assert "no fq qdisc" in w.why and "not pacing" in w.why
    unknown = want(ctx(iface("eth0", 10_000), fq=None), "sysctl/net.core.default_qdisc")
    assert isinstance(unknown, NoWant) and unknown.status == "unknown"


def test_bbr_missing_names_what_to_install() -> None:
    w = want(
        ctx(iface("eth0", 10_000), cc=("reno", "cubic")), "sysctl/net.ipv4.tcp_congestion_control"
    )
    assert isinstance(w, NoWant) and w.status == "unsupported"
    assert "kernel-modules-extra" in w.why
    ok = want(ctx(iface("eth0", 10_000)), "sysctl/net.ipv4.tcp_congestion_control")
    assert isinstance(ok, Want) and "version unknown" in ok.why
    loadable = ctx(iface("eth0", 10_000), cc=("reno", "cubic"))
    loadable.caps = KernelCaps({"fq": True}, "test", ("reno", "cubic"), ("reno", "cubic"), ("bbr",))
    w = want(loadable, "sysctl/net.ipv4.tcp_congestion_control")
    assert isinstance(w, Want) and "setting the sysctl loads it" in w.why


def test_mtu_only_where_the_nic_supports_it() -> None:
    small = Interface("eth0", None, True, 10_000, "UP", 1500, 1500, 1000, None, None, (), None, 1)
    w = want(ctx(small), "link/eth0/mtu")
    assert isinstance(w, NoWant) and "largest MTU is 1500" in w.why


def test_exact_turns_raise_into_exact() -> None:
    w = want(ctx(iface("eth0", 10_000), exact=True), "sysctl/net.ipv4.tcp_rmem")
    assert isinstance(w, Want) and w.mode == "exact"


def test_raise_only_comparison_and_target_are_element_wise() -> None:
    t = tunable_for_key("sysctl/net.ipv4.tcp_rmem")
    assert t.satisfies("8192 262144 1073741824", "4096 131072 268435456", "raise")
    assert not t.satisfies("4096 65536 1073741824", "4096 131072 268435456", "raise")
    assert (
        t.target("4096 65536 1073741824", "4096 131072 268435456", "raise")
        == "4096 131072 1073741824"
    )
    assert t.satisfies("4096\t131072   6291456", "4096 131072 6291456", "exact")
