"""The peer of ``--peer``, probed once for the items that judge it (ipv6-peer, path-mtu): its
addresses, per address family the route, the device's MTU and the pings (a small one, then
the device's MTU and the sizes below it), run side by side."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from dtnkit.diagnose import sitecfg
from dtnkit.diagnose.sitecfg import PeerAddress
from dtnkit.host.facts import Interface
from dtnkit.host.host import Host

#: seconds ping waits for a reply, and at most in all (the probes of one peer run side by side;
#: two requests each, since one reply in a few is lost when many pings start at once)
PING_WAIT_S = 1
PING_DEADLINE_S = 2
#: path MTUs tried below the interface's own: jumbo, common tunnel sizes, Ethernet, IPv6 minimum
MTU_LADDER = (9000, 8000, 4000, 1500, 1280)


@dataclass
class FamilyFacts:
    version: int
    addr: str
    route: sitecfg.RouteTo | None
    route_note: str
    dev_mtu: int | None
    pings: dict[int, sitecfg.PingOutcome]  # MTU tried -> outcome (0: the small probe)
    argv: dict[int, str]


@dataclass
class PeerFacts:
    peer: PeerAddress
    resolved: list[str]
    resolve_note: str
    families: dict[int, FamilyFacts]

    @classmethod
    def probe(cls, host: Host, peer: PeerAddress, links: dict[str, Interface]) -> PeerFacts:
        if peer.literal:
            addrs, note = [peer.text], f"IPv{peer.family} address"
        else:
            res = host.query(["getent", "ahosts", peer.text])
            addrs = sitecfg.parse_getent_hosts(res.stdout) if res.ok else []
            note = (
                ", ".join(addrs[:4])
                if addrs
                else "does not resolve"
                if res.returncode == 2
                else f"cannot resolve: {res.message()}"
            )
        chosen: dict[int, str] = {}
        for a in addrs:
            version = 6 if ":" in a else 4
            chosen.setdefault(version, a)
        families: dict[int, FamilyFacts] = {}
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
            fam = FamilyFacts(version, addr, route, route_note, dev_mtu, {}, {})
            families[version] = fam
            if route is None or route.kind in ("unreachable", "prohibit", "blackhole"):
                continue
            header = 48 if version == 6 else 28
            mtus = [0]
            if dev_mtu is not None:
                mtus += [dev_mtu, *(m for m in MTU_LADDER if m < dev_mtu)]
            for mtu in mtus:
                size = 16 if mtu == 0 else mtu - header
                argv = [
                    "ping",
                    f"-{version}",
                    "-n",
                    "-c",
                    "2",
                    "-i",
                    "0.2",
                    "-w",
                    str(PING_DEADLINE_S),
                    "-W",
                    str(PING_WAIT_S),
                    "-M",
                    "do",
                    "-s",
                    str(size),
                    addr,
                ]
                plans.append((version, mtu, argv))
        host.read_ahead([functools.partial(host.query, argv) for _, _, argv in plans], workers=8)
        for version, mtu, argv in plans:
            res = host.query(argv)
            text = res.stdout + "\n" + res.stderr
            if res.returncode == 127 and "not found" in res.stderr + res.stdout:
                text = "ping: error: ping is not installed (iputils-ping)"
            families[version].pings[mtu] = sitecfg.parse_ping(res.returncode, text)
            families[version].argv[mtu] = " ".join(argv)
        return cls(peer, addrs, note, families)

    def evidence(self) -> tuple[str, str]:
        """Where the peer's addresses came from and what it gave: each peer item's first
        evidence line."""
        src = "--peer" if self.peer.literal else f"getent ahosts {self.peer.text}"
        return src, self.resolve_note
