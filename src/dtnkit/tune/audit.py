"""Audit: current vs recommended for every selected item.  Reads only.

One list of :class:`Finding` feeds the table, the JSON and the apply plan, so no output can
drop an item the others show (fasterdata-tuning.sh bug #3).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.host import facts
from dtnkit.host.facts import Interface, Unavailable
from dtnkit.host.host import Host
from dtnkit.tune.checks import check_for_key
from dtnkit.tune.context import Context, Decision, NoWant
from dtnkit.tune.keys import typed
from dtnkit.tune.kinds.base import Scope, Tunable
from dtnkit.tune.profile import GROUPS, ItemSpec, Profile
from dtnkit.tune.recommend import recommend
from dtnkit.tune.registry import prepare_scopes, tunable_for_key
from dtnkit.tune.status import NOT_COMPLIANT, AuditStatus
from dtnkit.tune.validation import check_profile
from dtnkit.units import SPEED_MBPS_MAX, SPEED_MBPS_MIN

#: 2: sysctl triples (tcp_rmem, tcp_wmem, tcp_mem) are arrays of integers, not strings
AUDIT_SCHEMA = "dtnkit.audit/2"


@dataclass(slots=True)
class Finding:
    """One audited item: its current and recommended values, status and why."""

    group: str
    key: str
    label: str
    scope: str
    device: str | None
    current: Any
    current_text: str
    recommended: Any
    recommended_text: str
    status: AuditStatus
    why: str
    source: str
    apply: str  # auto | on-request | audit-only
    mode: str
    target: Any = None  # what apply would write (raise-only keeps larger parts)
    give: str = ""  # for "unknown": the option that would decide it (e.g. "--speed")
    tunable: Tunable | None = None
    # why the value apply would write weakens security or breaks connectivity ("": it does
    # not); apply refuses it unless --allow-unsafe names the key
    unsafe: str = ""

    def as_dict(self) -> dict[str, Any]:
        doc = {
            "group": self.group,
            "key": self.key,
            "label": self.label,
            "scope": self.scope,
            "device": self.device,
            "current": typed(self.current),
            "recommended": typed(self.recommended),
            "status": self.status,
            "why": self.why,
            "source": self.source,
            "apply": self.apply,
            "mode": self.mode,
        }
        if self.unsafe:  # only then: the usual finding keeps its shape
            doc["unsafe"] = self.unsafe
        return doc


@dataclass
class Audit:
    """An audit's findings, with the profile and context they were judged by."""

    host_label: str
    profile: Profile
    ctx: Context
    findings: list[Finding]
    nics: dict[str, dict[str, str | None]] = field(default_factory=dict)  # ethtool -i per device

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(AuditStatus, 0)
        for f in self.findings:
            counts[f.status] += 1
        return counts

    @property
    def compliant(self) -> bool:
        """Nothing differs and nothing is unknown: an item dtnkit cannot judge is not proof
        that the host complies."""
        return not any(f.status in NOT_COMPLIANT for f in self.findings)

    @property
    def undecided(self) -> list[dict[str, Any]]:
        """The unknown items grouped by what would decide them (``give``: an option, or
        null when only each item's ``why`` can say)."""
        groups: dict[str, list[Finding]] = {}
        for f in self.findings:
            if f.status == AuditStatus.UNKNOWN:
                groups.setdefault(f.give, []).append(f)
        out = []
        for give, found in sorted(groups.items(), key=lambda kv: kv[0] == ""):
            hint = (
                f"give {give} and audit again"
                if give
                else "dtnkit cannot tell on this host; see each item's why"
            )
            out.append({"give": give or None, "hint": hint, "keys": [f.key for f in found]})
        return out

    def as_dict(self) -> dict[str, Any]:
        env = self.ctx.env
        return {
            "schema": AUDIT_SCHEMA,
            "host": self.host_label,
            "profile": self.profile.name,
            "rtt_ms": self.ctx.rtt_ms,
            "environment": {
                "initial_netns": env.initial_netns,
                "netns": env.netns,
                "container": env.container,
                "proc_sys_read_only": env.proc_sys_read_only,
                "ram_bytes": env.ram_bytes,
                "notes": list(env.notes),
            },
            "interfaces": [
                {
                    "device": d,
                    "via": via,
                    "speed_mbps": self.ctx.ifaces[d].speed_mbps,
                    "driver": self.nics.get(d, {}).get("driver"),
                    "firmware": self.nics.get(d, {}).get("firmware"),
                }
                for d, via in self.ctx.devices
            ],
            "decisions": [
                {"what": d.what, "value": d.value, "why": d.why} for d in self.ctx.decisions
            ],
            "compliant": self.compliant,
            "undecided": self.undecided,
            "counts": self.counts,
            "findings": [f.as_dict() for f in self.findings],
        }


def check_groups(groups: Sequence[str] | None) -> list[str]:
    if not groups:
        return list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise BadInput(
            f"unknown group {', '.join(unknown)}",
            f"groups: {', '.join(GROUPS)}",
            "pick from those with --group",
        )
    return [g for g in GROUPS if g in groups]


def build_context(
    host: Host,
    profile: Profile,
    *,
    rtt_ms: float = 100.0,
    ifaces: Sequence[str] | None = None,
    exact: bool = False,
    speed_mbps: int | None = None,
) -> Context:
    if not 0 < rtt_ms <= 10000:  # NaN too
        raise BadInput(
            f"RTT {rtt_ms} ms is out of range",
            "give the longest RTT in ms (1-10000)",
            "e.g. --rtt 150",
        )
    if speed_mbps is not None and not SPEED_MBPS_MIN <= speed_mbps <= SPEED_MBPS_MAX:
        raise BadInput(
            f"speed {speed_mbps} Mbit/s is out of range",
            "allowed: 10 Mbit/s to 1600 Gbit/s",
            "e.g. --speed 25gbit",
        )
    check_profile(profile)  # every literal value by its kind, before anything reads or writes
    host.read_ahead(
        [
            lambda: facts.interfaces(host),
            lambda: facts.default_route_devices(host),
            lambda: facts.placement(host),
            lambda: facts.kernel_caps(host),
        ]
    )
    links = facts.interfaces(host)
    skipped: list[tuple[str, str]] = []
    devices = facts.select_interfaces(
        links, list(ifaces) if ifaces else None, facts.default_route_devices(host), skipped
    )
    ctx = Context(
        profile=profile,
        rtt_ms=rtt_ms,
        env=facts.placement(host),
        caps=facts.kernel_caps(host),
        ifaces=links,
        devices=devices,
        exact=exact,
        speed_override_mbps=speed_mbps,
    )
    ctx.decisions.extend(
        Decision("not a data interface", name, f"{why} (name it with --iface to tune it)")
        for name, why in skipped
    )
    return ctx


def expand(ctx: Context, groups: Sequence[str]) -> list[tuple[Tunable, ItemSpec]]:
    """Every (tunable, profile item) pair the selected groups cover on this host."""
    out: list[tuple[Tunable, ItemSpec]] = []
    for group in groups:
        for key, spec in ctx.profile.items.items():
            if spec.group != group:
                continue
            if key.startswith("check/"):
                out.append((check_for_key(key, ctx), spec))
            else:
                out.extend((t, spec) for t in tunables_for(key, ctx.devices, ctx.ifaces))
    return out


def tunables_for(
    key: str, devices: Sequence[tuple[str, str]], ifaces: dict[str, Interface] | None = None
) -> list[Tunable]:
    """The tunables a profile key names: one per selected device for `kind/*/name`.

    An MTU belongs to the whole stack (members, bond, VLANs, lowest first) when ``ifaces`` is
    given, so apply raises it in an order the kernel accepts and audit checks every level.
    """
    if "/*/" in key:
        if ifaces is not None and key == "link/*/mtu":
            devices = facts.link_stack(ifaces, list(devices))
        return [tunable_for_key(key.replace("*", dev, 1)) for dev, _ in devices]
    return [tunable_for_key(key)]


def evaluate(ctx: Context, host: Host, tunable: Tunable, spec: ItemSpec) -> Finding:
    current = tunable.read(host)
    apply = "audit-only" if not tunable.restorable else spec.apply
    finding = Finding(
        group=spec.group,
        key=tunable.key,
        label=tunable.label,
        scope=str(tunable.scope),
        device=tunable.device,
        current=None,
        current_text="-",
        recommended=None,
        recommended_text="-",
        status=AuditStatus.UNKNOWN,
        why="",
        source=spec.source,
        apply=apply,
        mode=spec.mode,
        tunable=tunable,
    )
    via = dict(ctx.devices).get(tunable.device or "", "")
    if not isinstance(current, Unavailable):
        finding.current = current
        finding.current_text = tunable.show(current)
    want = recommend(ctx, host, tunable, spec)
    if not isinstance(want, NoWant):
        finding.recommended = want.value
        finding.recommended_text = tunable.show(want.value)
        finding.mode = want.mode
    notes = [n for n in (via,) if n]
    scope, scope_why = (tunable.scope, "") if ctx.env.initial_netns else tunable.scope_on(host)
    finding.scope = str(scope)
    if scope is Scope.HOST and not ctx.env.initial_netns:
        finding.status = AuditStatus.HOST_SCOPE
        notes.insert(
            0,
            f"global to the host ({scope_why or 'not per namespace'}): never "
            "written inside a namespace; left alone",
        )
    elif isinstance(current, Unavailable):
        finding.status = AuditStatus.UNSUPPORTED
        notes.insert(0, current.reason)
    elif isinstance(want, NoWant):
        finding.status = want.status
        finding.give = want.give
        notes.insert(0, want.why)
    elif tunable.satisfies(current, want.value, want.mode):
        finding.status = AuditStatus.OK
        if want.mode == "raise" and not tunable.satisfies(current, want.value, "exact"):
            notes.insert(0, "already above the recommendation (raise-only: never lowered)")
        if want.why:
            notes.append(want.why)
    else:
        finding.status = AuditStatus.DIFFERS
        finding.target = tunable.target(current, want.value, want.mode)
        if tunable.fixed(host):
            finding.status = AuditStatus.UNSUPPORTED
            notes.insert(0, "fixed by the driver: cannot be changed")
        if want.why:
            notes.append(want.why)
    if not isinstance(want, NoWant) and finding.status in (AuditStatus.OK, AuditStatus.DIFFERS):
        finding.unsafe = (
            tunable.unsafe(
                finding.target if finding.status == AuditStatus.DIFFERS else want.value, host
            )
            or ""
        )
        if finding.unsafe:
            notes.insert(
                0,
                f"unsafe: {finding.unsafe} (apply refuses it without --allow-unsafe {tunable.key})",
            )
    finding.why = "; ".join(notes)
    return finding


def run_audit(
    host: Host,
    profile: Profile,
    *,
    groups: Sequence[str] | None = None,
    rtt_ms: float = 100.0,
    ifaces: Sequence[str] | None = None,
    exact: bool = False,
    speed_mbps: int | None = None,
) -> Audit:
    host = host.read_only_view()
    chosen = check_groups(groups)
    # the scope probe (a process of its own) runs beside the context and the reads: for a
    # namespace it starts now with the profile's sysctls, which do not depend on the devices
    early = None
    if host.netns is not None:
        keys = [
            k
            for k, spec in profile.items.items()
            if k.startswith("sysctl/") and spec.group in chosen
        ]
        early = _scopes_thread(host, lambda: [tunable_for_key(k) for k in keys], None)
    ctx = build_context(
        host, profile, rtt_ms=rtt_ms, ifaces=ifaces, exact=exact, speed_mbps=speed_mbps
    )
    pairs = expand(ctx, chosen)
    probe = early
    if not ctx.env.initial_netns:  # the rest (cached keys are not probed again)
        probe = _scopes_thread(host, lambda: [t for t, _ in pairs], early)
    host.read_ahead(
        [
            *(functools.partial(t.read, host) for t, _ in pairs),
            *(functools.partial(facts.nic_driver, host, d) for d, _ in ctx.devices),
        ]
    )
    if probe is not None:
        probe.join()  # best effort: evaluate asks again, and fails there if it must
    findings = [evaluate(ctx, host, t, spec) for t, spec in pairs]
    nics = {d: facts.nic_driver(host, d) for d, _ in ctx.devices}
    return Audit(host_label(host), profile, ctx, findings, nics)


def _scopes_thread(
    host: Host, tunables: Callable[[], list[Tunable]], after: threading.Thread | None
) -> threading.Thread:
    """A started thread that asks the kernel the scope of ``tunables()``, after ``after``
    ends (the probe's cache then answers for the keys that one asked)."""

    def run() -> None:
        if after is not None:
            after.join()
        with contextlib.suppress(Exception):  # a failure shows again where evaluate asks
            prepare_scopes(host, tunables())

    thread = threading.Thread(target=run, name="dtnkit-scopes", daemon=True)
    thread.start()
    return thread


def host_label(host: Host) -> str:
    if not host.is_live:
        return f"tree:{host.root.name}"
    name = os.uname().nodename
    return f"{name} (netns {host.netns})" if host.netns else name
