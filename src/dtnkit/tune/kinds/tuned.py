"""``tuned/profile``: the active TuneD profile, read and set with ``tuned-adm``."""

from __future__ import annotations

import re

from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.tuned import parse_tuned_active
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import Argv, CommandTunable, Scope, Tunable, Value, check_name
from dtnkit.tune.profile import ItemSpec

# one or more TuneD profile names, space-separated (tuned-adm merges them)
_PROFILES = re.compile(r"[A-Za-z0-9_.-]{1,64}( [A-Za-z0-9_.-]{1,64}){0,7}")


class TunedTunable(CommandTunable):
    kind = "tuned"

    def __init__(self) -> None:
        super().__init__("tuned/profile", Scope.HOST, None, "tuned-adm profile")

    @classmethod
    def from_key(cls, rest: str) -> Tunable | None:
        return cls() if rest == "profile" else None

    def read(self, host: Host) -> Value | Unavailable:
        if not host.has_tool("tuned-adm"):  # no process start to learn it
            return Unavailable("TuneD is not installed")
        res = host.query(["tuned-adm", "active"])
        if res.returncode == 127:
            return Unavailable("TuneD is not installed")
        if not res.ok:
            return Unavailable(res.message())
        return parse_tuned_active(res.stdout)

    # tuned-adm can exit 0 and fail: the re-read in verify is what counts
    def commands(self, value: Value) -> list[Argv]:
        return [["tuned-adm", "off"] if value is None else ["tuned-adm", "profile", str(value)]]

    def failure(self, value: Value) -> str:
        return f"`{' '.join(self.commands(value)[0])}` failed"

    def validate(self, value: Value) -> str | None:
        return None if value is None else check_name(value, _PROFILES, "network-throughput")

    def boot_commands(self, value: Value) -> list[Argv]:
        return []  # TuneD keeps its active profile across reboots itself

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        return Want(
            spec.value,
            mode,
            "applied only with --tuned; TuneD re-applies /etc/sysctl.d on start unless "
            "reapply_sysctl=0, and its own sysctls can undo dtnkit's",
        )
