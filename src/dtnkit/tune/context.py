"""What a recommendation is made from (:class:`Context`) and what it gives (:class:`Want`,
:class:`NoWant`), apart from the rules that compute it, so each kind's own hook can use them.

Every automatic decision (which speed sizes the buffers, why a value is capped) is carried as
text in :class:`Want.why` and in :class:`Context.decisions`, so audit output shows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dtnkit.host.facts import Interface, KernelCaps, Placement
from dtnkit.tune.profile import ItemSpec, Profile
from dtnkit.tune.status import AuditStatus


def nominal_ram(mem_total: int) -> int:
    """The installed memory size a ``MemTotal`` of ``mem_total`` bytes comes from.

    MemTotal is "total usable RAM (i.e. physical RAM minus a few reserved bits and the kernel
    binary code)" (kernel Documentation/filesystems/proc.rst): the installed size less the
    firmware's reserved ranges, the kernel image, crashkernel and the page structures (64 bytes
    per 4 KiB page, 1.6 %), so a 16 GiB host shows about 15.6 GiB.  Installed sizes are
    multiples of 1/8 of their power of two (8, 12, 16, 24, 40, 48, 64, 96, 192, 288 GiB ...),
    so rounding MemTotal up to the next multiple of 1/8 of its own power of two gives back the
    installed size whenever less than 6.25 % is reserved, and never adds more than 12.5 %.
    """
    if mem_total <= 0:
        return mem_total
    step = max(1 << (math.floor(math.log2(mem_total)) - 3), 1)
    return -(-mem_total // step) * step


@dataclass(frozen=True, slots=True)
class Want:
    value: Any
    mode: str
    why: str


@dataclass(frozen=True, slots=True)
class NoWant:
    status: AuditStatus  # UNSUPPORTED or UNKNOWN
    why: str
    give: str = ""  # for "unknown": the option that would decide it, e.g. "--speed"


@dataclass(frozen=True, slots=True)
class Decision:
    what: str
    value: Any
    why: str


@dataclass
class Context:
    """What a recommendation depends on: profile, RTT, environment, kernel, interfaces."""

    profile: Profile
    rtt_ms: float
    env: Placement
    caps: KernelCaps
    ifaces: dict[str, Interface]
    devices: list[tuple[str, str]]  # selected leaf devices, with how they were reached
    exact: bool = False
    speed_override_mbps: int | None = None
    decisions: list[Decision] = field(default_factory=list)
    buffer_speed_mbps: int | None = None
    ram_bytes: int | None = None  # the nominal (installed) size; see nominal_ram

    def __post_init__(self) -> None:
        self._choose_buffer_speed()
        self._choose_ram()

    def _choose_ram(self) -> None:
        total = self.env.ram_bytes
        if not total:
            return
        self.ram_bytes = nominal_ram(total)
        self.decisions.append(
            Decision(
                "RAM",
                self.ram_bytes,
                f"MemTotal {total / 2**30:.2f} GiB is the installed size less what firmware "
                f"and the kernel reserve; sized as {self.ram_bytes / 2**30:g} GiB (rounded up "
                "to 1/8 of its power of two)",
            )
        )

    def speed_for(self, device: str | None) -> int | None:
        """The speed (Mbit/s) that sizes an item of ``device`` (None: a host-wide item).

        ``--speed`` wins everywhere, so every speed-dependent item follows it; otherwise an
        interface's own reported speed, and for host-wide items the buffer speed.
        """
        if self.speed_override_mbps:
            return self.speed_override_mbps
        if device is not None:
            iface = self.ifaces.get(device)
            return iface.speed_mbps if iface and iface.speed_mbps else None
        return self.buffer_speed_mbps

    def _choose_buffer_speed(self) -> None:
        if self.speed_override_mbps:
            self.buffer_speed_mbps = self.speed_override_mbps
            self.decisions.append(
                Decision(
                    "speed",
                    self.speed_override_mbps,
                    "given with --speed: it sizes every speed-dependent item (buffers, tiers, "
                    "pacing) on every selected interface, whatever the NICs report",
                )
            )
            return
        known = [
            (self.ifaces[d].speed_mbps or 0, d)
            for d, _ in self.devices
            if d in self.ifaces and self.ifaces[d].speed_mbps
        ]
        up = [(s, d) for s, d in known if self.ifaces[d].operstate.upper() in ("UP", "UNKNOWN")]
        pool = up or known
        if not pool:
            self.decisions.append(
                Decision(
                    "buffer speed",
                    None,
                    "no selected interface reports its speed; buffer sizes are unknown "
                    "(give --speed, e.g. --speed 25gbit)",
                )
            )
            return
        speed, dev = max(pool)
        self.buffer_speed_mbps = speed
        note = "" if up else " (no selected link is up; using the fastest link anyway)"
        self.decisions.append(
            Decision(
                "buffer speed",
                speed,
                f"fastest selected link is {dev} at {speed / 1000:g} Gbit/s; a bond counts by its "
                f"members, since one TCP flow uses one member{note}",
            )
        )

    def param(self, spec: ItemSpec, name: str) -> float:
        return spec.numbers.get(name, self.profile.params[name])
