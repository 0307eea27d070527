"""records.record behaves as @dataclass(frozen=True) for the classes that use it."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from dtnkit.host.parsers.ethtool import Feature, Rings
from dtnkit.records import record


@record
class Point:
    """A record."""

    kind: ClassVar[str] = "point"
    x: int
    y: int = 2
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DPoint:
    """The same as a dataclass."""

    kind: ClassVar[str] = "point"
    x: int
    y: int = 2
    tags: tuple[str, ...] = ()


def test_same_behaviour_as_a_frozen_dataclass() -> None:
    for cls in (Point, DPoint):
        a, b = cls(1), cls(x=1, y=2)
        assert a == b and hash(a) == hash(b) and a != cls(1, 3)
        assert (a.x, a.y, a.tags) == (1, 2, ()) and cls.kind == "point"
        assert cls.__match_args__ == ("x", "y", "tags")
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.x = 5  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del a.x
        for bad in ((), (1, 2, (), 4)):
            with pytest.raises(TypeError):
                cls(*bad)
        with pytest.raises(TypeError):
            cls(1, x=1)  # type: ignore[misc]
        with pytest.raises(TypeError):
            cls(1, z=1)  # type: ignore[call-arg]
        match a:
            case cls(1, 2):
                pass
            case _:
                pytest.fail("no match")
    assert repr(Point(1, tags=("a",))) == "Point(x=1, y=2, tags=('a',))"
    assert repr(DPoint(1, tags=("a",))) == "DPoint(x=1, y=2, tags=('a',))"
    assert Point(1) != DPoint(1)  # type: ignore[comparison-overlap]  # never equal


def test_the_converted_parsers_records() -> None:
    f = Feature("rx-gro", True, False)
    assert f.requested is None and f == Feature(name="rx-gro", on=True, fixed=False)
    assert {f: 1}[Feature("rx-gro", True, False, None)] == 1
    rings = Rings(1, None, None, 2, 4, None, None, 8)
    assert repr(rings).startswith("Rings(rx=1, rx_mini=None")
    with pytest.raises(TypeError, match="defines __eq__"):
        record(type("Own", (), {"__annotations__": {"a": "int"}, "__eq__": lambda s, o: True}))
    with pytest.raises(TypeError, match="follows default"):
        record(type("Order", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}))
