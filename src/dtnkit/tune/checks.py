"""Audit-only checks: facts worth knowing that dtnkit reports but never changes.

Checks are registered by name (:data:`CHECKS`), so a profile's ``check/NAME`` key maps to its
check by lookup; a name no check has is an error.
"""

from __future__ import annotations

import ipaddress
from typing import ClassVar

from dtnkit.errors import BadInput
from dtnkit.host import facts
from dtnkit.host.facts import Interface, Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.proc import parse_cpu_list, parse_proc_interrupts
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import Scope, Tunable, Value
from dtnkit.tune.profile import ItemSpec


class AuditOnlyCheck(Tunable):
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
    def for_context(cls, ctx: Context) -> AuditOnlyCheck:
        return cls()


class IrqbalanceCheck(AuditOnlyCheck):
    name, title = "irqbalance", "irqbalance"

    def read(self, host: Host) -> Value | Unavailable:
        running = host.process_running("irqbalance")
        if running is not None:
            return "running" if running else "stopped"
        res = host.query(["pgrep", "-x", "irqbalance"])
        if res.returncode == 127:
            return Unavailable("pgrep is not installed (procps)")
        return "running" if res.ok and res.stdout.strip() else "stopped"


class SmtCheck(AuditOnlyCheck):
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


class Ipv6Check(AuditOnlyCheck):
    """Dual stack for real: a global IPv6 address on a data interface and an IPv6 default route.

    ``disable_ipv6 = 0`` alone proves nothing: every link gets a link-local ``fe80::`` address,
    which no remote host can reach.  The address may sit on a bond or VLAN above the NIC.
    """

    name, title = "ipv6", "IPv6"

    def __init__(self, stack: list[str]) -> None:
        super().__init__()
        self.stack = stack

    @classmethod
    def for_context(cls, ctx: Context) -> AuditOnlyCheck:
        return cls([d for d, _ in facts.link_stack(ctx.ifaces, list(ctx.devices))])

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read("/proc/sys/net/ipv6/conf/all/disable_ipv6")
        if text is None:
            return "absent"
        if text.strip() == "1":
            return "disabled"
        addrs = facts.addresses(host, "-6")
        if isinstance(addrs, Unavailable):
            return addrs
        routes = facts.default_routes(host, "-6")
        if isinstance(routes, Unavailable):
            return routes
        mine = set(self.stack)
        global_on = sorted(
            {
                a.ifname
                for a in addrs
                if a.family == "inet6"
                and a.scope == "global"
                and a.ifname in mine
                and not unique_local(a.local)
            }
        )
        routed = sorted({d for r in routes for d in r.devs if d in mine})
        problems: list[str] = []
        if not global_on:
            where = ", ".join(self.stack) or "no data interface"
            ula = any(
                a.ifname in mine and a.scope == "global" and unique_local(a.local) for a in addrs
            )
            local = any(a.ifname in mine and a.scope == "link" for a in addrs)
            problems.append(
                f"no global IPv6 address on {where}"
                + (
                    " (unique-local fc00::/7 only: not reachable from other sites)"
                    if ula
                    else " (link-local only)"
                    if local
                    else ""
                )
            )
        if not routed:
            others = sorted({d for r in routes for d in r.devs})
            problems.append(
                "no IPv6 default route"
                + (f" on a data interface (only via {', '.join(others)})" if others else "")
            )
        return "; ".join(problems) if problems else "present"


UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")


def unique_local(address: str) -> bool:
    """An address of fc00::/7 (RFC 4193): the kernel calls its scope global, but no other site
    routes it.  ``address`` may carry a zone (``%eth0``); text that is no IPv6 address is not."""
    try:
        return ipaddress.IPv6Address(address.split("%")[0]) in UNIQUE_LOCAL
    except ValueError:
        return False


class IommuCheck(AuditOnlyCheck):
    """``iommu=pt`` on the kernel command line: at 100G an IOMMU translating every DMA costs
    throughput (ESnet fasterdata 100G page)."""

    name, title = "iommu", "iommu=pt on the kernel command line"

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read("/proc/cmdline")
        if text is None:
            return Unavailable("/proc/cmdline is not readable")
        values = [w.partition("=")[2] for w in text.split() if w.startswith("iommu=")]
        return values[-1] if values else "not set"

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        return want == "any" or bool(current == want)

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        min_gbit = spec.numbers.get("min_speed_gbit", 0)
        speed = ctx.buffer_speed_mbps or 0
        if speed / 1000 < min_gbit:
            return Want("any", "exact", f"iommu=pt matters at {min_gbit:g}G and up")
        return Want(spec.value, mode, "add iommu=pt to the kernel command line (GRUB) and reboot")


HASHING_MODES = ("802.3ad", "balance-xor", "balance-tlb", "balance-alb")


class BondHashCheck(AuditOnlyCheck):
    """A bond that spreads flows by hash should hash on layer 3+4, or every flow between two
    hosts takes one member (layer2 hashes MAC addresses only)."""

    name, title = "bond-hash", "bond xmit_hash_policy"

    def __init__(self, bonds: list[str]) -> None:
        super().__init__()
        self.bonds = bonds

    @classmethod
    def for_context(cls, ctx: Context) -> AuditOnlyCheck:
        stack = facts.link_stack(ctx.ifaces, list(ctx.devices))
        return cls([d for d, _ in stack if ctx.ifaces[d].kind == "bond"])

    def read(self, host: Host) -> Value | Unavailable:
        if not self.bonds:
            return "no bond"
        wrong: list[str] = []
        for bond in self.bonds:
            mode, policy = self._bond(host, bond)
            if mode is None or policy is None:
                return Unavailable(
                    f"cannot read {bond}'s mode and hash policy "
                    f"(/sys/class/net/{bond}/bonding, /proc/net/bonding/{bond})"
                )
            if mode in HASHING_MODES and policy != "layer3+4":
                wrong.append(f"{bond}: {policy} ({mode})")
        return "; ".join(wrong) if wrong else "layer3+4"

    @staticmethod
    def _bond(host: Host, bond: str) -> tuple[str | None, str | None]:
        base = f"/sys/class/net/{bond}/bonding"
        mode, policy = host.read(f"{base}/mode"), host.read(f"{base}/xmit_hash_policy")
        if mode is not None and policy is not None:
            return mode.split()[0], policy.split()[0]
        text = host.read(f"/proc/net/bonding/{bond}")
        if text is None:
            return None, None
        found: dict[str, str] = {}
        for line in text.splitlines():
            key, _, value = line.partition(":")
            found.setdefault(key.strip(), value.strip())
        mode_text = found.get("Bonding Mode", "")
        names = {
            "IEEE 802.3ad Dynamic link aggregation": "802.3ad",
            "load balancing (xor)": "balance-xor",
            "transmit load balancing": "balance-tlb",
            "adaptive load balancing": "balance-alb",
        }
        policy_text = found.get("Transmit Hash Policy")
        return (
            names.get(mode_text, mode_text or None),
            policy_text.split()[0] if policy_text else "n/a",
        )

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        return current in (want, "no bond")


class IrqAffinityCheck(AuditOnlyCheck):
    """Are the NIC's queue interrupts on CPUs of the NIC's own NUMA node?"""

    name, title = "irq-affinity", "NIC IRQs on the NIC's NUMA node"

    def __init__(self, devices: list[Interface]) -> None:
        super().__init__()
        self.devices = devices

    @classmethod
    def for_context(cls, ctx: Context) -> AuditOnlyCheck:
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
            bus = (facts.driver_info(host, dev.name) or {}).get("bus-info", "")
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
                problems.append(
                    f"{off} of {len(mine)} IRQs of {dev.name} off NUMA node {dev.numa_node}"
                )
        if not checked:
            return Unavailable("no NIC interrupts found in /proc/interrupts")
        return "; ".join(problems) if problems else "numa-local"


CHECKS: dict[str, type[AuditOnlyCheck]] = {
    check.name: check
    for check in (IrqAffinityCheck, IrqbalanceCheck, SmtCheck, Ipv6Check, IommuCheck, BondHashCheck)
}


def check_for_key(key: str, ctx: Context) -> AuditOnlyCheck:
    """The check a profile's ``check/NAME`` key names; BadInput for a name no check has."""
    prefix, _, name = key.partition("/")
    check = CHECKS.get(name) if prefix == "check" else None
    if check is None:
        raise BadInput(
            f"unknown check {key!r}",
            f"checks: {', '.join('check/' + n for n in CHECKS)}",
            "fix the key",
        )
    return check.for_context(ctx)
