"""``qdisc/DEVICE/root``: the root qdisc of a device with everything under it, via ``tc``.

Its value is either the tree ``tc -j qdisc show`` and ``tc -d class show`` give, minus counters
(what a snapshot holds and restore puts back exactly, see docs/architecture.md) or a pacing
recommendation (``maxrate_bps``, ``mq``, ``queues``), which apply and
``--persist`` both turn into commands with :meth:`QdiscTunable.pacing_commands`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from dtnkit.errors import DtnkitError
from dtnkit.host.facts import Unavailable, kernel_qdiscs
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.tc import (
    parse_tc_class_text,
    parse_tc_qdisc_json,
    parse_tc_qdisc_text,
)
from dtnkit.tune.kinds.base import (
    Argv,
    DeviceTunable,
    Scope,
    Tunable,
    Value,
    absolute,
    check_bool,
    check_int,
    check_name,
    type_name,
)
from dtnkit.units import counted

DEFAULT_TICK = 1000 / 64  # tc's ticks per microsecond with high-resolution timers
# The options tc can set again, per kind, as ``tc -j qdisc show`` reports them.  Anything else
# it reports (htb's ``direct_packets_stat`` counter, ...) is statistics: never stored, and
# ignored when a snapshot that holds it is compared.
OPTIONS: dict[str, tuple[str, ...]] = {
    "pfifo": ("limit",),
    "bfifo": ("limit",),
    "pfifo_fast": ("bands", "priomap", "multiqueue"),  # fixed by the kernel
    "tbf": ("rate", "burst", "lat", "limit", "minburst", "peakrate"),
    "prio": ("bands", "priomap", "multiqueue"),
    "htb": ("r2q", "default", "direct_qlen"),
    "mq": (),
    "noqueue": (),
    "fq": (
        "limit",
        "flow_limit",
        "quantum",
        "initial_quantum",
        "buckets",
        "maxrate",
        "low_rate_threshold",
        "refill_delay",
        "orphan_mask",
        "pacing",
        "ce_threshold",
        "horizon",
        "horizon_drop",
    ),
    "fq_codel": (
        "limit",
        "flows",
        "quantum",
        "target",
        "interval",
        "memory_limit",
        "ecn",
        "drop_batch",
        "ce_threshold",
    ),
}
# The options of an htb class, as ``tc -d class show`` prints them (``level`` is derived).
_HTB_CLASS_OPTIONS = ("prio", "quantum", "rate", "ceil", "burst", "cburst")
# Attached to ingress/clsact (``parent ffff:fff1``): out of scope, never read nor written.
_INGRESS_PARENT = "ffff:fff1"


def _options(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    """The settable options of a qdisc; unknown kinds keep all (restore refuses them)."""
    keep = OPTIONS.get(kind)
    if keep is None:
        return dict(options)
    return {k: v for k, v in options.items() if k in keep}


def _qdisc_args(kind: str, options: dict[str, Any], tick: float = DEFAULT_TICK) -> list[str]:
    """tc arguments that recreate a qdisc from its `tc -j` options, as tc will report them."""
    args: list[str] = []
    if kind == "tbf":
        rate, burst = int(options["rate"]), int(options["burst"])
        peak: tuple[int, int] | None = None
        peak_args: list[str] = []
        if "minburst" in options:
            if not isinstance(options.get("peakrate"), str):
                raise DtnkitError(
                    "cannot recreate a tbf with a peak rate",
                    "the snapshot does not hold the peak rate (tc -j does not "
                    "report it; dtnkit reads it from tc -d since)",
                    "restore it by hand with tc, or save a new snapshot",
                )
            peak_bits = _rate_bits(options["peakrate"])
            prate = peak_bits // 8  # the kernel keeps bytes/s
            mtu = burst_for(prate, int(options["minburst"]), tick)
            peak = (prate, mtu)
            peak_args = ["peakrate", f"{peak_bits}bit", "mtu", f"{mtu}b"]
        if "limit" in options:
            buffer = burst_for(rate, burst, tick)
            args += [
                "rate",
                f"{rate}bps",
                "burst",
                f"{buffer}b",
                *peak_args,
                "limit",
                f"{int(options['limit'])}b",
            ]
        else:
            buffer, limit = tbf_buffer_and_limit(
                rate, burst, int(options.get("lat", 50000)), tick, peak
            )
            args += ["rate", f"{rate}bps", "burst", f"{buffer}b", *peak_args, "limit", f"{limit}b"]
    elif kind in ("pfifo", "bfifo"):
        if "limit" in options:
            args += ["limit", str(options["limit"])]
    elif kind == "htb":
        if "default" in options:
            args += ["default", str(options["default"]).removeprefix("0x")]
        if "r2q" in options:
            args += ["r2q", str(options["r2q"])]
        if "direct_qlen" in options:
            args += ["direct_qlen", str(options["direct_qlen"])]
    elif kind == "fq":
        for name in ("limit", "flow_limit", "quantum", "initial_quantum", "buckets"):
            if name in options:
                args += [name, str(options[name])]
        if options.get("maxrate"):
            args += ["maxrate", f"{options['maxrate']}bps"]
    elif kind == "fq_codel":
        for name in ("limit", "flows", "quantum", "drop_batch"):
            if name in options:
                args += [name, str(options[name])]
        if "memory_limit" in options:
            args += ["memory_limit", f"{options['memory_limit']}b"]
        for name in ("target", "interval", "ce_threshold"):
            if name in options:
                args += [name, f"{codel_us_for(int(options[name]))}us"]
        if "ecn" in options:
            args.append("ecn" if options["ecn"] else "noecn")
    elif kind == "prio":
        priomap = options.get("priomap")
        if "bands" in options:
            args += ["bands", str(options["bands"])]
        if isinstance(priomap, list) and priomap:
            args += ["priomap", *(str(int(p)) for p in priomap)]
    elif kind in ("mq", "pfifo_fast", "noqueue"):
        pass
    else:
        raise DtnkitError(
            f"cannot recreate a {kind} qdisc",
            "dtnkit does not know its options",
            "restore it by hand with tc",
        )
    return args


# ---- tc's rounding of a token-bucket burst --------------------------------------------------
# A burst of B bytes at R bytes/s is kept in kernel ticks of 64 ns and shown by tc as
# int(R * int(ticks / TICK) / 1e6) bytes (iproute2 tc_core.c; TICK, tc's ticks per
# microsecond, from /proc/net/psched: 15.625 on every kernel with high-resolution timers).
# How the ticks are made differs:
# - htb: tc turns the bytes into whole microseconds, 1e6 * B / R cut, and those into
#   int(us * TICK) ticks, which the kernel keeps;
# - tbf: tc sends the bytes (TCA_TBF_BURST, and the mtu as TCA_TBF_PBURST) and the kernel
#   makes nanoseconds with the rate's fixed-point multiplier, B * mult >> shift with
#   mult = floor(1e9 * 2**shift / R) (psched_l2t_ns), a hair short of 1e9 * B / R: a burst
#   that tc's own arithmetic puts on a tick's edge is shown one byte short at low rates
#   (tbf rate 63664bps burst 63664b shows burst 63663).
# So writing back the burst tc shows loses up to a microsecond each time (tbf: 65250 -> 64875
# at 3gbit).  dtnkit writes the middle of the range of bursts that tc shows as the recorded
# value; the model was checked against tc 6.1 on random rates and bursts.
_U32 = 2**32 - 1


def psched_tick(host: Host) -> float:
    """tc's ticks per microsecond, as tc_core_init computes it from /proc/net/psched."""
    text = host.read("/proc/net/psched") or ""
    try:
        t2us, us2t, clock_res = (int(word, 16) for word in text.split()[:3])
    except ValueError:
        return DEFAULT_TICK
    if clock_res == 1_000_000_000:
        t2us = us2t
    return t2us / us2t * (clock_res / 1e6) if us2t else DEFAULT_TICK


@functools.lru_cache(maxsize=64)
def _mult_shift(rate: int) -> tuple[int, int]:
    """The kernel's fixed-point 1e9 / rate (psched_ratecfg_precompute): the first shift for
    which floor(1e9 * 2**shift / rate) has bit 31 set."""
    factor, shift = 1_000_000_000, 0
    while True:
        mult = factor // rate
        if mult & (1 << 31) or factor & (1 << 63):
            return mult, shift
        factor <<= 1
        shift += 1


def _tbf_ticks(rate: int, size: int) -> int:
    """The ticks of 64 ns a tbf keeps for ``size`` bytes at ``rate`` bytes/s (psched_l2t_ns).
    The kernel reports them in 32 bits: a burst over 2**32 ticks (275 s at its rate) wraps,
    which is not modelled, so that the burst shown grows with the bytes written."""
    mult, shift = _mult_shift(rate)
    return (size * mult) >> shift >> 6


def shown_burst(rate: int, burst: int, tick: float = DEFAULT_TICK, whole_us: bool = False) -> int:
    """The burst tc shows after writing ``burst`` bytes at ``rate`` bytes/s: a tbf's, or with
    ``whole_us`` an htb class's (see above)."""
    ticks = int(int(1e6 * (burst / rate)) * tick) if whole_us else _tbf_ticks(rate, burst)
    return int(rate * int(ticks / tick) / 1e6)


def _first(rate: int, at_least: int, tick: float, whole_us: bool) -> int:
    """The smallest burst tc shows as at least ``at_least`` bytes."""
    low, high = 1, _U32
    while low < high:
        middle = (low + high) // 2
        if shown_burst(rate, middle, tick, whole_us) >= at_least:
            high = middle
        else:
            low = middle + 1
    return low


def burst_for(rate: int, shown: int, tick: float = DEFAULT_TICK, whole_us: bool = False) -> int:
    """A burst (bytes) that tc shows as ``shown`` at ``rate`` bytes/s (``shown`` if none does).
    A shown burst of 0 is a burst below one tick at that rate (1845 bytes at 2.86 GB/s): tc
    refuses to write `burst 0b`, and the middle of that range shows as 0 again."""
    if rate <= 0 or shown < 0:
        return shown
    low, high = _first(rate, shown, tick, whole_us), _first(rate, shown + 1, tick, whole_us) - 1
    if low > high or shown_burst(rate, low, tick, whole_us) != shown:
        return shown
    return (low + high) // 2


def _us(size: int, rate: int, tick: float) -> int:
    """tc_core_tick2time of the ticks a tbf keeps for a size at a rate (whole microseconds)."""
    return int(_tbf_ticks(rate, size) / tick)


def _exact_tbf_limit(
    rate: int, burst: int, lat_us: int, tick: float, peak: tuple[int, int] | None = None
) -> int | None:
    """A limit (bytes) for which tc shows ``lat_us`` as the latency of a tbf whose buffer is
    ``burst`` bytes, or None: tc computes 1e6 * limit / rate - int(ticks / TICK), with a peak
    rate (``peak``: its bytes/s and the mtu bytes written) the larger of that and the same at
    the peak rate, shows it truncated to whole microseconds, and only when it is not negative
    (q_tbf.c): a latency just under 0 is not "lat 0"."""
    us = _us(burst, rate, tick)
    spans = [(rate, us)]
    if peak is not None:
        spans.append((peak[0], _us(peak[1], peak[0], tick)))

    def latency(limit: int) -> float:
        return max(1e6 * (limit / r) - u for r, u in spans)

    candidates: set[int] = set()
    for r, u in spans:
        low = max(int(r * (lat_us + u) / 1e6) - 2, 1)
        candidates.update(range(low, int(r * (lat_us + u + 1) / 1e6) + 3))
    for limit in sorted(candidates):
        shown = latency(limit)
        if shown >= 0 and int(shown) == lat_us:
            return limit
    return None


def tbf_limit_for(
    rate: int,
    burst: int,
    lat_us: int,
    tick: float = DEFAULT_TICK,
    peak: tuple[int, int] | None = None,
) -> int:
    """A limit (bytes) for which tc shows ``lat_us`` as the latency of a tbf (see
    :func:`_exact_tbf_limit`), or the nearest tc would compute from a latency."""
    exact = _exact_tbf_limit(rate, burst, lat_us, tick, peak)
    return exact if exact is not None else int(rate * lat_us / 1e6) + burst


def codel_us_for(shown: int) -> int:
    """The microseconds to write for an fq_codel time (target, interval, ce_threshold) that tc
    shows as ``shown``: the kernel keeps codel times in units of 1024 ns (``codel_time_t``)
    and reports ``units * 1024 // 1000`` us, so 5000us is shown as 4999us, and 4999us written
    back would be shown as 4998us.  The smallest whole microsecond of the unit that shows
    ``shown`` (None of them: ``shown`` itself)."""
    units = (shown * 1000 + 1023) // 1024  # the first unit showing at least `shown`
    for unit in (units, units + 1):
        if unit * 1024 // 1000 == shown:
            return -(-unit * 1024 // 1000)  # the first us whose unit is `unit`
    return shown


def codel_shown(us: int) -> int:
    """What tc shows for an fq_codel time written as ``us`` microseconds."""
    return (us * 1000 // 1024) * 1024 // 1000


# how many buffers around the middle of the range tc shows as one burst are tried for a latency
_TBF_TRIES = 256


def tbf_buffer_and_limit(
    rate: int,
    shown: int,
    lat_us: int,
    tick: float = DEFAULT_TICK,
    peak: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """(buffer, limit) bytes that tc shows as burst ``shown`` and latency ``lat_us``.

    The latency tc shows depends on the exact buffer, not only on the burst it shows: at low
    rates one byte of limit is many microseconds (20 at 50000 bytes/s), so the middle of the
    burst's range may have no limit that shows the latency while another buffer of the range
    has (tbf rate 50000bps burst 574065b latency 95921us: buffer 574064 gives 95920 or 95940,
    574065 gives 95921).  Buffers are tried from the middle outwards.
    """
    middle = burst_for(rate, shown, tick)
    if rate <= 0 or shown < 0:
        return middle, tbf_limit_for(rate, middle, lat_us, tick, peak) if rate > 0 else shown
    low = _first(rate, shown, tick, False)
    high = _first(rate, shown + 1, tick, False) - 1
    tries = sorted(
        range(max(low, middle - _TBF_TRIES), min(high, middle + _TBF_TRIES) + 1),
        key=lambda b: (abs(b - middle), b),
    )
    for buffer in tries or [middle]:
        limit = _exact_tbf_limit(rate, buffer, lat_us, tick, peak)
        if limit is not None:
            return buffer, limit
    return middle, tbf_limit_for(rate, middle, lat_us, tick, peak)


# ---- htb classes ----------------------------------------------------------------------------
_RATE_UNITS = {
    "": 1,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
}


def _rate_bits(text: str) -> int:
    """Bits/s of a rate as tc prints it (``100Mbit``, ``123456Kbit``, ``1Gibit``)."""
    number = text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = text[len(number) :]
    if unit.endswith("bit"):
        scale, per = _RATE_UNITS.get(unit[:-3]), 1
    elif unit.endswith("bps"):
        scale, per = _RATE_UNITS.get(unit[:-3]), 8
    else:
        scale, per = None, 1
    if scale is None or not number:
        raise DtnkitError(
            f"cannot read the rate {text!r}",
            "tc printed a unit dtnkit does not know",
            "restore it by hand with tc",
        )
    return int(float(number) * scale * per)


def _bytes(text: str) -> int:
    """Bytes of a size as tc prints it (``1600b``, ``1600b/1``, ``15Kb``)."""
    size = text.split("/", 1)[0]
    for suffix, scale in (("Kb", 1024), ("Mb", 1024**2), ("Gb", 1024**3), ("b", 1)):
        if size.endswith(suffix) and size[: -len(suffix)].isdigit():
            return int(size[: -len(suffix)]) * scale
    if size.isdigit():
        return int(size)
    raise DtnkitError(
        f"cannot read the size {text!r}",
        "tc printed a unit dtnkit does not know",
        "restore it by hand with tc",
    )


def size_text(size: int) -> str:
    """A size as tc prints it (iproute2 print_size): ``1600b``, ``11Kb`` (within 16 B of a
    KiB multiple), ``2Mb`` (within 1 KiB of a MiB multiple)."""
    if size >= 1024 * 1024 and abs(1024 * 1024 * round(size / (1024 * 1024)) - size) < 1024:
        return f"{round(size / (1024 * 1024)):g}Mb"
    if size >= 1024 and abs(1024 * round(size / 1024) - size) < 16:
        return f"{round(size / 1024):g}Kb"
    return f"{size}b"


# ---- a qdisc in words, as `tc qdisc show` prints it ------------------------------------------
# The main parameters of each kind, in tc's order, and how tc prints each (iproute2 6.1:
# tc_print_rate, print_size, print_time): what people compare between hosts and snapshots.
_WORDS: dict[str, tuple[tuple[str, str], ...]] = {
    "tbf": (("rate", "rate"), ("burst", "size"), ("lat", "time"), ("limit", "size")),
    "htb": (("r2q", "plain"), ("default", "plain")),
    "pfifo": (("limit", "packets"),),
    "bfifo": (("limit", "size"),),
    "pfifo_fast": (("bands", "plain"),),
    "fq": (
        ("limit", "packets"),
        ("flow_limit", "packets"),
        ("quantum", "size"),
        ("maxrate", "rate"),
    ),
    "fq_codel": (
        ("limit", "packets"),
        ("flows", "plain"),
        ("target", "time"),
        ("interval", "time"),
        ("ecn", "flag"),
    ),
}
#: the most words a qdisc is shown in (a document from elsewhere may hold anything)
WORDS_MOST = 300


def rate_text(bytes_per_s: int) -> str:
    """A rate as tc prints it (tc_print_rate): ``1Gbit``, ``1500Mbit``, ``123456Kbit``:
    bits/s divided by 1000 while it stays whole (or while it is a million or more)."""
    rate, units = bytes_per_s * 8, ("", "K", "M", "G", "T")
    i = 0
    while i < len(units) - 1 and rate >= 1000 and (rate % 1000 == 0 or rate >= 1000**2):
        rate //= 1000
        i += 1
    return f"{rate}{units[i]}bit"


def time_text(us: int | float) -> str:
    """A time in microseconds as tc prints it (three significant digits): ``25ms``,
    ``67.9ms`` (67947), ``5ms`` (4999), ``1.5s``, ``999us``."""
    if us >= 1e6:
        return f"{us / 1e6:.3g}s"
    if us >= 1000:
        return f"{us / 1000:.3g}ms"
    return f"{int(us)}us"


def _option_text(value: Any, how: str) -> str | None:
    number = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64
    if how == "flag":
        return "" if value is True else None
    if how == "plain" or not number:
        return (
            str(value)
            if isinstance(value, str | int | float) and not isinstance(value, bool)
            else None
        )
    if how == "rate":
        return rate_text(value)
    if how == "size":
        return size_text(value)
    if how == "time":
        return time_text(value)
    return f"{value}p"  # packets


def qdisc_words(kind: object, options: object) -> str:
    """One qdisc, its kind and main parameters as ``tc qdisc show`` prints them:
    ``tbf rate 1Gbit burst 64Kb lat 10ms``, ``pfifo_fast bands 3``, ``noqueue``.  A kind
    dtnkit does not know shows its first few plain options as ``name value``."""
    name = str(kind) if isinstance(kind, str | int) else "?"
    opts = options if isinstance(options, dict) else {}
    known = _WORDS.get(name)
    pairs = (
        known
        if known is not None
        else tuple((k, "plain") for k in list(opts)[:4] if isinstance(k, str))
    )
    words = [name]
    for key, how in pairs:
        if key == "limit" and name == "tbf" and "lat" in opts:
            continue  # tc shows a tbf's limit as its latency when it was given that way
        if key not in opts:
            continue
        text = _option_text(opts[key], how)
        if text is not None:
            words.append(f"{key} {text}".strip())
    return " ".join(words)


def words(value: Value) -> str:
    """A recorded qdisc tree (or a pacing recommendation) in words, one line: the root, its
    classes and the qdiscs under them, e.g. ``mq, 16 queues: fq_codel limit 10240p flows
    1024 target 5ms interval 100ms ecn`` or ``htb r2q 10 default 0x10; class 1:10
    rate 100Mbit ceil 1Gbit; pfifo limit 500p under 1:10``."""
    if not isinstance(value, dict):
        return _one_line(str(value))
    if "maxrate_bps" in value:
        rate = value.get("maxrate_bps")
        cap = (
            f" maxrate {rate / 1e9:g}gbit"
            if isinstance(rate, int | float) and not isinstance(rate, bool) and rate
            else ""
        )
        return f"mq + fq{cap}" if value.get("mq") else f"fq{cap}"
    kind = value.get("kind")
    head = qdisc_words(kind, value.get("options"))
    children = (
        [c for c in value.get("children") or [] if isinstance(c, dict)]
        if isinstance(value.get("children"), list)
        else []
    )
    classes = (
        [c for c in value.get("classes") or [] if isinstance(c, dict)]
        if isinstance(value.get("classes"), list)
        else []
    )
    parts = [head]
    if kind == "mq" and children:
        shown: dict[str, int] = {}
        for c in children:
            text = qdisc_words(c.get("kind"), c.get("options"))
            shown[text] = shown.get(text, 0) + 1
        queues = counted(len(children), "queue")
        if len(shown) == 1:
            parts = [f"{head}, {queues}: {next(iter(shown))}"]
        else:
            parts = [f"{head}, {queues}: " + "; ".join(f"{n} x {t}" for t, n in shown.items())]
    else:
        for c in classes:
            got = c.get("options")
            opts: dict[str, Any] = got if isinstance(got, dict) else {}
            said = [f"{k} {opts[k]}" for k in ("rate", "ceil") if isinstance(opts.get(k), str)]
            parts.append(" ".join([f"class {c.get('classid')}", *said]))
        for c in children:
            parts.append(f"{qdisc_words(c.get('kind'), c.get('options'))} under {c.get('parent')}")
    untouched = value.get("untouched")
    if isinstance(untouched, list) and untouched:
        parts.append(f"{'/'.join(map(str, untouched))} and filters left as they are")
    return _one_line("; ".join(parts))


def _one_line(text: str) -> str:
    """One line of at most WORDS_MOST characters, whatever a document's value held."""
    text = " ".join(text.split())
    return text if len(text) <= WORDS_MOST else text[: WORDS_MOST - 3] + "..."


def _size_fuzz(text: str) -> int:
    return 1024 if text.endswith("Mb") else 16 if text.endswith("Kb") else 0


def _class_options(options: dict[str, Any]) -> dict[str, Any]:
    """An htb class's settable options as tc prints them (bursts without the ``/cell``)."""
    keep = {k: v for k, v in options.items() if k in _HTB_CLASS_OPTIONS}
    for name in ("burst", "cburst"):
        if isinstance(keep.get(name), int):
            keep[name] = f"{keep[name]}b"
        if isinstance(keep.get(name), str):
            keep[name] = keep[name].split("/", 1)[0]
    for name in ("prio", "quantum"):
        if isinstance(keep.get(name), str) and keep[name].isdigit():
            keep[name] = int(keep[name])
    return keep


def class_burst_for(rate: int, text: str, tick: float = DEFAULT_TICK) -> int:
    """A burst (bytes) of an htb class at ``rate`` bytes/s that tc prints as ``text``, or the
    one nearest to it when the rate tc printed was rounded and no burst prints the same."""
    target, fuzz = _bytes(text), _size_fuzz(text)
    shown = max(target - fuzz, 1)
    while shown <= target + fuzz:
        burst = burst_for(rate, shown, tick, True)
        now = shown_burst(rate, burst, tick, True) if rate > 0 else shown
        if now == shown and size_text(shown) == text:
            return burst
        shown = max(now, shown) + 1
    if rate <= 0:
        return target
    above = _first(rate, target, tick, True)
    below = max(above - 1, 1)
    return min((above, below), key=lambda burst: abs(shown_burst(rate, burst, tick, True) - target))


def _class_args(options: dict[str, Any], tick: float = DEFAULT_TICK) -> list[str]:
    """tc arguments that recreate an htb class so that tc shows ``options`` again."""
    options = _class_options(options)
    rate_bits = _rate_bits(str(options["rate"]))
    ceil_bits = _rate_bits(str(options.get("ceil", options["rate"])))
    rate, ceil = rate_bits // 8, ceil_bits // 8  # the kernel keeps bytes/s
    args = ["rate", f"{rate_bits}bit", "ceil", f"{ceil_bits}bit"]
    if "burst" in options:
        args += ["burst", f"{class_burst_for(rate, options['burst'], tick)}b"]
    if "cburst" in options:
        args += ["cburst", f"{class_burst_for(ceil, options['cburst'], tick)}b"]
    for name in ("prio", "quantum"):
        if name in options:
            args += [name, str(options[name])]
    return args


def _classes_match(current: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    """htb classes compare as tc prints them, except that a burst may differ by what one
    microsecond is at the class's rate (plus tc's print rounding): tc prints a rate rounded
    (``123456Kbit`` for 123456789 bit/s), so the exact rate, and with it the bytes a burst of
    whole microseconds prints as, cannot always be written back."""

    def keyed(classes: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
        return {
            (str(c.get("classid")), str(c.get("parent")), str(c.get("kind"))): _class_options(
                dict(c.get("options") or {})
            )
            for c in classes
        }

    now, wanted = keyed(current), keyed(want)
    if now.keys() != wanted.keys():
        return False
    for key, opts in wanted.items():
        got = now[key]
        bursts = {"burst": "rate", "cburst": "ceil"}
        if {k: v for k, v in got.items() if k not in bursts} != {
            k: v for k, v in opts.items() if k not in bursts
        }:
            return False
        for name, rate_name in bursts.items():
            a, b = got.get(name), opts.get(name)
            if a == b:
                continue
            if not isinstance(a, str) or not isinstance(b, str) or rate_name not in opts:
                return False
            slack = _rate_bits(str(opts[rate_name])) / 8e6 + 1 + _size_fuzz(a) + _size_fuzz(b)
            if abs(_bytes(a) - _bytes(b)) > slack:
                return False
    return True


class QdiscTunable(DeviceTunable):
    """The root qdisc of a device, with its parameters and (for mq) its children."""

    kind = "qdisc"
    names = ("root",)
    persist_recommended = True

    def __init__(self, device: str) -> None:
        super().__init__(f"qdisc/{device}/root", Scope.INTERFACE, device, "root qdisc")

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device)

    def read(self, host: Host) -> Value | Unavailable:
        """The root qdisc, every qdisc under it and (for htb) its classes, minus counters.

        ingress/clsact and filters are out of scope: not read, and restore leaves them as
        they are.
        """
        qdiscs = kernel_qdiscs(host, str(self.device))  # a live host: no tc process
        if qdiscs is None:
            res = host.query(["tc", "-j", "qdisc", "show", "dev", str(self.device)])
            if not res.ok:
                return Unavailable(res.message())
            qdiscs = parse_tc_qdisc_json(res.stdout)
        roots = [q for q in qdiscs if q.root]
        if not roots:
            return Unavailable(f"no root qdisc on {self.device}")
        root = roots[0]
        children = [
            {
                "kind": q.kind,
                "handle": q.handle,
                "parent": q.parent,
                "options": _options(q.kind, q.options),
            }
            for q in qdiscs
            if not q.root
            and q.parent
            and q.parent != _INGRESS_PARENT
            and q.kind not in ("ingress", "clsact")
        ]
        value: dict[str, Any] = {
            "kind": root.kind,
            "handle": root.handle,
            "options": _options(root.kind, root.options),
            "children": children,
        }
        if any(
            "minburst" in node["options"] for node in (value, *children) if node["kind"] == "tbf"
        ):
            # a tbf with a peak rate: tc -j reports its mtu (minburst) but not the rate
            peaks = self._peak_rates(host)
            if peaks is None:
                return Unavailable(
                    f"cannot read the tbf peak rate on {self.device} (tc -d qdisc show)"
                )
            for node in (value, *children):
                if node["kind"] == "tbf" and "minburst" in node["options"]:
                    if node["handle"] not in peaks:
                        return Unavailable(
                            f"tc -d qdisc show shows no peak rate of tbf "
                            f"{node['handle']} on {self.device}"
                        )
                    node["options"]["peakrate"] = peaks[node["handle"]]
        untouched = sorted({q.kind for q in qdiscs if q.kind in ("ingress", "clsact")})
        if untouched:  # shown in plans, never compared nor written
            value["untouched"] = untouched
        if "htb" in {root.kind, *(c["kind"] for c in children)}:
            res = host.query(["tc", "-d", "class", "show", "dev", str(self.device)])
            if not res.ok:
                return Unavailable(res.message())
            value["classes"] = [
                {
                    "kind": c.kind,
                    "classid": c.classid,
                    "parent": c.parent,
                    "options": _class_options(c.options),
                }
                for c in parse_tc_class_text(res.stdout)
                if c.kind == "htb"
            ]
        return value

    def _peak_rates(self, host: Host) -> dict[str, str] | None:
        """Each tbf's peak rate by handle, as ``tc -d qdisc show`` prints it (``200Mbit``)."""
        res = host.query(["tc", "-d", "qdisc", "show", "dev", str(self.device)])
        if not res.ok:
            return None
        try:
            shown = parse_tc_qdisc_text(res.stdout)
        except ParseError:
            return None
        return {
            q.handle: str(q.options["peakrate"])
            for q in shown
            if q.kind == "tbf" and isinstance(q.options.get("peakrate"), str)
        }

    @staticmethod
    def is_default(value: dict[str, Any]) -> bool:
        """Attached by the kernel (handle 0:): deleting the root brings it back."""
        return _major(str(value.get("handle", ""))) == "0"

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        if not isinstance(current, dict) or not isinstance(want, dict):
            return False
        if "maxrate_bps" in want:  # a pacing recommendation
            return _pacing_matches(current, want)
        return _trees_match(current, want) and _classes_match(
            list(current.get("classes", [])), list(want.get("classes", []))
        )

    def show(self, value: Value) -> str:
        if not isinstance(value, dict):
            return super().show(value)
        if "maxrate_bps" in value:
            rate = value["maxrate_bps"]
            cap = f" maxrate {rate / 1e9:g}gbit" if rate else ""
            return f"mq + fq{cap}" if value.get("mq") else f"fq{cap}"
        kids = {c["kind"] for c in value.get("children", [])}
        classes = len(value.get("classes", []))
        shown = f" ({classes} classes)" if classes else ""
        untouched = value.get("untouched") or []
        note = (
            f"; {'/'.join(map(str, untouched))} and filters left as they are" if untouched else ""
        )
        if kids:
            return f"{value['kind']}{shown} + {'/'.join(sorted(kids))}{note}"
        if classes:
            return f"{value['kind']}{shown}{note}"
        opts = " ".join(
            f"{k}={v}"
            for k, v in value.get("options", {}).items()
            if k in ("rate", "burst", "limit", "maxrate")
        )
        return f"{value['kind']} {opts}".strip() + note

    def write(self, host: Host, value: Value) -> None:
        dev = str(self.device)
        if "maxrate_bps" in value:
            self._write_pacing(host, dev, value)
            return
        if self.is_default(value):
            res = host.change(["tc", "qdisc", "del", "dev", dev, "root"])
            if not res.ok and "handle of zero" not in res.stderr and "No such" not in res.stderr:
                raise DtnkitError(f"cannot reset the root qdisc of {dev}", res.message())
            return
        self._write_tree(host, dev, value)

    def _write_tree(self, host: Host, dev: str, value: dict[str, Any]) -> None:
        """Delete the root (and so every qdisc and class under it), then build the tree again
        (:func:`tree_commands`).  Every command is made before the first is run, so a tree
        dtnkit cannot recreate is refused with the host untouched."""
        steps = tree_commands(dev, value, psched_tick(host))
        res = host.change(["tc", "qdisc", "del", "dev", dev, "root"])
        if not res.ok and "handle of zero" not in res.stderr and "No such" not in res.stderr:
            raise DtnkitError(f"cannot reset the root qdisc of {dev}", res.message())
        for what, argv in steps:
            res = host.change(argv)
            if not res.ok:
                raise DtnkitError(f"cannot {what} on {dev}", res.message())

    def validate(self, value: Value) -> str | None:
        return validate_qdisc(value)

    def boot_commands(self, value: Value) -> list[Argv]:
        """Only dtnkit's own pacing is persisted, not an arbitrary qdisc."""
        if not (isinstance(value, dict) and "maxrate_bps" in value):
            return []
        return [absolute(argv) for argv in self.pacing_commands(str(self.device), value)]

    @staticmethod
    def pacing_commands(dev: str, want: dict[str, Any]) -> list[Argv]:
        """tc commands for fq pacing: under each queue of a new mq root, or as the root."""
        rate = int(want["maxrate_bps"])
        fq = ["fq"] + (["maxrate", f"{rate}bit"] if rate else [])
        if not want.get("mq"):
            return [["tc", "qdisc", "replace", "dev", dev, "root", *fq]]
        cmds = [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "mq"]]
        cmds += [
            ["tc", "qdisc", "replace", "dev", dev, "parent", f"1:{queue:x}", *fq]
            for queue in range(1, int(want["queues"]) + 1)
        ]
        return cmds

    def _write_pacing(self, host: Host, dev: str, want: dict[str, Any]) -> None:
        for argv in self.pacing_commands(dev, want):
            res = host.change(argv)
            if not res.ok:
                raise DtnkitError(f"cannot set up fq pacing on {dev}", res.message())


def tree_commands(
    dev: str, value: dict[str, Any], tick: float = DEFAULT_TICK
) -> list[tuple[str, Argv]]:
    """(what, tc argv) that build a recorded tree on a device whose root was deleted: the
    root, then for each qdisc its classes parent first and the qdiscs under them, with the
    recorded handles so that every ``parent`` still names the same place.  Children with
    handle ``0:`` are the ones the kernel attaches by itself (mq's per-queue defaults)."""
    kind, handle = value["kind"], value.get("handle", "") or "1:"
    cmds: list[tuple[str, Argv]] = [
        (
            f"set the root qdisc to {kind}",
            [
                "tc",
                "qdisc",
                "add",
                "dev",
                dev,
                "root",
                "handle",
                handle,
                kind,
                *_qdisc_args(kind, value.get("options", {}), tick),
            ],
        )
    ]
    pending = [c for c in value.get("children", []) if _major(c["handle"]) != "0"]
    defaults = [c for c in value.get("children", []) if _major(c["handle"]) == "0"]
    classes = list(value.get("classes", []))
    majors = [_major(handle)]
    while majors:
        major = majors.pop(0)
        cmds += _class_commands(dev, [c for c in classes if _major(c["classid"]) == major], tick)
        for child in [c for c in pending if _major(c["parent"]) == major]:
            pending.remove(child)
            cmds.append(
                (
                    f"set qdisc {child['kind']} under {child['parent']}",
                    [
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        dev,
                        "parent",
                        child["parent"],
                        "handle",
                        child["handle"],
                        child["kind"],
                        *_qdisc_args(child["kind"], child["options"], tick),
                    ],
                )
            )
            majors.append(_major(child["handle"]))
    if pending:
        raise DtnkitError(
            f"cannot place qdisc {pending[0]['kind']} {pending[0]['handle']} on {dev}",
            f"its parent {pending[0]['parent']} is not in the recorded tree",
            "restore it by hand with tc",
        )
    for child in defaults:  # a kernel default whose kind changed since (default_qdisc)
        if child["kind"] not in ("noqueue", "pfifo_fast"):
            cmds.append(
                (
                    f"set qdisc {child['kind']} under {child['parent']}",
                    [
                        "tc",
                        "qdisc",
                        "replace",
                        "dev",
                        dev,
                        "parent",
                        child["parent"],
                        child["kind"],
                        *_qdisc_args(child["kind"], child["options"], tick),
                    ],
                )
            )
    return cmds


def _class_commands(dev: str, classes: list[dict[str, Any]], tick: float) -> list[tuple[str, Argv]]:
    """tc commands that add the classes of one qdisc, each after its parent class."""
    cmds: list[tuple[str, Argv]] = []
    done: set[str] = set()
    while classes:
        ready = [
            c
            for c in classes
            if c["parent"] is None or c["parent"] in done or _minor(c["parent"]) in ("", "0")
        ]
        if not ready:
            raise DtnkitError(
                f"cannot place class {classes[0]['classid']} on {dev}",
                f"its parent {classes[0]['parent']} is not in the recorded tree",
                "restore it by hand with tc",
            )
        for cls in ready:
            classes.remove(cls)
            parent = cls["parent"] or f"{_major(cls['classid'])}:"
            cmds.append(
                (
                    f"add class {cls['classid']}",
                    [
                        "tc",
                        "class",
                        "add",
                        "dev",
                        dev,
                        "parent",
                        parent,
                        "classid",
                        cls["classid"],
                        cls["kind"],
                        *_class_args(cls["options"], tick),
                    ],
                )
            )
            done.add(cls["classid"])
    return cmds


def _major(handle: str) -> str:
    """The major number of a tc handle or parent: "8001:" -> "8001", ":20" and "0:" -> "0"."""
    major = handle.split(":", 1)[0]
    return major or "0"


def _minor(parent: str) -> str:
    return parent.split(":", 1)[1] if ":" in parent else parent


def _normal(value: dict[str, Any]) -> dict[str, Any]:
    """A qdisc tree as compared: handles and parents as recorded, options without counters,
    children in a fixed order (the kernel's listing order may change); classes apart."""
    return {
        "kind": value.get("kind"),
        "handle": value.get("handle"),
        "options": _options(str(value.get("kind")), dict(value.get("options") or {})),
        "children": sorted(
            (
                str(c.get("parent")),
                str(c.get("handle")),
                str(c.get("kind")),
                sorted(_options(str(c.get("kind")), dict(c.get("options") or {})).items(), key=str),
            )
            for c in value.get("children", [])
        ),
    }


# Options the kernel keeps in another form than tc reports them, and how each is written so
# that tc reports it again (tests/tune/test_qdisc_restore.py checks them with real tc on random
# trees, fq_codel's by its model: this kernel has no fq_codel).
KERNEL_ROUNDED: dict[tuple[str, str], str] = {
    ("tbf", "burst"): "bytes -> 64 ns ticks at the rate's fixed-point multiplier: burst_for "
    "writes the middle of the range of bursts tc shows as the value",
    ("tbf", "minburst"): "the mtu, bytes -> ticks at the peak rate: burst_for at the peak rate",
    ("tbf", "lat"): "derived from the limit, the buffer and (with a peak rate) the mtu: "
    "tbf_buffer_and_limit finds a buffer and limit tc shows as the latency",
    ("tbf", "peakrate"): "not in tc -j: read from tc -d as printed (rounded) and written so",
    ("htb class", "rate"): "printed rounded (123456Kbit): restored as printed",
    ("htb class", "burst"): "whole microseconds -> ticks at the rate: class_burst_for",
    ("fq_codel", "target"): "microseconds -> units of 1024 ns: codel_us_for",
    ("fq_codel", "interval"): "microseconds -> units of 1024 ns: codel_us_for",
    ("fq_codel", "ce_threshold"): "microseconds -> units of 1024 ns: codel_us_for",
}


def _trees_match(current: dict[str, Any], want: dict[str, Any]) -> bool:
    """Trees compare as tc shows them; a tbf with a peak rate tc printed rounded (the exact
    rate cannot be written back) may show its minburst one tick's bytes at the peak rate
    apart, and its latency within 1 us and 0.1 %."""
    a, b = _normal(current), _normal(want)
    if a == b:
        return True
    if {k: v for k, v in a.items() if k != "options"} != {
        k: v for k, v in b.items() if k != "options"
    }:
        return False
    return _peak_close(a["kind"], a["options"], b["options"])


def _peak_close(kind: str, got: dict[str, Any], want: dict[str, Any]) -> bool:
    if kind != "tbf" or not isinstance(want.get("peakrate"), str):
        return False
    loose = ("minburst", "lat")
    if {k: v for k, v in got.items() if k not in loose} != {
        k: v for k, v in want.items() if k not in loose
    }:
        return False
    try:
        prate = _rate_bits(str(want["peakrate"])) / 8
    except DtnkitError:
        return False
    g_min, w_min = int(got.get("minburst", -1)), int(want.get("minburst", -1))
    g_lat, w_lat = int(got.get("lat", -1)), int(want.get("lat", -1))
    return (
        abs(g_min - w_min) <= prate / (DEFAULT_TICK * 1e6) + 1
        and abs(g_lat - w_lat) <= 1 + w_lat / 1000
    )


def _pacing_matches(current: dict[str, Any], want: dict[str, Any]) -> bool:
    fqs = [current] if current["kind"] == "fq" else []
    if current["kind"] == "mq":
        fqs = [c for c in current.get("children", []) if c["kind"] == "fq"]
        if not fqs or len(fqs) != len(current.get("children", [])):
            return False
    if not fqs:
        return False
    rate = int(want["maxrate_bps"])
    for fq in fqs:
        got = int(fq.get("options", {}).get("maxrate", 0) or 0) * 8  # tc -j: bytes/s
        if rate and abs(got - rate) > rate * 0.01:
            return False
    return True


# ---- validation of a qdisc value (snapshot tree or pacing recommendation) ------------------
_QDISC_KIND = re.compile(r"[a-z][a-z0-9_]{0,15}")
_HANDLE = re.compile(r"[0-9a-fA-F]{0,5}:[0-9a-fA-F]{0,5}")
#: options a kind cannot be recreated without
REQUIRED_OPTIONS: dict[str, tuple[str, ...]] = {"tbf": ("rate", "burst")}
#: options the tc arguments are built from: non-negative integers when present
INTEGER_OPTIONS = (
    "rate",
    "burst",
    "lat",
    "limit",
    "flow_limit",
    "quantum",
    "initial_quantum",
    "buckets",
    "maxrate",
    "flows",
    "target",
    "interval",
    "r2q",
    "minburst",
    "memory_limit",
    "drop_batch",
    "ce_threshold",
)
_TC_RATE = re.compile(r"[0-9]{1,20}(\.[0-9]{1,6})?([KMGT]i?)?(bit|bps)")
U64 = 2**64 - 1


def validate_qdisc(value: Value) -> str | None:
    """Why ``value`` is neither a qdisc tree as read nor a pacing recommendation (None: it is)."""
    if not isinstance(value, dict):
        return f"it must be an object, not {type_name(value)}"
    if "maxrate_bps" in value:
        extra = set(value) - {"maxrate_bps", "mq", "queues"}
        if extra:
            return f"unknown fields {sorted(extra)} in a pacing value"
        why = check_int(value["maxrate_bps"], 0, U64) or check_bool(value.get("mq", False))
        if not why and value.get("mq"):
            why = check_int(value.get("queues"), 1, 4096)
        return f"maxrate_bps/mq/queues: {why}" if why else None
    why = _check_node(value, root=True)
    if why:
        return why
    children = value.get("children", [])
    if not isinstance(children, list):
        return f"children must be a list, not {type_name(children)}"
    for i, child in enumerate(children):
        if not isinstance(child, dict):
            return f"children[{i}] must be an object, not {type_name(child)}"
        why = _check_node(child, root=False)
        if why:
            return f"children[{i}]: {why}"
    return None


def _check_node(node: dict[str, Any], *, root: bool) -> str | None:
    if "kind" not in node:
        return "it has no kind"
    why = check_name(node["kind"], _QDISC_KIND, "tbf")
    if why:
        return f"kind: {why}"
    for name in ("handle", "parent"):
        if name in node or (name == "parent" and not root):
            text = node.get(name)
            if not isinstance(text, str) or not _HANDLE.fullmatch(text):
                return f"{name} must be a tc handle such as 1: or :1, not {str(text)[:20]!r}"
    if "options" not in node and not root:
        return "it has no options"
    options = node.get("options", {})
    if not isinstance(options, dict):
        return f"options must be an object, not {type_name(options)}"
    missing = [o for o in REQUIRED_OPTIONS.get(node["kind"], ()) if o not in options]
    if missing:
        return f"a {node['kind']} qdisc needs options {', '.join(missing)}"
    for name in INTEGER_OPTIONS:
        if name in options:
            why = check_int(options[name], 0, U64)
            if why:
                return f"option {name}: {why}"
    if "peakrate" in options and (
        not isinstance(options["peakrate"], str) or not _TC_RATE.fullmatch(options["peakrate"])
    ):
        return (
            f"option peakrate must be a rate as tc prints it (200Mbit), not "
            f"{str(options['peakrate'])[:20]!r}"
        )
    if "bands" in options:
        why = check_int(options["bands"], 2, 16)
        if why:
            return f"option bands: {why}"
    if "priomap" in options:
        priomap = options["priomap"]
        if (
            not isinstance(priomap, list)
            or len(priomap) > 16
            or any(check_int(p, 0, 15) for p in priomap)
        ):
            return "option priomap must be a list of at most 16 bands 0-15"
    if "ecn" in options:
        why = check_bool(options["ecn"])
        if why:
            return f"option ecn: {why}"
    return None
