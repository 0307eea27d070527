"""Snapshots and profiles are checked whole before anything is written.

Each check refuses with :class:`~dtnkit.errors.BadInput` (exit 9) saying what, why and what
next: text that is not UTF-8, JSON with a key given twice, ``NaN`` / ``Infinity``, nesting
deeper than :data:`MAX_DEPTH`, unknown fields, wrong types, and values a kind refuses (each
kind's :meth:`~dtnkit.tune.kinds.base.Tunable.validate` hook: ranges, names, shapes).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.tune.kinds.base import type_name
from dtnkit.tune.persist import FILES
from dtnkit.tune.profile import Profile
from dtnkit.tune.registry import tunable_for_key

#: deepest nesting of lists and objects a snapshot may have (a qdisc tree needs 5)
MAX_DEPTH = 32
#: largest snapshot file read (a real one is a few tens of KiB)
MAX_BYTES = 16 * 2**20
SNAPSHOT_FIELDS = {"schema", "id", "label", "kind", "created", "host", "values", "files"}
REQUIRED_FIELDS = ("id", "kind", "created", "values")
SNAPSHOT_KINDS = ("manual", "baseline", "experiment")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_DAMAGED = "delete it, or restore from another snapshot"


def decode_text(data: bytes, origin: str, next_step: str) -> str:
    """UTF-8 text of a file, or BadInput naming the first bad byte."""
    if len(data) > MAX_BYTES:
        raise BadInput(
            f"{origin} is too large", f"{len(data)} bytes, at most {MAX_BYTES}", next_step
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{origin} is not UTF-8 text",
            f"byte 0x{data[exc.start]:02x} at offset {exc.start}",
            next_step,
        ) from exc


def parse_json(data: bytes, origin: str) -> Any:
    """Strict JSON: UTF-8, no key twice, no NaN or Infinity, nesting at most MAX_DEPTH."""
    text = decode_text(data, origin, _DAMAGED)
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except json.JSONDecodeError as exc:
        raise BadInput(f"{origin} is corrupt", f"invalid JSON: {exc}", _DAMAGED) from exc
    except _Refused as exc:
        raise BadInput(f"{origin} is corrupt", str(exc), _DAMAGED) from exc
    except RecursionError as exc:
        raise BadInput(
            f"{origin} is corrupt", f"nested deeper than {MAX_DEPTH} levels", _DAMAGED
        ) from exc
    except ValueError as exc:  # an integer of more than 4300 digits
        raise BadInput(f"{origin} is corrupt", str(exc), _DAMAGED) from exc
    if depth(doc) > MAX_DEPTH:
        raise BadInput(f"{origin} is corrupt", f"nested deeper than {MAX_DEPTH} levels", _DAMAGED)
    return doc


class _Refused(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key {key[:80]!r} is given twice")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number dtnkit accepts")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{text[:40]} is out of range")
    return value


def depth(doc: Any) -> int:
    """Nesting depth of lists and objects, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in node)
    return deepest


def check_snapshot(doc: Mapping[str, Any], origin: str) -> None:
    """Every field of a snapshot document (already an object of this dtnkit's schema)."""
    unknown = set(doc) - SNAPSHOT_FIELDS
    if unknown:
        raise BadInput(
            f"{origin} has unknown fields {sorted(unknown)[:5]}",
            f"a snapshot has {', '.join(sorted(SNAPSHOT_FIELDS))}",
            _DAMAGED,
        )
    missing = [f for f in REQUIRED_FIELDS if f not in doc]
    if missing:
        raise BadInput(f"{origin} is a damaged snapshot", f"missing field {missing[0]!r}", _DAMAGED)
    _field(
        origin,
        "id",
        doc["id"],
        isinstance(doc["id"], str) and _ID.fullmatch(doc["id"]),
        "a name of letters, digits, '.', '_' and '-'",
    )
    _field(
        origin,
        "kind",
        doc["kind"],
        doc["kind"] in SNAPSHOT_KINDS,
        f"one of {', '.join(SNAPSHOT_KINDS)}",
    )
    for name in ("label", "created"):
        value = doc.get(name, "")
        _field(origin, name, value, isinstance(value, str) and len(value) <= 1024, "a string")
    host = doc.get("host", {})
    _field(
        origin,
        "host",
        host,
        isinstance(host, dict) and all(isinstance(v, str | None) for v in host.values()),
        "an object of strings",
    )
    files = doc.get("files", {})
    _field(
        origin,
        "files",
        files,
        isinstance(files, dict) and all(isinstance(v, str | None) for v in files.values()),
        "an object of file contents",
    )
    others = sorted(set(files) - set(FILES))
    if others:
        raise BadInput(
            f"{origin} names files dtnkit never writes: {others[:3]}",
            f"a snapshot keeps only {', '.join(FILES)}",
            _DAMAGED,
        )
    values = doc["values"]
    if not isinstance(values, dict):
        raise BadInput(
            f"{origin} is a damaged snapshot",
            f"values must be an object of settings, not {type_name(values)}",
            _DAMAGED,
        )
    for key, value in values.items():
        check_value(key, value, origin)


def _field(origin: str, name: str, value: Any, ok: Any, want: str) -> None:
    if not ok:
        raise BadInput(
            f"{origin} is a damaged snapshot",
            f"{name} must be {want}, not {str(value)[:40]!r}",
            _DAMAGED,
        )


def check_value(key: str, value: Any, origin: str) -> None:
    """The key names a setting (its kind builds a tunable) and its kind accepts the value."""
    tunable = tunable_for_key(key)
    why = tunable.validate(value)
    if why:
        raise BadInput(
            f"{origin}: bad value for {key}", why, "fix the value, or take a new snapshot"
        )


def check_profile(profile: Profile) -> None:
    """Every literal value and tier of a merged profile, by the kind of its key."""
    where = f"profile {profile.name!r}"
    for key, spec in profile.items.items():
        if key.startswith("check/"):
            continue
        tunable = tunable_for_key(key.replace("/*/", "/dev/", 1))
        candidates = [("value", spec.value)] if spec.value is not None else []
        candidates += [(f"tiers.{speed}", v) for speed, v in (spec.tiers or {}).items()]
        for name, value in candidates:
            why = tunable.validate(value)
            if why:
                raise BadInput(
                    f"{where}: bad {name} for {key}",
                    why,
                    "fix it (docs/profiles.md lists what each key takes)",
                )
