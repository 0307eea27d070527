"""``dtnkit.records.replace``: ``dataclasses.replace`` for a record (the copy's Options are a
mutable record since session 22, and a one-stream retry or a server's TPC pull copies them
with a change)."""

from __future__ import annotations

import dataclasses

import pytest

from dtnkit.records import mutable_record, record, replace


@record
class Point:
    x: int
    y: int = 0


@mutable_record
class Settings:
    streams: int = 1
    token: str | None = None


@dataclasses.dataclass
class SettingsDc:
    streams: int = 1
    token: str | None = None


def test_replace_makes_a_new_record_with_the_changes() -> None:
    p = Point(1, 2)
    q = replace(p, y=5)
    assert q == Point(1, 5) and p == Point(1, 2) and q is not p


def test_replace_of_a_mutable_record_leaves_the_original_alone() -> None:
    s = Settings(streams=4, token="t")
    t = replace(s, streams=1)
    t.token = "u"
    assert (s.streams, s.token) == (4, "t") and (t.streams, t.token) == (1, "u")
    # as dataclasses.replace does for the same class as a dataclass
    d = dataclasses.replace(SettingsDc(4, "t"), streams=1)
    assert (d.streams, d.token) == (t.streams, "t")


def test_replace_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(Point(1), z=3)
