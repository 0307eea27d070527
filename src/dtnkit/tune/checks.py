"""Audit-only checks: facts worth knowing that dtnkit reports but never changes."""

from __future__ import annotations

from dtnkit.host.facts import Interface, Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.ethtool import parse_ethtool_driver
from dtnkit.host.parsers.proc import parse_cpu_list, parse_proc_interrupts
from dtnkit.tune.tunables import Scope, Tunable, Value


class Check(Tunable):
    kind = "check"
    restorable = False

    def __init__(self, name: str, label: str) -> None:
        super().__init__(f"check/{name}", Scope.HOST, None, label)


class IrqbalanceCheck(Check):
    def __init__(self) -> None:
        super().__init__("irqbalance", "irqbalance")

    def read(self, host: Host) -> Value | Unavailable:
        res = host.query(["pgrep", "-x", "irqbalance"])
        if res.returncode == 127:
            return Unavailable("pgrep is not installed (procps)")
        return "running" if res.ok and res.stdout.strip() else "stopped"


class SmtCheck(Check):
    def __init__(self) -> None:
        super().__init__("smt", "SMT (hyper-threading)")

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


class Ipv6Check(Check):
    def __init__(self) -> None:
        super().__init__("ipv6", "IPv6")

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read("/proc/sys/net/ipv6/conf/all/disable_ipv6")
        if text is None:
            return "absent"
        return "disabled" if text.strip() == "1" else "present"


class IrqAffinityCheck(Check):
    """Are the NIC's queue interrupts on CPUs of the NIC's own NUMA node?"""

    def __init__(self, devices: list[Interface]) -> None:
        super().__init__("irq-affinity", "NIC IRQs on the NIC's NUMA node")
        self.devices = devices

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
