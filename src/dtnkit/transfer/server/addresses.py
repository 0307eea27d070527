"""Which addresses a third-party copy may reach without ``--tpc-allow``: the IANA
special-purpose registries as data, and the hosts of URLs read the one way the connection
will use them.

:data:`BLOCKS` is the table (declared once; docs/transfer.md lists it and tests check it):
each row is a block, what it is, its source (the IANA IPv4 and IPv6 Special-Purpose IpAddress
Registries, whose "Globally Reachable" column gives the verdict, and the RFCs for the
blocks those registries do not list: multicast, site-local, the IPv4-compatible form) and a
verdict.  The most specific block holding an address decides (``0.0.0.0/0`` and
``2000::/3`` allow, ``::/0`` denies: IPv6 unicast outside 2000::/3 is reserved).  A block
whose addresses *embed* an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64, 6to4,
Teredo) is allowed only when every IPv4 address it embeds is allowed itself: a NAT64
gateway turns ``64:ff9b::a00:5`` into a connection to 10.0.0.5.

Python's ``ipaddress.is_global`` is not used: on 3.11 it calls ``64:ff9b::/96``, the
IPv4-compatible ``::/96``, ``fec0::/10``, ``3fff::/20``, ``5f00::/16``, ``ff00::/8`` and
``224.0.0.0/4``, ``192.88.99.0/24`` and IPv6 outside 2000::/3 global, and ``2002::/16``
(6to4 of a public IPv4 address) not global.

:func:`parse_host` reads a URL's host (as :func:`urllib.parse.urlsplit` gives it): an IPv6
literal (an RFC 6874 zone ``%25eth0`` or ``%eth0`` kept), an IPv4 address in every form the
C library's ``inet_aton`` and browsers (the WHATWG URL standard) accept -- decimal, ``0x``
hex, leading-``0`` octal, one to four parts (``10.1`` is 10.0.0.1), one trailing dot -- or
a name to resolve.  A host whose last label is a number and that is not such an address, a
host with percent-encoding and one with characters no name has are refused: none of them
is ever given to the resolver.
"""

from __future__ import annotations

import ipaddress
import string
from collections.abc import Callable
from dataclasses import dataclass

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW = "allow"
DENY = "deny"
EMBEDS = "embeds IPv4"


def _mapped(a: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    return (ipaddress.IPv4Address(int(a) & 0xFFFFFFFF),)  # the last 32 bits (RFC 4291, 6052)


def _sixtofour(a: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    return (ipaddress.IPv4Address((int(a) >> 80) & 0xFFFFFFFF),)  # bits 16-47 (RFC 3056 §2)


def _teredo(a: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    # the Teredo server (bits 32-63) and the client's public address, stored inverted in
    # the last 32 bits (RFC 4380 §4): traffic goes to the client through a relay
    server = ipaddress.IPv4Address((int(a) >> 64) & 0xFFFFFFFF)
    client = ipaddress.IPv4Address(~int(a) & 0xFFFFFFFF)
    return (server, client)


V4 = "IPv4 special-purpose"  # the IANA IPv4 Special-Purpose IpAddress Registry
V6 = "IPv6 special-purpose"  # the IANA IPv6 Special-Purpose IpAddress Registry
V4_SPACE = "IPv4 address space"  # the IANA IPv4 IpAddress Space Registry
V4_MCAST = "IPv4 multicast"  # the IANA IPv4 Multicast IpAddress Space Registry
V6_SPACE = "IPv6 address space"  # the IANA IPv6 IpAddress Space Registry


@dataclass(frozen=True)
class AddressBlock:
    """One row of the table."""

    network: Network
    name: str  # what the block is, as the registry names it
    registry: str  # the IANA registry that lists it
    rfc: str  # where it is defined
    verdict: str  # ALLOW, DENY or EMBEDS
    embedded: Callable[[ipaddress.IPv6Address], tuple[ipaddress.IPv4Address, ...]] | None = None
    note: str = ""  # why the verdict differs from the registry's, or how it is read


def _block(
    cidr: str,
    name: str,
    registry: str,
    rfc: str,
    verdict: str,
    embedded: Callable[[ipaddress.IPv6Address], tuple[ipaddress.IPv4Address, ...]] | None = None,
    note: str = "",
) -> AddressBlock:
    return AddressBlock(ipaddress.ip_network(cidr), name, registry, rfc, verdict, embedded, note)


#: The table.  Verdicts follow the registries' "Globally Reachable" column (True: allow;
#: False and N/A: deny); the notes say where a row reads further.
BLOCKS: tuple[AddressBlock, ...] = (
    # IPv4
    _block(
        "0.0.0.0/0",
        "global unicast",
        V4_SPACE,
        "RFC 791",
        ALLOW,
        note="every IPv4 address no row below holds",
    ),
    _block("0.0.0.0/8", "this network", V4, "RFC 791 §3.2", DENY),
    _block(
        "0.0.0.0/32",
        "this host on this network",
        V4,
        "RFC 1122 §3.2.1.3",
        DENY,
        note="a connection to 0.0.0.0 reaches this host",
    ),
    _block("10.0.0.0/8", "private-use", V4, "RFC 1918", DENY),
    _block("100.64.0.0/10", "shared address space", V4, "RFC 6598", DENY, note="carrier-grade NAT"),
    _block("127.0.0.0/8", "loopback", V4, "RFC 1122 §3.2.1.3", DENY),
    _block(
        "169.254.0.0/16",
        "link-local",
        V4,
        "RFC 3927",
        DENY,
        note="cloud metadata services (169.254.169.254)",
    ),
    _block("172.16.0.0/12", "private-use", V4, "RFC 1918", DENY),
    _block("192.0.0.0/24", "IETF protocol assignments", V4, "RFC 6890 §2.1", DENY),
    _block("192.0.0.0/29", "IPv4 service continuity prefix", V4, "RFC 7335", DENY),
    _block("192.0.0.8/32", "IPv4 dummy address", V4, "RFC 7600", DENY),
    _block("192.0.0.9/32", "Port Control Protocol anycast", V4, "RFC 7723", ALLOW),
    _block("192.0.0.10/32", "TURN anycast", V4, "RFC 8155", ALLOW),
    _block("192.0.0.170/31", "NAT64/DNS64 discovery", V4, "RFC 8880, RFC 7050", DENY),
    _block("192.0.2.0/24", "documentation (TEST-NET-1)", V4, "RFC 5737", DENY),
    _block("192.31.196.0/24", "AS112-v4", V4, "RFC 7535", ALLOW),
    _block("192.52.193.0/24", "AMT", V4, "RFC 7450", ALLOW),
    _block(
        "192.88.99.0/24",
        "deprecated 6to4 relay anycast",
        V4,
        "RFC 7526",
        DENY,
        note="a relay, never a data server",
    ),
    _block("192.168.0.0/16", "private-use", V4, "RFC 1918", DENY),
    _block("192.175.48.0/24", "direct delegation AS112 service", V4, "RFC 7534", ALLOW),
    _block("198.18.0.0/15", "benchmarking", V4, "RFC 2544", DENY),
    _block("198.51.100.0/24", "documentation (TEST-NET-2)", V4, "RFC 5737", DENY),
    _block("203.0.113.0/24", "documentation (TEST-NET-3)", V4, "RFC 5737", DENY),
    _block("224.0.0.0/4", "multicast", V4_MCAST, "RFC 5771", DENY),
    _block("240.0.0.0/4", "reserved", V4, "RFC 1112 §4", DENY),
    _block("255.255.255.255/32", "limited broadcast", V4, "RFC 8190, RFC 919 §7", DENY),
    # IPv6
    _block(
        "::/0",
        "reserved by the IETF",
        V6_SPACE,
        "RFC 4291 §2.4",
        DENY,
        note="IPv6 outside 2000::/3 that no row below holds",
    ),
    _block("2000::/3", "global unicast", V6_SPACE, "RFC 4291 §2.4", ALLOW),
    _block(
        "::/128",
        "unspecified",
        V6,
        "RFC 4291 §2.5.2",
        DENY,
        note="a connection to :: reaches this host",
    ),
    _block("::1/128", "loopback", V6, "RFC 4291 §2.5.3", DENY),
    _block(
        "::/96",
        "IPv4-compatible (deprecated)",
        V6_SPACE,
        "RFC 4291 §2.5.5.1",
        EMBEDS,
        _mapped,
        note="the IPv4 address is the last 32 bits",
    ),
    _block(
        "::ffff:0:0/96",
        "IPv4-mapped",
        V6,
        "RFC 4291 §2.5.5.2",
        EMBEDS,
        _mapped,
        note="the kernel connects to the IPv4 address (the last 32 bits)",
    ),
    _block(
        "64:ff9b::/96",
        "NAT64 well-known prefix",
        V6,
        "RFC 6052 §2.1",
        EMBEDS,
        _mapped,
        note="a NAT64 gateway connects to the last 32 bits (the registry calls the block global)",
    ),
    _block(
        "64:ff9b:1::/48",
        "local-use IPv4/IPv6 translation",
        V6,
        "RFC 8215",
        DENY,
        note="the operator picks where the IPv4 address sits, so it cannot be read; "
        "list your prefix with --tpc-allow",
    ),
    _block("100::/64", "discard-only", V6, "RFC 6666", DENY),
    _block("2001::/23", "IETF protocol assignments", V6, "RFC 2928", DENY),
    _block(
        "2001::/32",
        "Teredo",
        V6,
        "RFC 4380 §4, RFC 8190",
        EMBEDS,
        _teredo,
        note="the server (bits 32-63) and the client (the last 32 bits, inverted)",
    ),
    _block("2001:1::1/128", "Port Control Protocol anycast", V6, "RFC 7723", ALLOW),
    _block("2001:1::2/128", "TURN anycast", V6, "RFC 8155", ALLOW),
    _block("2001:2::/48", "benchmarking", V6, "RFC 5180", DENY),
    _block("2001:3::/32", "AMT", V6, "RFC 7450", ALLOW),
    _block("2001:4:112::/48", "AS112-v6", V6, "RFC 7535", ALLOW),
    _block("2001:10::/28", "deprecated ORCHID", V6, "RFC 4843", DENY),
    _block("2001:20::/28", "ORCHIDv2", V6, "RFC 7343", ALLOW),
    _block("2001:30::/28", "drone remote ID entity tags", V6, "RFC 9374", ALLOW),
    _block("2001:db8::/32", "documentation", V6, "RFC 3849", DENY),
    _block(
        "2002::/16",
        "6to4",
        V6,
        "RFC 3056 §2",
        EMBEDS,
        _sixtofour,
        note="the IPv4 address is bits 16-47",
    ),
    _block("2620:4f:8000::/48", "direct delegation AS112 service", V6, "RFC 7534", ALLOW),
    _block("3fff::/20", "documentation", V6, "RFC 9637", DENY),
    _block("5f00::/16", "segment routing (SRv6) SIDs", V6, "RFC 9602", DENY),
    _block("fc00::/7", "unique-local", V6, "RFC 4193, RFC 8190", DENY),
    _block("fe80::/10", "link-local", V6, "RFC 4291 §2.5.6", DENY),
    _block("fec0::/10", "site-local (deprecated)", V6_SPACE, "RFC 3879", DENY),
    _block("ff00::/8", "multicast", V6_SPACE, "RFC 4291 §2.7", DENY),
)

#: the blocks, most specific first, per IP version
_ORDERED = {
    v: sorted((b for b in BLOCKS if b.network.version == v), key=lambda b: -b.network.prefixlen)
    for v in (4, 6)
}


@dataclass(frozen=True)
class AddressDecision:
    """Whether an address may be reached, the row that decided, and why in words."""

    allowed: bool
    block: AddressBlock
    why: str


def block_of(address: IpAddress) -> AddressBlock:
    """The most specific row holding *address*."""
    for block in _ORDERED[address.version]:
        if address in block.network:
            return block
    raise AssertionError(f"no block holds {address}")  # 0.0.0.0/0 and ::/0 hold all


def classify(address: IpAddress) -> AddressDecision:
    """The table's decision for *address* (its zone, if any, plays no part)."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        address = ipaddress.IPv6Address(int(address))
    block = block_of(address)
    if block.verdict != EMBEDS:
        allowed = block.verdict == ALLOW
        return AddressDecision(allowed, block, f"{address} is {block.name} ({block.rfc})")
    assert block.embedded is not None and isinstance(address, ipaddress.IPv6Address)
    inner = dict.fromkeys(block.embedded(address))
    refused = [d.why for d in (classify(v4) for v4 in inner) if not d.allowed]
    shown = " and ".join(str(v4) for v4 in inner)
    if refused:
        return AddressDecision(
            False,
            block,
            f"{address} is {block.name} ({block.rfc}) of {shown}: " + "; ".join(refused),
        )
    return AddressDecision(
        True, block, f"{address} is {block.name} ({block.rfc}) of {shown}, which is global"
    )


def connect_address(address: IpAddress) -> IpAddress:
    """The address the kernel connects to: an IPv4-mapped IPv6 address is its IPv4 one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


# --- hosts as URLs write them -------------------------------------------------------------

NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_.")
ZONE_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_.")
MAX_ZONE = 15  # IFNAMSIZ - 1


class BadHost(ValueError):
    """A URL's host that is neither an address nor a name (the message says why)."""


def parse_host(host: str) -> IpAddress | None:
    """The address *host* names (an IPv6 literal without its brackets, or an IPv4 address
    in any form), or None for a name to resolve; :class:`BadHost` otherwise."""
    if ":" in host:
        return _ipv6(host)
    if "%" in host:
        raise BadHost("holds percent-encoding, which a host name never needs")
    if not host or not set(host) <= NAME_CHARACTERS:
        raise BadHost("is not a host name or an address")
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()  # one trailing dot: the root
    if _ends_in_number(labels[-1]):
        return _ipv4(labels)
    if len(host.rstrip(".")) > 253 or any(not label or len(label) > 63 for label in labels):
        raise BadHost("is not a host name (an empty label, or one over 63 characters)")
    return None


def _ipv6(host: str) -> ipaddress.IPv6Address:
    text, sep, zone = host.partition("%")
    if sep:
        if zone.startswith("25"):
            zone = zone[2:]  # RFC 6874: the "%" before a zone is written "%25" in a URL
        if not zone or len(zone) > MAX_ZONE or not set(zone) <= ZONE_CHARACTERS:
            raise BadHost(f"has a zone ({zone[:20]!r}) that is not an interface name")
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise BadHost("is not an IPv6 address") from None
    if sep and not (address.is_link_local or address.is_multicast):
        # a zone scopes a link-local (or multicast) address to an interface; on any other
        # address it means nothing, and "%30" could as well be a percent-encoded "0"
        raise BadHost(f"has a zone ({zone[:20]!r}), which only a link-local address takes")
    return ipaddress.IPv6Address(f"{address}%{zone}") if sep else address


def _number(text: str) -> int | None:
    """One part of an IPv4 address as inet_aton and the WHATWG URL standard read it."""
    if not text:
        return None
    base = 10
    if text[:2] in ("0x", "0X"):
        text, base = text[2:], 16
    elif len(text) > 1 and text[0] == "0":
        text, base = text[1:], 8
    if not text:
        return 0  # "0x" (WHATWG)
    digits = string.hexdigits if base == 16 else string.digits[:base]
    if not set(text) <= set(digits):
        return None
    return int(text, base)


def _ends_in_number(label: str) -> bool:
    return bool(label) and ((label.isdigit() and label.isascii()) or _number(label) is not None)


def _ipv4(labels: list[str]) -> ipaddress.IPv4Address:
    numbers = [_number(label) for label in labels]
    if len(labels) > 4 or any(n is None for n in numbers):
        raise BadHost("ends in a number but is not an IPv4 address")
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        raise BadHost("ends in a number but is not an IPv4 address (a part is too large)")
    value = values[-1]
    for i, n in enumerate(values[:-1]):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)
