"""``link/DEVICE/mtu`` and ``link/DEVICE/txqueuelen``: read from /sys, set with ``ip link``."""

from __future__ import annotations

from typing import ClassVar

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
from dtnkit.tune.profile import ItemSpec
from dtnkit.tune.status import AuditStatus

IPV6_MIN_MTU = 1280


class LinkTunable(DeviceTunable, CommandTunable):
    kind = "link"
    names = ("mtu", "txqueuelen")
    _files: ClassVar[dict[str, str]] = {"mtu": "mtu", "txqueuelen": "tx_queue_len"}
    # what the kernel takes: MTU from IPv4's minimum to the largest any device has (lo);
    # tx_queue_len is an unsigned 32-bit count (ip link stores -5 as 4294967291)
    bounds: ClassVar[dict[str, tuple[int, int]]] = {"mtu": (68, 65536),
                                                    "txqueuelen": (0, 2**32 - 1)}

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
        if host is not None:
            flag = host.read(f"/proc/sys/net/ipv6/conf/{self.device}/disable_ipv6")
            if flag is None or flag.strip() != "0":
                return None  # no IPv6 on this interface: nothing to lose
        return (f"an MTU below {IPV6_MIN_MTU} (IPv6's minimum, RFC 8200) takes IPv6 off "
                f"{self.device}: its addresses and routes are removed")

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        if self.attr != "mtu":
            return super().literal(ctx, host, spec, mode)
        iface = ctx.ifaces.get(str(self.device))
        if iface and iface.max_mtu is not None and iface.max_mtu < int(spec.value):
            return NoWant(AuditStatus.UNSUPPORTED, f"the NIC's largest MTU is {iface.max_mtu}")
        return Want(spec.value, mode,
                    "applied only with --mtu; the whole path must carry jumbo frames")
