"""Frozen records: what ``@dataclass(frozen=True)`` gives a class of plain fields, without its
start-up cost.

A dataclass compiles its generated methods (``__init__``, ``__repr__``, ``__eq__``,
``__setattr__``, ``__delattr__``, ``__hash__``: one ``exec`` each) and, without a docstring,
computes a signature: about 3.5 M instructions (~1 ms) per frozen class, which ``dtnkit tune
audit`` paid for every one of the ~30 classes it imports.  :func:`record` builds the same
behaviour from shared functions: the constructor takes the fields in order, positionally or by
name, with their defaults; instances compare equal when of the same class with equal fields,
hash as the tuple of their fields, print as ``Name(field=value, ...)``, and refuse
assignment with :class:`dataclasses.FrozenInstanceError`; ``__match_args__`` is set.  Type
checkers see a frozen dataclass (``dataclass_transform``).  Not supported (use a dataclass):
``field(...)``, ``__post_init__``, ``dataclasses.asdict``/``fields``, inheritance between
records; :func:`replace` is ``dataclasses.replace`` for a record.  :func:`mutable_record` is
the same for a class whose fields are assigned after construction (``@dataclass`` without
``frozen``).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar, dataclass_transform

C = TypeVar("C", bound=type)
R = TypeVar("R")

_MISSING = object()


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    names: tuple[str, ...] = cls.__match_args__
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} positional arguments but "
                        f"{len(args)} were given")
    values = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {key!r}")
        if key in values:
            raise TypeError(f"{cls.__name__}() got multiple values for argument {key!r}")
        values[key] = value
    defaults: dict[str, Any] = cls.__record_defaults__
    state = self.__dict__  # (a mutable record's __setattr__ would do; this is quicker)
    for name in names:
        value = values.get(name, _MISSING)
        if value is _MISSING:
            value = defaults.get(name, _MISSING)
            if value is _MISSING:
                raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
        state[name] = value


def _values(self: Any) -> tuple[Any, ...]:
    state = self.__dict__
    return tuple(state[name] for name in type(self).__match_args__)


def _eq(self: Any, other: object) -> object:
    if other.__class__ is not self.__class__:
        return NotImplemented
    same: bool = _values(self) == _values(other)
    return same


def _hash(self: Any) -> int:
    return hash(_values(self))


def _repr(self: Any) -> str:
    cls = type(self)
    shown = ", ".join(f"{name}={value!r}"
                      for name, value in zip(cls.__match_args__, _values(self), strict=True))
    return f"{cls.__qualname__}({shown})"


def _setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(frozen_default=True)
def record(cls: C) -> C:
    """Make ``cls`` (annotated fields, plain defaults) a frozen record (see the module)."""
    return _make(cls, frozen=True)


@dataclass_transform()
def mutable_record(cls: C) -> C:
    """A record whose fields may be assigned, as ``@dataclass`` (not frozen) makes it: the
    same constructor, equality and repr; not hashable (``__hash__`` is None).  A default is
    one object shared by every instance: give a list or dict field no default."""
    return _make(cls, frozen=False)


def replace(obj: R, /, **changes: Any) -> R:
    """A new record of *obj*'s class with its fields, *changes* replacing some (as
    ``dataclasses.replace`` makes one of a dataclass)."""
    cls = type(obj)
    names: tuple[str, ...] = cls.__match_args__  # type: ignore[attr-defined]
    for key in changes:
        if key not in names:
            raise TypeError(f"{cls.__name__} has no field {key!r}")
    state = obj.__dict__
    return cls(**{name: changes.get(name, state[name]) for name in names})


def _make(cls: C, *, frozen: bool) -> C:
    annotations = inspect.get_annotations(cls)
    names = tuple(name for name, kind in annotations.items()
                  if not str(kind).startswith(("ClassVar", "typing.ClassVar")))
    defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
    seen_default = False
    for name in names:  # as a dataclass: no required field after one with a default
        if name in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {name!r} follows default argument")
    for name in ("__init__", "__eq__", "__hash__", "__repr__", "__setattr__", "__delattr__"):
        if name in cls.__dict__ and name != "__hash__":
            raise TypeError(f"{cls.__name__} defines {name}: make it a dataclass")
    methods: tuple[tuple[str, Any], ...] = (("__init__", _init), ("__eq__", _eq),
                                            ("__repr__", _repr))
    if frozen:
        methods += (("__hash__", _hash), ("__setattr__", _setattr), ("__delattr__", _delattr))
    else:
        methods += (("__hash__", None),)
    for name, method in methods:
        type.__setattr__(cls, name, method)
    type.__setattr__(cls, "__match_args__", names)
    type.__setattr__(cls, "__record_defaults__", defaults)
    return cls
