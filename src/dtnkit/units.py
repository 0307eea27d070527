"""The quantities people type and read: durations, rates, sizes, probabilities.

Each parser accepts what tc and iperf3 users write (``50ms``, ``2gbit``, ``0.01%``, ``64KiB``)
and raises :class:`~dtnkit.errors.BadInput` naming the quantity and an example.

Every value dtnkit shows to people is formatted here (``format_*``), one way everywhere: rates
in bit/s with SI prefixes (``941 Mbit/s``, ``9.41 Gbit/s``: the spelling of every rate dtnkit
prints, in tables, progress, hints, errors, help and docs), sizes in IEC bytes (``256 MiB``),
durations (``850 ms``, ``4.02 s``, ``2 min 5 s``), percentages (``12.3%``), moments in ISO
8601 UTC (``2026-12-01T10:00:00Z``); a missing value (None) is ``-`` (:data:`MISSING`), never
``None``.  JSON keeps the plain numbers with the unit in the key (``throughput_bps``).
"""

from __future__ import annotations

import math
import re
import time

from dtnkit.errors import BadInput

_NUM = r"\s*([0-9]+(?:\.[0-9]+)?)\s*"


def parse_ms(
    text: str | float, what: str = "RTT", *, lo: float = 0.0, hi: float = 10000.0
) -> float:
    """``100ms``, ``0.15s``, ``150`` (ms) -> milliseconds, within [lo, hi]."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        m = re.fullmatch(_NUM + r"(ms|s|us)?\s*", text)
        if not m:
            raise BadInput(
                f"bad {what} {text!r}",
                "give milliseconds such as 100ms or 0.15s",
                f"e.g. --{what.lower()} 50ms",
            )
        scale = {"s": 1000.0, "us": 0.001}.get(m.group(2) or "ms", 1.0)
        value = float(m.group(1)) * scale
    if not lo <= value <= hi:
        raise BadInput(
            f"{what} {value:g} ms is out of range",
            f"allowed: {lo:g} to {hi:g} ms",
            f"give a {what} in that range",
        )
    return value


_DURATION = {
    "": 1.0,
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([a-z]*)")


def parse_duration(
    text: str | float,
    what: str = "--duration",
    *,
    lo: float = 0.0,
    hi: float = 86400.0,
    whole: bool = False,
) -> float:
    """``5s``, ``2m``, ``1h30m``, ``1500ms`` or a bare number of seconds -> seconds, in
    [lo, hi].  ``whole``: only whole seconds (what iperf3's ``-t`` takes)."""
    example = f"e.g. {what} 30s, {what} 2m or {what} 1h30m"
    if isinstance(text, bool):
        raise BadInput(f"bad {what} {text!r}", "give a duration", example)
    if isinstance(text, int | float):
        value = float(text)
    else:
        raw = "".join(text.split()).lower()
        parts = _DURATION_PART.findall(raw)
        units = [unit for _, unit in parts]
        if (
            not parts
            or "".join(n + u for n, u in parts) != raw
            or any(u not in _DURATION for u in units)
            or ("" in units and len(parts) > 1)
            or len(set(units)) != len(units)
        ):
            raise BadInput(
                f"bad {what} {text!r}",
                "give a duration such as 30s, 2m, 1h30m or 1500ms (a bare number is seconds)",
                example,
            )
        value = sum(float(n) * _DURATION[u] for n, u in parts)
    if not math.isfinite(value) or not lo <= value <= hi:
        raise BadInput(
            f"{what} {text} is out of range",
            f"allowed: {duration_flag(lo)} to {duration_flag(hi)}",
            f"give {what} in that range",
        )
    if whole and value != int(value):
        raise BadInput(
            f"{what} {text} is not a whole number of seconds",
            "iperf3 runs for whole seconds",
            example,
        )
    return value


def duration_flag(seconds: float) -> str:
    """``1500ms``, ``30s``, ``2m``, ``1h30m`` (the form :func:`parse_duration` reads)."""
    if seconds < 1 and seconds != 0:
        return f"{seconds * 1000:g}ms"
    if seconds < 60 or seconds != int(seconds):
        return f"{seconds:g}s"
    out, rest = "", int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out += f"{rest // size}{unit}"
            rest %= size
    return out


_RATE = {
    "": 1,
    "bit": 1,
    "kbit": 10**3,
    "mbit": 10**6,
    "gbit": 10**9,
    "tbit": 10**12,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "bps": 8,
    "kbps": 8 * 10**3,
    "mbps": 8 * 10**6,
    "gbps": 8 * 10**9,
}


def _scaled(text: str | int, units: dict[str, int], what: str, why: str, next_step: str) -> int:
    """A number with an optional unit from ``units`` (case-insensitive), scaled to an int."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(_NUM + r"([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in units:
        raise BadInput(what, why, next_step)
    return int(float(m.group(1)) * units[unit])


def parse_rate(
    text: str | int, what: str = "rate", *, lo: int = 10**6, hi: int = 400 * 10**9
) -> int:
    """``2gbit``, ``500mbit``, ``1g`` (bits/s; tc's ``bps`` is bytes/s) -> bits per second."""
    value = _scaled(
        text,
        _RATE,
        f"bad {what} {text!r}",
        "give a rate such as 2gbit or 500mbit",
        f"e.g. --{what} 2gbit",
    )
    if not lo <= value <= hi:
        raise BadInput(
            f"{what} {rate_limit_text(value)} is out of range",
            f"allowed: {rate_limit_text(lo)} to {rate_limit_text(hi)}",
            f"give a {what} in that range",
        )
    return value


def rate_limit_text(bits_per_second: int) -> str:
    """A rate limit or a refused figure in the largest unit under it: ``1 Mbit/s``,
    ``400 Gbit/s``, ``1 Tbit/s``, ``2.5 Tbit/s``."""
    for scale, unit in (
        (10**12, "Tbit/s"),
        (10**9, "Gbit/s"),
        (10**6, "Mbit/s"),
        (10**3, "kbit/s"),
    ):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:g} {unit}"
    return f"{bits_per_second:g} bit/s"


def counted(n: int, noun: str) -> str:
    """``1 stream``, ``4 streams``: a count with its noun in the right number."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def parse_fraction(text: str | float, what: str = "loss", *, hi: float = 0.5) -> float:
    """``0.01%`` or ``0.0001`` -> a probability in [0, hi]."""
    percent = False
    if isinstance(text, int | float):
        value = float(text)
    else:
        m = re.fullmatch(_NUM + r"(%)?\s*", text)
        if not m:
            raise BadInput(
                f"bad {what} {text!r}",
                "give a percentage such as 0.01% or a probability such as 0.0001",
                f"e.g. --{what} 0.01%",
            )
        percent = bool(m.group(2))
        value = float(m.group(1)) / (100 if percent else 1)
    allowed = f"allowed: 0 to {hi * 100:g}% (a probability of 0 to {hi:g})"
    if not 0 <= value <= hi:
        if percent:
            raise BadInput(
                f"{what} {value * 100:g}% is out of range",
                allowed,
                f"give a {what} in that range, e.g. --{what} 1%",
            )
        shown = f"{value:g}"
        raise BadInput(
            f"{what} {shown} is out of range",
            f"a number without % is a probability ({shown} = {value * 100:g}%); {allowed}",
            f"for {shown} percent write --{what} {shown}%"
            if value <= hi * 100
            else f"give a {what} in that range, e.g. --{what} 1%",
        )
    return value


_SIZE = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 2**20,
    "mb": 10**6,
    "mib": 2**20,
    "g": 2**30,
    "gb": 10**9,
    "gib": 2**30,
}


def parse_bytes(
    text: str | int, what: str = "queue size", *, lo: int = 1500, hi: int = 2**31
) -> int:
    """``64KiB``, ``4m``, ``1500`` -> bytes."""
    option = what.split()[0]
    value = _scaled(
        text,
        _SIZE,
        f"bad {what} {text!r}",
        "give bytes such as 4MiB or 65536",
        f"e.g. --{option} 4MiB",
    )
    if not lo <= value <= hi:
        raise BadInput(
            f"{what} {value} bytes is out of range",
            f"allowed: {lo} to {hi} bytes",
            f"give a {what} in that range",
        )
    return value


# Link speeds: bit units only (tc's `bps` means bytes/s, and people mean bits when they
# write "25Gbps" for a NIC, so the byte units are refused rather than guessed); ethtool's
# "Mb/s" spelling is accepted as it prints it.
_SPEED = {u: s for u, s in _RATE.items() if not u.endswith("bps") and u != ""}
_SPEED.update({"b/s": 1, "kb/s": 10**3, "mb/s": 10**6, "gb/s": 10**9, "tb/s": 10**12})
BARE_SPEED_MAX_GBIT = 1000
#: link speeds dtnkit sizes for, Mbit/s (10 Mbit/s to 1.6 Tbit/s)
SPEED_MBPS_MIN, SPEED_MBPS_MAX = 10, 1_600_000


def parse_speed(text: str | float, what: str = "speed") -> int:
    """``25gbit``, ``100G``, ``10000mbit``, ``25000Mb/s`` or a bare ``25`` (Gbit/s) -> Mbit/s.

    A bare number is Gbit/s; one above 1000 is refused, since ethtool prints Mb/s and
    ``--speed 10000`` would otherwise mean 10 Tbit/s.  The result is 10 Mbit/s to 1.6 Tbit/s.
    """
    example = f"e.g. --{what} 25gbit, --{what} 100G or --{what} 10000mbit"
    raw = str(text).strip()
    m = re.fullmatch(_NUM + r"([A-Za-z/]*)\s*", raw)
    unit = m.group(2).lower() if m else ""
    if not m or (unit and unit not in _SPEED):
        raise BadInput(
            f"bad {what} {raw!r}",
            "give a link speed with a bit unit (gbit, mbit, G, M, Gb/s) or a bare number of Gbit/s",
            example,
        )
    number = float(m.group(1))
    if not unit:
        if number > BARE_SPEED_MAX_GBIT:
            raise BadInput(
                f"{what} {raw} is read as {number:g} Gbit/s",
                f"a bare number is Gbit/s and no NIC is faster than {BARE_SPEED_MAX_GBIT} "
                "Gbit/s; ethtool reports Mb/s",
                f"write the unit: --{what} {raw}mbit (or --{what} {number / 1000:g}gbit)",
            )
        bits = number * 10**9
    else:
        bits = number * _SPEED[unit]
    mbps = round(bits / 10**6)
    if not SPEED_MBPS_MIN <= mbps <= SPEED_MBPS_MAX:
        raise BadInput(
            f"{what} {raw} ({bits / 1e9:g} Gbit/s) is out of range",
            "allowed: 10 Mbit/s to 1600 Gbit/s",
            example,
        )
    return mbps


def check_finite(value: float, what: str, *, lo: float, hi: float, example: str) -> float:
    """A number given as a float option: finite and in (lo, hi] (NaN, inf, -1 are refused)."""
    if not math.isfinite(value) or not lo < value <= hi:
        raise BadInput(
            f"bad {what} {value!r}",
            f"it must be a number above {lo:g} and at most {hi:g}",
            f"e.g. {example}",
        )
    return value


#: the one rate vocabulary (SI prefixes, a lower-case k): the spelling help and docs use;
#: not iperf3's "Mbits/sec", so no screen mixes the two
_RATE_UNITS = ("bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s")


#: what people see for a value that is missing (not measured, not known)
MISSING = "-"


def _three_digits(value: float) -> str:
    """Three significant digits, no exponent: ``1.83``, ``18.3``, ``183``."""
    if value < 9.995:
        return f"{value:.2f}"
    if value < 99.95:
        return f"{value:.1f}"
    return f"{value:.0f}"


def _number(value: object) -> float | None:
    """A finite number, or None for anything else (None, a bool, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def format_rate(bits_per_second: object) -> str:
    """A rate: ``941 Mbit/s``, ``9.41 Gbit/s``, ``23.5 Gbit/s`` (SI prefixes, three
    significant digits as iperf3 gives them, the unit that keeps the number under 1000)."""
    value = _number(bits_per_second)
    if value is None:
        return MISSING
    unit = 0
    while value >= 999.5 and unit < len(_RATE_UNITS) - 1:
        value /= 1000
        unit += 1
    return f"{_three_digits(value)} {_RATE_UNITS[unit]}"


_IEC = ("KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: object) -> str:
    """A size in IEC bytes: ``512 B``, ``64.0 KiB``, ``256 MiB``, ``1.50 GiB``."""
    value = _number(n)
    if value is None:
        return MISSING
    if value < 0:
        return f"-{format_bytes(-value)}"
    if value < 1024:
        return f"{value:.0f} B"
    unit = -1
    while value >= 1023.5 and unit < len(_IEC) - 1:
        value /= 1024
        unit += 1
    return f"{_three_digits(value)} {_IEC[unit]}"


def format_duration(seconds: object) -> str:
    """A duration: ``850 ms``, ``4.02 s``, ``59.5 s``, ``2 min 5 s``, ``3 h 20 min``."""
    s = _number(seconds)
    if s is None:
        return MISSING
    if s < 1:
        return f"{s * 1000:.3g} ms" if s * 1000 >= 1 or s == 0 else f"{s * 1e6:.3g} us"
    if s < 59.95:
        return f"{_three_digits(s)} s"
    whole = round(s)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def format_eta(seconds: float) -> str:
    """A time still to come, to the second, as progress lines show it: ``45s``, ``3m20s``,
    ``1h05m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_ms(ms: object) -> str:
    """A time in milliseconds as measured (an RTT, a latency): ``50.2 ms``, ``0.123 ms``."""
    value = _number(ms)
    if value is None:
        return MISSING
    return f"{value:.3g} ms" if value < 100 else f"{value:.0f} ms"


def format_percent(pct: object, *, fraction: bool = False) -> str:
    """A percentage: ``12.3%``, ``0.05%``, ``100%`` (``fraction``: the value is 0..1)."""
    value = _number(pct)
    if value is None:
        return MISSING
    if fraction:
        value *= 100
    if value == 0 or abs(value) >= 99.95:
        return f"{value:.0f}%"
    return f"{value:.3g}%" if abs(value) >= 0.01 else f"{value:.1g}%"


def format_count(n: object) -> str:
    """A count (packets, retransmits, samples): the integer, ``-`` when missing."""
    value = _number(n)
    return MISSING if value is None else str(int(value))


#: the first second ISO 8601's four-digit years cannot write
_YEAR_10000 = 253402300800


def format_time(epoch: object) -> str:
    """A moment, ISO 8601 in UTC to the second: ``2026-12-01T10:00:00Z`` (tables and JSON
    alike; JSON keeps the epoch seconds beside it, e.g. ``started_epoch``)."""
    value = _number(epoch)
    if value is None or not 0 <= value < _YEAR_10000:
        return MISSING
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(value))
    except (OverflowError, OSError, ValueError):  # beyond what the C library can show
        return MISSING


def format_value(value: object) -> str:
    """Any other value shown to people: ``-`` for None, ``yes``/``no`` for booleans."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
