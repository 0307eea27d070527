"""Which remote hosts a third-party copy may reach, and the one address it then connects to.

Without ``--tpc-allow`` a COPY may reach only *global* addresses (the public internet, where
other sites' DTNs are), as :mod:`~dtnkit.transfer.server.addresses` decides them from the
IANA special-purpose registries: loopback, private, link-local, site-local, unique-local,
shared (CGN), unspecified, multicast, documentation, benchmarking and reserved addresses
are refused, and so is an IPv6 address that embeds a refused IPv4 one (IPv4-mapped and
-compatible, NAT64, 6to4, Teredo), so a token holder cannot make the server a proxy into its
own host or site network.  Each ``--tpc-allow`` entry adds to that: ``HOST``,
``HOST:PORT``, ``[IPv6]:PORT``, an address or a ``CIDR`` range.  A name is resolved once per
connection target and the connection goes to the address that was checked (never resolved
again), so DNS rebinding cannot swap in another address between check and connect; an
address written as a host (``10.1``, ``0xa000005``, ``[::ffff:10.0.0.5]``) is read the one
way the connection uses it and never resolved; every redirect hop is checked the same way.

A remote matched by an entry is *listed*: failure lines name what went wrong there.  Other
remotes get one line for every failure (refused, timed out, TLS, an HTTP error, a digest it
did not offer), so a COPY cannot be used as a port scanner; the server log has the reason.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from dtnkit.errors import BadInput
from dtnkit.host.parsers import is_uint
from dtnkit.transfer.server import addresses
from dtnkit.transfer.server.addresses import IpAddress, Network

#: the one failure line for a remote that is not listed (or not allowed at all)
GENERIC = (
    "the remote side could not be reached, refused the transfer or answered with an "
    "error (details are in the server log)"
)


class RemoteRefused(Exception):
    """The remote host is not allowed: the COPY fails with :data:`GENERIC`."""


@dataclass(frozen=True)
class AllowEntry:
    host: str | None = None  # a name, lower case (None: a network)
    network: Network | None = None  # an address is a /32 or /128
    port: int | None = None  # None: any port

    def matches(self, host: str, address: IpAddress, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host is not None:
            return self.host == host.lower().rstrip(".")
        return self.network is not None and address in self.network


def parse_entry(text: str) -> AllowEntry:
    """One ``--tpc-allow`` value: HOST, HOST:PORT, [IPv6]:PORT, ADDRESS or CIDR."""
    value = text.strip()
    bad = BadInput(
        f"--tpc-allow {text!r}",
        "is not HOST, HOST:PORT, an address or a CIDR range",
        "pass e.g. dtn2.example.org, dtn2.example.org:8443, "
        "192.0.2.7, [2001:db8::7]:8443 or 10.1.0.0/16",
    )
    if not value or any(c.isspace() for c in value):
        raise bad
    if "/" in value:
        try:
            return AllowEntry(network=ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise bad from None
    port: int | None = None
    host = value
    if value.startswith("["):
        inner, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise bad
        host, port_text = inner, rest[1:]
        if rest:
            port = _port(port_text, bad)
    elif value.count(":") == 1:
        host, port_text = value.split(":")
        port = _port(port_text, bad)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = host.lower().rstrip(".")
        if not name or not all(
            part and all(c.isalnum() or c in "-_" for c in part) for part in name.split(".")
        ):
            raise bad from None
        return AllowEntry(host=name, port=port)
    return AllowEntry(network=ipaddress.ip_network(address), port=port)


def _port(text: str, bad: BadInput) -> int:
    if not is_uint(text) or not 0 < int(text) < 65536:
        raise bad
    return int(text)


def usable(address: IpAddress) -> IpAddress:
    """The address as the kernel will use it (an IPv4-mapped IPv6 address is IPv4)."""
    return addresses.connect_address(address)


def is_public(address: IpAddress) -> bool:
    """Whether the special-purpose table allows *address* without an entry
    (:func:`dtnkit.transfer.server.addresses.classify`)."""
    return addresses.classify(address).allowed


@dataclass(frozen=True)
class AllowList:
    entries: tuple[AllowEntry, ...] = ()

    @classmethod
    def parse(cls, values: Iterable[str]) -> AllowList:
        return cls(tuple(parse_entry(v) for v in values))

    def listed(self, host: str, address: IpAddress, port: int) -> bool:
        address = usable(address)
        return any(e.matches(host, address, port) for e in self.entries)

    def allows(self, host: str, address: IpAddress, port: int) -> bool:
        return is_public(address) or self.listed(host, address, port)

    def pick(self, host: str, port: int) -> tuple[str, bool]:
        """Resolve *host* once; the first allowed address and whether it is listed.

        RemoteRefused when the name does not resolve or no address of it is allowed.
        """
        try:
            literal = addresses.parse_host(host)
        except addresses.BadHost as exc:
            raise RemoteRefused(f"{host[:200]!r}: {exc}") from None
        if literal is not None:
            candidates: list[IpAddress] = [literal]
        else:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:
                raise RemoteRefused(f"{host}: cannot be resolved ({exc})") from None
            candidates = []
            for info in infos:
                try:
                    candidates.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
                except ValueError:
                    continue
        for address in candidates:
            if self.allows(host, address, port):
                return str(usable(address)), self.listed(host, address, port)
        shown = "; ".join(addresses.classify(a).why for a in candidates[:4]) or "no address"
        raise RemoteRefused(f"{host} port {port} is not allowed: {shown}; not in --tpc-allow")
