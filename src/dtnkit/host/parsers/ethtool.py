"""Parsers for ``ethtool`` output: rings, channels, features, coalescing, pause, driver, speed.

The formats, as printed by ethtool 6.1 (Debian 12) and by newer releases, checked against
the real captures under ``tests/fixtures/captured``:

``ethtool -g`` (rings)
    ``Ring parameters for IF:``, then ``Pre-set maximums:`` and ``Current hardware settings:``
    sections of ``RX:``, ``RX Mini:``, ``RX Jumbo:``, ``TX:`` rows (TAB aligned; a number or
    ``n/a``). Newer ethtool adds ``RX Buf Len``, ``CQE Size``, ``TX Push``, ``RX Push``,
    ``TX push buff len``, ``TCP data split`` rows. ``ethtool --json -g`` (not in 6.1) prints a
    list holding one object with ``rx-max``, ``rx-mini-max``, ``rx-jumbo-max``, ``tx-max``,
    ``rx``, ``rx-mini``, ``rx-jumbo``, ``tx``; absent attributes are left out.

``ethtool -k`` / ``--json -k`` / ``-K`` (features)
    ``Features for IF:`` then ``name: on|off`` rows with an optional ``[fixed]``,
    ``[requested on]`` or ``[requested off]``; features grouped under a legacy name
    (``tx-checksumming``) are indented by a TAB under it. JSON: ``{"ifname": ..., name:
    {"active": bool, "fixed": bool|null, "requested": bool|null}}`` in a one-element list (the
    legacy group names have ``null`` there). ``ethtool -K`` prints nothing when every request
    took effect exactly; otherwise ``Actual changes:`` and one row per feature that differs,
    using the *kernel* feature names (``rx-gro``, ``rx-lro``, not ``generic-receive-offload``):
    ``name: on`` (requested and done), ``name: off [requested on]`` (refused -- ethtool can
    still exit 0) or ``name: on [not requested]`` (changed as a side effect).

``ethtool -c`` / ``--json -c`` (coalescing)
    ``Coalesce parameters for IF:``, ``Adaptive RX: on  TX: off``, then ``name: value`` rows
    (ethtool 6.1 puts a space after the colon, newer ethtool a TAB; ``tx-aggr-time-usecs`` is
    printed without a colon), blank lines between groups, and ``CQE mode RX: n/a  TX: n/a``.
    JSON omits absent values; before early 2025 it keyed both the adaptive and the CQE-mode pair
    ``"rx"``/``"tx"`` (duplicate keys), later ``adaptive-rx``/``adaptive-tx`` and
    ``cqe-mode-rx``/``cqe-mode-tx``.

``ethtool -a`` / ``--json -a`` (pause)
    ``Autonegotiate:\\ton``, ``RX:\\t\\ton``, ``TX:\\t\\toff``; with autonegotiation on also
    ``RX negotiated: on`` / ``TX negotiated: on``; with ``-I`` a ``Statistics:`` block. JSON:
    ``[{"ifname", "autonegotiate", "rx", "tx", "negotiated": {...}, "statistics": {...}}]``.
    A device without pause support makes ethtool print ``[ ]`` on stdout (and exit 1).

``ethtool -l`` (channels)
    Like ``-g``: two sections of ``RX:``, ``TX:``, ``Other:``, ``Combined:`` (number or ``n/a``).

``ethtool -i`` (driver)
    ``key: value`` rows (``driver``, ``version``, ``firmware-version``, ``bus-info``,
    ``supports-...``); a value may be empty (``expansion-rom-version:``).

``ethtool IF`` (settings)
    ``Settings for IF:`` then TAB-indented rows; ``Speed: 25000Mb/s`` or ``Speed: Unknown!``;
    some devices (``lo``) print no ``Speed`` row at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dtnkit.host.parsers import (
    ParseError,
    error_at,
    int_or_str,
    is_uint,
    json_int,
    load_json,
    require_text,
)


def _on_off_na(value: str, source: str, lineno: int, line: str) -> bool | None:
    value = value.strip()
    if value == "on":
        return True
    if value == "off":
        return False
    if value == "n/a":
        return None
    raise error_at(source, "expected 'on', 'off' or 'n/a'", lineno, line)


def _int_or_na(value: str, source: str, lineno: int, line: str) -> int | None:
    value = value.strip()
    if value == "n/a":
        return None
    if is_uint(value):
        return int(value)
    raise error_at(source, "expected a number or 'n/a'", lineno, line)


def _single_object(data: Any, source: str) -> dict[str, Any]:
    """ethtool --json prints a list holding one object per device."""
    if not isinstance(data, list):
        raise ParseError(f"{source}: expected a JSON list, got {type(data).__name__}")
    if len(data) != 1:
        raise ParseError(f"{source}: expected a JSON list with one object, got {len(data)} items")
    obj = data[0]
    if not isinstance(obj, dict):
        raise ParseError(f"{source}: expected a JSON object in the list, got {type(obj).__name__}")
    return obj


def _parse_max_cur_sections(
    text: str, source: str, keys: dict[str, str]
) -> tuple[dict[str, int | None], dict[str, int | None]]:
    """Read the ``Pre-set maximums:`` / ``Current hardware settings:`` layout of -g and -l.

    Only rows whose label is in ``keys`` are read (label -> field name); other rows are ignored.
    """
    require_text(text, source)
    maxima: dict[str, int | None] = {}
    current: dict[str, int | None] = {}
    section: dict[str, int | None] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped == "Pre-set maximums:":
            section = maxima
            continue
        if stripped == "Current hardware settings:":
            section = current
            continue
        if section is None:
            continue
        label, sep, value = stripped.partition(":")
        if sep and label.strip() in keys:
            section[keys[label.strip()]] = _int_or_na(value, source, lineno, line)
    if section is None:
        raise ParseError(
            f"{source}: no 'Pre-set maximums:' or 'Current hardware settings:' section found"
        )
    return maxima, current


@dataclass(frozen=True, slots=True)
class Rings:
    """Ring sizes from ``ethtool -g``; ``None`` where the driver reports ``n/a`` or nothing."""

    rx: int | None
    rx_mini: int | None
    rx_jumbo: int | None
    tx: int | None
    rx_max: int | None
    rx_mini_max: int | None
    rx_jumbo_max: int | None
    tx_max: int | None


_RING_LABELS = {"RX": "rx", "RX Mini": "rx_mini", "RX Jumbo": "rx_jumbo", "TX": "tx"}


def parse_ethtool_rings_text(text: str) -> Rings:
    """Parse ``ethtool -g IF`` text (any ethtool version; extra rows are ignored)."""
    maxima, current = _parse_max_cur_sections(text, "ethtool -g", _RING_LABELS)
    return Rings(
        rx=current.get("rx"),
        rx_mini=current.get("rx_mini"),
        rx_jumbo=current.get("rx_jumbo"),
        tx=current.get("tx"),
        rx_max=maxima.get("rx"),
        rx_mini_max=maxima.get("rx_mini"),
        rx_jumbo_max=maxima.get("rx_jumbo"),
        tx_max=maxima.get("tx"),
    )


def parse_ethtool_rings_json(text: str) -> Rings:
    """Parse ``ethtool --json -g IF`` (newer ethtool); missing keys give ``None``."""
    source = "ethtool --json -g"
    obj = _single_object(load_json(text, source), source)
    values: dict[str, int | None] = {}
    for key in ("rx", "rx-mini", "rx-jumbo", "tx"):
        for json_key in (key, f"{key}-max"):
            value = obj.get(json_key)
            if value is not None and not (json_int(value) and value >= 0):
                raise ParseError(f"{source}: {json_key!r} is not a non-negative integer: {value!r}")
            values[json_key] = value
    return Rings(
        rx=values["rx"],
        rx_mini=values["rx-mini"],
        rx_jumbo=values["rx-jumbo"],
        tx=values["tx"],
        rx_max=values["rx-max"],
        rx_mini_max=values["rx-mini-max"],
        rx_jumbo_max=values["rx-jumbo-max"],
        tx_max=values["tx-max"],
    )


@dataclass(frozen=True, slots=True)
class Channels:
    """Channel counts from ``ethtool -l``; ``None`` for ``n/a``."""

    rx: int | None
    tx: int | None
    other: int | None
    combined: int | None
    rx_max: int | None
    tx_max: int | None
    other_max: int | None
    combined_max: int | None


_CHANNEL_LABELS = {"RX": "rx", "TX": "tx", "Other": "other", "Combined": "combined"}


def parse_ethtool_channels_text(text: str) -> Channels:
    """Parse ``ethtool -l IF`` text."""
    maxima, current = _parse_max_cur_sections(text, "ethtool -l", _CHANNEL_LABELS)
    return Channels(
        rx=current.get("rx"),
        tx=current.get("tx"),
        other=current.get("other"),
        combined=current.get("combined"),
        rx_max=maxima.get("rx"),
        tx_max=maxima.get("tx"),
        other_max=maxima.get("other"),
        combined_max=maxima.get("combined"),
    )


# --------------------------------------------------------------------------- ethtool -k / -K


# The short names `ethtool -K` takes for the features dtnkit tunes, and the names `ethtool -k`
# prints for them.
FEATURE_NAMES = {
    "gro": "generic-receive-offload",
    "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload",
    "rx": "rx-checksumming",
    "tx": "tx-checksumming",
    "lro": "large-receive-offload",
}


@dataclass(frozen=True, slots=True)
class Feature:
    """One netdev feature.

    ``on`` is the active state; ``fixed`` is true when it cannot be changed; ``requested`` is the
    wanted state when the output says it (``[requested on]``, JSON ``requested``, or -- in
    ``ethtool -K`` output -- a plain row, which means "requested and done"), else ``None``.
    """

    name: str
    on: bool
    fixed: bool
    requested: bool | None = None


# The text parsers' patterns are compiled at their first use (re caches them), not at import:
# a live audit reads ethtool from the kernel and never parses its text (~3 M instructions).
_FEATURE = r"^(?P<name>[^\s:][^:]*):\s+(?P<state>on|off)(?P<notes>(?:\s*\[[^\]]*\])*)\s*$"
_NOTE = r"\[([^\]]*)\]"


def _parse_feature_line(
    line: str, lineno: int, source: str, *, plain_is_requested: bool
) -> Feature:
    match = re.match(_FEATURE, line.strip())
    if match is None:
        raise error_at(source, "expected 'feature: on|off [note]'", lineno, line)
    on = match["state"] == "on"
    fixed = False
    requested: bool | None = on if plain_is_requested else None
    for note in re.findall(_NOTE, match["notes"]):
        note = note.strip()
        if note == "fixed":
            fixed = True
        elif note == "requested on":
            requested = True
        elif note == "requested off":
            requested = False
        elif note == "not requested":
            requested = None
        else:
            raise error_at(source, f"unknown feature annotation [{note}]", lineno, line)
    return Feature(name=match["name"].strip(), on=on, fixed=fixed, requested=requested)


def parse_ethtool_features_text(text: str) -> dict[str, Feature]:
    """Parse ``ethtool -k IF``: every feature row, indented sub-features included, by name.

    ``requested`` is set only where the row says ``[requested on|off]``.
    """
    source = "ethtool -k"
    require_text(text, source)
    features: dict[str, Feature] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or (stripped.startswith("Features for ") and stripped.endswith(":")):
            continue
        feature = _parse_feature_line(line, lineno, source, plain_is_requested=False)
        features[feature.name] = feature
    return features


def parse_ethtool_features_json(text: str) -> dict[str, Feature]:
    """Parse ``ethtool --json -k IF`` (a one-element list, or the bare object).

    ``fixed: null`` (legacy group names) reads as not fixed; ``requested: null`` as ``None``.
    """
    source = "ethtool --json -k"
    data = load_json(text, source)
    obj = data if isinstance(data, dict) else _single_object(data, source)
    features: dict[str, Feature] = {}
    for name, entry in obj.items():
        if name == "ifname":
            continue
        if not isinstance(entry, dict):
            raise ParseError(f"{source}: feature {name!r} is not an object: {entry!r}")
        active = entry.get("active")
        fixed = entry.get("fixed")
        requested = entry.get("requested")
        if not isinstance(active, bool):
            raise ParseError(f"{source}: feature {name!r}: 'active' is not a boolean: {active!r}")
        if fixed is not None and not isinstance(fixed, bool):
            raise ParseError(f"{source}: feature {name!r}: 'fixed' is not a boolean: {fixed!r}")
        if requested is not None and not isinstance(requested, bool):
            raise ParseError(
                f"{source}: feature {name!r}: 'requested' is not a boolean: {requested!r}"
            )
        features[name] = Feature(name=name, on=active, fixed=bool(fixed), requested=requested)
    return features


def parse_ethtool_feature_changes(text: str) -> dict[str, Feature]:
    """Parse the stdout of ``ethtool -K IF ...``: the rows under ``Actual changes:``.

    Empty output (every request took effect exactly) gives ``{}``. A plain row has
    ``requested == on``; ``[requested X]`` gives ``requested=X`` (a refused change: compare
    ``on`` with ``requested``); ``[not requested]`` gives ``requested=None``. The names are the
    kernel feature names (``rx-gro``), which ``ethtool -k`` shows only for ungrouped features.
    ethtool's stderr line "Could not change any device features" is tolerated if mixed in.
    """
    source = "ethtool -K"
    if not isinstance(text, str):
        raise ParseError(f"{source}: expected text (str), got {type(text).__name__}")
    changes: dict[str, Feature] = {}
    in_changes = False
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("Could not change any device features"):
            continue
        if stripped == "Actual changes:":
            in_changes = True
            continue
        if not in_changes:
            raise error_at(source, "expected 'Actual changes:' first", lineno, line)
        feature = _parse_feature_line(line, lineno, source, plain_is_requested=True)
        changes[feature.name] = feature
    return changes


# --------------------------------------------------------------------------- ethtool -c


@dataclass(frozen=True, slots=True)
class Coalesce:
    """Interrupt coalescing from ``ethtool -c``.

    ``values`` holds every other setting by its printed name (``rx-usecs``, ``tx-frames``,
    ``CQE mode RX`` ...): an int where the value is a number, else the string as printed
    (``"n/a"``, ``"on"``). From JSON, booleans become ``"on"``/``"off"``.
    """

    adaptive_rx: bool | None
    adaptive_tx: bool | None
    values: dict[str, int | str]


_RX_TX_PAIR = r"^(?P<label>Adaptive|CQE mode) RX:\s*(?P<rx>\S+)\s+TX:\s*(?P<tx>\S+)$"


def parse_ethtool_coalesce_text(text: str) -> Coalesce:
    """Parse ``ethtool -c IF`` text (ethtool 6.1 ``name: value`` or newer ``name:\\tvalue``)."""
    source = "ethtool -c"
    require_text(text, source)
    adaptive_rx: bool | None = None
    adaptive_tx: bool | None = None
    recognized = False
    values: dict[str, int | str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("Coalesce parameters for ") and stripped.endswith(":"):
            recognized = True
            continue
        pair = re.match(_RX_TX_PAIR, stripped)
        if pair is not None:
            if pair["label"] == "Adaptive":
                adaptive_rx = _on_off_na(pair["rx"], source, lineno, line)
                adaptive_tx = _on_off_na(pair["tx"], source, lineno, line)
                recognized = True
            else:
                values["CQE mode RX"] = int_or_str(pair["rx"])
                values["CQE mode TX"] = int_or_str(pair["tx"])
            continue
        if stripped.startswith("{"):
            # rows of a DIM profile table printed under "rx-profile:" by newer ethtool
            continue
        key, sep, value = stripped.partition(":")
        if not sep:
            # newer ethtool prints "tx-aggr-time-usecs\t<value>" without a colon
            parts = stripped.split()
            if len(parts) != 2:
                raise error_at(source, "expected 'name: value'", lineno, line)
            key, value = parts
        key = key.strip()
        if not key or " " in key:
            raise error_at(source, "expected 'name: value'", lineno, line)
        values[key] = int_or_str(value.strip())
    if not recognized:
        raise ParseError(f"{source}: no 'Coalesce parameters for' header or 'Adaptive RX:' line")
    return Coalesce(adaptive_rx=adaptive_rx, adaptive_tx=adaptive_tx, values=values)


def _coalesce_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Keep both of the duplicate ``"rx"``/``"tx"`` keys that older ethtool --json -c prints.

    The first pair is the adaptive setting, the second the CQE mode (the print order).
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in ("rx", "tx"):
            key = f"cqe-mode-{key}" if f"adaptive-{key}" in out else f"adaptive-{key}"
        out[key] = value
    return out


def parse_ethtool_coalesce_json(text: str) -> Coalesce:
    """Parse ``ethtool --json -c IF`` (newer ethtool).

    Reads both the current keys (``adaptive-rx`` ...) and the older duplicate ``rx``/``tx``
    keys. Numbers and strings go into ``values``; nested objects and lists are skipped.
    """
    source = "ethtool --json -c"
    obj = _single_object(load_json(text, source, object_pairs_hook=_coalesce_pairs), source)
    adaptive: dict[str, bool | None] = {}
    for key in ("adaptive-rx", "adaptive-tx"):
        value = obj.get(key)
        if value is not None and not isinstance(value, bool):
            raise ParseError(f"{source}: {key!r} is not a boolean: {value!r}")
        adaptive[key] = value
    values: dict[str, int | str] = {}
    for key, value in obj.items():
        if key in ("ifname", "adaptive-rx", "adaptive-tx"):
            continue
        if isinstance(value, bool):
            values[key] = "on" if value else "off"
        elif isinstance(value, int | str):
            values[key] = value
    return Coalesce(
        adaptive_rx=adaptive["adaptive-rx"], adaptive_tx=adaptive["adaptive-tx"], values=values
    )


# --------------------------------------------------------------------------- ethtool -a


@dataclass(frozen=True, slots=True)
class Pause:
    """Flow-control (pause frame) settings from ``ethtool -a``; ``None`` for ``n/a``/absent."""

    autoneg: bool | None
    rx: bool | None
    tx: bool | None


_PAUSE_LABELS = {"Autonegotiate": "autoneg", "RX": "rx", "TX": "tx"}


def parse_ethtool_pause_text(text: str) -> Pause:
    """Parse ``ethtool -a IF`` (the ``negotiated`` and ``Statistics`` rows are ignored)."""
    source = "ethtool -a"
    require_text(text, source)
    found: dict[str, bool | None] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        label, sep, value = line.strip().partition(":")
        if sep and label.strip() in _PAUSE_LABELS:
            found[_PAUSE_LABELS[label.strip()]] = _on_off_na(value, source, lineno, line)
    if not found:
        raise ParseError(f"{source}: no 'Autonegotiate:', 'RX:' or 'TX:' line found")
    return Pause(autoneg=found.get("autoneg"), rx=found.get("rx"), tx=found.get("tx"))


def parse_ethtool_pause_json(text: str) -> Pause:
    """Parse ``ethtool --json -a IF``: ``[{"ifname", "autonegotiate", "rx", "tx", ...}]``."""
    source = "ethtool --json -a"
    obj = _single_object(load_json(text, source), source)
    found: dict[str, bool | None] = {}
    for key in ("autonegotiate", "rx", "tx"):
        value = obj.get(key)
        if value is not None and not isinstance(value, bool):
            raise ParseError(f"{source}: {key!r} is not a boolean: {value!r}")
        found[key] = value
    if all(value is None for value in found.values()):
        raise ParseError(f"{source}: none of 'autonegotiate', 'rx', 'tx' present")
    return Pause(autoneg=found["autonegotiate"], rx=found["rx"], tx=found["tx"])


# --------------------------------------------------------------------------- ethtool -i / IF


def parse_ethtool_driver(text: str) -> dict[str, str]:
    """Parse ``ethtool -i IF`` into ``{key: value}`` with keys as printed; empty values kept."""
    source = "ethtool -i"
    require_text(text, source)
    info: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or not key:
            raise error_at(source, "expected 'key: value'", lineno, line)
        info[key] = value.strip()
    if "driver" not in info:
        raise ParseError(f"{source}: no 'driver:' line")
    return info


_SPEED = r"^\s*Speed:\s*(?P<value>.*?)\s*$"


def parse_ethtool_speed(text: str) -> int | None:
    """Link speed in Mbit/s from ``ethtool IF``; ``None`` for ``Unknown!`` or no Speed row."""
    source = "ethtool"
    require_text(text, source)
    match = re.search(_SPEED, text, re.MULTILINE)
    if match is None:
        return None
    value = match["value"]
    if value.startswith("Unknown"):
        return None
    speed = re.fullmatch(r"([0-9]+)Mb/s", value)
    if speed is None:
        lineno = text.count("\n", 0, match.start("value")) + 1
        raise error_at(source, "unrecognized speed", lineno, match.group(0))
    return int(speed.group(1))
