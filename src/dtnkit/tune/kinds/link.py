"""``link/DEVICE/mtu`` and ``link/DEVICE/txqueuelen``: read from /sys, set with ``ip link``."""

from __future__ import annotations

from typing import ClassVar

from dtnkit.host import facts
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import (
    Argv,
    CommandTunable,
    DeviceTunable,
    Scope,
    Tunable,
    Value,
    check_int,
)
from dtnkit.tune.kinds.ipv6 import IPV6_MIN_MTU, Ipv6Tunable
from dtnkit.tune.profile import ItemSpec
from dtnkit.tune.status import AuditStatus


class LinkTunable(DeviceTunable, CommandTunable):
    kind = "link"
    names = ("mtu", "txqueuelen")
    _files: ClassVar[dict[str, str]] = {"mtu": "mtu", "txqueuelen": "tx_queue_len"}
    # what the kernel takes: MTU from IPv4's minimum to the largest any device has (lo);
    # tx_queue_len is an unsigned 32-bit count (ip link stores -5 as 4294967291)
    bounds: ClassVar[dict[str, tuple[int, int]]] = {
        "mtu": (68, 65536),
        "txqueuelen": (0, 2**32 - 1),
    }

    def __init__(self, device: str, attr: str) -> None:
        if attr not in self._files:
            raise ValueError(attr)
        super().__init__(f"link/{device}/{attr}", Scope.INTERFACE, device, attr)
        self.attr = attr

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device, name)

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read(f"/sys/class/net/{self.device}/{self._files[self.attr]}")
        if text is None:
            return Unavailable(f"no interface {self.device}")
        return int(text.strip())

    def commands(self, value: Value) -> list[Argv]:
        return [["ip", "link", "set", "dev", str(self.device), self.attr, str(value)]]

    def failure(self, value: Value) -> str:
        return f"cannot set {self.attr} {value} on {self.device}"

    def validate(self, value: Value) -> str | None:
        return check_int(value, *self.bounds[self.attr])

    def unsafe(self, value: Value, host: Host | None = None) -> str | None:
        if self.attr != "mtu" or not isinstance(value, int) or value >= IPV6_MIN_MTU:
            return None
        if host is not None and not self._ipv6_runs(host):
            return None  # no IPv6 on this interface to cut (its settings: see drops)
        return (
            f"an MTU below {IPV6_MIN_MTU} (IPv6's minimum, RFC 8200) takes IPv6 off "
            f"{self.device}: its addresses and routes are removed"
        )

    def _ipv6_runs(self, host: Host) -> bool:
        flag = host.read(f"/proc/sys/net/ipv6/conf/{self.device}/disable_ipv6")
        return flag is not None and flag.strip() == "0"

    def drops(self, value: Value, host: Host) -> list[Tunable]:
        """An MTU below 1280: the interface's IPv6 settings, addresses and routes, which the
        kernel does not bring back with the MTU (it makes IPv6 anew from
        ``net.ipv6.conf.default``: on again where it was disabled, with only a link-local
        address)."""
        if self.attr != "mtu" or not isinstance(value, int) or value >= IPV6_MIN_MTU:
            return []
        if not host.exists(f"/proc/sys/net/ipv6/conf/{self.device}"):
            return []  # no IPv6 state on it now
        return [Ipv6Tunable(str(self.device), name) for name in ("conf", "addresses", "routes")]

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        if self.attr != "mtu":
            return super().literal(ctx, host, spec, mode)
        iface = ctx.ifaces.get(str(self.device))
        if iface and iface.max_mtu is not None and iface.max_mtu < int(spec.value):
            return NoWant(AuditStatus.UNSUPPORTED, f"the NIC's largest MTU is {iface.max_mtu}")
        held = self._bridge_held(ctx, int(spec.value), mode)
        if held is not None:
            return held
        return Want(
            spec.value, mode, "applied only with --mtu; the whole path must carry jumbo frames"
        )

    def _bridge_held(self, ctx: Context, value: int, mode: str) -> NoWant | None:
        """A bridge whose MTU follows its ports' (the smallest of them) and would not reach
        ``value`` through the ports apply sets: written by hand it would stop following them
        for good (the kernel keeps a bridge MTU set by hand until the bridge is re-created),
        which restore could not undo, so it is left undecided until every port is selected."""
        bridge = ctx.ifaces.get(str(self.device))
        if bridge is None or bridge.kind != "bridge":
            return None
        ports = [ctx.ifaces[p] for p in bridge.members if p in ctx.ifaces]
        if not ports or bridge.mtu != min(p.mtu for p in ports):
            return None  # no ports to follow, or set by hand already
        stack = {d for d, _ in facts.link_stack(ctx.ifaces, list(ctx.devices))}

        def after(mtu: int) -> int:
            return max(mtu, value) if mode == "raise" else value

        if min(after(p.mtu) if p.name in stack else p.mtu for p in ports) == after(bridge.mtu):
            return None  # the ports take it there: the bridge follows
        held = sorted((p for p in ports if p.name not in stack), key=lambda p: p.mtu)
        names = ", ".join(f"{p.name} ({p.mtu})" for p in held)
        return NoWant(
            AuditStatus.UNKNOWN,
            (
                f"{bridge.name} follows its ports' MTU, and {names} would hold it where it is: "
                "apply sets only the selected interfaces, and a bridge MTU set by hand stops "
                "following its ports until the bridge is re-created, which restore cannot undo; "
                f"select every port (--iface {bridge.name})"
            ),
            give=f"--iface {bridge.name}",
        )
