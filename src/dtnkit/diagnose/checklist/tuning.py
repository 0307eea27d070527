"""Tuning: the tune audit's verdict, tcp_rmem against the link's speed, UDP GRO forwarding,
and the sysctls the HTTP-TPC troubleshooting list names."""

from __future__ import annotations

import functools

from dtnkit.diagnose.checklist.base import Check, ChecklistStatus, Facts, Item, as_int, sysctl_fix
from dtnkit.errors import DtnkitError
from dtnkit.host import facts
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.ethtool import parse_ethtool_features_json, parse_ethtool_features_text
from dtnkit.tune.keys import typed
from dtnkit.tune.status import AuditStatus
from dtnkit.units import format_bytes

ONE_GIB = 1 << 30
HUNDRED_G_MBPS = 100_000


def _tuned(item: Item, f: Facts) -> None:
    audit, error, j = f.audit, f.audit_error, f.judging
    if audit is None:
        item.status, item.summary = ChecklistStatus.WARN, f"the audit could not run: {error}"
        item.next = j.command("tune", "audit")
        return
    groups: dict[str, dict[str, int]] = {}
    for finding in audit.findings:
        groups.setdefault(finding.group, {}).setdefault(finding.status, 0)
        groups[finding.group][finding.status] += 1
    bad = []
    unknown = []
    for group, counts in groups.items():
        item.saw(
            f"tune audit --group {group}", ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        )
        if counts.get(AuditStatus.DIFFERS):
            bad.append(group)
        elif counts.get(AuditStatus.UNKNOWN):
            unknown.append(group)
    ok = len(groups) - len(bad) - len(unknown)
    item.summary = (
        f"{ok} of {len(groups)} groups comply (profile {audit.profile.name}, "
        f"RTT {audit.ctx.rtt_ms:g} ms)"
    )
    if bad:
        item.status = ChecklistStatus.FAIL
        item.summary += f"; differs: {', '.join(bad)}"
        item.next = j.command("tune", "apply", "--dry-run")
    elif unknown:
        item.status = ChecklistStatus.WARN
        item.summary += f"; unknown: {', '.join(unknown)}"
        hints = [u["hint"] for u in audit.undecided]
        item.next = f"{j.command('tune', 'audit')}  ({hints[0] if hints else 'see each why'})"


def _tcp_rmem(item: Item, f: Facts) -> None:
    host, audit, j = f.host, f.audit, f.judging
    text = host.read("/proc/sys/net/ipv4/tcp_rmem")
    item.saw("/proc/sys/net/ipv4/tcp_rmem", " ".join((text or "-").split()))
    parts = (text or "").split()
    current = int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else None
    speed = audit.ctx.buffer_speed_mbps if audit is not None else j.speed_mbps
    item.saw("link speed", f"{speed} Mbit/s" if speed else "unknown")
    want: int | None = None
    why = ""
    from_audit = False
    if audit is not None:
        for finding in audit.findings:
            triple = typed(finding.recommended)  # the audit keeps a triple as the kernel prints it
            if (
                finding.key == "sysctl/net.ipv4.tcp_rmem"
                and isinstance(triple, list)
                and len(triple) == 3
            ):
                want, from_audit = int(triple[2]), True
                why = f"the {audit.profile.name} profile at {audit.ctx.rtt_ms:g} ms"
    if speed is not None and speed >= HUNDRED_G_MBPS and (want is None or want < ONE_GIB):
        want, why, from_audit = ONE_GIB, "1 GiB at 100G and faster", False
    if current is None:
        item.status, item.summary = ChecklistStatus.WARN, "cannot read tcp_rmem"
        item.next = j.shell("sysctl net.ipv4.tcp_rmem")
    elif want is None and speed is None:
        item.status = ChecklistStatus.WARN
        item.summary = f"max {format_bytes(current)}; link speed unknown, so no target"
        item.next = (
            f"{j.command('checklist', extra=['--speed', 'SPEED'])}  (SPEED: the "
            "link's, e.g. 100gbit)"
        )
    elif want is None:
        item.status = ChecklistStatus.WARN
        item.summary = (
            f"max {format_bytes(current)}; the {j.profile} profile sets no tcp_rmem, so no target"
        )
        item.next = j.command("tune", "audit", "--group", "buffers")
    elif current >= want:
        item.summary = f"max {format_bytes(current)} >= {format_bytes(want)} ({why})"
    else:
        item.status = ChecklistStatus.FAIL
        item.summary = f"max {format_bytes(current)} < {format_bytes(want)} ({why})"
        item.next = (
            j.command("tune", "apply", "--group", "buffers")
            if from_audit
            else sysctl_fix(j, f"net.ipv4.tcp_rmem='{parts[0]} {parts[1]} {want}'")
        )


def _udp_gro_forwarding(item: Item, f: Facts) -> None:
    host, devices, j = f.host, f.devices, f.judging
    if not devices:
        item.status, item.summary = ChecklistStatus.WARN, "no data interface selected"
        item.next = "name the data interfaces with --iface"
        return
    off, lack = [], []
    for dev, _ in devices:
        try:
            feats = facts.ethtool_read(
                host, "-k", dev, parse_ethtool_features_json, parse_ethtool_features_text
            )
        except DtnkitError as exc:  # ethtool missing
            feats = Unavailable(exc.what)
        if isinstance(feats, Unavailable):
            item.saw(f"ethtool -k {dev}", feats.reason)
            lack.append(f"{dev} ({feats.reason})")
            continue
        feat = feats.get("rx-udp-gro-forwarding")
        if feat is None:
            item.saw(f"ethtool -k {dev}", "no rx-udp-gro-forwarding feature")
            lack.append(f"{dev} (driver or kernel has no such feature: before 5.12?)")
        elif feat.on:
            item.saw(f"ethtool -k {dev}", "rx-udp-gro-forwarding: on")
        elif feat.fixed:
            item.saw(f"ethtool -k {dev}", "rx-udp-gro-forwarding: off [fixed]")
            lack.append(f"{dev} (fixed off by the driver)")
        else:
            item.saw(f"ethtool -k {dev}", "rx-udp-gro-forwarding: off")
            off.append(dev)
    if off:
        item.status = ChecklistStatus.FAIL
        item.summary = f"off on {', '.join(off)}"
        item.next = j.shell(f"ethtool -K {off[0]} rx-udp-gro-forwarding on")
    elif lack:
        item.status = ChecklistStatus.WARN
        item.summary = f"cannot be on: {'; '.join(lack)}"
        item.next = "nothing to set on these devices; check the physical NICs below them"
    else:
        item.summary = f"on for {', '.join(d for d, _ in devices)}"


def _sysctl(key: str, want: int, item: Item, f: Facts) -> None:
    host, j = f.host, f.judging
    path = Host.sysctl_path(key)
    text = host.read(path)
    value = as_int(text)
    item.saw(path, "-" if text is None else text.strip())
    if value is None:
        item.status, item.summary = ChecklistStatus.WARN, f"cannot read {key}"
        item.next = j.shell(f"sysctl {key}")
    elif value == want:
        item.summary = f"{key} = {value}"
    else:
        item.status, item.summary = ChecklistStatus.FAIL, f"{key} = {value}, want {want}"
        item.next = sysctl_fix(j, f"{key}={want}")


def sysctl_check(ident: str, key: str, want: int, why: str) -> Check:
    """An item that passes when sysctl ``key`` is ``want``."""
    return Check(
        ident, "troubleshooting", f"{key} = {want} ({why})", functools.partial(_sysctl, key, want)
    )


TUNED = Check("tuned", "dc27", "host tuned (tune audit)", _tuned)
TCP_RMEM = Check(
    "tcp-rmem", "troubleshooting", "tcp_rmem max: 1 GiB at 100G, the BDP below", _tcp_rmem
)
UDP_GRO_FORWARDING = Check(
    "udp-gro-forwarding", "troubleshooting", "rx-udp-gro-forwarding on", _udp_gro_forwarding
)
SLOW_START_IDLE = sysctl_check(
    "slow-start-idle",
    "net.ipv4.tcp_slow_start_after_idle",
    0,
    "unstable transfers: no cwnd collapse after an idle pause",
)
TCP_FRTO = sysctl_check(
    "tcp-frto",
    "net.ipv4.tcp_frto",
    2,
    "unstable transfers: F-RTO finds spurious retransmit timeouts",
)
