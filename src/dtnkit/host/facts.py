"""Facts about a host, read through :class:`~dtnkit.host.host.Host` and the pure parsers.

Nothing here writes.  Each function says where its answer came from, so audit can show the
reason for every automatic decision (speed tier, fq present, namespace scope, ...).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError, ethtool_nl
from dtnkit.host.parsers.ethtool import parse_ethtool_driver
from dtnkit.host.parsers.iproute import (
    Address,
    Link,
    Route,
    parse_ip_addr_json,
    parse_ip_link_json,
    parse_ip_route_json,
)
from dtnkit.host.parsers.netlink import KernelRefused
from dtnkit.host.parsers.proc import parse_meminfo
from dtnkit.host.parsers.rtnetlink import (
    NlLink,
    link_names,
    parse_addresses,
    parse_default_routes,
    parse_links,
    parse_qdiscs,
)
from dtnkit.host.parsers.tc import Qdisc

T = TypeVar("T")

JSON_TRUSTED = frozenset({"-k"})

AGGREGATE_KINDS = frozenset({"bond", "team", "bridge"})
STACKED_KINDS = frozenset({"vlan", "macvlan", "ipvlan", "macsec"})
# links that carry no traffic of their own: not tuned unless named with --iface
AUXILIARY_KINDS = frozenset(
    {
        "ifb",
        "dummy",
        "nlmon",
        "sit",
        "ipip",
        "ip6tnl",
        "gre",
        "gretap",
        "ip6gre",
        "vti",
        "wireguard",
        "vxlan",
        "geneve",
    }
)


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A value the host cannot give, and why (unsupported op, tool missing, no such file)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Interface:
    name: str
    kind: str | None  # None: a physical NIC (or anything without linkinfo)
    physical: bool  # has /sys/class/net/IF/device
    speed_mbps: int | None  # None: the kernel reports no speed (-1, virtio, down, lo)
    operstate: str
    mtu: int
    max_mtu: int | None
    txqlen: int
    master: str | None
    lower: str | None
    members: tuple[str, ...]
    numa_node: int | None
    num_tx_queues: int | None

    @property
    def loopback(self) -> bool:
        return self.name == "lo"

    @property
    def aggregate(self) -> bool:
        return self.kind in AGGREGATE_KINDS

    @property
    def stacked(self) -> bool:
        return self.kind in STACKED_KINDS


def _kernel_links(host: Host) -> tuple[list[NlLink], dict[str, bytes]] | None:
    """The links from the kernel's rtnetlink dump, with every dump; None when the host gives
    no dumps (a captured tree replays ``ip`` instead) or they do not parse."""
    kernel = host.kernel
    dumps = kernel.rtnl_dumps() if kernel is not None else None
    if dumps is None:
        return None
    try:
        return _parsed_links(dumps["link"]), dumps
    except ParseError:
        return None


#: the last link dump parsed and its links: a dump is the same bytes object until the Host
#: reads again (after a write or refresh), and an audit asks for the links a dozen times
_LAST_LINKS: list[tuple[bytes, list[NlLink]]] = []


def _parsed_links(data: bytes) -> list[NlLink]:
    """``parse_links(data)``, parsed once per dump (the list is shared: do not change it)."""
    last = _LAST_LINKS[:1]
    if last and last[0][0] is data:
        return last[0][1]
    links = parse_links(data)
    _LAST_LINKS[:] = [(data, links)]  # holds ``data``, so its id is not reused meanwhile
    return links


def kernel_qdiscs(host: Host, dev: str) -> list[Qdisc] | None:
    """The qdiscs of ``dev`` as ``tc -j qdisc show dev DEV`` gives them, from the kernel's
    rtnetlink dump on a live host; None when tc has to run (a tree, a device the dump does not
    have, a qdisc kind whose options only tc prints: see
    :data:`~dtnkit.host.parsers.rtnetlink.QDISC_KINDS`)."""
    kernel = _kernel_links(host)
    if kernel is None:
        return None
    links, dumps = kernel
    index = next((link.index for link in links if link.name == dev), None)
    if index is None or "qdisc" not in dumps:
        return None
    try:
        return parse_qdiscs(dumps["qdisc"], index)
    except ParseError:
        return None


def interfaces(host: Host) -> dict[str, Interface]:
    """Every link the host (or namespace) has, keyed by name (from the kernel's rtnetlink
    dump on a live host, else ``ip -d -j link show``: the same fields)."""
    kernel = _kernel_links(host)
    links: list[Link] | list[NlLink]
    if kernel is not None:
        links = kernel[0]
    else:
        res = host.query(["ip", "-d", "-j", "link", "show"])
        if res.returncode == 127:
            raise DtnkitError(
                "`ip` is not installed",
                "dtnkit reads links with `ip -d -j link`",
                "install iproute2",
            )
        if not res.ok:
            raise DtnkitError("cannot list network interfaces", res.message())
        links = parse_ip_link_json(res.stdout)
    members: dict[str, list[str]] = {}
    for link in links:
        if link.master:
            members.setdefault(link.master, []).append(link.name)
    out: dict[str, Interface] = {}
    for link in links:
        base = f"/sys/class/net/{link.name}"
        speed = _int_or_none(host.read(f"{base}/speed"))
        if speed is not None and speed <= 0:
            speed = None
        numa = _int_or_none(host.read(f"{base}/device/numa_node"))
        out[link.name] = Interface(
            name=link.name,
            kind=link.kind,
            physical=host.exists(f"{base}/device"),
            speed_mbps=speed,
            operstate=link.operstate,
            mtu=link.mtu,
            max_mtu=link.max_mtu,
            txqlen=link.txqlen if link.txqlen is not None else 0,
            master=link.master,
            lower=link.lower if link.kind in STACKED_KINDS else None,
            members=tuple(sorted(members.get(link.name, []))),
            numa_node=numa if numa is not None and numa >= 0 else None,
            num_tx_queues=link.num_tx_queues,
        )
    return out


def leaf_devices(ifaces: dict[str, Interface], name: str) -> list[tuple[str, str]]:
    """The devices that carry ``name``'s packets, with how they were reached.

    A VLAN resolves to its lower device, a bond or bridge to its members; ethtool settings
    belong on those, not on the virtual device (fasterdata-tuning.sh bug #15).
    """
    seen: set[str] = set()
    out: list[tuple[str, str]] = []

    def walk(dev: str, path: str) -> None:
        if dev in seen or dev not in ifaces:
            return
        seen.add(dev)
        iface = ifaces[dev]
        if iface.aggregate and iface.members:
            for member in iface.members:
                walk(member, f"{path} -> member {member}" if path else f"member of {dev}")
        elif iface.stacked and iface.lower:
            walk(iface.lower, f"{path} -> lower {iface.lower}" if path else f"under {dev}")
        else:
            out.append((dev, path))

    walk(name, "")
    return out


DATA_MIN_MBPS = 10_000  # below this a link is a management port, not a data NIC


def default_routes(host: Host, family: str) -> list[Route] | Unavailable:
    """The default routes of the main table, IPv4 (``family`` "-4") or IPv6 ("-6"): from the
    kernel's rtnetlink dump on a live host, else ``ip [-6] -j route show default``."""
    kernel = _kernel_links(host)
    if kernel is not None:
        links, dumps = kernel
        try:
            return parse_default_routes(
                dumps["route6" if family == "-6" else "route4"], link_names(links)
            )
        except ParseError:
            pass  # ip says the same in its own words
    argv = ["ip", "-j", "route", "show", "default"]
    if family == "-6":
        argv.insert(1, "-6")
    res = host.query(argv)
    if not res.ok:
        name = "IPv6" if family == "-6" else "IPv4"
        return Unavailable(f"cannot read {name} routes: {res.message()}")
    try:
        return [r for r in parse_ip_route_json(res.stdout) if r.default]
    except ParseError as exc:
        return Unavailable(str(exc))


def default_route_devices(host: Host) -> set[str] | None:
    """Devices that carry an IPv4 or IPv6 default route; None when routes cannot be read."""
    devs: set[str] = set()
    read_any = False
    for family in ("-4", "-6"):
        routes = default_routes(host, family)
        if isinstance(routes, Unavailable):
            continue
        read_any = True
        for route in routes:
            devs.update(route.devs)
    return devs if read_any else None


def upper_devices(ifaces: dict[str, Interface], name: str) -> list[str]:
    """``name`` and every device stacked on it: its bond or bridge, their VLANs, and so on."""
    out = [name]
    for dev in out:
        iface = ifaces.get(dev)
        if iface is None:
            continue
        above = [
            n
            for n, i in sorted(ifaces.items())
            if (i.stacked and i.lower == dev) or (iface.master == n)
        ]
        out.extend(n for n in above if n not in out)
    return out


def stack_depth(ifaces: dict[str, Interface], name: str, seen: frozenset[str] = frozenset()) -> int:
    """0 for a device that carries its own packets, 1 + the depth below for a bond or VLAN."""
    iface = ifaces.get(name)
    if iface is None or name in seen:
        return 0
    below: list[str] = []
    if iface.aggregate:
        below = list(iface.members)
    elif iface.stacked and iface.lower:
        below = [iface.lower]
    below = [b for b in below if b in ifaces]
    if not below:
        return 0
    return 1 + max(stack_depth(ifaces, b, seen | {name}) for b in below)


def link_stack(
    ifaces: dict[str, Interface], devices: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The selected leaf devices and every bond, bridge and VLAN above them, lowest first.

    This is the order an MTU is raised in: the kernel refuses a VLAN MTU above its lower
    device's, and a bond sets its members' MTU to its own, so members, then the bond, then its
    VLANs (lowering goes the other way; the kernel lowers a VLAN with its lower device).
    """
    out: list[tuple[str, str]] = list(devices)
    names = [d for d, _ in devices]
    for dev, _ in devices:
        for up in upper_devices(ifaces, dev)[1:]:
            if up not in names and not ifaces[up].loopback:
                names.append(up)
                iface = ifaces[up]
                under = iface.members if iface.aggregate else (iface.lower or "",)
                out.append((up, f"above {', '.join(u for u in under if u)}"))
    order = {name: i for i, name in enumerate(names)}
    return sorted(out, key=lambda item: (stack_depth(ifaces, item[0]), order[item[0]]))


def data_link_reason(
    ifaces: dict[str, Interface], name: str, routes: set[str] | None, routed_anywhere: bool
) -> str | None:
    """Why ``name`` is not a data interface (below 10G, no default route), or None if it is."""
    reasons: list[str] = []
    speeds = [
        ifaces[d].speed_mbps
        for d, _ in leaf_devices(ifaces, name)
        if d in ifaces and ifaces[d].speed_mbps
    ]
    speed = (
        sum(s for s in speeds if s)
        if ifaces[name].aggregate
        else max((s for s in speeds if s), default=0)
    )
    if speeds and speed < DATA_MIN_MBPS:
        reasons.append(f"{speed / 1000:g} Gbit/s")
    if routes is not None and routed_anywhere and not set(upper_devices(ifaces, name)) & routes:
        reasons.append("no default route")
    return ", ".join(reasons) or None


def select_interfaces(
    ifaces: dict[str, Interface],
    wanted: list[str] | None,
    routes: set[str] | None = None,
    skipped: list[tuple[str, str]] | None = None,
) -> list[tuple[str, str]]:
    """Resolve ``--iface`` choices (or the data links) to leaf devices with reasons.

    Without ``--iface``, a link is a data interface when it runs at 10 Gbit/s or more (a link
    that reports no speed is kept) and carries a default route (``routes``: the devices with one;
    this test is skipped when routes are unknown or no link of 10G or more has a default route,
    e.g. in a lab namespace).  The links left out, and why, are appended to ``skipped``.
    """
    if wanted:
        unknown = [w for w in wanted if w not in ifaces]
        if unknown:
            raise BadInput(
                f"unknown interface {', '.join(unknown)}",
                f"this host has {', '.join(sorted(ifaces)) or 'no interfaces'}",
                "pick one of those with --iface (or --netns for another namespace)",
            )
        roots = wanted
    else:
        candidates = [
            n
            for n, i in sorted(ifaces.items())
            if not i.loopback and not i.master and i.kind not in AUXILIARY_KINDS
        ]
        fast = [n for n in candidates if data_link_reason(ifaces, n, None, False) is None]
        routed = routes is not None and any(set(upper_devices(ifaces, n)) & routes for n in fast)
        roots = []
        for name in candidates:
            reason = data_link_reason(ifaces, name, routes, routed)
            if reason is None:
                roots.append(name)
            elif skipped is not None:
                skipped.append((name, reason))
    result: list[tuple[str, str]] = []
    for name in roots:
        for dev, path in leaf_devices(ifaces, name):
            if dev != "lo" and dev not in [d for d, _ in result]:
                result.append((dev, path))
    return result


def driver_info(host: Host, dev: str) -> dict[str, str] | None:
    """The rows ``ethtool -i DEV`` prints, from the kernel (the SIOCETHTOOL ioctl) on a live
    host, else from ethtool; None where ethtool fails (no driver information)."""
    replies = _ethtool_replies(host, dev)
    raw = replies.get("drvinfo") if replies is not None else None
    if raw in (ethtool_nl.EOPNOTSUPP, ethtool_nl.ENODEV):
        return None  # ethtool -i fails the same way
    if isinstance(raw, bytes):
        try:
            return ethtool_nl.parse_drvinfo(raw)
        except ParseError:
            pass  # ethtool says it in its own words
    res = host.query(["ethtool", "-i", dev])
    if not res.ok:
        return None
    try:
        return parse_ethtool_driver(res.stdout)
    except ParseError:
        return None


def nic_driver(host: Host, dev: str) -> dict[str, str | None]:
    """Driver, driver version and firmware of ``dev`` from ``ethtool -i`` (None when unknown)."""
    info = driver_info(host, dev) or {}
    return {
        "driver": info.get("driver") or None,
        "version": info.get("version") or None,
        "firmware": info.get("firmware-version") or None,
        "bus": info.get("bus-info") or None,
    }


def addresses(host: Host, family: str = "-6") -> list[Address] | Unavailable:
    """The addresses of every link (IPv6 by default: from the kernel's rtnetlink dump on a
    live host, else ``ip -6 -j addr show``)."""
    kernel = _kernel_links(host) if family == "-6" else None
    if kernel is not None:
        links, dumps = kernel
        try:
            return parse_addresses(dumps["addr6"], link_names(links))
        except ParseError:
            pass  # ip says the same in its own words
    res = host.query(["ip", family, "-j", "addr", "show"])
    if not res.ok:
        return Unavailable(f"cannot list addresses: {res.message()}")
    try:
        return parse_ip_addr_json(res.stdout)
    except ParseError as exc:
        return Unavailable(str(exc))


def ethtool_read(
    host: Host,
    flag: str,
    iface: str,
    json_parser: Callable[[str], T],
    text_parser: Callable[[str], T],
) -> T | Unavailable:
    """Run ``ethtool --json FLAG IF``, falling back to text; Unavailable when unsupported.

    Only ``-k`` tries JSON first.  ``-g`` reads text: its JSON (ethtool 6.2 on) holds the same
    eight numbers as the text, and ethtool 6.1 refuses ``--json -g``, which cost a second
    process on every audit.  ``-a`` and ``-c`` read text: ethtool 6.1's
    ``--json -a`` prints ``true`` for every pause field whatever the state (fixed in 6.2), and
    ``--json -c`` from 6.2 to at least 6.11 prints adaptive and CQE settings under the same
    keys.  The text of both has been stable for years.
    """
    host.need_tool("ethtool", "ethtool")
    kernel = _ethtool_kernel(host, flag, iface)
    if kernel is not None:
        return cast("T | Unavailable", kernel)
    if flag in JSON_TRUSTED:
        res = host.query(["ethtool", "--json", flag, iface])
        if res.ok:
            try:
                return json_parser(res.stdout)
            except ParseError:
                pass  # an ethtool whose JSON we do not know: the text is the contract
    res = host.query(["ethtool", flag, iface])
    if res.returncode == 127 and "not captured" not in res.stderr:
        return Unavailable("ethtool is not installed")
    if not res.ok:
        return Unavailable(_ethtool_reason(res.stderr or res.stdout))
    try:
        return text_parser(res.stdout)
    except ParseError as exc:
        return Unavailable(f"cannot parse `ethtool {flag} {iface}`: {exc}")


def _ethtool_kernel(host: Host, flag: str, iface: str) -> object | None:
    """What ``ethtool FLAG IF`` would give, read from the kernel as ethtool 6.1 reads it (see
    :mod:`~dtnkit.host.parsers.ethtool_nl`), or Unavailable with ethtool's reason; None when
    ethtool has to run (a tree, no reply, an error ethtool words its own way)."""
    name = ethtool_nl.FLAG_READS.get(flag)
    replies = _ethtool_replies(host, iface) if name is not None else None
    if replies is None or name is None:
        return None
    memo = f"parsed {name}"  # decoded once per reply (several tunables read each)
    if memo in replies:
        return replies[memo]
    replies[memo] = found = _ethtool_decode(replies, name)
    return found


def _ethtool_replies(host: Host, dev: str) -> dict[str, object] | None:
    kernel = host.kernel
    return kernel.ethtool_replies(dev) if kernel is not None else None


def _ethtool_decode(replies: dict[str, object], name: str) -> object | None:
    reply = replies.get(name)
    if not isinstance(reply, bytes):
        return None
    try:
        if name == "features":
            strset = replies.get("strset")
            if not isinstance(strset, bytes):
                return None
            return ethtool_nl.parse_features(reply, ethtool_nl.parse_feature_names(strset))
        if name == "rings":
            return ethtool_nl.parse_rings(reply)
        if name == "coalesce":
            return ethtool_nl.parse_coalesce(reply)
        return ethtool_nl.parse_pause(reply)
    except KernelRefused as exc:
        if exc.errno == ethtool_nl.EOPNOTSUPP:  # "netlink error: Operation not supported"
            return Unavailable(_ethtool_reason("Operation not supported"))
        if exc.errno == ethtool_nl.ENODEV:
            return Unavailable(_ethtool_reason("No such device"))
        return None
    except ParseError:
        return None


def _ethtool_reason(text: str) -> str:
    low = text.lower()
    if "not supported" in low:
        return "the driver does not support it"
    if "no such device" in low:
        return "no such device"
    first = text.strip().splitlines()
    return first[0] if first else "ethtool failed"


@dataclass(frozen=True, slots=True)
class KernelCaps:
    qdiscs: dict[str, bool | None]  # kind -> present? None when unknown
    qdisc_evidence: str
    cc_available: tuple[str, ...]
    cc_allowed: tuple[str, ...]
    cc_modules: tuple[str, ...] = ()  # built as modules, not loaded yet: a write loads them


#: the strings of the kernel config lines kernel_caps reads
_CAPS_CONFIG = ("CONFIG_NET_SCH_", "CONFIG_MODULES", "CONFIG_TCP_CONG_")


def kernel_caps(host: Host) -> KernelCaps:
    config = host.kernel_config(only=_CAPS_CONFIG)
    qdiscs: dict[str, bool | None] = {}
    evidence = "no kernel config found (/proc/config.gz, /boot/config-*)"
    for kind, symbol in (
        ("fq", "CONFIG_NET_SCH_FQ"),
        ("fq_codel", "CONFIG_NET_SCH_FQ_CODEL"),
        ("tbf", "CONFIG_NET_SCH_TBF"),
        ("htb", "CONFIG_NET_SCH_HTB"),
        ("netem", "CONFIG_NET_SCH_NETEM"),
    ):
        present: bool | None = None
        if config is not None:
            value = config.get(symbol, "n")
            modular = value == "m" and config.get("CONFIG_MODULES", "n") == "y"
            present = value == "y" or modular
            evidence = "kernel config"
        if host.exists(f"/sys/module/sch_{kind}"):
            present = True
        qdiscs[kind] = present
    avail = (host.read("/proc/sys/net/ipv4/tcp_available_congestion_control") or "").split()
    allowed = (host.read("/proc/sys/net/ipv4/tcp_allowed_congestion_control") or "").split()
    modules: list[str] = []
    if config is not None and config.get("CONFIG_MODULES") == "y":
        prefix = "CONFIG_TCP_CONG_"
        modules = sorted(
            name[len(prefix) :].lower()
            for name, value in config.items()
            if name.startswith(prefix) and value == "m"
        )
    return KernelCaps(qdiscs, evidence, tuple(avail), tuple(allowed), tuple(modules))


@dataclass(frozen=True, slots=True)
class Placement:
    """Where dtnkit runs, and what that means for tuning."""

    initial_netns: bool
    netns: str | None
    container: str | None
    proc_sys_read_only: bool
    root: bool
    ram_bytes: int | None
    notes: tuple[str, ...] = ()


def placement(host: Host) -> Placement:
    notes: list[str] = []
    initial = True
    if host.netns:
        initial = False
        notes.append(
            f"working in network namespace {host.netns}: host-global keys (net.core.*mem_*, "
            "netdev_max_backlog, default_qdisc, CPU) are reported as host-scope and left alone"
        )
    elif not host.exists("/proc/sys/net/core/netdev_max_backlog"):
        initial = False
        notes.append(
            "this is not the host's initial network namespace (netdev_max_backlog is absent): "
            "host-global keys cannot be read or set here; run dtnkit on the host itself"
        )
    elif host.is_live:
        try:
            if os.readlink("/proc/self/ns/net") != os.readlink("/proc/1/ns/net"):
                initial = False
                notes.append("this process is not in PID 1's network namespace")
        except OSError:
            pass
    container = _container(host)
    if container:
        notes.append(
            f"running inside a container ({container}): settings made here may be "
            "per-container or refused; tune the host itself"
        )
    ro = False
    mounts = host.read("/proc/mounts") if host.is_live else None
    for line in (mounts or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "/proc/sys" and "ro" in parts[3].split(","):
            ro = True
    if ro:
        notes.append("/proc/sys is mounted read-only: sysctls can be audited, not applied")
    meminfo = host.read("/proc/meminfo")
    ram = parse_meminfo(meminfo).get("MemTotal") if meminfo else None
    is_root = (os.geteuid() == 0) if host.is_live else True
    return Placement(initial, host.netns, container, ro, is_root, ram, tuple(notes))


def _container(host: Host) -> str | None:
    if host.exists("/.dockerenv"):
        return "docker (/.dockerenv is present)"
    if host.exists("/run/.containerenv"):
        return "podman"
    cgroup = host.read("/proc/1/cgroup") or ""
    for word in ("kubepods", "docker", "lxc", "containerd", "libpod"):
        if word in cgroup:
            return word
    environ = host.read("/proc/1/environ") if host.is_live else None
    if environ:
        for entry in environ.split("\0"):
            if entry.startswith("container="):
                return entry.partition("=")[2] or "container"
    return None


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None
