"""Parsers for the text printed by the Linux tools and files dtnkit reads.

Pure functions: text in, typed data (frozen dataclasses, dicts, lists) out. Nothing here runs a
command or opens a file. Every parser raises :class:`ParseError` (a ``ValueError``) when it
cannot make sense of its input -- empty text where output is mandatory, invalid JSON, JSON of the
wrong shape, a line that fits no known form -- and never leaks ``IndexError``, ``KeyError`` or
``json.JSONDecodeError``.

The formats, as printed by ethtool 6.1 / iproute2 6.1 (Debian 12) and by newer releases, checked
against the real captures under ``tests/fixtures/captured``:

sysctl
    ``/etc/sysctl.conf`` and ``sysctl.d(5)`` files: ``key = value`` or ``key=value``; ``#`` and
    ``;`` start comment lines; a leading ``-`` on the key means "ignore failure". A key may be
    written as a path (``net/ipv4/tcp_rmem``): if its first separator is ``/``, slashes and dots
    swap, so ``net/ipv4/conf/eth0.111/rp_filter`` is ``net.ipv4.conf.eth0/111.rp_filter``, the
    name ``sysctl -a`` prints. ``sysctl -a`` prints the same ``key = value`` form; multi-value
    keys (``tcp_rmem``) keep the TAB separators of ``/proc/sys``, and a value of several lines
    (``kernel.core_modes``) is printed as one ``key = line`` row per line.

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

``ip -d -j link show``
    A JSON list of link objects: ``ifindex``, ``ifname``, ``flags``, ``mtu``, ``operstate``,
    ``link_type``, ``master``, ``link`` (lower device, or veth peer in the same namespace; a peer
    in another namespace shows ``link_index`` + ``link_netnsid`` instead), ``txqlen`` (omitted
    when 0), ``min_mtu``/``max_mtu`` (0 = not reported), ``num_tx_queues``/``num_rx_queues``,
    ``linkinfo`` (``info_kind``, ``info_data``, ``info_slave_kind``, ``info_slave_data``).

``tc qdisc show`` / ``tc -j qdisc show``
    Text: ``qdisc KIND HANDLE [dev IF] root|parent ID [refcnt N] OPTIONS...``; with ``-s``,
    indented statistics rows follow. JSON: a list of ``{"kind", "handle", "root": true |
    "parent": ID, "refcnt", "options": {...}}``.

``/proc`` and ``/sys``
    ``/sys/devices/system/cpu/online`` style CPU lists (``0-3,8,10-11``);
    ``scaling_available_governors`` (space separated); ``/proc/meminfo`` (``Key:  N kB``);
    ``/proc/interrupts`` (a ``CPU0 CPU1 ...`` header, then ``IRQ: counts... chip hwirq-type
    name``; non-numeric rows such as ``NMI``/``LOC`` are per-CPU counters, not IRQs);
    ``/proc/net/bonding/BOND`` (``Bonding Mode:`` and ``Slave Interface:`` rows).

tuned
    ``tuned-adm active``: ``Current active profile: NAME`` or ``No current active profile.``
    (or, with the daemon stopped, ``It seems that tuned daemon is not running, preset profile
    is not activated.`` / ``Preset profile: NAME``). ``tuned-adm verify``: ``Verification
    succeeded, ...`` or ``Verification failed, ...`` followed by advice lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Bond",
    "Channels",
    "Coalesce",
    "Feature",
    "Interrupt",
    "Link",
    "ParseError",
    "Pause",
    "Qdisc",
    "Rings",
    "normalize_sysctl",
    "parse_cpu_list",
    "parse_ethtool_channels_text",
    "parse_ethtool_coalesce_json",
    "parse_ethtool_coalesce_text",
    "parse_ethtool_driver",
    "parse_ethtool_feature_changes",
    "parse_ethtool_features_json",
    "parse_ethtool_features_text",
    "parse_ethtool_pause_json",
    "parse_ethtool_pause_text",
    "parse_ethtool_rings_json",
    "parse_ethtool_rings_text",
    "parse_ethtool_speed",
    "parse_governors",
    "parse_ip_link_json",
    "parse_meminfo",
    "parse_proc_interrupts",
    "parse_proc_net_bonding",
    "parse_sysctl_conf",
    "parse_tc_qdisc_json",
    "parse_tc_qdisc_text",
    "parse_tuned_active",
    "parse_tuned_verify",
]


class ParseError(ValueError):
    """Text that a parser cannot make sense of.

    The message names the source (tool or file) and, where there is one, the 1-based line
    number, which is also kept in :attr:`lineno`.
    """

    def __init__(self, message: str, *, lineno: int | None = None) -> None:
        super().__init__(message)
        self.lineno = lineno


def error_at(
    source: str, message: str, lineno: int | None = None, line: str | None = None
) -> ParseError:
    where = f"{source}: line {lineno}: " if lineno is not None else f"{source}: "
    shown = f": {line.strip()[:200]!r}" if line is not None else ""
    return ParseError(f"{where}{message}{shown}", lineno=lineno)


def require_text(text: str, source: str) -> None:
    if not isinstance(text, str):
        raise ParseError(f"{source}: expected text (str), got {type(text).__name__}")
    if not text.strip():
        raise ParseError(f"{source}: empty input")


def _load_json(text: str, source: str, **kwargs: Any) -> Any:
    require_text(text, source)
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as exc:
        raise error_at(source, f"invalid JSON ({exc.msg}, column {exc.colno})",
                       exc.lineno) from None
    except RecursionError:
        raise ParseError(f"{source}: JSON nested too deeply") from None


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


def _is_uint(value: str) -> bool:
    return value.isascii() and value.isdigit()


def _int_or_na(value: str, source: str, lineno: int, line: str) -> int | None:
    value = value.strip()
    if value == "n/a":
        return None
    if _is_uint(value):
        return int(value)
    raise error_at(source, "expected a number or 'n/a'", lineno, line)


def _on_off_na(value: str, source: str, lineno: int, line: str) -> bool | None:
    value = value.strip()
    if value == "on":
        return True
    if value == "off":
        return False
    if value == "n/a":
        return None
    raise error_at(source, "expected 'on', 'off' or 'n/a'", lineno, line)


def _int_or_str(value: str) -> int | str:
    return int(value) if _is_uint(value) else value


def _json_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- sysctl


def normalize_sysctl(value: str) -> str:
    """Strip and collapse every run of whitespace (tabs, spaces, newlines) to one space."""
    return " ".join(value.split())


_PATH_TO_DOTTED = str.maketrans("/.", "./")


def _sysctl_key(key: str) -> str:
    """Turn a path-style key (``net/ipv4/tcp_rmem``) into the dotted form.

    As in sysctl.d(5): when the first separator is ``/``, slashes and dots are swapped, so a dot
    inside a component (a VLAN interface ``eth0.111``) becomes ``/`` as ``sysctl -a`` prints it.
    """
    first = re.search(r"[./]", key)
    if first is None or first.group() == ".":
        return key
    return key.translate(_PATH_TO_DOTTED)


def parse_sysctl_conf(text: str) -> dict[str, str]:
    """Parse sysctl.conf / sysctl.d syntax or ``sysctl -a`` output into ``{key: value}``.

    Blank lines and ``#``/``;`` comment lines are skipped; a leading ``-`` on the key is dropped;
    path-style keys are converted to the dotted form; values are normalized with
    :func:`normalize_sysctl`. Later assignments win. An empty text gives ``{}``. A non-blank,
    non-comment line without ``=`` (or with an empty key) raises :class:`ParseError`.
    """
    source = "sysctl"
    if not isinstance(text, str):
        raise ParseError(f"{source}: expected text (str), got {type(text).__name__}")
    result: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            raise error_at(source, "expected 'key = value'", lineno, line)
        key = key.strip()
        if key.startswith("-"):
            key = key[1:].strip()
        if not key:
            raise error_at(source, "empty key", lineno, line)
        result[_sysctl_key(key)] = normalize_sysctl(value)
    return result


# --------------------------------------------------------------------------- ethtool -g / -l


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


@dataclass(frozen=True)
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
    obj = _single_object(_load_json(text, source), source)
    values: dict[str, int | None] = {}
    for key in ("rx", "rx-mini", "rx-jumbo", "tx"):
        for json_key in (key, f"{key}-max"):
            value = obj.get(json_key)
            if value is not None and not (_json_int(value) and value >= 0):
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


_FEATURE_RE = re.compile(
    r"^(?P<name>[^\s:][^:]*):\s+(?P<state>on|off)(?P<notes>(?:\s*\[[^\]]*\])*)\s*$"
)
_NOTE_RE = re.compile(r"\[([^\]]*)\]")


def _parse_feature_line(
    line: str, lineno: int, source: str, *, plain_is_requested: bool
) -> Feature:
    match = _FEATURE_RE.match(line.strip())
    if match is None:
        raise error_at(source, "expected 'feature: on|off [note]'", lineno, line)
    on = match["state"] == "on"
    fixed = False
    requested: bool | None = on if plain_is_requested else None
    for note in _NOTE_RE.findall(match["notes"]):
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
    data = _load_json(text, source)
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


@dataclass(frozen=True)
class Coalesce:
    """Interrupt coalescing from ``ethtool -c``.

    ``values`` holds every other setting by its printed name (``rx-usecs``, ``tx-frames``,
    ``CQE mode RX`` ...): an int where the value is a number, else the string as printed
    (``"n/a"``, ``"on"``). From JSON, booleans become ``"on"``/``"off"``.
    """

    adaptive_rx: bool | None
    adaptive_tx: bool | None
    values: dict[str, int | str]


_RX_TX_PAIR_RE = re.compile(r"^(?P<label>Adaptive|CQE mode) RX:\s*(?P<rx>\S+)\s+TX:\s*(?P<tx>\S+)$")


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
        pair = _RX_TX_PAIR_RE.match(stripped)
        if pair is not None:
            if pair["label"] == "Adaptive":
                adaptive_rx = _on_off_na(pair["rx"], source, lineno, line)
                adaptive_tx = _on_off_na(pair["tx"], source, lineno, line)
                recognized = True
            else:
                values["CQE mode RX"] = _int_or_str(pair["rx"])
                values["CQE mode TX"] = _int_or_str(pair["tx"])
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
        values[key] = _int_or_str(value.strip())
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
    obj = _single_object(_load_json(text, source, object_pairs_hook=_coalesce_pairs), source)
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


@dataclass(frozen=True)
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
    obj = _single_object(_load_json(text, source), source)
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


_SPEED_RE = re.compile(r"^\s*Speed:\s*(?P<value>.*?)\s*$", re.MULTILINE)


def parse_ethtool_speed(text: str) -> int | None:
    """Link speed in Mbit/s from ``ethtool IF``; ``None`` for ``Unknown!`` or no Speed row."""
    source = "ethtool"
    require_text(text, source)
    match = _SPEED_RE.search(text)
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


# --------------------------------------------------------------------------- ip -j link


@dataclass(frozen=True)
class Link:
    """One network link from ``ip -d -j link show``.

    ``kind`` is ``linkinfo.info_kind`` (veth, bond, vlan, bridge ...; ``None`` for a physical
    NIC or loopback); ``slave_kind`` is ``linkinfo.info_slave_kind`` ("bond" on a bond member);
    ``lower`` is the ``link`` field (a VLAN's lower device, a veth peer in the same namespace).
    ``max_mtu`` is ``None`` when absent or 0 (not reported); ``txqlen`` is 0 when absent, since
    ip omits it exactly when it is 0. ``info_data`` is ``linkinfo.info_data`` or ``{}``.
    """

    name: str
    index: int
    kind: str | None
    slave_kind: str | None
    master: str | None
    lower: str | None
    mtu: int
    min_mtu: int | None
    max_mtu: int | None
    txqlen: int | None
    operstate: str
    flags: tuple[str, ...]
    link_type: str
    num_tx_queues: int | None
    num_rx_queues: int | None
    info_data: dict[str, object]


def _opt_int(obj: dict[str, Any], key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not _json_int(value):
        raise ParseError(f"{where}: {key!r} is not an integer: {value!r}")
    return int(value)


def _req_int(obj: dict[str, Any], key: str, where: str) -> int:
    value = _opt_int(obj, key, where)
    if value is None:
        raise ParseError(f"{where}: missing {key!r}")
    return value


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParseError(f"{where}: {key!r} is not a string: {value!r}")
    return value


def _req_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = _opt_str(obj, key, where)
    if value is None:
        raise ParseError(f"{where}: missing {key!r}")
    return value


def _parse_link(entry: Any, position: int) -> Link:
    source = "ip -j link"
    if not isinstance(entry, dict):
        raise ParseError(f"{source}: item {position} is not an object: {entry!r}")
    name = entry.get("ifname")
    where = f"{source}: item {position}"
    if isinstance(name, str):
        where += f" ({name})"
    linkinfo = entry.get("linkinfo", {})
    if not isinstance(linkinfo, dict):
        raise ParseError(f"{where}: 'linkinfo' is not an object")
    info_data = linkinfo.get("info_data", {})
    if info_data is None:
        info_data = {}
    if not isinstance(info_data, dict):
        raise ParseError(f"{where}: 'linkinfo.info_data' is not an object")
    flags = entry.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(flag, str) for flag in flags):
        raise ParseError(f"{where}: 'flags' is not a list of strings")
    txqlen = _opt_int(entry, "txqlen", where)
    return Link(
        name=_req_str(entry, "ifname", where),
        index=_req_int(entry, "ifindex", where),
        kind=_opt_str(linkinfo, "info_kind", where),
        slave_kind=_opt_str(linkinfo, "info_slave_kind", where),
        master=_opt_str(entry, "master", where),
        lower=_opt_str(entry, "link", where),
        mtu=_req_int(entry, "mtu", where),
        min_mtu=_opt_int(entry, "min_mtu", where),
        max_mtu=_opt_int(entry, "max_mtu", where) or None,
        txqlen=0 if txqlen is None else txqlen,
        operstate=_req_str(entry, "operstate", where),
        flags=tuple(flags),
        link_type=_req_str(entry, "link_type", where),
        num_tx_queues=_opt_int(entry, "num_tx_queues", where),
        num_rx_queues=_opt_int(entry, "num_rx_queues", where),
        info_data=dict(info_data),
    )


def parse_ip_link_json(text: str) -> list[Link]:
    """Parse ``ip -j link show`` / ``ip -d -j link show`` (all links or one), in order."""
    source = "ip -j link"
    data = _load_json(text, source)
    if not isinstance(data, list):
        raise ParseError(f"{source}: expected a JSON list, got {type(data).__name__}")
    return [_parse_link(entry, position) for position, entry in enumerate(data)]


# --------------------------------------------------------------------------- tc qdisc


@dataclass(frozen=True)
class Qdisc:
    """One queueing discipline from ``tc qdisc show``.

    ``parent`` is ``None`` for the root qdisc. ``options`` is the JSON ``options`` object as
    given; from text it is ``{"raw": "<option tokens>"}`` plus every ``key value`` pair that
    splits reliably (a lowercase word followed by tokens that start with a digit; an int where
    the token is all digits, else the string; several values become a list).
    """

    kind: str
    handle: str
    parent: str | None
    root: bool
    options: dict[str, object]


def parse_tc_qdisc_json(text: str) -> list[Qdisc]:
    """Parse ``tc -j qdisc show [dev IF]``."""
    source = "tc -j qdisc"
    data = _load_json(text, source)
    if not isinstance(data, list):
        raise ParseError(f"{source}: expected a JSON list, got {type(data).__name__}")
    qdiscs: list[Qdisc] = []
    for position, entry in enumerate(data):
        where = f"{source}: item {position}"
        if not isinstance(entry, dict):
            raise ParseError(f"{where} is not an object: {entry!r}")
        root = entry.get("root", False)
        if not isinstance(root, bool):
            raise ParseError(f"{where}: 'root' is not a boolean: {root!r}")
        options = entry.get("options", {})
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise ParseError(f"{where}: 'options' is not an object: {options!r}")
        qdiscs.append(
            Qdisc(
                kind=_req_str(entry, "kind", where),
                handle=_req_str(entry, "handle", where),
                parent=_opt_str(entry, "parent", where),
                root=root,
                options=dict(options),
            )
        )
    return qdiscs


_OPTION_KEY_RE = re.compile(r"[a-z][a-z0-9_]*")


def _split_qdisc_options(tokens: list[str]) -> dict[str, object]:
    options: dict[str, object] = {"raw": " ".join(tokens)}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not _OPTION_KEY_RE.fullmatch(token):
            continue
        values: list[int | str] = []
        while index < len(tokens) and tokens[index][:1].isdigit():
            values.append(_int_or_str(tokens[index]))
            index += 1
        if values and token not in options:
            options[token] = values[0] if len(values) == 1 else values
    return options


def parse_tc_qdisc_text(text: str) -> list[Qdisc]:
    """Parse ``tc qdisc show [dev IF]`` (indented ``-s`` statistics rows are skipped)."""
    source = "tc qdisc"
    require_text(text, source)
    qdiscs: list[Qdisc] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line[:1].isspace():
            continue
        tokens = line.split()
        if tokens[0] != "qdisc" or len(tokens) < 4 or not tokens[2].endswith(":"):
            raise error_at(source, "expected 'qdisc KIND HANDLE root|parent ID ...'", lineno, line)
        kind, handle = tokens[1], tokens[2]
        index = 3
        if tokens[index] == "dev":
            index += 2
        parent: str | None = None
        root = False
        if index < len(tokens) and tokens[index] == "root":
            root = True
            index += 1
        elif index + 1 < len(tokens) and tokens[index] == "parent":
            parent = tokens[index + 1]
            index += 2
        else:
            raise error_at(source, "expected 'root' or 'parent ID'", lineno, line)
        if index + 1 < len(tokens) and tokens[index] == "refcnt":
            index += 2
        qdiscs.append(
            Qdisc(
                kind=kind,
                handle=handle,
                parent=parent,
                root=root,
                options=_split_qdisc_options(tokens[index:]),
            )
        )
    return qdiscs


# --------------------------------------------------------------------------- /proc and /sys


def parse_cpu_list(text: str) -> list[int]:
    """Parse a kernel CPU list (``0-3,8,10-11``) into sorted unique CPU numbers; blank -> []."""
    source = "cpu list"
    if not isinstance(text, str):
        raise ParseError(f"{source}: expected text (str), got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        return []
    cpus: set[int] = set()
    for part in stripped.split(","):
        match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", part)
        if match is None:
            raise ParseError(f"{source}: cannot parse {part!r} in {stripped!r}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ParseError(f"{source}: descending range {part!r} in {stripped!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def parse_governors(text: str) -> list[str]:
    """Whitespace-separated governor names, first-seen order, duplicates dropped."""
    if not isinstance(text, str):
        raise ParseError(f"governors: expected text (str), got {type(text).__name__}")
    return list(dict.fromkeys(text.split()))


_MEMINFO_RE = re.compile(r"^(?P<key>[^:\s][^:]*):\s*(?P<value>[0-9]+)(?:\s+(?P<unit>kB))?\s*$")


def parse_meminfo(text: str) -> dict[str, int]:
    """Parse ``/proc/meminfo``: ``kB`` values converted to bytes, unitless values as int."""
    source = "/proc/meminfo"
    require_text(text, source)
    info: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _MEMINFO_RE.match(line.strip())
        if match is None:
            raise error_at(source, "expected 'Key: N [kB]'", lineno, line)
        value = int(match["value"])
        info[match["key"]] = value * 1024 if match["unit"] else value
    return info


@dataclass(frozen=True)
class Interrupt:
    """One numbered IRQ row of ``/proc/interrupts``.

    ``chip`` is the first field after the counts (``IR-PCI-MSIX-0000:3b:00.0``, ``IO-APIC``,
    ``GICv3``); ``name`` is the text after the hwirq/trigger fields, as printed
    (``mlx5_comp0@pci:0000:3b:00.0``, ``i801_smbus, ehci_hcd:usb1``); either may be "".
    """

    irq: str
    counts: tuple[int, ...]
    chip: str
    name: str


_HWIRQ_RE = re.compile(r"\d+(?:-[A-Za-z]+)?")


def parse_proc_interrupts(text: str) -> list[Interrupt]:
    """Parse ``/proc/interrupts``; only numeric IRQ rows (NMI, LOC, ERR ... are skipped)."""
    source = "/proc/interrupts"
    require_text(text, source)
    lines = text.splitlines()
    header_index = next(index for index, line in enumerate(lines) if line.strip())
    cpus = lines[header_index].split()
    if not cpus or not all(re.fullmatch(r"CPU\d+", cpu) for cpu in cpus):
        raise error_at(
            source, "expected a 'CPU0 CPU1 ...' header", header_index + 1, lines[header_index]
        )
    interrupts: list[Interrupt] = []
    for lineno, line in enumerate(lines[header_index + 1 :], header_index + 2):
        if not line.strip():
            continue
        tokens = list(re.finditer(r"\S+", line))
        first = tokens[0].group()
        if not first.endswith(":"):
            raise error_at(source, "expected 'IRQ: counts...'", lineno, line)
        irq = first[:-1]
        if not irq.isdigit():
            continue
        count_tokens = [token.group() for token in tokens[1 : 1 + len(cpus)]]
        if len(count_tokens) != len(cpus) or not all(_is_uint(token) for token in count_tokens):
            raise error_at(source, f"expected {len(cpus)} per-CPU counts", lineno, line)
        rest = tokens[1 + len(cpus) :]
        chip = rest[0].group() if rest else ""
        position = 1
        if position < len(rest) and _HWIRQ_RE.fullmatch(rest[position].group()):
            position += 1
            if position < len(rest) and rest[position].group() in ("Edge", "Level"):
                position += 1
        name = line[rest[position].start() :].strip() if position < len(rest) else ""
        interrupts.append(
            Interrupt(
                irq=irq,
                counts=tuple(int(token) for token in count_tokens),
                chip=chip,
                name=name,
            )
        )
    return interrupts


@dataclass(frozen=True)
class Bond:
    """A bond from ``/proc/net/bonding/BOND``.

    ``mode`` is the short name that ip and sysfs use (``802.3ad``, ``active-backup``,
    ``balance-rr`` ...) when the printed description is known, else the description as printed.
    """

    mode: str
    slaves: tuple[str, ...]


_BOND_MODES = {
    "load balancing (round-robin)": "balance-rr",
    "fault-tolerance (active-backup)": "active-backup",
    "load balancing (xor)": "balance-xor",
    "fault-tolerance (broadcast)": "broadcast",
    "IEEE 802.3ad Dynamic link aggregation": "802.3ad",
    "transmit load balancing": "balance-tlb",
    "adaptive load balancing": "balance-alb",
}


def parse_proc_net_bonding(text: str) -> Bond:
    """Parse ``/proc/net/bonding/BOND``: the mode and the slave interfaces in order."""
    source = "/proc/net/bonding"
    require_text(text, source)
    mode: str | None = None
    slaves: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Bonding Mode":
            mode = _BOND_MODES.get(value, value)
        elif key == "Slave Interface":
            if not value:
                raise error_at(source, "empty slave name", lineno, line)
            slaves.append(value)
    if not mode:
        raise ParseError(f"{source}: no 'Bonding Mode:' line")
    return Bond(mode=mode, slaves=tuple(slaves))


# --------------------------------------------------------------------------- tuned


def parse_tuned_active(text: str) -> str | None:
    """The active tuned profile from ``tuned-adm active``; ``None`` when none is active.

    A stopped daemon ("preset profile is not activated") also gives ``None``. A merged profile
    (``a b``) is returned as printed.
    """
    source = "tuned-adm active"
    require_text(text, source)
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("Current active profile:"):
            profile = stripped.partition(":")[2].strip()
            if not profile:
                raise error_at(source, "empty profile name", lineno, line)
            return profile
        if stripped == "No current active profile.":
            return None
        if "preset profile is not activated" in stripped:
            return None
    raise ParseError(f"{source}: no 'Current active profile:' or 'No current active profile.' line")


def parse_tuned_verify(text: str) -> tuple[bool, list[str]]:
    """``(passed, lines)`` from ``tuned-adm verify`` stdout; ``lines`` are the non-blank lines."""
    source = "tuned-adm verify"
    require_text(text, source)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("Verification succeeded"):
            return True, lines
        if line.startswith("Verification failed"):
            return False, lines
    raise ParseError(f"{source}: no 'Verification succeeded' or 'Verification failed' line")
