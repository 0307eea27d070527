"""bench/lib/stats.py: rounds run interleaved (alternating or shuffled), an A/A twin runs the
same command again in the same round, ratios pair values of the same round, and a ratio is
printed with the noise band its A/A rounds give."""

from __future__ import annotations

import math

import pytest
from bench.lib.stats import (
    AA_SUFFIX,
    Noise,
    Samples,
    aa,
    compare,
    round_order,
    run_rounds,
    with_aa,
)
from hypothesis import given
from hypothesis import strategies as st

NAMES = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8, unique=True)


@given(NAMES, st.integers(0, 50), st.sampled_from(["alternate", "random"]), st.integers())
def test_every_round_runs_every_measurement_once(
    names: list[str], k: int, order: str, seed: int
) -> None:
    got = round_order(names, k, order, seed)
    assert sorted(got) == sorted(names)
    assert got == round_order(names, k, order, seed)  # the same seed, the same order


def test_alternate_reverses_every_other_round_and_random_is_not_fixed() -> None:
    names = [f"m{i}" for i in range(8)]
    assert round_order(names, 0) == names
    assert round_order(names, 1) == names[::-1]
    assert round_order(names, 2) == names
    shuffled = {tuple(round_order(names, k, "random", 7)) for k in range(6)}
    assert len(shuffled) > 1  # rounds differ
    with pytest.raises(ValueError, match="order"):
        round_order(names, 0, "sideways")


def test_a_twin_runs_right_after_its_measurement_in_the_same_round() -> None:
    assert with_aa(["a", "b", "c"], ["b"]) == ["a", "b", aa("b"), "c"]
    calls: list[str] = []
    measures = {n: (lambda n=n: calls.append(n) or float(len(calls))) for n in ("a", "b")}
    got = run_rounds(measures, 2, twins=["a"])
    assert calls == ["a", "a", "b", "b", "a", "a"]  # round 2 reversed: b, a (A/A), a
    assert got.get("a") == [1.0, 6.0] and got.get(aa("a")) == [2.0, 5.0]
    assert got.paired("a", aa("a")) == [0.5, 1.2]


def test_a_failed_run_is_a_failure_of_that_round_only_with_keep_going() -> None:
    state = {"n": 0}

    def flaky() -> float:
        state["n"] += 1
        if state["n"] == 2:
            raise RuntimeError("lost the peer")
        return 1.0

    got = run_rounds({"x": flaky, "y": lambda: 2.0}, 3, keep_going=True)
    assert got.get("x") == [1.0, 1.0] and got.failures == {"x": ["lost the peer"]}
    assert got.paired("x", "y") == [0.5, 0.5]  # the failed round is not paired
    with pytest.raises(RuntimeError):
        state["n"] = 0
        run_rounds({"x": flaky}, 3)


def test_figures_recorded_beside_a_run_land_in_its_round() -> None:
    got = run_rounds({"cp": lambda: (3.0, {"cp copy phase": 2.0})}, 2, twins=["cp"])
    assert got.get("cp copy phase") == [2.0, 2.0]  # the twin's are not kept twice
    assert got.as_json()["values"] == {
        "cp": [3.0, 3.0],
        "cp copy phase": [2.0, 2.0],
        "cp" + AA_SUFFIX: [3.0, 3.0],
    }


def test_the_noise_is_the_largest_a_a_ratio_away_from_one() -> None:
    noise = Noise.of([1.0, 1.04, 0.97])
    assert noise is not None and noise.margin == pytest.approx(0.04)
    assert noise.covers(1.03) and noise.covers(1 / 1.04)
    assert not noise.covers(1.05) and not noise.covers(0.9)
    assert Noise.of([]) is None


@given(st.lists(st.floats(0.2, 5.0), min_size=1, max_size=20))
def test_every_a_a_ratio_is_within_its_own_noise(ratios: list[float]) -> None:
    noise = Noise.of(ratios)
    assert noise is not None and noise.margin >= 0
    assert all(noise.covers(r) for r in ratios)


def samples(values: dict[str, list[float]]) -> Samples:
    s = Samples()
    for name, vs in values.items():
        for k, v in enumerate(vs):
            s.add(name, k, v)
    return s


def test_a_ratio_is_judged_against_its_noise_band() -> None:
    s = samples({"new": [0.90, 0.92, 0.91], "old": [1.0, 1.0, 1.0], aa("old"): [1.02, 0.99, 1.01]})
    c = compare(s, "new", "old")
    assert c.ratio == pytest.approx(0.91)
    assert c.noise is not None and c.noise.margin == pytest.approx(0.02)  # 1.0 / 1.02
    assert (c.verdict, c.fmt()) == ("lower", "0.91 ±2 %")
    same = compare(samples({"new": [1.005], "old": [1.0], aa("old"): [1.02]}), "new", "old")
    assert same.verdict == "within noise"
    assert compare(samples({"new": [2.0], "old": [1.0]}), "new", "old").verdict == "no A/A rounds"
    assert compare(samples({"old": [1.0]}), "new", "old").fmt() == "-"
    assert math.isclose(compare(s, "old", "new").ratio or 0, 1 / 0.91)
