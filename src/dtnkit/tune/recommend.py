"""From a profile and the host's facts to one recommended value per item, with its reason.

Every automatic decision (which speed sizes the buffers, which tier a speed falls in, why a
value is capped) is carried as text in :class:`Want.why` and in :class:`Context.decisions`,
so audit output shows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dtnkit.host.facts import Environment, Interface, KernelCaps
from dtnkit.host.host import Host
from dtnkit.tune.profile import SPEED_TIERS, ItemSpec, Profile
from dtnkit.tune.tunables import (
    GovernorTunable,
    LinkTunable,
    QdiscTunable,
    RingTunable,
    Tunable,
)

INT_MAX = 2147483647


@dataclass(frozen=True)
class Want:
    value: Any
    mode: str
    why: str


@dataclass(frozen=True)
class NoWant:
    status: str  # "unsupported" or "unknown"
    why: str


@dataclass(frozen=True)
class Decision:
    what: str
    value: Any
    why: str


@dataclass
class Context:
    profile: Profile
    rtt_ms: float
    env: Environment
    caps: KernelCaps
    ifaces: dict[str, Interface]
    devices: list[tuple[str, str]]  # selected leaf devices, with how they were reached
    exact: bool = False
    speed_override_mbps: int | None = None
    decisions: list[Decision] = field(default_factory=list)
    buffer_speed_mbps: int | None = None

    def __post_init__(self) -> None:
        self._choose_buffer_speed()

    def _choose_buffer_speed(self) -> None:
        if self.speed_override_mbps:
            self.buffer_speed_mbps = self.speed_override_mbps
            self.decisions.append(Decision("buffer speed", self.speed_override_mbps,
                                           "given with --speed"))
            return
        known = [(self.ifaces[d].speed_mbps or 0, d) for d, _ in self.devices
                 if d in self.ifaces and self.ifaces[d].speed_mbps]
        up = [(s, d) for s, d in known if self.ifaces[d].operstate.upper() in ("UP", "UNKNOWN")]
        pool = up or known
        if not pool:
            self.decisions.append(Decision(
                "buffer speed", None,
                "no selected interface reports its speed; buffer sizes are unknown "
                "(give --speed GBIT)"))
            return
        speed, dev = max(pool)
        self.buffer_speed_mbps = speed
        note = "" if up else " (no selected link is up; using the fastest link anyway)"
        self.decisions.append(Decision(
            "buffer speed", speed,
            f"fastest selected link is {dev} at {speed / 1000:g} Gbit/s; a bond counts by its "
            f"members, since one TCP flow uses one member{note}"))

    def param(self, spec: ItemSpec, name: str) -> float:
        return spec.numbers.get(name, self.profile.params[name])


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
    return _literal(ctx, host, tunable, spec, mode)


def _speed_for(ctx: Context, tunable: Tunable) -> int | None:
    if tunable.device is not None:
        iface = ctx.ifaces.get(tunable.device)
        return iface.speed_mbps if iface and iface.speed_mbps else ctx.speed_override_mbps
    return ctx.buffer_speed_mbps


def _literal(
    ctx: Context, host: Host, tunable: Tunable, spec: ItemSpec, mode: str
) -> Want | NoWant:
    value = spec.value
    why = ""
    if tunable.key == "sysctl/net.ipv4.tcp_congestion_control":
        if value not in ctx.caps.cc_available and value in ctx.caps.cc_modules:
            why = (f"{value} is a kernel module not loaded yet (tcp_{value}); setting the sysctl "
                   "loads it")
        elif value not in ctx.caps.cc_available:
            return NoWant("unsupported", (
                f"{value} is not offered by this kernel (available: "
                f"{' '.join(ctx.caps.cc_available) or 'none'}); load tcp_{value} "
                "(modprobe; EL: kernel-modules-extra)"))
        elif not ctx.env.initial_netns and value not in ctx.caps.cc_allowed:
            return NoWant("unsupported", (
                f"{value} is not in tcp_allowed_congestion_control "
                f"({' '.join(ctx.caps.cc_allowed)}), so this namespace cannot choose it"))
        if value == "bbr":
            why = "; ".join(w for w in (why, "bbr version unknown: v1 and v3 both register as "
                                             "'bbr'") if w)
    if isinstance(tunable, LinkTunable) and tunable.attr == "mtu":
        iface = ctx.ifaces.get(str(tunable.device))
        if iface and iface.max_mtu is not None and iface.max_mtu < int(value):
            return NoWant("unsupported", f"the NIC's largest MTU is {iface.max_mtu}")
        why = "applied only with --mtu; the whole path must carry jumbo frames"
    if isinstance(tunable, GovernorTunable):
        avail = tunable.available(host)
        if avail and value not in avail:
            return NoWant("unsupported", f"{value} is not offered by the cpufreq driver "
                                         f"(available: {' '.join(avail)})")
    if tunable.key == "tuned/profile":
        why = ("applied only with --tuned; TuneD re-applies /etc/sysctl.d on start unless "
               "reapply_sysctl=0, and its own sysctls can undo dtnkit's")
    if tunable.key == "check/smt":
        min_gbit = spec.numbers.get("min_speed_gbit", 0)
        speed = ctx.buffer_speed_mbps or 0
        if speed / 1000 < min_gbit:
            return Want("any", "exact", f"SMT matters at {min_gbit:g}G and up")
    return Want(value, mode, why)


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
