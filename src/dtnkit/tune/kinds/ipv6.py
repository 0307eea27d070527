"""``ipv6/DEVICE/addresses``, ``ipv6/DEVICE/conf`` and ``ipv6/DEVICE/routes``: the IPv6
state the kernel drops with an MTU below 1280, so restore and undo can put it back.

When an interface's MTU goes below IPv6's minimum the kernel takes IPv6 off it whole: every
address, every route through it, and its ``net.ipv6.conf.DEVICE.*`` settings.  When the MTU is
1280 or more again it makes the interface's IPv6 anew from ``net.ipv6.conf.default.*``
(``disable_ipv6`` 0 again where it was 1, ``accept_ra`` back to the default) with a new
link-local address, and nothing else.  A snapshot taken before an apply that lowers an MTU that
far holds these keys for that interface; restore (and the undo of a failed apply or restore)
puts back what differs once the MTU is back.

- ``conf``: every readable ``net.ipv6.conf.DEVICE.NAME``, as text, by NAME (one this kernel
  does not have is left out).

None is audited nor in a profile: they are only in such a snapshot.  Each value is a sorted
list of strings in ``ip``'s own words, so a user reads them as ``ip -6 addr`` / ``ip -6 route``
print them:

- an address: ``2001:db8::5/64`` with the flags ``ip addr add`` takes and the kernel reports
  (``nodad``, ``noprefixroute``, ``home``, ``mngtmpaddr``); only permanent ones that are not
  link-local (SLAAC, DHCPv6 and temporary addresses come back the way they came);
- a route of the main table through the interface that was added by hand or by a network
  manager (protocol ``boot`` or ``static``): ``default via fe80::1 metric 1024``,
  ``2001:db8:100::/48 via 2001:db8::1 metric 1024 onlink proto static``.  Routes with more
  to them (a source, another table, several next hops, an expiry) are not kept.

Restore adds what is missing and leaves what is there: an address added since stays.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
from typing import Any, ClassVar

from dtnkit.errors import DtnkitError
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers import is_uint
from dtnkit.tune.kinds.base import DeviceTunable, Scope, Tunable, Value, check_scalar, type_name

IPV6_MIN_MTU = 1280
#: the address flags ``ip -6 addr add`` takes that the kernel reports back (ip -j prints each
#: as a key set to true)
ADDRESS_FLAGS = ("nodad", "noprefixroute", "home", "mngtmpaddr")
#: routes of these protocols were put there by hand or by a network manager (``ip route add``
#: uses ``boot``): the kernel's own (``kernel``) and router advertisements' (``ra``) come back
ROUTE_PROTOCOLS = ("boot", "static")
#: the most entries a snapshot may hold for one interface
MAX_ENTRIES = 512
_FOREVER = 4294967295
_CONF_NAME = re.compile(r"[a-z0-9_]{1,64}")


class Ipv6Tunable(DeviceTunable):
    kind = "ipv6"
    names = ("addresses", "conf", "routes")
    snapshot_only = True
    persist_recommended = False
    _labels: ClassVar[dict[str, str]] = {
        "addresses": "IPv6 addresses",
        "conf": "IPv6 settings",
        "routes": "IPv6 routes",
    }
    _one: ClassVar[dict[str, str]] = {"addresses": "address", "routes": "route"}

    def __init__(self, device: str, attr: str) -> None:
        if attr not in self.names:
            raise ValueError(attr)
        super().__init__(f"ipv6/{device}/{attr}", Scope.INTERFACE, device, self._labels[attr])
        self.attr = attr

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device, name)

    # ---- read ---------------------------------------------------------------------------
    def read(self, host: Host) -> Value | Unavailable:
        dev = str(self.device)
        if not host.exists(f"/sys/class/net/{dev}"):
            return Unavailable(f"no interface {dev}")
        if self.attr == "conf":
            return self._read_conf(host)
        argv = (
            ["ip", "-6", "-j", "addr", "show", "dev", dev]
            if self.attr == "addresses"
            else ["ip", "-6", "-j", "route", "show", "table", "main", "dev", dev]
        )
        res = host.query(argv)
        if not res.ok:
            return Unavailable(f"cannot list the IPv6 {self.attr} of {dev}: {res.message()}")
        try:
            doc = json.loads(res.stdout or "[]")
        except ValueError:
            return Unavailable(f"`{' '.join(argv)}` printed no JSON")
        if not isinstance(doc, list):
            return Unavailable(f"`{' '.join(argv)}` printed no list")
        entries = _addresses(doc) if self.attr == "addresses" else _routes(doc)
        return sorted(set(entries))

    def _conf_dir(self) -> str:
        return f"/proc/sys/net/ipv6/conf/{self.device}"

    def _read_conf(self, host: Host) -> Value | Unavailable:
        """Every ``net.ipv6.conf.DEVICE.*`` the kernel lets us read ({}: IPv6 is off the
        interface, its MTU is below 1280)."""
        conf: dict[str, str] = {}
        for name in host.listdir(self._conf_dir()):
            if not _CONF_NAME.fullmatch(name):
                continue
            text = host.read(f"{self._conf_dir()}/{name}")
            if text is not None and check_scalar(text.strip()) is None:
                conf[name] = text.strip()
        return conf

    # ---- compare, show, write -----------------------------------------------------------
    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        """Every entry of ``want`` is there (others may be too: restore only adds); every
        setting of ``want`` has its value."""
        if isinstance(current, dict) and isinstance(want, dict):
            # (a setting this kernel does not have is no difference; no settings at all is)
            return (bool(current) or not want) and all(
                _same(current[k], v) for k, v in want.items() if k in current
            )
        if not isinstance(current, list) or not isinstance(want, list):
            return bool(current == want)
        return {self._ident(v) for v in want} <= {self._ident(v) for v in current}

    def _ident(self, entry: Any) -> Any:
        """What the kernel tells entries apart by: an address by itself (its flags aside), a
        route by its destination and metric (another gateway for them is "File exists")."""
        if not isinstance(entry, str):
            return entry
        words = entry.split()
        if self.attr == "addresses" or not words:
            return words[0] if words else entry
        metric = words[words.index("metric") + 1] if "metric" in words[:-1] else ""
        return (words[0], metric)

    def show(self, value: Value) -> str:
        if isinstance(value, list):
            return ", ".join(str(v) for v in value) if value else "none"
        if isinstance(value, dict):
            return f"{len(value)} settings" if value else "none"
        return super().show(value)

    def write(self, host: Host, value: Value) -> None:
        """Add each entry of ``value`` that is missing (write each setting that differs); on
        a failure take back what this call did, so a step is all or nothing."""
        dev = str(self.device)
        now = self.read(host)
        if isinstance(now, Unavailable):
            raise DtnkitError(f"cannot put back the {self.label} of {dev}", now.reason)
        if self.attr == "conf":
            self._write_conf(host, value, now)
            return
        there = {self._ident(v) for v in now}
        missing = [v for v in value if self._ident(v) not in there]
        if not missing:
            return
        mtu = (host.read(f"/sys/class/net/{dev}/mtu") or "").strip()
        if is_uint(mtu) and int(mtu) < IPV6_MIN_MTU:
            raise DtnkitError(
                f"cannot put back the {self.label} of {dev} ({', '.join(missing)})",
                f"its MTU is {mtu}, below IPv6's minimum {IPV6_MIN_MTU}, so the kernel runs "
                "no IPv6 on it",
                f"set its MTU to {IPV6_MIN_MTU} or more and restore again",
            )
        added: list[str] = []
        for entry in missing:
            argv = self._add(entry)
            res = host.change(argv)
            if not res.ok:
                for done in reversed(added):
                    host.change(self._add(done, verb="del"))
                one = self._one[self.attr]
                raise DtnkitError(
                    f"cannot put back the IPv6 {one} {entry} on {dev}",
                    res.message(),
                    f"check it with `ip -6 {one} show dev {dev}`; the snapshot still holds it",
                )
            added.append(entry)

    def _write_conf(self, host: Host, want: dict[str, str], now: dict[str, str]) -> None:
        differ = {k: v for k, v in want.items() if k in now and not _same(now[k], v)}
        if not now and want:
            raise DtnkitError(
                f"cannot put back the IPv6 settings of {self.device}",
                f"{self._conf_dir()} is not there: the kernel runs no IPv6 on it (an MTU "
                f"below {IPV6_MIN_MTU})",
                f"set its MTU to {IPV6_MIN_MTU} or more and restore again",
            )
        done: list[str] = []
        # disable_ipv6 first: writing 1 takes the addresses off, writing 0 makes a link-local
        for name in sorted(differ, key=lambda k: (k != "disable_ipv6", k)):
            try:
                host.write(f"{self._conf_dir()}/{name}", differ[name])
            except DtnkitError:
                for back in reversed(done):
                    with contextlib.suppress(DtnkitError):
                        host.write(f"{self._conf_dir()}/{back}", now[back])
                raise
            done.append(name)

    def _add(self, entry: str, verb: str = "add") -> list[str]:
        words = entry.split()
        if self.attr == "addresses":
            flags = words[1:] if verb == "add" else []
            return ["ip", "-6", "addr", verb, words[0], "dev", str(self.device), *flags]
        dst, rest = words[0], words[1:]
        return (
            ["ip", "-6", "route", verb, dst, *rest[:2], "dev", str(self.device), *rest[2:]]
            if rest[:1] == ["via"]
            else ["ip", "-6", "route", verb, dst, "dev", str(self.device), *rest]
        )

    def validate(self, value: Value) -> str | None:
        if self.attr == "conf":
            return check_conf(value)
        if not isinstance(value, list):
            return f"it must be a list of {self.attr}, not {type_name(value)}"
        if len(value) > MAX_ENTRIES:
            return f"it holds {len(value)} {self.attr}, at most {MAX_ENTRIES}"
        check = check_address if self.attr == "addresses" else check_route
        for entry in value:
            why = check(entry)
            if why:
                return why
        return None


def _same(current: Any, want: Any) -> bool:
    """Two sysctl texts alike but for their blanks."""
    return isinstance(current, str) and isinstance(want, str) and current.split() == want.split()


# ---- what ip prints, as entries ------------------------------------------------------------
def _addresses(doc: list[Any]) -> list[str]:
    out = []
    for link in doc:
        infos = link.get("addr_info", []) if isinstance(link, dict) else []
        for info in infos if isinstance(infos, list) else []:
            if not isinstance(info, dict) or info.get("family") != "inet6":
                continue
            if info.get("scope") == "link" or info.get("dynamic") or info.get("temporary"):
                continue
            if info.get("valid_life_time", _FOREVER) != _FOREVER:
                continue
            entry = " ".join(
                [
                    f"{info.get('local')}/{info.get('prefixlen')}",
                    *(f for f in ADDRESS_FLAGS if info.get(f) is True),
                ]
            )
            if check_address(entry) is None:
                out.append(_normal_address(entry))
    return out


def _routes(doc: list[Any]) -> list[str]:
    kept = {"dst", "gateway", "dev", "protocol", "metric", "flags", "pref"}
    out = []
    for route in doc:
        if not isinstance(route, dict) or set(route) - kept:
            continue  # a source, a type, next hops, an expiry: more than an entry says
        proto = route.get("protocol", "boot")
        flags = route.get("flags", [])
        if proto not in ROUTE_PROTOCOLS or route.get("pref", "medium") != "medium":
            continue
        if not isinstance(flags, list) or set(flags) - {"onlink"}:
            continue
        words = [str(route.get("dst"))]
        if "gateway" in route:
            words += ["via", str(route["gateway"])]
        words += ["metric", str(route.get("metric", 1024))]
        words += ["onlink"] * ("onlink" in flags)
        words += ["proto", "static"] * (proto == "static")
        entry = " ".join(words)
        if check_route(entry) is None:
            out.append(entry)
    return out


def _normal_address(entry: str) -> str:
    first, *flags = entry.split()
    iface = ipaddress.IPv6Interface(first)
    return " ".join([f"{iface.ip.compressed}/{iface.network.prefixlen}", *flags])


# ---- an entry's shape, for snapshots ----------------------------------------------------------
def _bad(entry: Any, why: str) -> str:
    shown = entry[:60] if isinstance(entry, str) else type_name(entry)
    return f"{shown!r} is not an IPv6 {why}"


def check_address(entry: Any) -> str | None:
    """Why ``entry`` is not ``ADDRESS/PREFIXLEN [FLAG...]`` of a permanent, non-link-local
    IPv6 address (None: it is)."""
    if not isinstance(entry, str) or not entry or len(entry) > 200:
        return _bad(entry, "address with its prefix length (e.g. '2001:db8::5/64')")
    first, *flags = entry.split(" ")
    addr, sep, plen = first.partition("/")
    if not sep or not is_uint(plen) or len(plen) > 3 or int(plen) > 128:
        return _bad(entry, "address with a prefix length from 0 to 128 (e.g. '2001:db8::5/64')")
    try:
        ip = ipaddress.IPv6Address(addr)
    except ValueError:
        return _bad(entry, "address (e.g. '2001:db8::5/64')")
    if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_loopback:
        return f"{first!r} is not an address restore puts back (link-local, multicast, :: or ::1)"
    unknown = [f for f in flags if f not in ADDRESS_FLAGS]
    if unknown or len(set(flags)) != len(flags):
        return f"{entry[:60]!r} has flags other than {', '.join(ADDRESS_FLAGS)} (each at most once)"
    return None


def check_route(entry: Any) -> str | None:
    """Why ``entry`` is not ``DST [via GW] metric N [onlink] [proto static]`` (None: it is)."""
    if not isinstance(entry, str) or not entry or len(entry) > 200:
        return _bad(entry, "route (e.g. 'default via fe80::1 metric 1024')")
    words = entry.split(" ")
    dst = words.pop(0)
    if dst != "default":
        try:
            ipaddress.IPv6Network(dst)
        except ValueError:
            return _bad(
                entry,
                "route: its destination must be 'default' or a prefix such as '2001:db8::/32'",
            )
    if words[:1] == ["via"]:
        try:
            gw = ipaddress.IPv6Address(words[1] if len(words) > 1 else "")
        except ValueError:
            return _bad(entry, "route: 'via' must name an IPv6 gateway")
        if gw.is_multicast or gw.is_unspecified:
            return _bad(entry, "route: its gateway is multicast or ::")
        words = words[2:]
    if (
        words[:1] != ["metric"]
        or len(words) < 2
        or not is_uint(words[1])
        or len(words[1]) > 10
        or int(words[1]) >= 2**32
    ):
        return _bad(entry, "route: it needs 'metric N' with N from 0 to 4294967295")
    rest = words[2:]
    if rest[:1] == ["onlink"]:
        rest = rest[1:]
    if rest not in ([], ["proto", "static"]):
        return _bad(entry, "route: after the metric only 'onlink' and 'proto static' may come")
    return None


def check_conf(value: Any) -> str | None:
    """Why ``value`` is not an object of ``net.ipv6.conf.DEVICE`` names to their text."""
    if not isinstance(value, dict):
        return f"it must be an object of IPv6 settings, not {type_name(value)}"
    if len(value) > MAX_ENTRIES:
        return f"it holds {len(value)} settings, at most {MAX_ENTRIES}"
    for name, text in value.items():
        if not _CONF_NAME.fullmatch(name):
            return (
                f"{name[:40]!r} is not the name of a net.ipv6.conf setting (lower-case "
                "letters, digits and '_')"
            )
        if not isinstance(text, str):
            return f"the value of {name} must be text, not {type_name(text)}"
        why = check_scalar(text)
        if why:
            return f"the value of {name}: {why}"
    return None
