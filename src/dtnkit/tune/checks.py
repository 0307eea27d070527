"""Audit-only checks: facts worth knowing that dtnkit reports but never changes.

Checks are registered by name (:data:`CHECKS`), so a profile's ``check/NAME`` key maps to its
check by lookup; a name no check has is an error.
"""

from __future__ import annotations

from typing import ClassVar

from dtnkit.errors import BadInput
from dtnkit.host.facts import Interface, Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.ethtool import parse_ethtool_driver
from dtnkit.host.parsers.proc import parse_cpu_list, parse_proc_interrupts
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import Scope, Tunable, Value
from dtnkit.tune.profile import ItemSpec


class Check(Tunable):
    kind = "check"
    restorable = False
    name: ClassVar[str]  # the key is check/NAME
    title: ClassVar[str]

    def __init__(self) -> None:
        super().__init__(f"check/{self.name}", Scope.HOST, None, self.title)

    @classmethod
    def from_key(cls, rest: str) -> Tunable | None:
        return None  # checks are built from the audit's context: see check_for_key

    @classmethod
    def for_context(cls, ctx: Context) -> Check:
        return cls()


class IrqbalanceCheck(Check):
    name, title = "irqbalance", "irqbalance"

    def read(self, host: Host) -> Value | Unavailable:
        res = host.query(["pgrep", "-x", "irqbalance"])
        if res.returncode == 127:
            return Unavailable("pgrep is not installed (procps)")
        return "running" if res.ok and res.stdout.strip() else "stopped"


class SmtCheck(Check):
    name, title = "smt", "SMT (hyper-threading)"

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read("/sys/devices/system/cpu/smt/control")
        if text is None:
            return Unavailable("the kernel has no SMT control")
        state = text.strip()
        return {"forceoff": "off", "notimplemented": "notsupported"}.get(state, state)

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        if want == "any":
            return True
        if want == "off":
            return current in ("off", "notsupported")
        return bool(current == want)

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        min_gbit = spec.numbers.get("min_speed_gbit", 0)
        speed = ctx.buffer_speed_mbps or 0
        if speed / 1000 < min_gbit:
            return Want("any", "exact", f"SMT matters at {min_gbit:g}G and up")
        return Want(spec.value, mode, "")


class Ipv6Check(Check):
    name, title = "ipv6", "IPv6"

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read("/proc/sys/net/ipv6/conf/all/disable_ipv6")
        if text is None:
            return "absent"
        return "disabled" if text.strip() == "1" else "present"


class IrqAffinityCheck(Check):
    """Are the NIC's queue interrupts on CPUs of the NIC's own NUMA node?"""

    name, title = "irq-affinity", "NIC IRQs on the NIC's NUMA node"

    def __init__(self, devices: list[Interface]) -> None:
        super().__init__()
        self.devices = devices

    @classmethod
    def for_context(cls, ctx: Context) -> Check:
        return cls([ctx.ifaces[d] for d, _ in ctx.devices])

    def read(self, host: Host) -> Value | Unavailable:
        numa_devs = [d for d in self.devices if d.physical and d.numa_node is not None]
        if not numa_devs:
            return Unavailable("no selected NIC reports a NUMA node (single-node host or VM)")
        text = host.read("/proc/interrupts")
        if text is None:
            return Unavailable("/proc/interrupts is not readable")
        irqs = parse_proc_interrupts(text)
        problems: list[str] = []
        checked = 0
        for dev in numa_devs:
            cpulist = host.read(f"/sys/devices/system/node/node{dev.numa_node}/cpulist")
            if cpulist is None:
                continue
            node_cpus = set(parse_cpu_list(cpulist))
            tags = {dev.name}
            info = host.query(["ethtool", "-i", dev.name])
            if info.ok:
                bus = parse_ethtool_driver(info.stdout).get("bus-info", "")
                if bus:
                    tags.add(bus)
            mine = [i for i in irqs if any(t in i.name for t in tags)]
            off = 0
            for irq in mine:
                aff = host.read(f"/proc/irq/{irq.irq}/smp_affinity_list")
                if aff is not None and not set(parse_cpu_list(aff)) <= node_cpus:
                    off += 1
            checked += len(mine)
            if off:
                problems.append(f"{off} of {len(mine)} IRQs of {dev.name} off NUMA node "
                                f"{dev.numa_node}")
        if not checked:
            return Unavailable("no NIC interrupts found in /proc/interrupts")
        return "; ".join(problems) if problems else "numa-local"


CHECKS: dict[str, type[Check]] = {
    check.name: check for check in (IrqAffinityCheck, IrqbalanceCheck, SmtCheck, Ipv6Check)
}


def check_for_key(key: str, ctx: Context) -> Check:
    """The check a profile's ``check/NAME`` key names; BadInput for a name no check has."""
    prefix, _, name = key.partition("/")
    check = CHECKS.get(name) if prefix == "check" else None
    if check is None:
        raise BadInput(f"unknown check {key!r}",
                       f"checks: {', '.join('check/' + n for n in CHECKS)}", "fix the key")
    return check.for_context(ctx)
