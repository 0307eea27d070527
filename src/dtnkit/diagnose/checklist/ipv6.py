"""Dual stack: a global IPv6 address on the data interfaces, an IPv6 default route, and (with
``--peer``) the peer answering over IPv6."""

from __future__ import annotations

from collections.abc import Sequence

from dtnkit.diagnose.checklist.base import Check, ChecklistStatus, Facts, Item, as_int, sysctl_fix
from dtnkit.host import facts
from dtnkit.host.facts import Interface, Unavailable
from dtnkit.tune.checks import unique_local


def _address(item: Item, f: Facts) -> None:
    host, links, devices, j = f.host, f.links, f.devices, f.judging
    if not host.exists("/proc/sys/net/ipv6/conf"):
        item.saw("/proc/sys/net/ipv6", "absent")
        item.status = ChecklistStatus.FAIL
        item.summary = "IPv6 is disabled in the kernel (ipv6.disable=1?)"
        item.next = "remove ipv6.disable=1 from the kernel command line and reboot"
        return
    off = as_int(host.read("/proc/sys/net/ipv6/conf/all/disable_ipv6"))
    item.saw("/proc/sys/net/ipv6/conf/all/disable_ipv6", "-" if off is None else off)
    data = [d for d, _ in devices]
    off_on = []
    for dev in data:
        value = as_int(host.read(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"))
        if value == 1:
            off_on.append(dev)
            item.saw(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6", value)
    addrs = facts.addresses(host, "-6")
    if isinstance(addrs, Unavailable):
        item.saw("ip -6 addr", addrs.reason)
        item.status = ChecklistStatus.WARN
        item.summary = f"cannot list IPv6 addresses: {addrs.reason}"
        item.next = j.shell("ip -6 addr show")
        return
    globals_ = [a for a in addrs if a.scope == "global" and a.ifname in links]
    public = [a for a in globals_ if not unique_local(a.local)]
    for a in globals_[:6]:
        item.saw(f"ip -6 addr ({a.ifname})", f"{a.local}/{a.prefixlen} scope {a.scope}")
    if off == 1 or (data and len(off_on) == len(data)):
        where = "all interfaces" if off == 1 else ", ".join(off_on)
        item.status = ChecklistStatus.FAIL
        item.summary = f"IPv6 is disabled on {where} (disable_ipv6 = 1)"
        item.next = sysctl_fix(j, "net.ipv6.conf.all.disable_ipv6=0")
        return
    if not globals_:
        item.saw("ip -6 addr", "no address of scope global")
        item.status, item.summary = ChecklistStatus.FAIL, "no global IPv6 address"
        item.next = "give the data interface a global IPv6 address (SLAAC or static)"
        return
    on_data = [a for a in public if a.ifname in upper_names(links, data)]
    if not public:
        item.status = ChecklistStatus.WARN
        item.summary = "only unique-local IPv6 addresses (fc00::/7)"
        item.next = "give the data interface a global unicast IPv6 address"
    elif data and not on_data:
        item.status = ChecklistStatus.WARN
        item.summary = (
            f"global IPv6 address on {public[0].ifname}, none on the data "
            f"interfaces ({', '.join(data)})"
        )
        item.next = f"give {data[0]} (or its bond/VLAN) a global IPv6 address"
    else:
        first = (on_data or public)[0]
        item.summary = f"{first.local} on {first.ifname}"
        if off_on:
            item.worst(ChecklistStatus.WARN)
            item.summary += f"; IPv6 off on {', '.join(off_on)}"
            item.next = sysctl_fix(j, f"net.ipv6.conf.{off_on[0]}.disable_ipv6=0")


def upper_names(links: dict[str, Interface], devices: Sequence[str]) -> set[str]:
    """The devices and every bond, bridge and VLAN above them (where addresses live)."""
    out: set[str] = set()
    for dev in devices:
        out.update(facts.upper_devices(links, dev))
    return out


def _route(item: Item, f: Facts) -> None:
    host, j = f.host, f.judging
    routes = facts.default_routes(host, "-6")
    if isinstance(routes, Unavailable):
        item.saw("ip -6 route show default", routes.reason)
        item.status = ChecklistStatus.WARN
        item.summary = f"cannot read IPv6 routes: {routes.reason}"
        item.next = j.shell("ip -6 route show default")
        return
    for r in routes[:4]:
        item.saw(
            "ip -6 route show default", f"via {r.gateway or '-'} dev {','.join(r.devs) or '-'}"
        )
    if not routes:
        item.saw("ip -6 route show default", "none")
        item.status, item.summary = ChecklistStatus.FAIL, "no IPv6 default route"
        item.next = (
            f"add one (router advertisements, or {j.shell('ip -6 route add default via GW')})"
        )
    else:
        r = routes[0]
        item.summary = f"default via {r.gateway or '-'} dev {','.join(r.devs) or '-'}"


def _peer(item: Item, f: Facts) -> None:
    pf, j = f.peer, f.judging
    assert pf is not None
    item.saw(*pf.evidence())
    name = pf.peer.text
    if not pf.resolved:
        item.status, item.summary = ChecklistStatus.FAIL, f"{name} {pf.resolve_note}"
        item.next = f"{j.shell(f'getent ahosts {name}')}  (check the name and the resolver)"
        return
    fam = pf.families.get(6)
    if fam is None:
        if pf.peer.family == 4:
            item.status = ChecklistStatus.WARN
            item.summary = f"{name} is an IPv4 address: IPv6 reach not tested"
            item.next = "give the peer's name or IPv6 address with --peer"
        else:
            item.status = ChecklistStatus.FAIL
            item.summary = f"{name} has no IPv6 address (no AAAA record)"
            item.next = f"publish an AAAA record for {name} and make it dual-stack"
        return
    if fam.route is None:
        item.saw(f"ip -6 route get {fam.addr}", fam.route_note)
        item.status, item.summary = ChecklistStatus.FAIL, f"no IPv6 route to {fam.addr}"
        item.next = f"{j.shell('ip -6 route show default')}  (see ipv6-route)"
        return
    small = fam.pings.get(0)
    if small is None:
        item.saw(f"ip -6 route get {fam.addr}", fam.route.kind)
        item.status, item.summary = ChecklistStatus.FAIL, f"{fam.addr} is {fam.route.kind}"
        item.next = j.shell(f"ip -6 route get {fam.addr}")
        return
    item.saw(fam.argv[0], small.note)
    if small.replied:
        item.summary = f"{fam.addr} answers over IPv6 (dev {fam.route.dev or '-'})"
    else:
        item.status = ChecklistStatus.FAIL
        item.summary = f"no IPv6 reply from {fam.addr}: {small.note}"
        item.next = (
            f"{j.shell(f'ping -6 -c 3 {fam.addr}')}; {j.shell(f'tracepath -6 -n {fam.addr}')}"
        )


ADDRESS = Check("ipv6-address", "dc27", "dual-stack: a global IPv6 address", _address)
ROUTE = Check("ipv6-route", "dc27", "dual-stack: an IPv6 default route", _route)
PEER = Check("ipv6-peer", "dc27", "dual-stack: the peer answers over IPv6", _peer, needs_peer=True)
