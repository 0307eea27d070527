"""``cpu/governor``: the cpufreq scaling governor of every CPU, written as /sys files."""

from __future__ import annotations

import re

from dtnkit.errors import DtnkitError
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.proc import parse_governors
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import Scope, Tunable, Value, check_name
from dtnkit.tune.profile import ItemSpec
from dtnkit.tune.status import AuditStatus

_GOVERNOR = re.compile(r"[a-z][a-z0-9_]{0,31}")
_CPU = re.compile(r"cpu[0-9]{1,5}")


class GovernorTunable(Tunable):
    """The scaling governor of every CPU (value: {"cpu0": "powersave", ...})."""

    kind = "cpu"

    def __init__(self) -> None:
        super().__init__("cpu/governor", Scope.HOST, None, "scaling governor")

    @classmethod
    def from_key(cls, rest: str) -> Tunable | None:
        return cls() if rest == "governor" else None

    @staticmethod
    def cpus(host: Host) -> list[str]:
        names = [
            n
            for n in host.listdir("/sys/devices/system/cpu")
            if n.startswith("cpu") and n[3:].isdigit()
        ]
        return sorted(names, key=lambda n: int(n[3:]))

    def read(self, host: Host) -> Value | Unavailable:
        out: dict[str, str] = {}
        for cpu in self.cpus(host):
            gov = host.read(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor")
            if gov is not None:
                out[cpu] = gov.strip()
        if not out:
            return Unavailable("no cpufreq driver (usual in VMs): the hypervisor sets the speed")
        return out

    def available(self, host: Host) -> list[str]:
        for cpu in self.cpus(host):
            text = host.read(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_available_governors")
            if text is not None:
                return parse_governors(text)
        return []

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        if isinstance(current, dict) and isinstance(want, str):
            return all(v == want for v in current.values())
        return bool(current == want)

    def target(self, current: Value, want: Value, mode: str) -> Value:
        if isinstance(current, dict) and isinstance(want, str):
            return {cpu: want for cpu in current}
        return want

    def show(self, value: Value) -> str:
        if isinstance(value, dict):
            counts: dict[str, int] = {}
            for gov in value.values():
                counts[gov] = counts.get(gov, 0) + 1
            return ", ".join(f"{g} ({n} CPUs)" for g, n in sorted(counts.items()))
        return super().show(value)

    def validate(self, value: Value) -> str | None:
        """A governor name (profile), or CPU -> governor for every CPU (snapshot)."""
        if not isinstance(value, dict):
            return check_name(value, _GOVERNOR, "performance")
        if not value:
            return "it names no CPU"
        for cpu, gov in value.items():
            if not _CPU.fullmatch(cpu):
                return f"{cpu[:40]!r} is not a CPU name such as cpu0"
            why = check_name(gov, _GOVERNOR, "performance")
            if why:
                return f"{cpu}: {why}"
        return None

    def unsafe(self, value: Value, host: Host | None = None) -> str | None:
        names = set(value.values()) if isinstance(value, dict) else {value}
        if "userspace" in names:
            return (
                "userspace leaves each CPU at the fixed speed in scaling_setspeed (often "
                "the lowest) until a daemon sets it"
            )
        return None

    def write(self, host: Host, value: Value) -> None:
        if not isinstance(value, dict):
            raise DtnkitError("internal error: governor value must map CPUs to governors")
        for cpu, gov in value.items():
            host.write(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor", gov)

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        value = spec.value
        avail = self.available(host)
        if avail and value not in avail:
            return NoWant(
                AuditStatus.UNSUPPORTED,
                f"{value} is not offered by the cpufreq driver (available: {' '.join(avail)})",
            )
        return Want(value, mode, "")
