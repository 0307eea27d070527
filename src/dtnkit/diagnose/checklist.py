"""``dtnkit checklist``: the DC27 site items and the HTTP-TPC troubleshooting checks, each
pass / warn / fail with its evidence (what was read, the value) and the next step.

Reads only, through the :class:`~dtnkit.host.host.Host` seam (a namespace, a captured tree):
the host is made read-only here, so a write anywhere below raises.  The tuning items run the
tune audit in-process and reuse its interface selection.  docs/monitoring.md ("Checklist")
says what each item looks at and its rules.
"""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dtnkit.diagnose import sitecfg
from dtnkit.diagnose.sitecfg import Peer
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host import facts
from dtnkit.host.facts import Interface, Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.ethtool import parse_ethtool_features_json, parse_ethtool_features_text
from dtnkit.tune.audit import Audit, host_label
from dtnkit.tune.judging import Judging
from dtnkit.tune.keys import typed
from dtnkit.tune.profile import Profile
from dtnkit.units import format_bytes

CHECKLIST_SCHEMA = "dtnkit.checklist/1"
STATUSES = ("pass", "warn", "fail")
JUMBO = 9000
ONE_GIB = 1 << 30
HUNDRED_G_MBPS = 100_000
#: seconds ping waits for a reply, and at most in all (the probes of one peer run side by side;
#: two requests each, since one reply in a few is lost when many pings start at once)
PING_WAIT_S = 1
PING_DEADLINE_S = 2
#: path MTUs tried below the interface's own: jumbo, common tunnel sizes, Ethernet, IPv6 minimum
MTU_LADDER = (9000, 8000, 4000, 1500, 1280)
NODE_EXPORTER_PORT = 9100


@dataclass(frozen=True)
class Evidence:
    source: str  # what was read: a file, a command line, a process
    value: str

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "value": self.value}


@dataclass
class Item:
    id: str
    section: str  # dc27 | troubleshooting
    title: str
    status: str = "pass"
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    next: str = ""

    def saw(self, source: str, value: object) -> None:
        self.evidence.append(Evidence(source, str(value)))

    def worst(self, status: str) -> None:
        if STATUSES.index(status) > STATUSES.index(self.status):
            self.status = status

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "section": self.section, "title": self.title,
                "status": self.status, "summary": self.summary,
                "evidence": [e.as_dict() for e in self.evidence],
                "next": self.next or None}


@dataclass
class Checklist:
    host: str
    peer: str | None
    items: list[Item]

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for item in self.items:
            counts[item.status] += 1
        return counts

    @property
    def ok(self) -> bool:
        """No item fails (warnings are allowed: some facts are the network's, not the host's)."""
        return not any(i.status == "fail" for i in self.items)

    def as_dict(self) -> dict[str, Any]:
        return {"schema": CHECKLIST_SCHEMA, "host": self.host, "peer": self.peer,
                "ok": self.ok, "counts": self.counts,
                "items": [i.as_dict() for i in self.items]}


@dataclass
class Options:
    """What only the checklist looks at; what the host is judged by (profile, RTT, speed,
    interfaces) and where (namespace, tree) is the :class:`Judging`."""

    peer: Peer | None = None
    perfsonar: str | None = None


@dataclass
class _Proc:
    pid: str
    program: str
    args: list[str]
    #: the process's network namespace (``DEV:INODE``); None when it cannot be told
    netns_id: str | None = None

    @property
    def line(self) -> str:
        return " ".join([self.program, *self.args])[:160]


def run_checklist(host: Host, judging: Judging, opts: Options,
                  profile: Profile | None = None) -> Checklist:
    """Every item, in the order of docs/monitoring.md.  Never writes.  The tuning items judge
    by ``judging`` (``profile``: its profile, when the caller loaded it already) and every
    next step carries its scope and flags."""
    host = host.read_only_view()
    j = judging
    try:
        audit: Audit | None = j.audit(host, profile or j.load_profile())
        audit_error = ""
    except BadInput:
        raise  # --iface names an interface this host does not have
    except DtnkitError as exc:
        audit, audit_error = None, exc.render()
    if audit is not None:
        links, devices = audit.ctx.ifaces, audit.ctx.devices
    else:
        links = facts.interfaces(host)
        devices = facts.select_interfaces(links, list(j.ifaces) or None,
                                          facts.default_route_devices(host))
    procs = _processes(host)
    peer_facts = _PeerFacts.probe(host, opts.peer, links) if opts.peer else None
    items = [
        ipv6_address(host, links, devices, j),
        ipv6_route(host, j),
        *([ipv6_peer(peer_facts, j)] if peer_facts else []),
        jumbo(links, devices, j),
        *([path_mtu(peer_facts, j)] if peer_facts else []),
        scitags(host, procs, j),
        perfsonar(host, opts.perfsonar, j),
        tuned(audit, audit_error, j),
        flow_monitoring(host, procs, j),
        traffic_type(host),
        tcp_rmem(host, audit, j),
        udp_gro_forwarding(host, devices, j),
        sysctl_item(host, "slow-start-idle", "net.ipv4.tcp_slow_start_after_idle", 0,
                    "unstable transfers: no cwnd collapse after an idle pause", j),
        sysctl_item(host, "tcp-frto", "net.ipv4.tcp_frto", 2,
                    "unstable transfers: F-RTO finds spurious retransmit timeouts", j),
    ]
    return Checklist(host_label(host), opts.peer.text if opts.peer else None, items)


# ---- dual stack ---------------------------------------------------------------------------------


def _int(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def ipv6_address(host: Host, links: dict[str, Interface],
                 devices: list[tuple[str, str]], j: Judging) -> Item:
    item = Item("ipv6-address", "dc27", "dual-stack: a global IPv6 address")
    if not host.exists("/proc/sys/net/ipv6/conf"):
        item.saw("/proc/sys/net/ipv6", "absent")
        item.status, item.summary = "fail", "IPv6 is disabled in the kernel (ipv6.disable=1?)"
        item.next = "remove ipv6.disable=1 from the kernel command line and reboot"
        return item
    off = _int(host.read("/proc/sys/net/ipv6/conf/all/disable_ipv6"))
    item.saw("/proc/sys/net/ipv6/conf/all/disable_ipv6", "-" if off is None else off)
    data = [d for d, _ in devices]
    off_on = []
    for dev in data:
        value = _int(host.read(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"))
        if value == 1:
            off_on.append(dev)
            item.saw(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6", value)
    addrs = facts.addresses(host, "-6")
    if isinstance(addrs, Unavailable):
        item.saw("ip -6 addr", addrs.reason)
        item.status, item.summary = "warn", f"cannot list IPv6 addresses: {addrs.reason}"
        item.next = j.shell("ip -6 addr show")
        return item
    globals_ = [a for a in addrs if a.scope == "global" and a.ifname in links]
    public = [a for a in globals_ if not _ula(a.local)]
    for a in globals_[:6]:
        item.saw(f"ip -6 addr ({a.ifname})", f"{a.local}/{a.prefixlen} scope {a.scope}")
    if off == 1 or (data and len(off_on) == len(data)):
        where = "all interfaces" if off == 1 else ", ".join(off_on)
        item.status, item.summary = "fail", f"IPv6 is disabled on {where} (disable_ipv6 = 1)"
        item.next = _sysctl_fix(j, "net.ipv6.conf.all.disable_ipv6=0")
        return item
    if not globals_:
        item.saw("ip -6 addr", "no address of scope global")
        item.status, item.summary = "fail", "no global IPv6 address"
        item.next = "give the data interface a global IPv6 address (SLAAC or static)"
        return item
    on_data = [a for a in public if a.ifname in upper_names(links, data)]
    if not public:
        item.status, item.summary = "warn", "only unique-local IPv6 addresses (fc00::/7)"
        item.next = "give the data interface a global unicast IPv6 address"
    elif data and not on_data:
        item.status = "warn"
        item.summary = (f"global IPv6 address on {public[0].ifname}, none on the data "
                        f"interfaces ({', '.join(data)})")
        item.next = f"give {data[0]} (or its bond/VLAN) a global IPv6 address"
    else:
        first = (on_data or public)[0]
        item.summary = f"{first.local} on {first.ifname}"
        if off_on:
            item.worst("warn")
            item.summary += f"; IPv6 off on {', '.join(off_on)}"
            item.next = _sysctl_fix(j, f"net.ipv6.conf.{off_on[0]}.disable_ipv6=0")
    return item


def upper_names(links: dict[str, Interface], devices: Sequence[str]) -> set[str]:
    """The devices and every bond, bridge and VLAN above them (where addresses live)."""
    out: set[str] = set()
    for dev in devices:
        out.update(facts.upper_devices(links, dev))
    return out


def _ula(addr: str) -> bool:
    try:
        return ipaddress.IPv6Address(addr.split("%")[0]) in ipaddress.IPv6Network("fc00::/7")
    except ValueError:
        return False


def ipv6_route(host: Host, j: Judging) -> Item:
    item = Item("ipv6-route", "dc27", "dual-stack: an IPv6 default route")
    routes = facts.default_routes(host, "-6")
    if isinstance(routes, Unavailable):
        item.saw("ip -6 route show default", routes.reason)
        item.status, item.summary = "warn", f"cannot read IPv6 routes: {routes.reason}"
        item.next = j.shell("ip -6 route show default")
        return item
    for r in routes[:4]:
        item.saw("ip -6 route show default",
                 f"via {r.gateway or '-'} dev {','.join(r.devs) or '-'}")
    if not routes:
        item.saw("ip -6 route show default", "none")
        item.status, item.summary = "fail", "no IPv6 default route"
        item.next = ("add one (router advertisements, or "
                     f"{j.shell('ip -6 route add default via GW')})")
    else:
        r = routes[0]
        item.summary = f"default via {r.gateway or '-'} dev {','.join(r.devs) or '-'}"
    return item


# ---- the peer: IPv6 reach and the path MTU ------------------------------------------------------


@dataclass
class _Family:
    version: int
    addr: str
    route: sitecfg.RouteTo | None
    route_note: str
    dev_mtu: int | None
    pings: dict[int, sitecfg.PingOutcome]  # MTU tried -> outcome (0: the small probe)
    argv: dict[int, str]


@dataclass
class _PeerFacts:
    peer: Peer
    resolved: list[str]
    resolve_note: str
    families: dict[int, _Family]

    @classmethod
    def probe(cls, host: Host, peer: Peer, links: dict[str, Interface]) -> _PeerFacts:
        if peer.literal:
            addrs, note = [peer.text], f"IPv{peer.family} address"
        else:
            res = host.query(["getent", "ahosts", peer.text])
            addrs = sitecfg.parse_getent_hosts(res.stdout) if res.ok else []
            note = (", ".join(addrs[:4]) if addrs else
                    "does not resolve" if res.returncode == 2 else
                    f"cannot resolve: {res.message()}")
        chosen: dict[int, str] = {}
        for a in addrs:
            version = 6 if ":" in a else 4
            chosen.setdefault(version, a)
        families: dict[int, _Family] = {}
        plans: list[tuple[int, int, list[str]]] = []
        for version, addr in sorted(chosen.items()):
            res = host.query(["ip", "-j", f"-{version}", "route", "get", addr.split("%")[0]])
            route = sitecfg.parse_route_get(res.stdout) if res.ok else None
            route_note = (res.message() or "no route") if not res.ok else ""
            if res.returncode == 127:  # a captured tree without it, or no `ip`
                route_note = f"cannot tell: {route_note}"
            dev_mtu = links[route.dev].mtu if route and route.dev in links else None
            if dev_mtu is not None and version == 4:
                dev_mtu = min(dev_mtu, 65535)  # lo's 65536 is above an IPv4 packet's largest
            fam = _Family(version, addr, route, route_note, dev_mtu, {}, {})
            families[version] = fam
            if route is None or route.kind in ("unreachable", "prohibit", "blackhole"):
                continue
            header = 48 if version == 6 else 28
            mtus = [0]
            if dev_mtu is not None:
                mtus += [dev_mtu, *(m for m in MTU_LADDER if m < dev_mtu)]
            for mtu in mtus:
                size = 16 if mtu == 0 else mtu - header
                argv = ["ping", f"-{version}", "-n", "-c", "2", "-i", "0.2", "-w",
                        str(PING_DEADLINE_S), "-W", str(PING_WAIT_S),
                        "-M", "do", "-s", str(size), addr]
                plans.append((version, mtu, argv))
        host.read_ahead([functools.partial(host.query, argv) for _, _, argv in plans],
                        workers=8)
        for version, mtu, argv in plans:
            res = host.query(argv)
            text = res.stdout + "\n" + res.stderr
            if res.returncode == 127 and "not found" in res.stderr + res.stdout:
                text = "ping: error: ping is not installed (iputils-ping)"
            families[version].pings[mtu] = sitecfg.parse_ping(res.returncode, text)
            families[version].argv[mtu] = " ".join(argv)
        return cls(peer, addrs, note, families)


def _resolve_evidence(item: Item, pf: _PeerFacts) -> None:
    src = "--peer" if pf.peer.literal else f"getent ahosts {pf.peer.text}"
    item.saw(src, pf.resolve_note)


def ipv6_peer(pf: _PeerFacts | None, j: Judging) -> Item:
    item = Item("ipv6-peer", "dc27", "dual-stack: the peer answers over IPv6")
    assert pf is not None
    _resolve_evidence(item, pf)
    name = pf.peer.text
    if not pf.resolved:
        item.status, item.summary = "fail", f"{name} {pf.resolve_note}"
        item.next = f"{j.shell(f'getent ahosts {name}')}  (check the name and the resolver)"
        return item
    fam = pf.families.get(6)
    if fam is None:
        if pf.peer.family == 4:
            item.status = "warn"
            item.summary = f"{name} is an IPv4 address: IPv6 reach not tested"
            item.next = "give the peer's name or IPv6 address with --peer"
        else:
            item.status, item.summary = "fail", f"{name} has no IPv6 address (no AAAA record)"
            item.next = f"publish an AAAA record for {name} and make it dual-stack"
        return item
    if fam.route is None:
        item.saw(f"ip -6 route get {fam.addr}", fam.route_note)
        item.status, item.summary = "fail", f"no IPv6 route to {fam.addr}"
        item.next = f"{j.shell('ip -6 route show default')}  (see ipv6-route)"
        return item
    small = fam.pings.get(0)
    if small is None:
        item.saw(f"ip -6 route get {fam.addr}", fam.route.kind)
        item.status, item.summary = "fail", f"{fam.addr} is {fam.route.kind}"
        item.next = j.shell(f"ip -6 route get {fam.addr}")
        return item
    item.saw(fam.argv[0], small.note)
    if small.replied:
        item.summary = f"{fam.addr} answers over IPv6 (dev {fam.route.dev or '-'})"
    else:
        item.status, item.summary = "fail", f"no IPv6 reply from {fam.addr}: {small.note}"
        item.next = (f"{j.shell(f'ping -6 -c 3 {fam.addr}')}; "
                     f"{j.shell(f'tracepath -6 -n {fam.addr}')}")
    return item


def path_mtu(pf: _PeerFacts | None, j: Judging) -> Item:
    item = Item("path-mtu", "dc27", "jumbo frames: the path MTU to the peer")
    assert pf is not None
    _resolve_evidence(item, pf)
    if not pf.resolved:
        item.status, item.summary = "fail", f"{pf.peer.text} {pf.resolve_note}"
        item.next = j.shell(f"getent ahosts {pf.peer.text}")
        return item
    summaries = []
    nexts = []
    for version, fam in sorted(pf.families.items(), reverse=True):
        tag = f"IPv{version}"
        if fam.route is None or fam.route.dev is None:
            item.saw(f"ip -{version} route get {fam.addr}", fam.route_note or "no device")
            if fam.route_note.startswith("cannot tell"):
                item.worst("warn")
                summaries.append(f"{tag}: {fam.route_note}")
                nexts.append("run the checklist on the host itself (a tree has no route or "
                             "ping of its own)")
                continue
            item.worst("fail")
            summaries.append(f"{tag}: no route to {fam.addr}")
            nexts.append(j.shell(f"ip -{version} route get {fam.addr}"))
            continue
        cache = f", cached path MTU {fam.route.pmtu}" if fam.route.pmtu else ""
        item.saw(f"ip -{version} route get {fam.addr}",
                 f"dev {fam.route.dev} mtu {fam.dev_mtu or '-'}{cache}")
        for mtu, out in sorted(fam.pings.items(), reverse=True):
            item.saw(fam.argv[mtu], out.note)
        if fam.dev_mtu is None:
            item.worst("warn")
            summaries.append(f"{tag}: MTU of {fam.route.dev} unknown")
            nexts.append(j.shell(f"ip link show {fam.route.dev}"))
            continue
        passed = [m for m, o in fam.pings.items() if m and o.replied]
        if not fam.pings.get(0, sitecfg.PingOutcome(False, None, "")).replied and not passed:
            item.worst("warn")
            summaries.append(f"{tag}: {fam.addr} does not answer ping; path MTU unknown")
            nexts.append(f"{j.shell(f'ping -{version} -c 3 {fam.addr}')}  (ICMP filtered? the "
                         "peer down?)")
            continue
        best = max(passed, default=0)
        if best >= fam.dev_mtu:
            summaries.append(f"{tag}: {fam.dev_mtu}-byte packets reach {fam.addr} unfragmented")
            continue
        item.worst("fail")
        failed = min((m for m, o in fam.pings.items() if m and not o.replied and m > best),
                     default=fam.dev_mtu)
        hints = sorted({o.mtu_hint for o in fam.pings.values() if o.mtu_hint})
        said = f"; ICMP says mtu {hints[0]}" if hints else ""
        within = (f"between {best} and {failed - 1}" if best else f"below {failed}")
        summaries.append(f"{tag}: path MTU to {fam.addr} is {within}, {fam.route.dev} has "
                         f"{fam.dev_mtu}{said}")
        nexts.append(f"{j.shell(f'tracepath -{version} -n {fam.addr}')}  (find the hop with "
                     "the smaller MTU; use one MTU end to end)")
    item.summary = "; ".join(summaries)
    item.next = "; ".join(nexts) if item.status != "pass" else ""
    return item


# ---- jumbo frames -------------------------------------------------------------------------------


def jumbo(links: dict[str, Interface], devices: list[tuple[str, str]], j: Judging) -> Item:
    item = Item("jumbo", "dc27", "jumbo frames on the data interfaces")
    if not devices:
        item.status, item.summary = "warn", "no data interface selected"
        item.next = "name the data interfaces with --iface"
        return item
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
        item.status = "fail"
        item.summary = f"MTU below {JUMBO} on {', '.join(small)}"
        item.next = (f"{j.command('tune', 'apply', '--mtu')} (or "
                     f"{j.shell(f'ip link set {small[0]} mtu {JUMBO}')}; the switch ports "
                     "too)")
    else:
        item.summary = f"MTU {JUMBO} or more on {names}"
    return item


# ---- processes and configuration files ----------------------------------------------------------


def _processes(host: Host) -> list[_Proc]:
    """Every process's program and arguments from ``/proc/PID/cmdline`` (the host's: a
    namespace shares the process table), with the network namespace it runs in."""
    out = []
    for pid in host.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            raw = host.read(f"/proc/{pid}/cmdline")
        except (DtnkitError, ValueError):
            continue  # not ours to read, or not UTF-8 (no marker or exporter is named so)
        argv = sitecfg.cmdline_argv(raw or "")
        if argv:
            prog, args = sitecfg.program(argv)
            out.append(_Proc(pid, prog, args, host.process_netns_id(pid)))
    return out


def _here(host: Host, procs: list[_Proc]) -> list[_Proc]:
    """The processes that run in the network namespace the checklist looks at: a server in
    another namespace (a lab's other end, a container) neither serves nor marks this one's
    traffic.  A process whose namespace cannot be told (a captured tree) is kept."""
    mine = host.netns_id()
    if mine is None:
        return procs
    return [p for p in procs if p.netns_id is None or p.netns_id == mine]


def _watches_here(host: Host, p: _Proc) -> bool:
    """Whether an exporter process reads this namespace's counters: ``dtnkit exporter
    --netns NS`` reads NS's wherever it runs; any other reads its own namespace's."""
    if _dtnkit(p, "exporter") or _dtnkit(p, "metrics"):
        ns = sitecfg.option_value(p.args, "--netns")
        if ns is not None:
            return host.netns_id() in (None, host.named_netns_id(ns))
    mine = host.netns_id()
    return mine is None or p.netns_id is None or p.netns_id == mine


def _read(host: Host, path: str) -> str | None:
    try:
        return host.read(path)
    except DtnkitError:
        return None


def _files(host: Host, directory: str, suffix: str = "") -> list[str]:
    return [f"{directory}/{n}" for n in host.listdir(directory)
            if n.endswith(suffix) and not n.startswith(".")]


def _dtnkit(p: _Proc, command: str) -> bool:
    return p.program == "dtnkit" and command in p.args[:4]


def scitags(host: Host, procs: list[_Proc], j: Judging) -> Item:
    item = Item("scitags", "dc27", "SciTags: flow marking configured")
    procs = _here(host, procs)
    active: list[str] = []
    partial: list[str] = []
    # flow services: flowd-go, flowd
    running = {p.program: p for p in procs if p.program in ("flowd-go", "flowd")}
    for p in running.values():
        item.saw(f"process {p.pid}", p.line)
    conf = _read(host, "/etc/flowd-go/conf.yaml")
    if conf is not None:
        backends = sitecfg.flowd_go_backends(conf)
        item.saw("/etc/flowd-go/conf.yaml", f"backends: {', '.join(backends) or 'none'}")
        if "flowd-go" in running and backends:
            active.append(f"flowd-go ({', '.join(backends)})")
        elif backends:
            partial.append("flowd-go configured but not running")
        else:
            partial.append("/etc/flowd-go/conf.yaml turns on no backend")
    elif "flowd-go" in running:
        active.append("flowd-go running")
    cfg = _read(host, "/etc/flowd/flowd.cfg")
    if cfg is not None:
        values = sitecfg.flowd_cfg(cfg)
        item.saw("/etc/flowd/flowd.cfg", f"PLUGIN={values.get('PLUGIN', '-')} "
                                         f"BACKEND={values.get('BACKEND', '-')}")
        if "flowd" in running and values.get("BACKEND"):
            active.append(f"flowd ({values['BACKEND']})")
        elif values.get("BACKEND"):
            partial.append("flowd configured but not running")
    elif "flowd" in running:
        active.append("flowd running")
    # XRootD: xrootd.pmark in its configuration (the -c of running servers, /etc/xrootd)
    paths = [*_files(host, "/etc/xrootd", ".cfg"), *_files(host, "/etc/xrootd/config.d", ".cfg")]
    for p in procs:
        if p.program == "xrootd":
            c = sitecfg.option_value(p.args, "-c")
            if c and c.startswith("/") and c not in paths:
                paths.append(c)
    seen: set[str] = set()
    for path in paths:
        text = _read(host, path) if path not in seen else None
        seen.add(path)
        if text is None:
            continue
        for inc in sitecfg.xrootd_includes(text)[:8]:
            more = _files(host, inc) if host.listdir(inc) else [inc]
            for extra in more:
                if extra not in seen:
                    seen.add(extra)
                    text += "\n" + (_read(host, extra) or "")
        pmark = sitecfg.parse_xrootd_pmark(text)
        if not pmark.lines:
            continue
        item.saw(path, "; ".join(pmark.lines)[:200])
        if pmark.fireflies_on and not pmark.problems:
            active.append(f"xrootd.pmark ffdest {','.join(pmark.ffdest)} ({path})")
        else:
            partial.append(f"xrootd.pmark in {path}: {'; '.join(pmark.problems)}")
    # dCache
    for path in ["/etc/dcache/dcache.conf", *_files(host, "/etc/dcache/layouts", ".conf")]:
        text = _read(host, path)
        on = sitecfg.dcache_firefly(text) if text is not None else None
        if on is not None:
            item.saw(path, f"pool.enable.firefly={'true' if on else 'false'}")
            (active if on else partial).append(f"dCache fireflies {'on' if on else 'off'}")
    # dtnkit serve's own marking
    for p in procs:
        if _dtnkit(p, "serve"):
            flags = [a.split("=")[0] for a in p.args
                     if a.startswith(("--scitag", "--firefly-dest"))]
            item.saw(f"process {p.pid}", p.line)
            if flags:
                active.append(f"dtnkit serve with {', '.join(sorted(set(flags)))}")
            else:
                partial.append(f"dtnkit serve (pid {p.pid}) runs without --scitag or "
                               "--firefly-dest")
    if active:
        item.summary = "; ".join(active)
        if partial:
            item.summary += f" (also: {'; '.join(partial)})"
    elif partial:
        item.status, item.summary = "warn", "; ".join(partial)
        item.next = ("complete it: xrootd.pmark ffdest HOST:10514, start flowd-go, or "
                     f"{j.shell('dtnkit serve --scitag N ...')} (docs/monitoring.md)")
    else:
        item.saw("processes, /etc/flowd-go, /etc/flowd, /etc/xrootd, /etc/dcache", "no marking")
        item.status, item.summary = "fail", "no SciTags marking found"
        item.next = ("configure xrootd.pmark ffdest HOST:10514 (XRootD), "
                     "pool.enable.firefly=true (dCache), or install flowd-go")
    return item


def _curl(host: Host, url: str, timeout_s: int) -> tuple[int | None, str, str]:
    """(HTTP status or None, body start, error) of a GET through the Host (its namespace)."""
    res = host.query(["curl", "-sS", "-k", "-m", str(timeout_s), "-o", "-",
                      "-w", "\n%{http_code}", url])
    if res.returncode == 127 and "not found" in res.stderr + res.stdout:
        return None, "", "curl is not installed"
    body, _, code = res.stdout.rpartition("\n")
    status = int(code) if code.strip().isdigit() and int(code) > 0 else None
    err = res.stderr.strip().splitlines()[-1][:120] if res.stderr.strip() else ""
    return status, body[:400], err or (f"curl exit {res.returncode}" if not res.ok else "")


def perfsonar(host: Host, url: str | None, j: Judging) -> Item:
    item = Item("perfsonar", "dc27", "perfSONAR: pscheduler here or a toolkit reachable")
    local = None
    if host.is_live:
        if host.has_tool("pscheduler"):
            local = "pscheduler on PATH"
    else:
        for path in ("/usr/bin/pscheduler", "/usr/local/bin/pscheduler"):
            if host.exists(path):
                local = path
    item.saw("pscheduler", local or "not installed")
    if url is not None:
        api = url.rstrip("/") + ("" if url.rstrip("/").endswith("/pscheduler") else
                                 "/pscheduler")
        status, body, err = _curl(host, api + "/", 5)
        item.saw(f"GET {api}/", f"HTTP {status}" if status else err or "no answer")
        if status == 200 and "pscheduler" in body.lower():
            item.summary = f"toolkit answers at {api}/"
        elif status is not None:
            item.status = "warn" if local else "fail"
            item.summary = f"{api}/ answered HTTP {status}, not the pScheduler API"
            item.next = f"{j.shell(f'curl -k {api}/')}  (is it a perfSONAR toolkit?)"
        else:
            item.status = "warn" if local else "fail"
            item.summary = f"{api}/ unreachable: {err or 'no answer'}"
            item.next = j.shell(f"curl -kv {api}/")
        if local and item.status != "pass":
            item.summary += f"; {local}"
        return item
    if local:
        item.summary = local
    else:
        item.status, item.summary = "warn", "no pscheduler on this host"
        item.next = "give --perfsonar URL of the site's perfSONAR toolkit to check it"
    return item


def flow_monitoring(host: Host, procs: list[_Proc], j: Judging) -> Item:
    item = Item("flow-monitoring", "dc27", "WAN flows monitored: host metrics and flow export")
    exporters = [p for p in procs if _watches_here(host, p) and (
                 p.program in ("node_exporter", "prometheus-node-exporter")
                 or _dtnkit(p, "exporter")
                 or (_dtnkit(p, "serve") and "--metrics" in p.args))]
    procs = _here(host, procs)
    for p in exporters[:4]:
        item.saw(f"process {p.pid}", p.line)
    metrics = bool(exporters)
    if not metrics and host.is_live:
        url = f"http://127.0.0.1:{NODE_EXPORTER_PORT}/metrics"
        status, _, err = _curl(host, url, 2)
        item.saw(f"GET {url}", f"HTTP {status}" if status else err or "no answer")
        metrics = status == 200
    export: list[str] = []
    flow_progs = ("softflowd", "pmacctd", "uacctd", "hsflowd", "fprobe", "nprobe", "goflow2")
    for p in procs:
        if p.program in flow_progs:
            item.saw(f"process {p.pid}", p.line)
            export.append(f"{p.program} running")
    for path in ["/etc/default/softflowd", *_files(host, "/etc/softflowd", ".conf")]:
        text = _read(host, path)
        where = sitecfg.softflowd_export(text) if text else None
        if where:
            item.saw(path, where)
            export.append(f"softflowd {where}")
    for path in _files(host, "/etc/pmacct", ".conf"):
        text = _read(host, path)
        plugins = sitecfg.pmacct_export(text) if text else []
        if plugins:
            item.saw(path, ", ".join(plugins))
            export.append(f"pmacct {', '.join(plugins)}")
    hs = _read(host, "/etc/hsflowd.conf")
    if hs is not None and sitecfg.uncommented(hs):
        item.saw("/etc/hsflowd.conf", f"{len(sitecfg.uncommented(hs))} settings")
        export.append("hsflowd configured")
    if host.exists("/proc/net/stat/ipt_netflow"):
        item.saw("/proc/net/stat/ipt_netflow", "present")
        export.append("ipt_NETFLOW loaded")
    have = []
    if metrics:
        have.append("host metrics (" + (", ".join(sorted({p.program if p.program != "dtnkit"
                                                          else f"dtnkit {p.args[0]}"
                                                          for p in exporters}))
                                        or f"port {NODE_EXPORTER_PORT}") + ")")
    if export:
        have.append("flow export (" + "; ".join(export[:3]) + ")")
    if metrics and export:
        item.summary = ", ".join(have)
    elif metrics or export:
        item.status = "warn"
        missing = ("no flow export on this host (the site routers may export NetFlow/IPFIX: "
                   "ask the network team)" if metrics else "no node_exporter or dtnkit exporter")
        item.summary = f"{have[0]}; {missing}"
        item.next = (f"{j.shell('softflowd -i DEV -n COLLECTOR:PORT')}, or confirm "
                     "router-side export" if metrics else
                     f"run {_exporter_hint(j)} or prometheus-node-exporter")
    else:
        item.status = "fail"
        item.summary = "no host metrics exporter and no flow export"
        item.next = (f"run {_exporter_hint(j)} (or prometheus-node-exporter) and a flow "
                     "exporter")
    return item


def _exporter_hint(j: Judging) -> str:
    """``dtnkit exporter`` judging as the checklist did, reading the counters it looked at."""
    if j.tree is not None:
        return f"{j.command('exporter', scope=False)} on the host {j.tree} was captured from"
    return j.command("exporter")


def traffic_type(host: Host) -> Item:
    item = Item("traffic-type", "dc27", "traffic told apart: LHCOPN, LHCONE, R&E, commodity")
    for family in ("-4", "-6"):
        routes = facts.default_routes(host, family)
        if isinstance(routes, list):
            for r in routes[:2]:
                item.saw(f"ip {family} route show default",
                         f"via {r.gateway or '-'} dev {','.join(r.devs) or '-'}")
    res = host.query(["ip", "-j", "rule", "show"])
    if res.ok:
        try:
            rules = json.loads(res.stdout)
        except ValueError:
            rules = None
        if isinstance(rules, list):
            extra = [r for r in rules if isinstance(r, dict)
                     and r.get("table") not in ("local", "main", "default")]
            item.saw("ip -j rule show", f"{len(extra)} policy rules beyond local/main/default")
    item.status = "warn"
    item.summary = ("a network-side fact: this host cannot see which path (LHCOPN, LHCONE, "
                    "R&E, commodity) its prefixes take")
    item.next = ("ask the network team which prefixes are announced to LHCONE/LHCOPN; "
                 "mark transfers with SciTags so R&E networks can tell flows apart")
    return item


# ---- troubleshooting ----------------------------------------------------------------------------


def tuned(audit: Audit | None, error: str, j: Judging) -> Item:
    item = Item("tuned", "dc27", "host tuned (tune audit)")
    if audit is None:
        item.status, item.summary = "warn", f"the audit could not run: {error}"
        item.next = j.command("tune", "audit")
        return item
    groups: dict[str, dict[str, int]] = {}
    for f in audit.findings:
        groups.setdefault(f.group, {}).setdefault(f.status, 0)
        groups[f.group][f.status] += 1
    bad = []
    unknown = []
    for group, counts in groups.items():
        item.saw(f"tune audit --group {group}",
                 ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        if counts.get("differs"):
            bad.append(group)
        elif counts.get("unknown"):
            unknown.append(group)
    ok = len(groups) - len(bad) - len(unknown)
    item.summary = (f"{ok} of {len(groups)} groups comply (profile {audit.profile.name}, "
                    f"RTT {audit.ctx.rtt_ms:g} ms)")
    if bad:
        item.status = "fail"
        item.summary += f"; differs: {', '.join(bad)}"
        item.next = j.command("tune", "apply", "--dry-run")
    elif unknown:
        item.status = "warn"
        item.summary += f"; unknown: {', '.join(unknown)}"
        hints = [u["hint"] for u in audit.undecided]
        item.next = f"{j.command('tune', 'audit')}  ({hints[0] if hints else 'see each why'})"
    return item


def tcp_rmem(host: Host, audit: Audit | None, j: Judging) -> Item:
    item = Item("tcp-rmem", "troubleshooting", "tcp_rmem max: 1 GiB at 100G, the BDP below")
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
        for f in audit.findings:
            triple = typed(f.recommended)  # the audit keeps a triple as the kernel prints it
            if (f.key == "sysctl/net.ipv4.tcp_rmem" and isinstance(triple, list)
                    and len(triple) == 3):
                want, from_audit = int(triple[2]), True
                why = f"the {audit.profile.name} profile at {audit.ctx.rtt_ms:g} ms"
    if speed is not None and speed >= HUNDRED_G_MBPS and (want is None or want < ONE_GIB):
        want, why, from_audit = ONE_GIB, "1 GiB at 100G and faster", False
    if current is None:
        item.status, item.summary = "warn", "cannot read tcp_rmem"
        item.next = j.shell("sysctl net.ipv4.tcp_rmem")
    elif want is None and speed is None:
        item.status = "warn"
        item.summary = f"max {format_bytes(current)}; link speed unknown, so no target"
        item.next = (f"{j.command('checklist', extra=['--speed', 'SPEED'])}  (SPEED: the "
                     "link's, e.g. 100gbit)")
    elif want is None:
        item.status = "warn"
        item.summary = (f"max {format_bytes(current)}; the {j.profile} profile sets no "
                        "tcp_rmem, so no target")
        item.next = j.command("tune", "audit", "--group", "buffers")
    elif current >= want:
        item.summary = f"max {format_bytes(current)} >= {format_bytes(want)} ({why})"
    else:
        item.status = "fail"
        item.summary = f"max {format_bytes(current)} < {format_bytes(want)} ({why})"
        item.next = (j.command("tune", "apply", "--group", "buffers") if from_audit else
                     _sysctl_fix(j, f"net.ipv4.tcp_rmem='{parts[0]} {parts[1]} {want}'"))
    return item


def _sysctl_fix(j: Judging, assignment: str) -> str:
    """``sysctl -w KEY=VALUE`` where the checklist looked, and where to keep it."""
    cmd = f"sysctl -w {assignment}"
    if j.tree is not None:
        return j.shell(cmd, j.command("tune", "audit"))
    if j.netns:  # /etc/sysctl.d is read in the host's namespace only
        return f"{j.shell(cmd)} (and wherever the namespace is set up)"
    return f"{cmd} (and the same in /etc/sysctl.d)"


def udp_gro_forwarding(host: Host, devices: list[tuple[str, str]], j: Judging) -> Item:
    item = Item("udp-gro-forwarding", "troubleshooting", "rx-udp-gro-forwarding on")
    if not devices:
        item.status, item.summary = "warn", "no data interface selected"
        item.next = "name the data interfaces with --iface"
        return item
    off, lack = [], []
    for dev, _ in devices:
        try:
            feats = facts.ethtool_read(host, "-k", dev, parse_ethtool_features_json,
                                       parse_ethtool_features_text)
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
        item.status = "fail"
        item.summary = f"off on {', '.join(off)}"
        item.next = j.shell(f"ethtool -K {off[0]} rx-udp-gro-forwarding on")
    elif lack:
        item.status = "warn"
        item.summary = f"cannot be on: {'; '.join(lack)}"
        item.next = "nothing to set on these devices; check the physical NICs below them"
    else:
        item.summary = f"on for {', '.join(d for d, _ in devices)}"
    return item


def sysctl_item(host: Host, ident: str, key: str, want: int, title: str, j: Judging) -> Item:
    item = Item(ident, "troubleshooting", f"{key} = {want} ({title})")
    path = Host.sysctl_path(key)
    text = host.read(path)
    value = _int(text)
    item.saw(path, "-" if text is None else text.strip())
    if value is None:
        item.status, item.summary = "warn", f"cannot read {key}"
        item.next = j.shell(f"sysctl {key}")
    elif value == want:
        item.summary = f"{key} = {value}"
    else:
        item.status, item.summary = "fail", f"{key} = {value}, want {want}"
        item.next = _sysctl_fix(j, f"{key}={want}")
    return item
