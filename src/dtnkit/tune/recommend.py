"""From a profile and the host's facts to one recommended value per item, with its reason.

Every automatic decision (which speed sizes the buffers, which tier a speed falls in, why a
value is capped) is carried as text in :class:`Want.why` and in :class:`Context.decisions`,
so audit output shows it.  A literal value goes through its kind's own hook
(:meth:`Tunable.literal`) for the special cases (a congestion control the kernel lacks, an MTU
above the NIC's largest, ...).
"""

from __future__ import annotations

import math
from typing import Any

from dtnkit.host.host import Host
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import Tunable
from dtnkit.tune.kinds.ethtool import RingTunable
from dtnkit.tune.kinds.qdisc import QdiscTunable
from dtnkit.tune.profile import SPEED_TIERS, ItemSpec

INT_MAX = 2147483647


def tier_for(mbps: int) -> tuple[int, str]:
    """The speed tier (Gbit/s) whose values apply to a link of ``mbps``, and a note."""
    gbit = mbps / 1000
    for tier in SPEED_TIERS:
        if gbit <= tier:
            if gbit < SPEED_TIERS[0]:
                return tier, f"{gbit:g}G is below the smallest tier; using the 10G values"
            note = "" if gbit == tier else f"{gbit:g}G uses the {tier}G tier (next one up)"
            return tier, note
    return SPEED_TIERS[-1], f"{gbit:g}G is above the largest tier; using the 400G values"


def _pow2(n: float) -> int:
    """The smallest power of two >= n."""
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def _pow2_floor(n: float) -> int:
    """The largest power of two <= n."""
    return 1 << max(0, math.floor(math.log2(max(n, 1))))


def _bdp_bytes(ctx: Context, spec: ItemSpec, scale: float) -> tuple[int, str] | NoWant:
    speed = ctx.buffer_speed_mbps
    if speed is None:
        return NoWant("unknown", "link speed unknown, so the bandwidth-delay product is too "
                                 "(give --speed GBIT)")
    bdp = speed * 1e6 / 8 * ctx.rtt_ms / 1000
    mult = ctx.param(spec, "bdp_multiplier")
    raw = _pow2(bdp * mult * scale)
    why = (f"BDP {speed / 1000:g} Gbit/s x {ctx.rtt_ms:g} ms = {bdp / 2**20:.0f} MiB, "
           f"x{mult:g}{f' x{scale:g}' if scale != 1 else ''} -> {raw / 2**20:.0f} MiB")
    floor = int(spec.numbers.get("floor", 0))
    ceiling = int(spec.numbers.get("ceiling", INT_MAX))
    ceiling = min(ceiling, INT_MAX)
    value = max(raw, floor)
    if value > raw:
        why += f"; raised to the floor {floor}"
    ram = ctx.env.ram_bytes
    if ram:
        ram_cap = _pow2_floor(ram * ctx.param(spec, "ram_fraction"))
        if value > ram_cap:
            value = ram_cap
            why += (f"; capped at {ctx.param(spec, 'ram_fraction'):g} of RAM "
                    f"({ram_cap / 2**20:.0f} MiB)")
    if value > ceiling:
        value = ceiling
        why += f"; clamped at {ceiling}"
    return value, why


def recommend(ctx: Context, host: Host, tunable: Tunable, spec: ItemSpec) -> Want | NoWant:
    mode = "exact" if ctx.exact else spec.mode
    if spec.requires:
        present = ctx.caps.qdiscs.get(spec.requires)
        if present is False:
            return NoWant("unsupported", (
                f"the kernel has no {spec.requires} qdisc ({ctx.caps.qdisc_evidence}): per-flow "
                "pacing is not available here. tbf would only cap the whole interface, which "
                "is not pacing"))
        if present is None:
            return NoWant("unknown", f"cannot tell whether the kernel has {spec.requires}: "
                                     f"{ctx.caps.qdisc_evidence}")
    if spec.rule is not None:
        return _rule(ctx, host, tunable, spec, mode)
    if spec.tiers is not None:
        speed = _speed_for(ctx, tunable)
        if speed is None:
            return NoWant("unknown", "link speed unknown, so the speed tier is too "
                                     "(give --speed GBIT)")
        tier, note = tier_for(speed)
        if tier not in spec.tiers:
            return NoWant("unknown", f"the profile has no value for the {tier}G tier")
        why = f"{tier}G tier" + (f" ({note})" if note else "")
        return Want(spec.tiers[tier], mode, why)
    return tunable.literal(ctx, host, spec, mode)


def _speed_for(ctx: Context, tunable: Tunable) -> int | None:
    if tunable.device is not None:
        iface = ctx.ifaces.get(tunable.device)
        return iface.speed_mbps if iface and iface.speed_mbps else ctx.speed_override_mbps
    return ctx.buffer_speed_mbps


def _rule(
    ctx: Context, host: Host, tunable: Tunable, spec: ItemSpec, mode: str
) -> Want | NoWant:
    if spec.rule == "bdp":
        got = _bdp_bytes(ctx, spec, spec.numbers.get("scale", 1.0))
        if isinstance(got, NoWant):
            return got
        return Want(got[0], mode, got[1])
    if spec.rule == "tcp_mem":
        got = _bdp_bytes(ctx, spec, spec.numbers.get("scale", 1.0))
        if isinstance(got, NoWant):
            return got
        lo = int(spec.numbers.get("min", 4096))
        default = int(spec.numbers.get("default", 131072))
        return Want(f"{lo} {default} {got[0]}", mode, got[1])
    if spec.rule == "hw_max":
        if not isinstance(tunable, RingTunable):
            return NoWant("unknown", "hw_max applies to rings only")
        limit = tunable.hw_max(host)
        if limit is None:
            current = tunable.read(host)
            reason = getattr(current, "reason", "the driver reports no maximum")
            return NoWant("unsupported", reason)
        return Want(limit, mode, f"hardware maximum {limit}")
    if spec.rule == "fq_pacing":
        if not isinstance(tunable, QdiscTunable):
            return NoWant("unknown", "fq_pacing applies to root qdiscs only")
        iface = ctx.ifaces.get(str(tunable.device))
        fraction = ctx.param(spec, "maxrate_fraction")
        rate = 0
        why = "fq without a per-flow cap"
        if fraction > 0:
            speed = _speed_for(ctx, tunable)
            if speed is None:
                return NoWant("unknown", "link speed unknown, so maxrate is too")
            step = ctx.profile.params["maxrate_round_mbit"] * 1e6
            rate = int(math.ceil(speed * 1e6 * fraction / step) * step)
            why = f"fq maxrate {fraction:g} x {speed / 1000:g} Gbit/s"
        queues = iface.num_tx_queues if iface and iface.num_tx_queues else 1
        current = tunable.read(host)
        if isinstance(current, dict) and current.get("kind") == "mq" and current["children"]:
            queues = len(current["children"])  # the queues the kernel shows under mq now
        want: dict[str, Any] = {"maxrate_bps": rate, "mq": queues > 1, "queues": queues}
        if queues > 1:
            why += f"; mq kept with fq on each of {queues} queues"
        return Want(want, "exact", why)
    return NoWant("unknown", f"rule {spec.rule} is not implemented")
