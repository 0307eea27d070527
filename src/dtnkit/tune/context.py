"""What a recommendation is made from (:class:`Context`) and what it gives (:class:`Want`,
:class:`NoWant`), apart from the rules that compute it, so each kind's own hook can use them.

Every automatic decision (which speed sizes the buffers, why a value is capped) is carried as
text in :class:`Want.why` and in :class:`Context.decisions`, so audit output shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dtnkit.host.facts import Environment, Interface, KernelCaps
from dtnkit.tune.profile import ItemSpec, Profile


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
