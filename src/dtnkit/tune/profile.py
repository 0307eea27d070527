"""Profiles are data: TOML files with an include chain, merged by a pure function.

Lookup order for a profile name: each user directory (``/etc/dtnkit/profiles`` or
``--profile-dir``), then the profiles shipped in this package.  A user profile may shadow a
shipped one of the same name and still ``include`` it: an include never resolves to the file
that asks for it.
"""

from __future__ import annotations

import fnmatch
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dtnkit.errors import BadInput

SCHEMA = 1
USER_PROFILE_DIR = Path("/etc/dtnkit/profiles")
SPEED_TIERS = (10, 25, 40, 100, 200, 400)
RULES = ("bdp", "tcp_mem", "tcp_mem_pages", "hw_max", "fq_pacing")
ITEM_FIELDS = {
    "value",
    "tiers",
    "rule",
    "mode",
    "apply",
    "source",
    "requires",
    "note",
    "enabled",
    "group",
    "min",
    "default",
    "floor",
    "ceiling",
    "scale",
    "maxrate_fraction",
    "min_speed_gbit",
    "full_sockets",
    "max_ram_fraction",
}
NUMERIC_FIELDS = (
    "min",
    "default",
    "floor",
    "ceiling",
    "scale",
    "maxrate_fraction",
    "min_speed_gbit",
    "full_sockets",
    "max_ram_fraction",
)
PARAMS = {"bdp_multiplier", "ram_fraction", "maxrate_fraction", "maxrate_round_mbit"}
# the range each parameter takes (inclusive): a zero rounding step or RAM share is refused
PARAM_RANGES: dict[str, tuple[float, float]] = {
    "bdp_multiplier": (0.01, 1000.0),
    "ram_fraction": (0.001, 1.0),
    "maxrate_fraction": (0.0, 1.0),
    "maxrate_round_mbit": (1.0, 1e6),
}

# Every key a profile may name, and the group it belongs to.  `sysctl/<other key>` is allowed
# too when the item names its `group`.
KNOWN_KEYS: dict[str, str] = {
    "sysctl/net.core.rmem_max": "buffers",
    "sysctl/net.core.wmem_max": "buffers",
    "sysctl/net.core.rmem_default": "buffers",
    "sysctl/net.core.wmem_default": "buffers",
    "sysctl/net.ipv4.tcp_rmem": "buffers",
    "sysctl/net.ipv4.tcp_wmem": "buffers",
    "sysctl/net.core.optmem_max": "buffers",
    "sysctl/net.ipv4.tcp_mem": "buffers",
    "sysctl/net.core.netdev_max_backlog": "backlog",
    "link/*/txqueuelen": "backlog",
    "sysctl/net.ipv4.tcp_congestion_control": "congestion",
    "sysctl/net.ipv4.tcp_no_metrics_save": "congestion",
    "sysctl/net.ipv4.tcp_slow_start_after_idle": "congestion",
    "sysctl/net.ipv4.tcp_mtu_probing": "congestion",
    "sysctl/net.core.default_qdisc": "pacing",
    "qdisc/*/root": "pacing",
    "ring/*/rx": "rings",
    "ring/*/tx": "rings",
    "feature/*/gro": "offloads",
    "feature/*/gso": "offloads",
    "feature/*/tso": "offloads",
    "feature/*/rx": "offloads",
    "feature/*/tx": "offloads",
    "feature/*/lro": "offloads",
    "coalesce/*/adaptive-rx": "nic",
    "coalesce/*/adaptive-tx": "nic",
    "pause/*/rx": "nic",
    "pause/*/tx": "nic",
    "link/*/mtu": "nic",
    "cpu/governor": "cpu",
    "tuned/profile": "cpu",
    "check/irq-affinity": "checks",
    "check/irqbalance": "checks",
    "check/smt": "checks",
    "check/ipv6": "checks",
    "check/iommu": "checks",
    "check/bond-hash": "checks",
}
# The only sysctls a site profile may add beyond KNOWN_KEYS (with a `group`): network settings
# of the TCP/UDP stack and the core network buffers.  Nothing else (kernel.*, vm.*, fs.*,
# routing and firewall keys such as net.ipv4.ip_forward or net.ipv4.conf.*) is a transfer
# tuning, and kernel.* / vm.* are global to the host.  docs/profiles.md lists the same.
SITE_SYSCTLS = (
    "net.core.*",
    "net.ipv4.tcp_*",
    "net.ipv4.udp_*",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_no_pmtu_disc",
)
SITE_SYSCTLS_EXCLUDED = ("net.core.bpf_*",)  # BPF JIT hardening: security, not tuning
GROUPS = ("buffers", "backlog", "congestion", "pacing", "rings", "offloads", "nic", "cpu", "checks")


@dataclass(frozen=True, slots=True)
class ItemSpec:
    """One profile entry after merging: what to recommend for one key, and why."""

    key: str
    group: str
    source: str
    value: Any = None
    tiers: dict[int, Any] | None = None
    rule: str | None = None
    mode: str = "raise"
    apply: str = "auto"
    requires: str | None = None
    note: str = ""
    numbers: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))  # read-only


@dataclass(frozen=True)
class Profile:
    """A profile after includes are merged: its parameters and items."""

    name: str
    description: str
    params: dict[str, float]
    items: dict[str, ItemSpec]
    files: tuple[str, ...]


def shipped_dir() -> Path:
    return Path(__file__).resolve().parent / "profiles"  # package data, installed as files


def shipped_names() -> list[str]:
    return sorted(p.stem for p in shipped_dir().glob("*.toml"))


def load_profile(name_or_path: str, user_dirs: Sequence[Path] = (USER_PROFILE_DIR,)) -> Profile:
    """Find, parse, include-resolve, merge and validate a profile."""
    path = _resolve(name_or_path, user_dirs, exclude=())
    raw, files = _load_chain(path, user_dirs, stack=())
    name = Path(name_or_path).stem if _is_path(name_or_path) else name_or_path
    return build_profile(name, raw, files)


def _is_path(text: str) -> bool:
    return "/" in text or text.endswith(".toml")


def _resolve(name: str, user_dirs: Sequence[Path], exclude: Sequence[Path]) -> Path:
    if _is_path(name):
        path = Path(name)
        if not path.is_file():
            raise BadInput(f"profile file {name} does not exist", "", "give an existing .toml")
        return path.resolve()
    if not name.replace("-", "").replace("_", "").isalnum():
        raise BadInput(
            f"bad profile name {name!r}",
            "names are letters, digits, - and _",
            "use a name such as dtn, or a path to a .toml file",
        )
    candidates = [d / f"{name}.toml" for d in user_dirs] + [shipped_dir() / f"{name}.toml"]
    for cand in candidates:
        if cand.is_file() and cand.resolve() not in exclude:
            return cand.resolve()
    looped = [str(c) for c in candidates if c.is_file()]
    if looped:
        raise BadInput(
            f"profile include loop at {name!r}",
            f"{', '.join(looped)} already includes it",
            "remove one of the includes",
        )
    known = sorted(set(shipped_names()) | {p.stem for d in user_dirs for p in d.glob("*.toml")})
    raise BadInput(
        f"unknown profile {name!r}",
        f"known profiles: {', '.join(known)}",
        "pick one of those, or put NAME.toml in /etc/dtnkit/profiles",
    )


MAX_PROFILE_BYTES = 2**20


def _read_toml(path: Path) -> dict[str, Any]:
    """Strict: UTF-8, valid TOML (a key or table given twice is invalid), not absurdly deep."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read profile {path}", exc.strerror or str(exc)) from exc
    if len(data) > MAX_PROFILE_BYTES:
        raise BadInput(
            f"profile {path} is too large",
            f"{len(data)} bytes, at most {MAX_PROFILE_BYTES}",
            "give a profile file",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"profile {path} is not UTF-8 text",
            f"byte 0x{data[exc.start]:02x} at offset {exc.start}",
            "save it as UTF-8",
        ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"profile {path} is not valid TOML", str(exc), "fix the file") from exc
    except RecursionError as exc:
        raise BadInput(
            f"profile {path} is not valid TOML", "it is nested too deeply", "fix the file"
        ) from exc
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise BadInput(f"profile {path} is not valid TOML", str(exc), "fix the file") from exc


def _number(value: Any) -> bool:
    """A finite, non-negative int or float (not a boolean, NaN or infinity)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _load_chain(
    path: Path, user_dirs: Sequence[Path], stack: tuple[Path, ...]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    if path in stack:
        chain = " -> ".join(str(p) for p in (*stack, path))
        raise BadInput("profile include loop", chain, "remove one of the includes")
    doc = _read_toml(path)
    _check_top(doc, path)
    merged: dict[str, Any] = {"params": {}, "tune": {}}
    files: tuple[str, ...] = ()
    includes = doc.get("include", [])
    if isinstance(includes, str):
        includes = [includes]
    for inc in includes:
        inc_path = _resolve(str(inc), user_dirs, exclude=(*stack, path))
        raw, inc_files = _load_chain(inc_path, user_dirs, (*stack, path))
        merged = merge(merged, raw)
        files += inc_files
    merged = merge(merged, doc)
    return merged, (*files, str(path))


def _check_top(doc: Mapping[str, Any], path: Path) -> None:
    where = f"profile {path}"
    schema = doc.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise BadInput(
            f"{where} has schema {schema!r}",
            f"this dtnkit reads schema {SCHEMA}",
            "convert the profile or upgrade dtnkit",
        )
    unknown = set(doc) - {"schema", "description", "include", "params", "tune"}
    if unknown:
        raise BadInput(
            f"{where} has unknown top-level keys {sorted(unknown)}",
            "allowed: schema, description, include, params, tune",
            "remove them",
        )
    if not isinstance(doc.get("description", ""), str):
        raise BadInput(f"{where}: description must be a string", "", "fix it")
    inc = doc.get("include", [])
    if not (
        isinstance(inc, str) or (isinstance(inc, list) and all(isinstance(i, str) for i in inc))
    ):
        raise BadInput(f"{where}: include must be a name or a list of names", "", "fix it")
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise BadInput(f"{where}: [params] must be a table", "", "fix it")
    for key, value in params.items():
        if key not in PARAMS:
            raise BadInput(
                f"{where}: unknown parameter {key!r}",
                f"known: {', '.join(sorted(PARAMS))}",
                "remove or rename it",
            )
        lo, hi = PARAM_RANGES[key]
        if not _number(value) or not lo <= value <= hi:
            raise BadInput(
                f"{where}: parameter {key} must be a finite non-negative number "
                f"from {lo:g} to {hi:g}",
                f"got {value!r}",
                "fix it",
            )
    tune = doc.get("tune", {})
    if not isinstance(tune, dict):
        raise BadInput(f"{where}: [tune] must hold tables", "", "fix it")
    for key, item in tune.items():
        if not isinstance(item, dict):
            raise BadInput(f"{where}: tune.{key!r} must be a table", f"got {item!r}", "fix it")
        extra = set(item) - ITEM_FIELDS
        if extra:
            raise BadInput(
                f"{where}: tune.{key!r} has unknown fields {sorted(extra)}",
                f"allowed: {', '.join(sorted(ITEM_FIELDS))}",
                "remove them",
            )
        for fname, ftype, want in (
            ("enabled", bool, "true or false"),
            ("note", str, "a string"),
            ("requires", str, "a string"),
            ("group", str, "a string"),
            ("source", str, "a string"),
            ("mode", str, "a string"),
            ("apply", str, "a string"),
            ("rule", str, "a string"),
        ):
            if fname in item and not isinstance(item[fname], ftype):
                raise BadInput(
                    f"{where}: tune.{key!r}.{fname} must be {want}",
                    f"got {item[fname]!r:.60}",
                    "fix it",
                )


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Pure merge of two raw profile documents: the override wins field by field.

    An override that gives any of value / tiers / rule replaces all three of the base's.
    """
    out: dict[str, Any] = {
        "description": override.get("description", base.get("description", "")),
        "params": {**base.get("params", {}), **override.get("params", {})},
        "tune": {k: dict(v) for k, v in base.get("tune", {}).items()},
    }
    for key, item in override.get("tune", {}).items():
        current = out["tune"].get(key, {})
        if {"value", "tiers", "rule"} & set(item):
            current = {k: v for k, v in current.items() if k not in ("value", "tiers", "rule")}
        out["tune"][key] = {**current, **item}
    return out


def build_profile(name: str, raw: Mapping[str, Any], files: tuple[str, ...]) -> Profile:
    items: dict[str, ItemSpec] = {}
    where = f"profile {name!r}"
    for key, item in raw.get("tune", {}).items():
        if item.get("enabled", True) is False:
            continue
        group = KNOWN_KEYS.get(key) or _site_group(where, key, item)
        given = [f for f in ("value", "tiers", "rule") if f in item]
        if len(given) != 1:
            raise BadInput(
                f"{where}: {key} needs exactly one of value, tiers, rule",
                f"it has {given or 'none'}",
                "fix the item",
            )
        if not isinstance(item.get("source"), str) or not item["source"].strip():
            raise BadInput(
                f"{where}: {key} has no source",
                "every value says where it comes from",
                'add source = "..."',
            )
        mode = item.get("mode", "raise")
        if mode not in ("raise", "exact"):
            raise BadInput(f"{where}: {key} has mode {mode!r}", "modes: raise, exact", "fix it")
        apply = item.get("apply", "auto")
        if apply not in ("auto", "on-request"):
            raise BadInput(
                f"{where}: {key} has apply {apply!r}", "use auto or on-request", "fix it"
            )
        rule = item.get("rule")
        if rule is not None and rule not in RULES:
            raise BadInput(
                f"{where}: {key} has unknown rule {rule!r}", f"rules: {', '.join(RULES)}", "fix it"
            )
        tiers = None
        if "tiers" in item:
            tiers = _tiers(where, key, item["tiers"])
        value = item.get("value")
        if "value" in item and not isinstance(value, str | int | bool):
            raise BadInput(
                f"{where}: {key} value must be a string, integer or boolean",
                f"got {value!r}",
                "fix it",
            )
        numbers: dict[str, float] = {}
        for fname in NUMERIC_FIELDS:
            if fname in item:
                num = item[fname]
                lo, hi = PARAM_RANGES.get(fname, (0.0, 2.0**63))
                if not _number(num) or not lo <= num <= hi:
                    raise BadInput(
                        f"{where}: {key}.{fname} must be a number from {lo:g} to {hi:g}",
                        f"got {num!r}",
                        "fix it",
                    )
                numbers[fname] = float(num)
        items[key] = ItemSpec(
            key=key,
            group=group,
            source=item["source"],
            value=value,
            tiers=tiers,
            rule=rule,
            mode=mode,
            apply=apply,
            requires=item.get("requires"),
            note=item.get("note", ""),
            numbers=numbers,
        )
    params = {k: float(v) for k, v in raw.get("params", {}).items()}
    missing = PARAMS - set(params)
    if missing:
        raise BadInput(
            f"{where} lacks parameters {sorted(missing)}",
            "they size buffers and pacing",
            "add them under [params] or include dtn",
        )
    return Profile(name, str(raw.get("description", "")), params, items, files)


def site_sysctl_allowed(name: str) -> bool:
    """Whether a site profile may add the sysctl ``name`` (the allow-list above)."""
    return any(fnmatch.fnmatchcase(name, p) for p in SITE_SYSCTLS) and not any(
        fnmatch.fnmatchcase(name, p) for p in SITE_SYSCTLS_EXCLUDED
    )


def site_sysctls_text() -> str:
    excluded = ", ".join(SITE_SYSCTLS_EXCLUDED)
    return f"{', '.join(SITE_SYSCTLS)} (not {excluded})"


def _site_group(where: str, key: str, item: Mapping[str, Any]) -> str:
    """The group of a key a site adds: an allow-listed sysctl naming a known group."""
    group = item.get("group")
    if not key.startswith("sysctl/") or not isinstance(group, str):
        raise BadInput(
            f"{where}: unknown key {key!r}",
            "known keys are listed in docs/profiles.md; other sysctls need "
            f"`sysctl/<name>` and a `group`, from: {site_sysctls_text()}",
            "fix the key",
        )
    if not site_sysctl_allowed(key.partition("/")[2]):
        raise BadInput(
            f"{where}: {key} is not a network setting a site profile may add",
            f"site profiles may add only these sysctls: {site_sysctls_text()} (docs/profiles.md)",
            "remove it; set other kernel settings outside dtnkit",
        )
    if group not in GROUPS:
        raise BadInput(
            f"{where}: {key} names unknown group {group!r}",
            f"groups: {', '.join(GROUPS)}",
            "fix the group",
        )
    return group


def _tiers(where: str, key: str, raw: Any) -> dict[int, Any]:
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: {key}.tiers must be a table", f"got {raw!r}", "fix it")
    tiers: dict[int, Any] = {}
    for speed, value in raw.items():
        try:
            gbit = int(speed)
        except ValueError:
            gbit = -1
        if gbit not in SPEED_TIERS:
            raise BadInput(
                f"{where}: {key} has tier {speed!r}",
                f"tiers are {', '.join(map(str, SPEED_TIERS))} (Gbit/s)",
                "fix it",
            )
        tiers[gbit] = value
    return tiers
