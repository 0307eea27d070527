"""A sweep's grid as data: a TOML file or ``axis=values`` flags -> :class:`Grid` -> Points.

The grid names values for each axis (``rtt``, ``rate``, ``loss``, ``streams``, ``origins``,
``cores``, ``file_size``, ``tool``, ``profile``) and the run settings (``repeats``,
``duration`` or ``bytes``, ``time_limit``, ``sample_interval``, the lab path's ``mtu``).
:meth:`Grid.points` expands the product in an order that changes the lab path the least
(RTT outermost, streams innermost), each :class:`Point` with a stable ID: a hash of the
values that define its measurement, so a resumed sweep can skip points already stored.
docs/sweep.md has the format.

Every malformed grid raises :class:`~dtnkit.errors.BadInput` (exit 9) naming the file and
line, or the flag, of the bad value.  Nothing here runs anything; :func:`load_grid` reads one
file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import re
import string
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dtnkit import units
from dtnkit.errors import BadInput
from dtnkit.measure.probes.load import PLACEHOLDERS
from dtnkit.tune.profile import USER_PROFILE_DIR, shipped_names

#: the grid file's schema version this code reads
SCHEMA = 1
#: at most this many points (the product of the axes times repeats)
MAX_POINTS = 10_000
MAX_GRID_BYTES = 2**20

#: tools a point can run; ``command:NAME`` runs the template ``[commands] NAME``
TOOLS = ("iperf3", "dtnkit-cp", "dtnkit-cp-upload", "dtnkit-tpc", "gfal-tpc")
COMMAND_PREFIX = "command:"
#: the grid's tools that are a registry tool run another way (the rest are their own name)
GRID_TOOLS = {"dtnkit-cp-upload": "dtnkit-cp"}


def registry_tool(tool: str) -> str:
    """The measure registry's tool that runs a grid's ``tool``: ``command:NAME`` is the
    command tool, ``dtnkit-cp-upload`` is dtnkit-cp with the load's ``upload``."""
    if tool.startswith(COMMAND_PREFIX):
        return "command"
    return GRID_TOOLS.get(tool, tool)


#: the axes, outermost first: the order points are run in (path settings change least)
AXES = (
    "rtt",
    "rate",
    "loss",
    "origins",
    "cores",
    "profile",
    "tool",
    "server",
    "file_size",
    "streams",
)
#: what the origins (and a TPC destination) serve with
SERVERS = ("dtnkit", "xrootd")
RUN_KEYS = ("repeats", "duration", "bytes", "time_limit", "sample_interval", "mtu")
TOP_KEYS = ("schema", "name", "description", "axes", "run", "commands")

DEFAULTS: dict[str, Any] = {
    "rate": (None,),
    "loss": (0.0,),
    "origins": (1,),
    "cores": (None,),
    "file_size": (2**30,),
    "tool": ("iperf3",),
    "profile": (None,),
    "server": ("dtnkit",),
}
DEFAULT_DURATION_S = 10.0
DEFAULT_TIME_LIMIT_S = 600.0
DEFAULT_SAMPLE_INTERVAL_S = 5.0
#: the lab path's MTU unless [run] mtu says otherwise (lab.path.PathSpec's default).  Jumbo
#: frames (9000, as DTNs use) cut the packets per second six-fold, which is what lets a
#: 2-core lab carry 64-128 streams at its cap (docs/sweep.md, "Many streams")
DEFAULT_MTU = 1500
MTU_RANGE = (576, 65535)
NONE_WORDS = ("none",)


@dataclasses.dataclass(frozen=True)
class Point:
    """One measurement: a value of every axis, the repeat index and how long to measure."""

    rtt_ms: float
    rate_bps: int | None
    loss: float
    origins: int
    cores: float | None
    profile: str | None
    tool: str
    file_size: int
    streams: int
    repeat: int
    duration_s: float | None
    bytes: int | None
    sample_interval_s: float
    time_limit_s: float
    command: str | None = None  # the template when tool is command:NAME
    server: str = "dtnkit"  # the origins' server (dtnkit serve or XRootD); iperf3 ignores it
    mtu: int = DEFAULT_MTU  # the lab path's MTU

    def identity(self) -> dict[str, Any]:
        """What the point ID hashes: everything but the time limit (which does not change
        a finished measurement).  The default MTU is left out, so points stored before the
        MTU setting existed keep their IDs (and ``--resume`` still skips them)."""
        out = dataclasses.asdict(self)
        del out["time_limit_s"]
        if self.mtu == DEFAULT_MTU:
            del out["mtu"]
        return out

    @property
    def id(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def total_cores(self) -> float | None:
        return None if self.cores is None else round(self.origins * self.cores, 3)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True)
class Grid:
    """Normalised axis values (sorted, numbers in base units) and the run settings."""

    axes: Mapping[str, tuple[Any, ...]]
    repeats: int = 1
    duration_s: float | None = DEFAULT_DURATION_S
    bytes: int | None = None
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    sample_interval_s: float = DEFAULT_SAMPLE_INTERVAL_S
    mtu: int = DEFAULT_MTU
    commands: Mapping[str, str] = dataclasses.field(default_factory=dict)
    name: str = ""
    description: str = ""

    def __len__(self) -> int:
        return math.prod(len(v) for v in self.axes.values()) * self.repeats

    def points(self) -> list[Point]:
        return list(self.iter_points())

    def iter_points(self) -> Iterator[Point]:
        """RTT outermost, then rate, loss, origins, cores, profile, tool, file size; each
        repeat sweeps the stream counts in turn (repeats interleave with time drift)."""

        def walk(i: int, chosen: dict[str, Any]) -> Iterator[dict[str, Any]]:
            if i == len(AXES) - 1:
                for repeat in range(self.repeats):
                    for streams in self.axes["streams"]:
                        yield {**chosen, "streams": streams, "repeat": repeat}
                return
            for value in self.axes[AXES[i]]:
                yield from walk(i + 1, {**chosen, AXES[i]: value})

        for v in walk(0, {}):
            tool = v["tool"]
            yield Point(
                rtt_ms=v["rtt"],
                rate_bps=v["rate"],
                loss=v["loss"],
                origins=v["origins"],
                cores=v["cores"],
                profile=v["profile"],
                tool=tool,
                file_size=v["file_size"],
                streams=v["streams"],
                repeat=v["repeat"],
                duration_s=self.duration_s,
                bytes=self.bytes,
                sample_interval_s=self.sample_interval_s,
                time_limit_s=self.time_limit_s,
                server=v["server"],
                mtu=self.mtu,
                command=self.commands[tool[len(COMMAND_PREFIX) :]]
                if tool.startswith(COMMAND_PREFIX)
                else None,
            )

    # ---- writing back (the round trip TOML <-> flags) ----
    def to_toml(self) -> str:
        lines = [f"schema = {SCHEMA}"]
        if self.name:
            lines.append(f"name = {_toml_str(self.name)}")
        if self.description:
            lines.append(f"description = {_toml_str(self.description)}")
        lines += ["", "[axes]"]
        for axis in AXES:
            shown = ", ".join(_toml_value(axis, v) for v in self.axes[axis])
            lines.append(f"{axis} = [{shown}]")
        lines += ["", "[run]"]
        lines += [
            f"{k} = {v if k in ('repeats', 'mtu') else _toml_str(v)}" for k, v in self._run_items()
        ]
        if self.commands:
            lines += ["", "[commands]"]
            lines += [f"{_toml_str(k)} = {_toml_str(v)}" for k, v in sorted(self.commands.items())]
        return "\n".join(lines) + "\n"

    def to_flags(self) -> list[str]:
        out = [f"{axis}={','.join(_show(axis, v) for v in self.axes[axis])}" for axis in AXES]
        out += [f"{k}={v}" for k, v in self._run_items()]
        out += [f"command.{k}={v}" for k, v in sorted(self.commands.items())]
        if self.name:
            out.append(f"name={self.name}")
        if self.description:
            out.append(f"description={self.description}")
        return out

    def _run_items(self) -> list[tuple[str, str]]:
        items = [("repeats", str(self.repeats))]
        if self.duration_s is not None:
            items.append(("duration", _show_duration(self.duration_s)))
        if self.bytes is not None:
            items.append(("bytes", _show_size(self.bytes)))
        items.append(("time_limit", _show_duration(self.time_limit_s)))
        items.append(("sample_interval", _show_duration(self.sample_interval_s)))
        if self.mtu != DEFAULT_MTU:
            items.append(("mtu", str(self.mtu)))
        return items


# ---------------------------------------------------------------- showing values


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


def _toml_value(axis: str, value: Any) -> str:
    """Counts and core quotas as bare numbers, the rest as strings with units."""
    if value is not None and axis in ("streams", "origins", "cores"):
        return _show(axis, value)
    return _toml_str(_show(axis, value))


def _decimal(value: float, places: int) -> str:
    return f"{value:.{places}f}".rstrip("0").rstrip(".") or "0"


def _show_duration(seconds: float) -> str:
    ms = round(seconds * 1000)
    return units.duration_flag(ms // 1000) if ms % 1000 == 0 and ms else f"{ms}ms"


def _show_size(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _show(axis: str, value: Any) -> str:
    if value is None:
        return "none"
    if axis == "rtt":
        return _decimal(value, 6) + "ms"
    if axis == "rate":
        for unit, size in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
            if value % size == 0:
                return f"{value // size}{unit}"
        return str(value)
    if axis == "loss":
        return _decimal(value * 100, 10) + "%"
    if axis == "cores":
        return _decimal(value, 3)
    if axis == "file_size":
        return _show_size(value)
    return str(value)


# ---------------------------------------------------------------- reading values


class _Where:
    """Names the place of a value in error messages: ``grid.toml:12 (axes.rtt)`` or
    ``flag rtt=...``."""

    def __init__(self, source: str, text: str | None) -> None:
        self.source = source
        self.lines = text.splitlines() if text is not None else None

    def __call__(self, section: str, key: str) -> str:
        shown = key if re.fullmatch(r"[A-Za-z0-9_-]{1,40}", key) else _brief(key)
        dotted = f"{section}.{shown}" if section else shown
        if self.lines is None:
            return f"{self.source}s" if key == "axes" else f"{self.source} {shown}="
        line = self._line(section, key)
        return f"{self.source}:{line} ({dotted})" if line else f"{self.source} ({dotted})"

    def _line(self, section: str, key: str) -> int | None:
        current = ""
        pattern = re.compile(r"\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
        inline = re.compile(r"\s*" + re.escape(section) + r"\s*=\s*\{.*\b" + re.escape(key))
        for number, line in enumerate(self.lines or (), 1):
            header = re.fullmatch(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?", line)
            if header:
                current = header.group(1).strip("\"' ")
                continue
            if current == section and pattern.match(line):
                return number
            if section and not current and inline.match(line):
                return number
        return None


def _fail(where: str, what: str, why: str, next_step: str) -> BadInput:
    return BadInput(f"{where}: {what}", why, next_step)


def _hint(next_step: str, key: str, where: str, listed: bool) -> str:
    """A unit parser's hint (``--rtt 50ms``, ``duration 30s``) as the grid writes it: in a
    file ``rtt = ["50ms"]`` (or ``duration = "30s"``), as a flag ``rtt=50ms``."""

    def grid_form(m: re.Match[str]) -> str:
        if where.endswith("="):
            return f"{key}={m.group(1)}"
        return f'{key} = ["{m.group(1)}"]' if listed else f'{key} = "{m.group(1)}"'

    return re.sub(rf"(?:--)?{re.escape(key)} ([^\s,]+)", grid_form, next_step)


def _reraise(exc: BadInput, where: str, key: str, listed: bool) -> BadInput:
    return _fail(
        where, exc.what.replace(f"--{key}", key), exc.why, _hint(exc.next_step, key, where, listed)
    )


def _one(
    axis: str, raw: Any, where: str, known_profiles: Sequence[str], commands: Mapping[str, str]
) -> Any:
    """One axis value, parsed and range-checked."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _fail(
            where,
            f"bad {axis} value {_brief(raw)}",
            f"a {axis} value is a number or a string",
            f"e.g. {EXAMPLES[axis]}",
        )
    if isinstance(raw, float) and not math.isfinite(raw):
        raise _fail(
            where, f"bad {axis} value {raw!r}", "not a finite number", f"e.g. {EXAMPLES[axis]}"
        )
    text = raw.strip() if isinstance(raw, str) else raw
    if (
        isinstance(text, str)
        and text.lower() in NONE_WORDS
        and axis in ("rate", "cores", "profile")
    ):
        return None
    try:
        if axis == "rtt":
            return round(units.parse_ms(text, "rtt", hi=10_000.0), 6)
        if axis == "rate":
            if isinstance(text, float):
                text = str(text)
            return units.parse_rate(text, "rate", lo=10**5, hi=10**12)
        if axis == "loss":
            return round(units.parse_fraction(text, "loss", hi=0.5), 12)
        if axis == "file_size":
            if isinstance(text, float):
                text = str(text)
            return units.parse_bytes(text, "file_size", lo=1, hi=2**40)
    except BadInput as exc:
        raise _reraise(exc, where, axis, True) from None
    if axis in ("streams", "origins"):
        hi = 1024 if axis == "streams" else 64
        value = _integer(text)
        if value is None or not 1 <= value <= hi:
            raise _fail(
                where,
                f"bad {axis} value {_brief(raw)}",
                f"a whole number from 1 to {hi}",
                f"e.g. {EXAMPLES[axis]}",
            )
        return value
    if axis == "cores":
        number = _number(text)
        if number is None or not 0 < number <= 1024:
            raise _fail(
                where,
                f"bad cores value {_brief(raw)}",
                "a CPU quota per origin above 0 and at most 1024 cores, or none",
                f"e.g. {EXAMPLES[axis]}",
            )
        quota = round(number, 3)
        if quota == 0:
            raise _fail(
                where,
                f"bad cores value {_brief(raw)}",
                "it rounds to 0 cores",
                "give at least 0.001 cores",
            )
        return quota
    if not isinstance(text, str):
        raise _fail(
            where,
            f"bad {axis} value {_brief(raw)}",
            f"a {axis} is a name",
            f"e.g. {EXAMPLES[axis]}",
        )
    if axis == "tool":
        if text.startswith(COMMAND_PREFIX):
            name = text[len(COMMAND_PREFIX) :]
            if name not in commands:
                known = ", ".join(sorted(commands)) or "none defined"
                raise _fail(
                    where,
                    f"unknown command template {name!r}",
                    f"[commands] defines: {known}",
                    f'add {name} = "..." under [commands] (or command.{name}=... as a flag)',
                )
            return text
        if text not in TOOLS:
            raise _fail(
                where,
                f"unknown tool {_brief(raw)}",
                f"known tools: {', '.join(TOOLS)}, command:NAME",
                "pick one of those",
            )
        return text
    if axis == "server":
        if text not in SERVERS:
            raise _fail(
                where,
                f"unknown server {_brief(raw)}",
                f"origins serve with: {', '.join(SERVERS)}",
                "pick one of those",
            )
        return text
    # profile
    if text not in known_profiles:
        raise _fail(
            where,
            f"unknown profile {_brief(raw)}",
            f"known profiles: {', '.join(known_profiles)}, none",
            "pick one of those, or put NAME.toml in /etc/dtnkit/profiles",
        )
    return text


EXAMPLES = {
    "rtt": 'rtt = ["5ms", "100ms"]',
    "rate": 'rate = ["1gbit"]',
    "loss": 'loss = ["0.01%"]',
    "streams": "streams = [1, 2, 4, 8]",
    "origins": "origins = [1, 4]",
    "cores": 'cores = [0.5, 2] (or "none")',
    "file_size": 'file_size = ["256MiB"]',
    "tool": 'tool = ["iperf3", "dtnkit-cp"]',
    "server": 'server = ["dtnkit", "xrootd"]',
    "profile": 'profile = ["none", "dtn"]',
}


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value.strip()):
        return int(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    numeric = isinstance(value, int | float) or (
        isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}(\.[0-9]{1,9})?", value.strip())
    )
    if not numeric:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _brief(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _axis(
    axis: str, raw: Any, where: str, known_profiles: Sequence[str], commands: Mapping[str, str]
) -> tuple[Any, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise _fail(
            where,
            f"axis {axis} is empty",
            "an axis needs at least one value",
            f"give values, e.g. {EXAMPLES[axis]}, or leave the axis out",
        )
    if len(values) > MAX_POINTS:
        raise _fail(
            where,
            f"axis {axis} has {len(values)} values",
            f"a grid has at most {MAX_POINTS} points",
            "drop values",
        )
    parsed: dict[Any, None] = {}  # a dict: ordered, and a duplicate is found in O(1)
    for value in values:
        one = _one(axis, value, where, known_profiles, commands)
        if one in parsed:
            raise _fail(
                where,
                f"{axis} value {_brief(value)} is given twice",
                f"it equals {_show(axis, one)}, already in the axis",
                "give each value once",
            )
        parsed[one] = None
    if axis in ("tool", "profile", "server"):
        return tuple(parsed)  # run in the order given
    return tuple(sorted(parsed, key=lambda v: (v is not None, v if v is not None else 0)))


def build_grid(
    doc: Mapping[str, Any],
    source: str = "grid",
    text: str | None = None,
    known_profiles: Sequence[str] | None = None,
) -> Grid:
    """Validate a parsed grid document (the TOML's shape) into a :class:`Grid`; ``text``
    (the file's text) lets errors name the line."""
    where = _Where(source, text)
    profiles = list(known_profiles) if known_profiles is not None else default_profiles()
    for key in doc:
        if key not in TOP_KEYS:
            raise _fail(
                where("", key),
                f"unknown key {_brief(key)}",
                f"a grid has: {', '.join(TOP_KEYS)}",
                "remove it or fix its name",
            )
    schema = doc.get("schema")
    if schema is None:
        raise _fail(
            where("", "schema"),
            "no schema version",
            f"a grid starts with schema = {SCHEMA}",
            f"add schema = {SCHEMA}",
        )
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise _fail(
            where("", "schema"),
            f"bad schema {_brief(schema)}",
            "the schema version is a number, not text",
            f"write schema = {SCHEMA}",
        )
    if schema != SCHEMA:
        newer = isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA
        raise _fail(
            where("", "schema"),
            f"grid schema {_brief(schema)} is not supported",
            f"this dtnkit reads schema {SCHEMA}" + (" (the file is newer)" if newer else ""),
            "upgrade dtnkit" if newer else f"write schema = {SCHEMA}",
        )
    for key in ("name", "description"):
        if key in doc and not isinstance(doc[key], str):
            raise _fail(
                where("", key),
                f"bad {key} {_brief(doc[key])}",
                "it is text",
                f'e.g. {key} = "metro paths"',
            )
    commands_raw = doc.get("commands", {})
    if not isinstance(commands_raw, dict):
        raise _fail(
            where("", "commands"),
            "bad [commands]",
            'a table of NAME = "template"',
            '[commands] then mine = "tool {dst}"',
        )
    commands = {
        str(k): _template(str(k), v, where("commands", str(k))) for k, v in commands_raw.items()
    }
    axes_raw = doc.get("axes")
    if not isinstance(axes_raw, dict):
        raise _fail(
            where("", "axes"),
            "no [axes] table" if axes_raw is None else "bad [axes]",
            "a grid names at least rtt and streams under [axes]",
            'add [axes] with rtt = ["5ms"] and streams = [1, 4]',
        )
    for key in axes_raw:
        if key not in AXES:
            raise _fail(
                where("axes", key),
                f"unknown axis {_brief(key)}",
                f"axes: {', '.join(AXES)}",
                "remove it or fix its name",
            )
    axes: dict[str, tuple[Any, ...]] = {}
    for axis in AXES:
        if axis in axes_raw:
            axes[axis] = _axis(axis, axes_raw[axis], where("axes", axis), profiles, commands)
        elif axis in DEFAULTS:
            axes[axis] = DEFAULTS[axis]
        else:
            raise _fail(
                where("axes", axis),
                f"axis {axis} is missing",
                "a grid needs rtt and streams",
                f"add {EXAMPLES[axis]}",
            )
    run = doc.get("run", {})
    if not isinstance(run, dict):
        raise _fail(
            where("", "run"), "bad [run]", "a table of run settings", "[run] then repeats = 3"
        )
    for key in run:
        if key not in RUN_KEYS:
            raise _fail(
                where("run", key),
                f"unknown run setting {_brief(key)}",
                f"settings: {', '.join(RUN_KEYS)}",
                "remove it or fix its name",
            )
    repeats = _integer(run.get("repeats", 1))
    if repeats is None or not 1 <= repeats <= 1000:
        raise _fail(
            where("run", "repeats"),
            f"bad repeats {_brief(run.get('repeats'))}",
            "a whole number from 1 to 1000",
            "e.g. repeats = 3",
        )
    if "duration" in run and "bytes" in run:
        raise _fail(
            where("run", "bytes"),
            "both duration and bytes are given",
            "a point runs for a time or moves a number of bytes",
            "keep one of them",
        )
    duration: float | None = DEFAULT_DURATION_S
    size: int | None = None
    if "bytes" in run:
        duration = None
        size = _parse(
            lambda v: units.parse_bytes(v, "bytes", lo=1, hi=2**50),
            run["bytes"],
            where("run", "bytes"),
            "bytes",
            'e.g. bytes = "4GiB"',
        )
    elif "duration" in run:
        duration = _seconds(run["duration"], "duration", where("run", "duration"), 0.1, 86400)
    # default limit: 10 min, or twice the duration and a minute when that is longer
    default_limit = (
        DEFAULT_TIME_LIMIT_S
        if duration is None
        else max(DEFAULT_TIME_LIMIT_S, round(2 * duration + 60, 3))
    )
    limit = _seconds(
        run.get("time_limit", default_limit), "time_limit", where("run", "time_limit"), 1, 7 * 86400
    )
    interval = _seconds(
        run.get("sample_interval", DEFAULT_SAMPLE_INTERVAL_S),
        "sample_interval",
        where("run", "sample_interval"),
        0.1,
        3600,
    )
    mtu = _integer(run.get("mtu", DEFAULT_MTU))
    if mtu is None or not MTU_RANGE[0] <= mtu <= MTU_RANGE[1]:
        raise _fail(
            where("run", "mtu"),
            f"bad mtu {_brief(run.get('mtu'))}",
            f"a whole number of bytes from {MTU_RANGE[0]} to {MTU_RANGE[1]}",
            "e.g. mtu = 9000",
        )
    if duration is not None and limit < duration:
        raise _fail(
            where("run", "time_limit"),
            "time_limit is shorter than duration",
            f"{_show_duration(limit)} < {_show_duration(duration)}",
            "raise time_limit or shorten duration",
        )
    if duration is not None and interval > duration:
        raise _fail(
            where("run", "sample_interval"),
            "sample_interval is longer than duration",
            f"{_show_duration(interval)} > {_show_duration(duration)}: not one sample",
            "shorten sample_interval (e.g. 1s) or lengthen duration",
        )
    unused = sorted(
        set(commands)
        - {t[len(COMMAND_PREFIX) :] for t in axes["tool"] if t.startswith(COMMAND_PREFIX)}
    )
    if unused:
        raise _fail(
            where("commands", unused[0]),
            f"command template {unused[0]!r} is unused",
            'no tool = "command:NAME" names it',
            f'add "command:{unused[0]}" to the tool axis or remove the template',
        )
    grid = Grid(
        axes=axes,
        repeats=repeats,
        duration_s=duration,
        bytes=size,
        time_limit_s=limit,
        sample_interval_s=interval,
        mtu=mtu,
        commands=commands,
        name=str(doc.get("name", "")),
        description=str(doc.get("description", "")),
    )
    total = len(grid)
    if total > MAX_POINTS:
        sizes = " x ".join(f"{len(grid.axes[a])} {a}" for a in AXES if len(grid.axes[a]) > 1)
        raise _fail(
            where("", "axes"),
            f"the grid has {total} points",
            f"{sizes or '1 point'} x {repeats} repeats; at most {MAX_POINTS}",
            "split it into several grids or drop values",
        )
    return grid


def _parse(parse: Any, raw: Any, where: str, what: str, example: str) -> Any:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise _fail(where, f"bad {what} {_brief(raw)}", "give a number with a unit", example)
    try:
        return parse(raw)
    except BadInput as exc:
        raise _reraise(exc, where, what, False) from None


def _seconds(raw: Any, what: str, where: str, lo: float, hi: float) -> float:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _fail(where, f"bad {what} {_brief(raw)}", "give a duration", f'e.g. {what} = "30s"')
    try:
        seconds = units.parse_duration(raw, what, lo=lo, hi=hi)
    except BadInput as exc:
        raise _reraise(exc, where, what, False) from None
    return round(seconds, 3)


def _template(name: str, raw: Any, where: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", name):
        raise _fail(
            where,
            f"bad command name {_brief(name)}",
            "names are letters, digits, - and _",
            "e.g. mine",
        )
    if not isinstance(raw, str) or not raw.strip() or "\n" in raw or "\x00" in raw:
        raise _fail(
            where,
            f"bad command template {_brief(raw)}",
            "one line of text with {placeholders}",
            'e.g. mine = "curl -o /dev/null {url}"',
        )
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(raw) if f is not None]
    except ValueError as exc:
        raise _fail(
            where, f"bad command template {_brief(raw)}", str(exc), "write { and } as {{ and }}"
        ) from None
    for field in fields:
        if field not in PLACEHOLDERS:
            raise _fail(
                where,
                f"unknown placeholder {{{field}}} in template {name}",
                f"placeholders: {', '.join(sorted(PLACEHOLDERS))}",
                "use one of those, or write { and } as {{ and }}",
            )
    return raw


def default_profiles() -> list[str]:
    """The tuning profiles a grid may name: the shipped ones and /etc/dtnkit/profiles."""
    users: list[str] = []
    with contextlib.suppress(OSError):
        users = [p.stem for p in USER_PROFILE_DIR.glob("*.toml")]
    return sorted(set(shipped_names()) | set(users))


# ---------------------------------------------------------------- entry points


def parse_grid_text(
    text: str, source: str = "grid", known_profiles: Sequence[str] | None = None
) -> Grid:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: not valid TOML", str(exc), "fix the file") from None
    except RecursionError:
        raise BadInput(
            f"{source}: not valid TOML", "it is nested too deeply", "fix the file"
        ) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise BadInput(f"{source}: not valid TOML", str(exc), "fix the file") from None
    return build_grid(doc, source, text, known_profiles)


def parse_grid_bytes(
    data: bytes, source: str = "grid", known_profiles: Sequence[str] | None = None
) -> Grid:
    if len(data) > MAX_GRID_BYTES:
        raise BadInput(
            f"{source}: too large",
            f"{len(data)} bytes, at most {MAX_GRID_BYTES}",
            "give a grid file",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BadInput(
            f"{source}:{line}: not UTF-8 text",
            f"byte 0x{data[exc.start]:02x} at offset {exc.start}",
            "save it as UTF-8",
        ) from None
    return parse_grid_text(text, source, known_profiles)


def load_grid(path: Path | str, known_profiles: Sequence[str] | None = None) -> Grid:
    """Read and validate a grid file."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_GRID_BYTES + 1)
    except OSError as exc:
        raise BadInput(
            f"cannot read grid {path}", exc.strerror or str(exc), "give an existing grid file"
        ) from None
    return parse_grid_bytes(data, str(path), known_profiles)


def parse_grid_flags(args: Iterable[str], known_profiles: Sequence[str] | None = None) -> Grid:
    """``rtt=5ms,100ms streams=1,2,4,8 repeats=3 command.mine=TEMPLATE`` -> a Grid (the
    same checks as a file; each value list is comma-separated)."""
    doc: dict[str, Any] = {"schema": SCHEMA}
    axes: dict[str, Any] = {}
    run: dict[str, Any] = {}
    commands: dict[str, str] = {}
    seen: set[str] = set()
    for arg in args:
        key, sep, value = arg.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(
                f"bad grid flag {_brief(arg)}",
                "write axis=value,value",
                "e.g. rtt=5ms,100ms streams=1,2,4,8",
            )
        if key in seen:
            raise BadInput(
                f"grid flag {key}= is given twice",
                "each axis once, values comma-separated",
                f"e.g. {key}=a,b",
            )
        seen.add(key)
        if key.startswith("command."):
            commands[key[len("command.") :]] = value
        elif key in AXES:
            axes[key] = [v.strip() for v in value.split(",")] if value.strip() else []
        elif key in RUN_KEYS:
            run[key] = value.strip()
        elif key in ("name", "description"):
            doc[key] = value
        else:
            raise BadInput(
                f"unknown grid flag {key}=",
                f"axes: {', '.join(AXES)}; settings: {', '.join(RUN_KEYS)}; command.NAME=TEMPLATE",
                "fix its name",
            )
    doc["axes"] = axes
    if run:
        doc["run"] = run
    if commands:
        doc["commands"] = commands
    return build_grid(doc, "flag", None, known_profiles)
