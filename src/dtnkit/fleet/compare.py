"""Comparing many hosts' audits: compliance per group per host, the values that differ
between hosts, each host against the profile and against a reference host.

An interface's settings are compared by the interface's place in its host's audit, not by
its name (``link/ens1f0/mtu`` on one host and ``link/eth0/mtu`` on another are both
``link/nic1/mtu``): sites name their NICs differently, and a NIC's setting differing between
hosts is what matters.  Values are equal when their JSON is (``1`` and ``1.0`` differ, as
they would in the audit).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dtnkit.errors import BadInput, ExitStatus
from dtnkit.fleet.load import Campaign, HostAudit, Loaded, ReportedExperiment, Skipped
from dtnkit.tune.profile import GROUPS
from dtnkit.tune.status import NOT_COMPLIANT, AuditStatus
from dtnkit.units import counted

REPORT_SCHEMA = "dtnkit.fleet-report/1"
#: a group's state on a host, worst first
STATES = ("differs", "unknown", "ok", "n/a", "not audited")


@dataclasses.dataclass(frozen=True)
class GroupState:
    """One group on one host: its state and how many of its items are in each status."""

    state: str
    items: int
    differs: int
    unknown: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "items": self.items,
            "differs": self.differs,
            "unknown": self.unknown,
        }


@dataclasses.dataclass(frozen=True)
class ComparedFinding:
    """One finding as compared: its comparison key, and the finding's own key and device."""

    ckey: str
    key: str
    device: str | None
    group: str
    status: AuditStatus
    current: Any
    recommended: Any
    why: str


@dataclasses.dataclass(frozen=True)
class HostView:
    audit: HostAudit
    groups: Mapping[str, GroupState]
    items: Mapping[str, ComparedFinding]  # by comparison key

    @property
    def name(self) -> str:
        return self.audit.name

    @property
    def against_profile(self) -> list[ComparedFinding]:
        return [i for i in self.items.values() if i.status in NOT_COMPLIANT]


@dataclasses.dataclass(frozen=True)
class Differing:
    """A setting whose current value is not the same on every host that has it."""

    key: str
    group: str
    values: Mapping[str, Any]  # host -> current value (hosts without the item left out)
    not_read: tuple[str, ...] = ()  # hosts whose audit has the item but could not read it

    def by_value(self) -> list[tuple[Any, list[str]]]:
        """(value, hosts) from the most hosts to the fewest."""
        groups: dict[str, tuple[Any, list[str]]] = {}
        for host, value in self.values.items():
            groups.setdefault(canonical(value), (value, []))[1].append(host)
        return sorted(groups.values(), key=lambda vh: (-len(vh[1]), canonical(vh[0])))


@dataclasses.dataclass(frozen=True)
class NotRead:
    """A setting some hosts' audits could not read, and why (the first such host's reason)."""

    key: str
    group: str
    hosts: tuple[str, ...]
    why: str


@dataclasses.dataclass(frozen=True)
class RefDiff:
    """A setting on which a host and the reference host differ (or only one has it)."""

    host: str
    key: str
    group: str
    value: Any
    reference_value: Any
    only_on: str | None  # "host" | "reference" | None (both have it)


@dataclasses.dataclass(frozen=True)
class Report:
    loaded: Loaded
    profile: str | None
    reference: str | None
    hosts: tuple[HostView, ...]
    groups: tuple[str, ...]
    differing: tuple[Differing, ...]
    reference_diffs: tuple[RefDiff, ...]
    skipped: tuple[Skipped, ...]  # the loader's and those left out for their profile
    notes: tuple[str, ...]
    not_read: tuple[NotRead, ...] = ()

    @property
    def experiments(self) -> tuple[ReportedExperiment, ...]:
        return self.loaded.experiments

    @property
    def campaign(self) -> Campaign | None:
        return self.loaded.campaign

    @property
    def compliant(self) -> int:
        return sum(1 for h in self.hosts if h.audit.compliant)

    @property
    def status(self) -> ExitStatus:
        """3 (as `tune audit`) when a host is not compliant, else 0."""
        return ExitStatus.DRIFT if self.compliant < len(self.hosts) else ExitStatus.OK

    def reference_diffs_of(self, host: str) -> list[RefDiff]:
        return [d for d in self.reference_diffs if d.host == host]

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "directory": str(self.loaded.directory),
            "profile": self.profile,
            "reference": self.reference,
            "groups": list(self.groups),
            "hosts": [
                {
                    "host": h.name,
                    "file": h.audit.file,
                    "audited_host": h.audit.doc_host,
                    "profile": h.audit.profile,
                    "rtt_ms": h.audit.rtt_ms,
                    "compliant": h.audit.compliant,
                    "claimed_compliant": h.audit.claimed_compliant,
                    "interfaces": list(h.audit.devices),
                    "groups": {g: s.as_dict() for g, s in h.groups.items()},
                    "against_profile": [
                        {
                            "key": i.key,
                            "compared_as": i.ckey,
                            "group": i.group,
                            "status": i.status,
                            "current": i.current,
                            "recommended": i.recommended,
                            "why": i.why,
                        }
                        for i in h.against_profile
                    ],
                    "against_reference": None
                    if self.reference is None
                    else [
                        {
                            "key": d.key,
                            "group": d.group,
                            "value": d.value,
                            "reference_value": d.reference_value,
                            "only_on": d.only_on,
                        }
                        for d in self.reference_diffs_of(h.name)
                    ],
                }
                for h in self.hosts
            ],
            "compliant_hosts": self.compliant,
            "differing": [
                {
                    "key": d.key,
                    "group": d.group,
                    "values": dict(d.values),
                    "not_read": list(d.not_read),
                }
                for d in self.differing
            ],
            "not_read": [
                {"key": u.key, "group": u.group, "hosts": list(u.hosts), "why": u.why}
                for u in self.not_read
            ],
            "experiments": [
                {
                    "name": e.name,
                    "file": e.file,
                    "id": e.id,
                    "profile": e.profile,
                    "hosts": list(e.hosts),
                    "probe": e.probe,
                    "groups": [_verdict(v) for v in e.groups],
                }
                for e in self.experiments
            ],
            "campaign": None
            if self.campaign is None
            else {
                "file": self.campaign.file,
                "profile": self.campaign.profile,
                "status": self.campaign.status,
                "failure": self.campaign.failure,
                "groups": list(self.campaign.groups),
                "started": self.campaign.started,
                "finished": self.campaign.finished,
                "restored": list(self.campaign.restored),
                "pairs": [
                    {
                        "client": p.client,
                        "server": p.server,
                        "nic_bps": p.nic_bps,
                        "results": [_verdict(v) for v in p.results],
                    }
                    for p in self.campaign.pairs
                ],
            },
            "skipped": [{"file": s.file, "why": s.why} for s in self.skipped],
            "notes": list(self.notes),
            "exit_status": int(self.status),
        }


def _verdict(v: Any) -> dict[str, Any]:
    return {
        "group": v.group,
        "verdict": v.verdict,
        "applied": v.applied,
        "ratio": v.ratio,
        "margin": v.margin,
        "baseline_bps": list(v.baseline_bps),
        "applied_bps": list(v.applied_bps),
        "why": v.why,
    }


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def was_read(item: ComparedFinding | None) -> bool:
    """The audit read the item's current value (null is "not read", never a value)."""
    return item is not None and item.current is not None


def comparison_key(key: str, device: str | None, devices: Sequence[str]) -> str:
    """``key`` with its device named by its place among the host's interfaces (nicN)."""
    if not device or f"/{device}/" not in key:
        return key
    place = devices.index(device) + 1 if device in devices else None
    nic = f"nic{place}" if place else f"nic:{device}"
    return key.replace(f"/{device}/", f"/{nic}/", 1)


def group_state(items: Sequence[ComparedFinding]) -> GroupState:
    statuses = Counter(i.status for i in items)
    if not items:
        state = "not audited"
    elif statuses[AuditStatus.DIFFERS]:
        state = "differs"
    elif statuses[AuditStatus.UNKNOWN]:
        state = "unknown"
    elif statuses[AuditStatus.OK]:
        state = "ok"
    else:
        state = "n/a"  # only unsupported or host-scope items: nothing to judge here
    return GroupState(
        state, len(items), statuses[AuditStatus.DIFFERS], statuses[AuditStatus.UNKNOWN]
    )


def view(audit: HostAudit, groups: Sequence[str]) -> HostView:
    items: dict[str, ComparedFinding] = {}
    devices = list(audit.devices)
    for f in audit.findings:  # devices the interfaces list missed still get a place
        if f.device and f.device not in devices and f"/{f.device}/" in f.key:
            devices.append(f.device)
    for f in audit.findings:
        ckey = comparison_key(f.key, f.device, devices)
        n = 2
        while ckey in items:  # the same key twice in one audit: keep both
            ckey = f"{comparison_key(f.key, f.device, devices)}#{n}"
            n += 1
        items[ckey] = ComparedFinding(
            ckey, f.key, f.device, f.group, f.status, f.current, f.recommended, f.why
        )
    return HostView(
        audit, {g: group_state([i for i in items.values() if i.group == g]) for g in groups}, items
    )


def choose_profile(audits: Sequence[HostAudit], wanted: str | None) -> str | None:
    if wanted is not None:
        if audits and not any(a.profile == wanted for a in audits):
            found = sorted({a.profile for a in audits})
            raise BadInput(
                f"no audit against profile {wanted!r}",
                f"the audits are against {', '.join(found)}",
                f"give one of those with --profile, or audit with --profile {wanted}",
            )
        return wanted
    if not audits:
        return None
    counts = Counter(a.profile for a in audits)
    return min(counts, key=lambda p: (-counts[p], p))


def choose_reference(hosts: Sequence[HostView], wanted: str | None) -> str | None:
    if wanted is None:
        return None
    if any(h.name == wanted for h in hosts):
        return wanted
    by_doc = [h.name for h in hosts if h.audit.doc_host == wanted]
    if len(by_doc) == 1:
        return by_doc[0]
    names = [h.name for h in hosts]
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    raise BadInput(
        f"no host {wanted!r} to compare with",
        f"the hosts are {shown or 'none'}",
        "give --reference one of them (the name before .audit.json)",
    )


def compare(loaded: Loaded, *, reference: str | None = None, profile: str | None = None) -> Report:
    """The report of a loaded directory; BadInput when nothing in it is usable, or the
    profile or reference host asked for is not there."""
    if not loaded.usable:
        why = (
            f"{counted(len(loaded.skipped), 'file')} skipped, none usable"
            if loaded.skipped
            else "no *.audit.json, *.experiment.json or campaign.json in it"
        )
        raise BadInput(
            f"nothing to report in {loaded.directory}",
            why,
            "give the directory the site audit wrote (DIR/HOST.audit.json)",
        )
    chosen = choose_profile(loaded.audits, profile)
    skipped = list(loaded.skipped)
    notes = []
    kept = []
    for a in loaded.audits:
        if a.profile == chosen:
            kept.append(a)
        else:
            skipped.append(
                Skipped(
                    a.file,
                    f"audited against profile {a.profile}, not "
                    f"{chosen} (--profile {a.profile} reports it)",
                )
            )
    for a in kept:
        if a.claimed_compliant != a.compliant:
            notes.append(
                f"{a.file} says compliant is {str(a.claimed_compliant).lower()}, "
                f"but its findings say {str(a.compliant).lower()}: the findings "
                "are used"
            )
    if not kept and not loaded.experiments and not loaded.campaign:
        raise BadInput(
            f"nothing to report in {loaded.directory}",
            "no audit against the profile asked for",
            "see the skipped files",
        )
    seen = [g for g in GROUPS]
    extra = sorted({f.group for a in kept for f in a.findings} - set(GROUPS))
    groups = tuple(seen + extra)
    hosts = tuple(sorted((view(a, groups) for a in kept), key=lambda h: h.name))
    ref = choose_reference(hosts, reference)
    return Report(
        loaded=loaded,
        profile=chosen,
        reference=ref,
        hosts=hosts,
        groups=groups,
        differing=tuple(differing(hosts)),
        reference_diffs=tuple(against(hosts, ref)) if ref else (),
        skipped=tuple(skipped),
        notes=tuple(notes),
        not_read=tuple(unread(hosts)),
    )


def differing(hosts: Sequence[HostView]) -> list[Differing]:
    """The settings whose current value differs between the hosts that read them, in the
    order of their first host's audit; the hosts that could not read one are named apart
    (not read is not a value: it never makes a difference)."""
    order: dict[str, str] = {}
    for h in hosts:
        for ckey, item in h.items.items():
            order.setdefault(ckey, item.group)
    out = []
    for ckey, group in order.items():
        values = {h.name: h.items[ckey].current for h in hosts if was_read(h.items.get(ckey))}
        if len({canonical(v) for v in values.values()}) > 1:
            unread = tuple(h.name for h in hosts if ckey in h.items and not was_read(h.items[ckey]))
            out.append(Differing(ckey, group, values, unread))
    return out


def unread(hosts: Sequence[HostView]) -> list[NotRead]:
    """The settings some hosts could not read, in the order of their first host's audit."""
    out: dict[str, NotRead] = {}
    for h in hosts:
        for ckey, item in h.items.items():
            if was_read(item):
                continue
            seen = out.get(ckey)
            out[ckey] = (
                NotRead(ckey, item.group, (h.name,), item.why)
                if seen is None
                else dataclasses.replace(seen, hosts=(*seen.hosts, h.name))
            )
    return list(out.values())


def against(hosts: Sequence[HostView], reference: str) -> list[RefDiff]:
    """Every other host against the reference host: the settings whose current values
    differ, and those only one of the two has.  A setting either host could not read is not
    compared (not read is no value to differ from)."""
    ref = next(h for h in hosts if h.name == reference)
    out = []
    for h in hosts:
        if h.name == reference:
            continue
        for ckey, item in h.items.items():
            theirs = ref.items.get(ckey)
            if not was_read(item) or (theirs is not None and not was_read(theirs)):
                continue
            if theirs is None:
                out.append(RefDiff(h.name, ckey, item.group, item.current, None, "host"))
            elif canonical(item.current) != canonical(theirs.current):
                out.append(RefDiff(h.name, ckey, item.group, item.current, theirs.current, None))
        for ckey, theirs in ref.items.items():
            if ckey not in h.items and was_read(theirs):
                out.append(RefDiff(h.name, ckey, theirs.group, None, theirs.current, "reference"))
    return out
