"""The fuzzers' size is one setting, DTNKIT_FUZZ (tests/support/fuzz.py): 1,000 cases in
every run, 10,000 in the nightly one, and a value it does not know stops the run."""

from __future__ import annotations

import pytest
from tests.support import fuzz


@pytest.mark.parametrize(
    ("value", "cases"),
    [
        (None, 1_000),
        ("", 1_000),
        ("ci", 1_000),
        ("nightly", 10_000),
        (" nightly ", 10_000),
        ("100000", 100_000),
        ("7", 7),
    ],
)
def test_the_setting_gives_the_size(value: str | None, cases: int) -> None:
    environ = {} if value is None else {"DTNKIT_FUZZ": value}
    assert fuzz.cases(environ) == cases


@pytest.mark.parametrize("value", ["night", "Nightly", "0", "-1", "1e4", "10,000", "ci nightly"])
def test_an_unknown_value_is_refused_with_what_is_expected(value: str) -> None:
    with pytest.raises(ValueError, match=r"DTNKIT_FUZZ=.*expected 'ci'.*'nightly'"):
        fuzz.cases({"DTNKIT_FUZZ": value})


def test_batches_cover_the_size() -> None:
    assert fuzz.batches(50) * 50 >= fuzz.CASES
    assert (fuzz.batches(50) - 1) * 50 < fuzz.CASES
