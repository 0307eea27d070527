"""Jumbo frames: the MTU of the data interfaces, and (with ``--peer``) the path MTU to the
peer."""

from __future__ import annotations

from dtnkit.diagnose import sitecfg
from dtnkit.diagnose.checklist.base import Check, ChecklistStatus, Facts, Item
from dtnkit.host import facts

JUMBO = 9000


def _jumbo(item: Item, f: Facts) -> None:
    links, devices, j = f.links, f.devices, f.judging
    if not devices:
        item.status, item.summary = ChecklistStatus.WARN, "no data interface selected"
        item.next = "name the data interfaces with --iface"
        return
    small = []
    for dev, _ in facts.link_stack(links, list(devices)):
        link = links.get(dev)
        if link is None:
            continue
        top = f", max {link.max_mtu}" if link.max_mtu else ""
        item.saw(f"ip link ({dev})", f"mtu {link.mtu}{top}")
        if link.mtu < JUMBO:
            small.append(dev)
    names = ", ".join(d for d, _ in devices)
    if small:
        item.status = ChecklistStatus.FAIL
        item.summary = f"MTU below {JUMBO} on {', '.join(small)}"
        item.next = (
            f"{j.command('tune', 'apply', '--mtu')} (or "
            f"{j.shell(f'ip link set {small[0]} mtu {JUMBO}')}; the switch ports "
            "too)"
        )
    else:
        item.summary = f"MTU {JUMBO} or more on {names}"


def _path_mtu(item: Item, f: Facts) -> None:
    pf, j = f.peer, f.judging
    assert pf is not None
    item.saw(*pf.evidence())
    if not pf.resolved:
        item.status, item.summary = ChecklistStatus.FAIL, f"{pf.peer.text} {pf.resolve_note}"
        item.next = j.shell(f"getent ahosts {pf.peer.text}")
        return
    summaries = []
    nexts = []
    for version, fam in sorted(pf.families.items(), reverse=True):
        tag = f"IPv{version}"
        if fam.route is None or fam.route.dev is None:
            item.saw(f"ip -{version} route get {fam.addr}", fam.route_note or "no device")
            if fam.route_note.startswith("cannot tell"):
                item.worst(ChecklistStatus.WARN)
                summaries.append(f"{tag}: {fam.route_note}")
                nexts.append(
                    "run the checklist on the host itself (a tree has no route or ping of its own)"
                )
                continue
            item.worst(ChecklistStatus.FAIL)
            summaries.append(f"{tag}: no route to {fam.addr}")
            nexts.append(j.shell(f"ip -{version} route get {fam.addr}"))
            continue
        cache = f", cached path MTU {fam.route.pmtu}" if fam.route.pmtu else ""
        item.saw(
            f"ip -{version} route get {fam.addr}",
            f"dev {fam.route.dev} mtu {fam.dev_mtu or '-'}{cache}",
        )
        for mtu, out in sorted(fam.pings.items(), reverse=True):
            item.saw(fam.argv[mtu], out.note)
        if fam.dev_mtu is None:
            item.worst(ChecklistStatus.WARN)
            summaries.append(f"{tag}: MTU of {fam.route.dev} unknown")
            nexts.append(j.shell(f"ip link show {fam.route.dev}"))
            continue
        passed = [m for m, o in fam.pings.items() if m and o.replied]
        if not fam.pings.get(0, sitecfg.PingOutcome(False, None, "")).replied and not passed:
            item.worst(ChecklistStatus.WARN)
            summaries.append(f"{tag}: {fam.addr} does not answer ping; path MTU unknown")
            nexts.append(
                f"{j.shell(f'ping -{version} -c 3 {fam.addr}')}  (ICMP filtered? the peer down?)"
            )
            continue
        best = max(passed, default=0)
        if best >= fam.dev_mtu:
            summaries.append(f"{tag}: {fam.dev_mtu}-byte packets reach {fam.addr} unfragmented")
            continue
        item.worst(ChecklistStatus.FAIL)
        failed = min(
            (m for m, o in fam.pings.items() if m and not o.replied and m > best),
            default=fam.dev_mtu,
        )
        hints = sorted({o.mtu_hint for o in fam.pings.values() if o.mtu_hint})
        said = f"; ICMP says mtu {hints[0]}" if hints else ""
        within = f"between {best} and {failed - 1}" if best else f"below {failed}"
        summaries.append(
            f"{tag}: path MTU to {fam.addr} is {within}, {fam.route.dev} has {fam.dev_mtu}{said}"
        )
        nexts.append(
            f"{j.shell(f'tracepath -{version} -n {fam.addr}')}  (find the hop with "
            "the smaller MTU; use one MTU end to end)"
        )
    item.summary = "; ".join(summaries)
    item.next = "; ".join(nexts) if item.status != ChecklistStatus.PASS else ""


JUMBO_FRAMES = Check("jumbo", "dc27", "jumbo frames on the data interfaces", _jumbo)
PATH_MTU = Check(
    "path-mtu", "dc27", "jumbo frames: the path MTU to the peer", _path_mtu, needs_peer=True
)
