"""From a profile and the host's facts to one recommended value per item, with its reason.

Every automatic decision (which speed sizes the buffers, which tier a speed falls in, why a
value is capped) is carried as text in :class:`Want.why` and in :class:`Context.decisions`,
so audit output shows it.  A literal value goes through its kind's own hook
(:meth:`Tunable.literal`) for the special cases (a congestion control the kernel lacks, an MTU
above the NIC's largest, ...).
"""

from __future__ import annotations

import math
import os
from typing import Any

from dtnkit.host.host import Host
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import Tunable
from dtnkit.tune.kinds.ethtool import RingTunable
from dtnkit.tune.kinds.qdisc import QdiscTunable
from dtnkit.tune.profile import SPEED_TIERS, ItemSpec
from dtnkit.tune.status import AuditStatus

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


SPEED_HINT = "give --speed, e.g. --speed 25gbit (ethtool's Mb/s: --speed 25000mbit)"


def _speed_unknown(what: str) -> NoWant:
    return NoWant(
        AuditStatus.UNKNOWN, f"link speed unknown, so {what} ({SPEED_HINT})", give="--speed"
    )


def _bdp_bytes(ctx: Context, spec: ItemSpec, scale: float) -> tuple[int, str] | NoWant:
    speed = ctx.buffer_speed_mbps
    if speed is None:
        return _speed_unknown("the bandwidth-delay product is too")
    bdp = speed * 1e6 / 8 * ctx.rtt_ms / 1000
    mult = ctx.param(spec, "bdp_multiplier")
    raw = _pow2(bdp * mult * scale)
    why = (
        f"BDP {speed / 1000:g} Gbit/s x {ctx.rtt_ms:g} ms = {bdp / 2**20:.0f} MiB, "
        f"x{mult:g}{f' x{scale:g}' if scale != 1 else ''} -> {raw / 2**20:.0f} MiB"
    )
    floor = int(spec.numbers.get("floor", 0))
    ceiling = int(spec.numbers.get("ceiling", INT_MAX))
    ceiling = min(ceiling, INT_MAX)
    value = max(raw, floor)
    if value > raw:
        why += f"; raised to the floor {floor}"
    ram = ctx.ram_bytes
    if ram:
        # the share itself, not rounded down to a power of two: that halved the cap of every
        # host whose RAM is not a power of two, or whose MemTotal rounds just below one
        fraction = ctx.param(spec, "ram_fraction")
        ram_cap = int(ram * fraction)
        if value > ram_cap:
            value = ram_cap
            why += (
                f"; capped at {fraction:g} of RAM ({ram / 2**30:g} GiB: {ram_cap / 2**20:.0f} MiB)"
            )
    if value > ceiling:
        value = ceiling
        why += f"; clamped at {ceiling}"
    return value, why


def recommend(ctx: Context, host: Host, tunable: Tunable, spec: ItemSpec) -> Want | NoWant:
    mode = "exact" if ctx.exact else spec.mode
    if spec.requires:
        present = ctx.caps.qdiscs.get(spec.requires)
        if present is False:
            return NoWant(
                AuditStatus.UNSUPPORTED,
                (
                    f"the kernel has no {spec.requires} qdisc ({ctx.caps.qdisc_evidence}): "
                    "per-flow pacing is not available here. tbf would only cap the whole "
                    "interface, which is not pacing"
                ),
            )
        if present is None:
            return NoWant(
                AuditStatus.UNKNOWN,
                f"cannot tell whether the kernel has {spec.requires}: {ctx.caps.qdisc_evidence}",
            )
    if spec.rule is not None:
        return _rule(ctx, host, tunable, spec, mode)
    if spec.tiers is not None:
        speed = ctx.speed_for(tunable.device)
        if speed is None:
            return _speed_unknown("the speed tier is too")
        tier, note = tier_for(speed)
        if tier not in spec.tiers:
            return NoWant(AuditStatus.UNKNOWN, f"the profile has no value for the {tier}G tier")
        why = f"{tier}G tier" + (f" ({note})" if note else "")
        if ctx.speed_override_mbps:
            why += " from --speed"
        return Want(spec.tiers[tier], mode, why)
    return tunable.literal(ctx, host, spec, mode)


def _rule(ctx: Context, host: Host, tunable: Tunable, spec: ItemSpec, mode: str) -> Want | NoWant:
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
    if spec.rule == "tcp_mem_pages":
        return _tcp_mem_pages(ctx, host, spec, mode)
    if spec.rule == "hw_max":
        if not isinstance(tunable, RingTunable):
            return NoWant(AuditStatus.UNKNOWN, "hw_max applies to rings only")
        limit = tunable.hw_max(host)
        if limit is None:
            current = tunable.read(host)
            reason = getattr(current, "reason", "the driver reports no maximum")
            return NoWant(AuditStatus.UNSUPPORTED, reason)
        return Want(limit, mode, f"hardware maximum {limit}")
    if spec.rule == "fq_pacing":
        if not isinstance(tunable, QdiscTunable):
            return NoWant(AuditStatus.UNKNOWN, "fq_pacing applies to root qdiscs only")
        iface = ctx.ifaces.get(str(tunable.device))
        fraction = ctx.param(spec, "maxrate_fraction")
        rate = 0
        why = "fq without a per-flow cap"
        if fraction > 0:
            speed = ctx.speed_for(tunable.device)
            if speed is None:
                return _speed_unknown("maxrate is too")
            step = ctx.profile.params["maxrate_round_mbit"] * 1e6
            rate = int(math.ceil(speed * 1e6 * fraction / step) * step)
            why = f"fq maxrate {fraction:g} x {speed / 1000:g} Gbit/s"
            if ctx.speed_override_mbps:
                why += " (--speed)"
        queues = iface.num_tx_queues if iface and iface.num_tx_queues else 1
        current = tunable.read(host)
        if isinstance(current, dict) and current.get("kind") == "mq" and current["children"]:
            queues = len(current["children"])  # the queues the kernel shows under mq now
        want: dict[str, Any] = {"maxrate_bps": rate, "mq": queues > 1, "queues": queues}
        if queues > 1:
            why += f"; mq kept with fq on each of {queues} queues"
        return Want(want, "exact", why)
    return NoWant(AuditStatus.UNKNOWN, f"rule {spec.rule} is not implemented")


SOCKET_BUFFERS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
TCP_MEM = "net.ipv4.tcp_mem"


def _last_int(text: object) -> int | None:
    parts = str(text).split() if text is not None else []
    try:
        return int(parts[-1]) if parts else None
    except ValueError:
        return None


def _page_size(host: Host) -> int:
    """tcp_mem counts pages; a captured tree is an x86_64 host (4 KiB pages)."""
    return os.sysconf("SC_PAGE_SIZE") if host.is_live else 4096


def _full_socket(ctx: Context, host: Host) -> tuple[int, str] | NoWant:
    """The most one TCP socket may hold after apply: the larger tcp_rmem / tcp_wmem max, the
    profile's or the host's own when larger (raise-only keeps it)."""
    best, name = 0, ""
    for sysctl in SOCKET_BUFFERS:
        sizes: list[int] = []
        spec = ctx.profile.items.get(f"sysctl/{sysctl}")
        if spec is not None and spec.rule == "tcp_mem":
            got = _bdp_bytes(ctx, spec, spec.numbers.get("scale", 1.0))
            if isinstance(got, NoWant):
                return NoWant(got.status, f"the socket buffers are unknown: {got.why}", got.give)
            sizes.append(got[0])
        elif spec is not None and (wanted := _last_int(spec.value)) is not None:
            sizes.append(wanted)
        if (current := _last_int(host.read(Host.sysctl_path(sysctl)))) is not None:
            sizes.append(current)
        if sizes and max(sizes) > best:
            best, name = max(sizes), sysctl
    if not best:
        return NoWant(
            AuditStatus.UNKNOWN, "neither the profile nor the host gives tcp_rmem/tcp_wmem"
        )
    return best, name


def _tcp_mem_pages(ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
    """net.ipv4.tcp_mem (pages, host-wide): room for ``full_sockets`` full-size sockets before
    memory pressure, in the kernel's own proportions (tcp_init_mem: low 3/4, max 3/2 of the
    pressure threshold), the ceiling at most ``max_ram_fraction`` of RAM."""
    got = _full_socket(ctx, host)
    if isinstance(got, NoWant):
        return got
    socket, name = got
    page = _page_size(host)
    full = int(spec.numbers.get("full_sockets", 4))
    pressure = -(-full * socket // page)
    high = pressure * 3 // 2
    why = (
        f"a full-size socket holds {socket / 2**20:g} MiB ({name} max); want {full} of them "
        f"before memory pressure (pressure {pressure} pages of {page} B, low and max in the "
        "kernel's 3/4 and 3/2 proportions)"
    )
    fraction = spec.numbers.get("max_ram_fraction", 0.5)
    if ctx.ram_bytes and high * page > ctx.ram_bytes * fraction:
        high = int(ctx.ram_bytes * fraction) // page
        pressure = high * 2 // 3
        why += (
            f"; capped: max at {fraction:g} of RAM ({ctx.ram_bytes / 2**30:g} GiB), so only "
            f"{pressure * page // socket} fit before pressure"
        )
    now = [int(x) for x in (host.read(Host.sysctl_path(TCP_MEM)) or "").split() if x.isdigit()]
    if len(now) == 3:
        why += (
            f"; now {now[1] * page // socket} fit before pressure and "
            f"{now[2] * page // socket} under the ceiling (tcp_mem max x page / socket)"
        )
    return Want(f"{pressure * 3 // 4} {pressure} {high}", mode, why)
