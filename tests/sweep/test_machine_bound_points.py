"""A point is kept out of the peak and drop analysis when the one machine holding the lab ran
out of CPU: the stage's own lateness can stay low while the hosts' TCP starves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dtnkit.lab import fidelity
from dtnkit.measure.pathsampler import idle_percent

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def test_idle_share_between_two_stat_lines() -> None:
    old = dict.fromkeys(FIELDS, 1000)
    new = {**old, "user": 1150, "system": 1030, "softirq": 1010, "idle": 1008, "iowait": 1002}
    # 200 ticks passed, 10 of them idle or waiting for I/O
    assert idle_percent(old, new) == 5.0
    assert idle_percent(old, old) is None  # no time passed


@given(
    st.lists(st.integers(0, 10**9), min_size=8, max_size=8),
    st.lists(st.integers(0, 10**9), min_size=8, max_size=8),
)
def test_idle_share_is_a_percentage_whatever_the_counters(a: list[int], b: list[int]) -> None:
    share = idle_percent(dict(zip(FIELDS, a, strict=True)), dict(zip(FIELDS, b, strict=True)))
    assert share is None or 0.0 <= share <= 100.0


def test_a_machine_out_of_cpu_binds_the_point() -> None:
    bound = fidelity.machine_bound(4.0)
    assert bound.bound and "4 % idle" in bound.reason
    assert not fidelity.machine_bound(fidelity.MACHINE_IDLE_FLOOR_PERCENT).bound
    assert not fidelity.machine_bound(55.0).bound
    assert not fidelity.machine_bound(None).bound  # not measured: no claim
