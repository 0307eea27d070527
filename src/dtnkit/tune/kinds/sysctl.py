"""``sysctl/NAME``: a kernel setting under /proc/sys, written as a file.

The one declaration is the name: the file apply writes (:meth:`Host.sysctl_path`) and the
``NAME = VALUE`` line ``--persist`` puts in /etc/sysctl.d both derive from it.

Whether a sysctl is per network namespace or global to the host is asked of the kernel
(:mod:`dtnkit.host.sysctl_scope`) whenever a namespace is targeted; the static rule below is
only for captured trees, which have no kernel to ask.  A host-global sysctl is never written
inside a namespace: :meth:`SysctlTunable.write` refuses it whatever planned the write.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from dtnkit.errors import DtnkitError
from dtnkit.host import sysctl_scope
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.sysctl import normalize_sysctl
from dtnkit.tune.context import Context, NoWant, Want
from dtnkit.tune.kinds.base import Scope, Tunable, Value, check_int, check_name, check_scalar
from dtnkit.tune.profile import ItemSpec
from dtnkit.tune.status import AuditStatus

# Captured trees only (no kernel to probe): the keys of the shipped profile that kernels keep
# global to the host (read-only or absent inside other namespaces); every key outside net.*
# is global too.  A live namespace is always probed instead.
HOST_GLOBAL_SYSCTLS = frozenset(
    {
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.core.rmem_default",
        "net.core.wmem_default",
        "net.core.netdev_max_backlog",
        "net.core.default_qdisc",
        "net.ipv4.tcp_mem",
    }
)
CONGESTION_CONTROL = "net.ipv4.tcp_congestion_control"
# what the sysctl kind claims: dotted names of letters, digits and _ @ : + - (no paths)
_NAME = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_@:+-]+)+$")

INT_MAX = 2**31 - 1  # the kernel's int sysctls (proc_dointvec)
LONG_MAX = 2**63 - 1
# Bounds of the sysctls dtnkit knows, as the kernel takes them: one integer in [lo, hi], or a
# triple (min default max, each in [lo, hi], ordered); other sysctls get the generic check.
SYSCTL_INTS: dict[str, tuple[int, int]] = {
    "net.core.rmem_max": (0, INT_MAX),
    "net.core.wmem_max": (0, INT_MAX),
    "net.core.rmem_default": (0, INT_MAX),
    "net.core.wmem_default": (0, INT_MAX),
    "net.core.optmem_max": (0, INT_MAX),
    "net.core.netdev_max_backlog": (0, INT_MAX),
    "net.ipv4.tcp_no_metrics_save": (0, 1),
    "net.ipv4.tcp_slow_start_after_idle": (0, 1),
    "net.ipv4.tcp_mtu_probing": (0, 2),
    # a site profile may add these (docs/profiles.md lists each range)
    "net.ipv4.tcp_syncookies": (0, 2),
    "net.ipv4.tcp_sack": (0, 1),
    "net.ipv4.tcp_timestamps": (0, 2),
    "net.ipv4.tcp_window_scaling": (0, 1),
    "net.ipv4.tcp_moderate_rcvbuf": (0, 1),
    "net.ipv4.tcp_low_latency": (0, 1),
    "net.ipv4.tcp_rfc1337": (0, 1),
    "net.ipv4.tcp_fin_timeout": (1, INT_MAX),
    "net.ipv4.tcp_max_syn_backlog": (1, INT_MAX),
    "net.ipv4.ip_no_pmtu_disc": (0, 3),
    "net.core.somaxconn": (1, INT_MAX),
}
# sysctls of two integers (low high, each in [lo, hi], low <= high)
SYSCTL_PAIRS: dict[str, tuple[int, int]] = {"net.ipv4.ip_local_port_range": (1, 65535)}


def _ports_unsafe(value: Value) -> str | None:
    ints = _ints(value)
    if ints is None or len(ints) != 2:
        return None
    low, high = ints
    if low < 1024:
        return (
            f"a local port range from {low} hands out privileged ports (below 1024) as "
            "outgoing ports, where system services listen"
        )
    if high - low + 1 < 1000:
        return (
            f"{high - low + 1} local ports allow only that many outgoing connections "
            "to one peer address and port at a time (fewer than 1000 breaks busy hosts)"
        )
    return None


def _equals(bad: tuple[int, ...], why: str) -> Callable[[Value], str | None]:
    def check(value: Value) -> str | None:
        ints = _ints(value)
        return why if ints is not None and len(ints) == 1 and ints[0] in bad else None

    return check


#: values the kernel takes that weaken the host's security or break its connectivity
#: (reverse-path filtering, net.ipv4.conf.*.rp_filter, is outside the site allow-list: no
#: profile or snapshot can set it at all)
UNSAFE_SYSCTLS: dict[str, Callable[[Value], str | None]] = {
    "net.ipv4.tcp_syncookies": _equals(
        (0,), "0 turns off SYN cookies, the defence against SYN floods"
    ),
    "net.ipv4.ip_local_port_range": _ports_unsafe,
    "net.core.netdev_max_backlog": _equals(
        (0,), "0 drops every packet that has to wait in the input backlog"
    ),
    "net.core.somaxconn": _equals(
        tuple(range(1, 16)), "a listen backlog below 16 drops connection attempts under any load"
    ),
}
SYSCTL_TRIPLES: dict[str, tuple[int, int]] = {
    "net.ipv4.tcp_rmem": (1, INT_MAX),
    "net.ipv4.tcp_wmem": (1, INT_MAX),
    "net.ipv4.tcp_mem": (0, LONG_MAX),  # pages
}
SYSCTL_NAMES = frozenset({"net.core.default_qdisc", CONGESTION_CONTROL})
_ALGORITHM = re.compile(r"[a-z][a-z0-9_]{0,15}")
_SYSCTL_NAME = re.compile(r"[a-z0-9_]+(\.[A-Za-z0-9_@/:-]+)+")


def _ints(value: Value) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        try:
            return [int(x) for x in value.split()]
        except ValueError:
            return None
    return None


def _typed(text: str) -> Value:
    """A single integer as an int (typed JSON), anything else as normalised text."""
    try:
        return int(text)
    except ValueError:
        return text


class SysctlTunable(Tunable):
    kind = "sysctl"

    def __init__(self, name: str) -> None:
        scope = (
            Scope.HOST
            if name in HOST_GLOBAL_SYSCTLS or not name.startswith("net.")
            else Scope.NETNS
        )
        super().__init__(f"sysctl/{name}", scope, None, name)
        self.name = name
        self.path = Host.sysctl_path(name)

    @classmethod
    def from_key(cls, rest: str) -> Tunable | None:
        return cls(rest) if _NAME.match(rest) else None

    def scope_on(self, host: Host) -> tuple[Scope, str]:
        if not host.is_live:
            return self.scope, "" if self.scope is Scope.NETNS else "global to the host"
        verdict = sysctl_scope.PROBE.classify([self.name])[self.name]
        return (Scope.NETNS if verdict.per_netns else Scope.HOST), verdict.why

    @classmethod
    def prepare_scopes(cls, host: Host, tunables: Sequence[Tunable]) -> None:
        if host.is_live:
            sysctl_scope.PROBE.classify(t.name for t in tunables if isinstance(t, SysctlTunable))

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read(self.path)
        if text is None:
            return Unavailable(f"{self.path} does not exist on this kernel")
        return _typed(normalize_sysctl(text))

    def write(self, host: Host, value: Value) -> None:
        if host.netns is not None:
            scope, why = self.scope_on(host)
            if scope is Scope.HOST:
                raise DtnkitError(
                    f"refusing to write {self.name} inside namespace {host.netns}",
                    f"it is global to the host: {why}",
                    "set it on the host itself, outside the namespace",
                )
        host.write(self.path, str(value))

    def sysctl_d_line(self, value: Value) -> tuple[str, str]:
        """The ``name = value`` pair --persist writes to /etc/sysctl.d."""
        return self.name, str(value)

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        cur, wnt = _ints(current), _ints(want)
        if cur is not None and wnt is not None and len(cur) == len(wnt):
            if mode == "raise":
                return all(c >= w for c, w in zip(cur, wnt, strict=True))
            return cur == wnt
        return normalize_sysctl(str(current)) == normalize_sysctl(str(want))

    def target(self, current: Value, want: Value, mode: str) -> Value:
        cur, wnt = _ints(current), _ints(want)
        if mode == "raise" and cur is not None and wnt is not None and len(cur) == len(wnt):
            return _typed(" ".join(str(max(c, w)) for c, w in zip(cur, wnt, strict=True)))
        return _typed(normalize_sysctl(str(want)))

    def validate(self, value: Value) -> str | None:
        return validate_sysctl(self.name, value)

    def unsafe(self, value: Value, host: Host | None = None) -> str | None:
        check = UNSAFE_SYSCTLS.get(self.name)
        return check(value) if check is not None else None

    def literal(self, ctx: Context, host: Host, spec: ItemSpec, mode: str) -> Want | NoWant:
        if self.name != CONGESTION_CONTROL:
            return super().literal(ctx, host, spec, mode)
        value = spec.value
        why = ""
        if value not in ctx.caps.cc_available and value in ctx.caps.cc_modules:
            why = (
                f"{value} is a kernel module not loaded yet (tcp_{value}); setting the sysctl "
                "loads it"
            )
        elif value not in ctx.caps.cc_available:
            return NoWant(
                AuditStatus.UNSUPPORTED,
                (
                    f"{value} is not offered by this kernel (available: "
                    f"{' '.join(ctx.caps.cc_available) or 'none'}); load tcp_{value} "
                    "(modprobe; EL: kernel-modules-extra)"
                ),
            )
        elif not ctx.env.initial_netns and value not in ctx.caps.cc_allowed:
            return NoWant(
                AuditStatus.UNSUPPORTED,
                (
                    f"{value} is not in tcp_allowed_congestion_control "
                    f"({' '.join(ctx.caps.cc_allowed)}), so this namespace cannot choose it"
                ),
            )
        if value == "bbr":
            why = "; ".join(
                w for w in (why, "bbr version unknown: v1 and v3 both register as 'bbr'") if w
            )
        return Want(value, mode, why)


def validate_sysctl(name: str, value: Value) -> str | None:
    """Why ``value`` cannot be written to sysctl ``name`` (None: it can)."""
    if not _SYSCTL_NAME.fullmatch(name):
        return f"{name[:60]!r} is not a sysctl name"
    if isinstance(value, bool):
        return "it must be a number or text, not a boolean"
    if name in SYSCTL_NAMES:
        return check_name(value, _ALGORITHM, "fq or bbr")
    if name in SYSCTL_INTS:
        ints = _ints(value)
        if ints is None or len(ints) != 1:
            return f"it must be one integer, not {str(value)[:40]!r}"
        return check_int(ints[0], *SYSCTL_INTS[name])
    if name in SYSCTL_PAIRS:
        why = check_scalar(value)  # one line: "1\n2" is not a pair
        if why:
            return why
        ints = _ints(value)
        if ints is None or len(ints) != 2:
            return f"it must be two integers (low high), not {str(value)[:40]!r}"
        lo, hi = SYSCTL_PAIRS[name]
        for part in ints:
            why = check_int(part, lo, hi)
            if why:
                return why
        if ints[0] > ints[1]:
            return f"{ints[0]} {ints[1]} is not ordered low <= high"
        return None
    if name in SYSCTL_TRIPLES:
        ints = _ints(value)
        if ints is None or len(ints) != 3:
            return f"it must be three integers (min default max), not {str(value)[:40]!r}"
        lo, hi = SYSCTL_TRIPLES[name]
        for part in ints:
            why = check_int(part, lo, hi)
            if why:
                return why
        if not ints[0] <= ints[1] <= ints[2]:
            return f"{' '.join(map(str, ints))} is not ordered min <= default <= max"
        return None
    return check_scalar(value) if value is not None else "it must have a value, not null"
