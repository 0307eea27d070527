"""Property tests of the one duration parser (every duration flag) and of `tune diff --map`
values: what they accept means what it says, and anything else is one BadInput."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.errors import BadInput
from dtnkit.tune.pairing import parse_map
from dtnkit.units import duration_flag, parse_duration

SCALE = {
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
BIG = 10.0**12


@given(st.integers(0, 10**6), st.sampled_from(sorted(SCALE)))
def test_a_number_with_a_unit(n: int, unit: str) -> None:
    assert math.isclose(parse_duration(f"{n}{unit}", hi=BIG), n * SCALE[unit], rel_tol=1e-12)
    assert math.isclose(
        parse_duration(f" {n} {unit.upper()} ", hi=BIG), n * SCALE[unit], rel_tol=1e-12
    )


@given(st.integers(0, 10**6))
def test_a_bare_number_is_seconds(n: int) -> None:
    assert parse_duration(str(n), hi=BIG) == n
    assert parse_duration(n, hi=BIG) == n


@given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59))
def test_parts_add_up(h: int, m: int, s: int) -> None:
    assert parse_duration(f"{h}h{m}m{s}s", hi=BIG) == h * 3600 + m * 60 + s


@given(st.integers(0, 10**7))
def test_format_is_read_back(seconds: int) -> None:
    assert parse_duration(duration_flag(seconds), hi=BIG) == seconds


@given(st.text(max_size=12))
@settings(max_examples=300)
def test_any_text_is_a_duration_in_range_or_one_bad_input(text: str) -> None:
    try:
        value = parse_duration(text, "--wait", lo=0, hi=600)
    except BadInput as exc:
        assert exc.what.startswith(("bad --wait", "--wait ")) and exc.next_step
    else:
        assert math.isfinite(value) and 0 <= value <= 600


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_floats_in_range_or_refused(value: float) -> None:
    try:
        got = parse_duration(value, lo=1, hi=3600)
    except BadInput:
        assert not (math.isfinite(value) and 1 <= value <= 3600)
    else:
        assert got == value


@given(st.integers(1, 3600), st.sampled_from(["", "s", "m"]))
def test_whole_seconds(n: int, unit: str) -> None:
    seconds = n * {"": 1, "s": 1, "m": 60}[unit]
    if seconds <= 3600:
        assert parse_duration(f"{n}{unit}", lo=1, hi=3600, whole=True) == seconds
    with pytest.raises(BadInput, match="whole number"):
        parse_duration(f"{n}.5s", lo=1, hi=3600 * 2, whole=True)


@pytest.mark.parametrize("text", ["1h1h", "5m3", "-5", "nan", "1e3", "s", "", "5 x", "2mm"])
def test_refused(text: str) -> None:
    with pytest.raises(BadInput):
        parse_duration(text)


# ---- --map ------------------------------------------------------------------------------------
IFNAME = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,14}", fullmatch=True)


@given(
    st.lists(st.tuples(IFNAME, IFNAME), max_size=6, unique_by=(lambda t: t[0], lambda t: t[1])),
    st.booleans(),
)
def test_map_pairs_are_read_back(pairs: list[tuple[str, str]], comma: bool) -> None:
    items = [f"{a}={b}" for a, b in pairs]
    given_items = [",".join(items)] if comma and items else items
    assert parse_map(given_items) == dict(pairs)


@given(st.lists(st.text(max_size=20), max_size=4))
@settings(max_examples=300)
def test_any_map_text_is_pairs_or_one_bad_input(items: list[str]) -> None:
    try:
        got = parse_map(items)
    except BadInput as exc:
        assert "--map" in exc.what and exc.next_step
    else:
        assert len(set(got.values())) == len(got)
        for a, b in got.items():
            assert 1 <= len(a) <= 15 and 1 <= len(b) <= 15
            assert not {"/", "=", ",", " "} & (set(a) | set(b))


@pytest.mark.parametrize(
    "items",
    [["eth0"], ["eth0=a,eth0=b"], ["a=x", "b=x"], ["../x=y"], ["eth0=" + "e" * 16], ["a b=c"]],
)
def test_bad_maps_are_refused(items: list[str]) -> None:
    with pytest.raises(BadInput):
        parse_map(items)
