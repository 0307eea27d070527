"""Which remote addresses a COPY may reach without ``--tpc-allow``: the special-purpose
table (transfer/server/addresses.py) checked row by row against the IANA registries, and
the decision a COPY's ``Source``/``Destination`` gets whatever textual form its host takes
(decimal, hex, octal, short IPv4, IPv6 with or without a dotted tail, zone IDs, trailing
dots, userinfo tricks, percent-encoding): the table's decision for the address the
connection would use, and that address is the one connected to.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support import fuzz

from dtnkit.transfer.server import addresses as ad
from dtnkit.transfer.server.copy import remote_url
from dtnkit.transfer.server.errors import HttpError
from dtnkit.transfer.server.tpc_allow import AllowList, RemoteRefused

DOCS = Path(__file__).resolve().parents[3] / "docs" / "transfer.md"

#: One or more addresses per row of the table, with whether a COPY may reach them without
#: --tpc-allow: written from the IANA IPv4 and IPv6 Special-Purpose Address Registries
#: ("Globally Reachable") and RFC 4291, RFC 3879, RFC 5771, not from the code.
EXAMPLES: list[tuple[str, bool]] = [
    ("8.8.8.8", True),
    ("1.1.1.1", True),
    ("192.0.1.255", True),
    ("192.0.3.0", True),
    ("0.0.0.0", False),
    ("0.1.2.3", False),
    ("10.0.0.5", False),
    ("10.255.255.255", False),
    ("100.64.0.1", False),
    ("100.127.255.254", False),
    ("100.128.0.1", True),
    ("127.0.0.1", False),
    ("127.255.255.254", False),
    ("169.254.169.254", False),
    ("172.16.0.1", False),
    ("172.31.255.255", False),
    ("172.32.0.1", True),
    ("192.0.0.1", False),
    ("192.0.0.8", False),
    ("192.0.0.9", True),
    ("192.0.0.10", True),
    ("192.0.0.11", False),
    ("192.0.0.170", False),
    ("192.0.0.171", False),
    ("192.0.0.255", False),
    ("192.0.2.5", False),
    ("192.31.196.1", True),
    ("192.52.193.1", True),
    ("192.88.99.1", False),
    ("192.168.1.1", False),
    ("192.175.48.1", True),
    ("198.18.0.1", False),
    ("198.19.255.255", False),
    ("198.20.0.1", True),
    ("198.51.100.7", False),
    ("203.0.113.9", False),
    ("224.0.0.1", False),
    ("239.255.255.250", False),
    ("240.0.0.1", False),
    ("255.255.255.254", False),
    ("255.255.255.255", False),
    ("2001:4860:4860::8888", True),
    ("2a00:1450::1", True),
    ("3ffe::1", True),
    ("::", False),
    ("::1", False),
    ("::2", False),
    ("4000::1", False),
    ("1::1", False),
    ("::ffff:10.0.0.5", False),
    ("::ffff:8.8.8.8", True),
    ("::10.0.0.5", False),
    ("::8.8.8.8", True),
    ("64:ff9b::a00:5", False),
    ("64:ff9b::808:808", True),
    ("64:ff9b::7f00:1", False),
    ("64:ff9b:1::a00:5", False),
    ("64:ff9b:1::808:808", False),
    ("100::1", False),
    ("2001::1", False),
    ("2001:0:808:808::f7f7:f7f7", True),
    ("2001:0:a00:5::f5ff:fffa", False),
    ("2001:0:808:808::f5ff:fffa", False),
    ("2001:1::1", True),
    ("2001:1::2", True),
    ("2001:1::3", False),
    ("2001:2::1", False),
    ("2001:3::1", True),
    ("2001:4:112::1", True),
    ("2001:5::1", False),
    ("2001:10::1", False),
    ("2001:20::1", True),
    ("2001:30::1", True),
    ("2001:db8::1", False),
    ("2002:808:808::1", True),
    ("2002:a00:5::1", False),
    ("2002:7f00:1::1", False),
    ("2620:4f:8000::1", True),
    ("3fff::1", False),
    ("3fff:fff::1", False),
    ("5f00::1", False),
    ("fc00::1", False),
    ("fd00::5", False),
    ("fe80::1", False),
    ("febf::1", False),
    ("fec0::5", False),
    ("feff::1", False),
    ("ff02::1", False),
    ("ff0e::1", False),
]


def bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def decide(text: str) -> tuple[bool, str | None]:
    """What a COPY with ``Source: text`` gets: (allowed, the address connected to); a 400
    (not a URL, or a host that is not one) and a 403 (not allowed) are both refusals."""
    try:
        url = remote_url(text, "Source")
        return True, AllowList().pick(url.host, url.port)[0]
    except (HttpError, RemoteRefused):
        return False, None


@pytest.mark.parametrize(("address", "allowed"), EXAMPLES)
def test_each_blocks_example_gets_the_registrys_decision(address: str, allowed: bool) -> None:
    assert decide(f"http://{bracket(address)}:8443/f")[0] is allowed


def test_every_block_of_the_table_has_an_example() -> None:
    covered = {ad.block_of(ipaddress.ip_address(a)).network for a, _ in EXAMPLES}
    missing = [str(b.network) for b in ad.BLOCKS if b.network not in covered]
    assert missing == []


def test_the_docs_list_every_block_with_its_decision() -> None:
    text = DOCS.read_text()
    for block in ad.BLOCKS:
        row = re.search(rf"^\| `{re.escape(str(block.network))}` \|.*$", text, re.M)
        assert row is not None, block.network
        assert f"| {block.verdict} |" in row.group(0), (block.network, row.group(0))


# --- every textual form -------------------------------------------------------------------

V4_BLOCKS = [b for b in ad.BLOCKS if b.network.version == 4]
V6_BLOCKS = [b for b in ad.BLOCKS if b.network.version == 6]


@st.composite
def in_block(draw: st.DrawFn, blocks: list[ad.AddressBlock]) -> ad.IpAddress:
    """An address of a block: its first, its last or any; an embedding block's address
    embeds IPv4 addresses of any block (so internal ones come up as often as public)."""
    block = draw(st.sampled_from(blocks))
    net = block.network
    if block.verdict == ad.EMBEDS:
        v4 = [int(draw(in_block(V4_BLOCKS))) for _ in range(2)]
        base = int(net.network_address)
        if net.prefixlen == 16:  # 6to4: bits 16-47, then any subnet and interface
            value = base | v4[0] << 80 | draw(st.integers(0, 2**80 - 1))
        elif net.prefixlen == 32:  # Teredo: server, flags and port, inverted client
            value = (
                base | v4[0] << 64 | draw(st.integers(0, 2**32 - 1)) << 32 | (~v4[1] & 0xFFFFFFFF)
            )
        else:  # the last 32 bits
            value = base | v4[0]
        address: ad.IpAddress = ipaddress.IPv6Address(value)
        return address if ad.block_of(address) is block else net.network_address
    size = net.num_addresses
    offset = draw(st.one_of(st.just(0), st.just(size - 1), st.integers(0, size - 1)))
    return net[offset]


def _part(draw: st.DrawFn, value: int) -> str:
    radix = draw(st.sampled_from(["dec", "hex", "HEX", "oct"]))
    if radix == "dec":
        return str(value)
    if radix == "oct":
        return "0" + format(value, "o")
    return (
        ("0x" if radix == "hex" else "0X")
        + "0" * draw(st.integers(0, 2))
        + format(value, "x" if radix == "hex" else "X")
    )


@st.composite
def ipv4_text(draw: st.DrawFn, address: ipaddress.IPv4Address) -> str:
    """*address* as inet_aton and browsers read it: 1 to 4 parts, each in any radix."""
    n = int(address)
    a, b, c, d = address.packed
    parts = draw(st.sampled_from([1, 2, 3, 4]))
    values = {1: [n], 2: [a, n & 0xFFFFFF], 3: [a, b, n & 0xFFFF], 4: [a, b, c, d]}[parts]
    text = ".".join(_part(draw, v) for v in values)
    return text + "." if draw(st.booleans()) else text


@st.composite
def ipv6_text(draw: st.DrawFn, address: ipaddress.IPv6Address) -> tuple[str, str | None]:
    """*address* written as URLs write it (the brackets added later), and its zone."""
    form = draw(st.sampled_from(["short", "long", "upper", "dotted"]))
    if form == "short":
        text = address.compressed
    elif form == "long":
        text = address.exploded
    elif form == "upper":
        text = address.compressed.upper()
    else:
        head = ipaddress.IPv6Address(int(address) & ~0xFFFFFFFF).exploded.rsplit(":", 2)[0]
        text = f"{head}:{ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)}"
    zone = draw(st.sampled_from([None, "eth0", "lo", "1"]))
    if zone is None:
        return text, None
    return text + draw(st.sampled_from(["%25", "%"])) + zone, zone


USERINFO = ["", "", "dtn.example.org@", "user:secret@", "8.8.8.8@", "8.8.8.8:443@", "%31%30.0.0.5@"]


@st.composite
def remote(draw: st.DrawFn) -> tuple[str, ad.IpAddress, bool]:
    """(a Source URL, the address it names, whether its host is percent-encoded)."""
    version = draw(st.sampled_from([4, 6]))
    address = draw(in_block(V4_BLOCKS if version == 4 else V6_BLOCKS))
    if isinstance(address, ipaddress.IPv4Address):
        mapped = draw(st.integers(0, 4)) == 0  # the same address, IPv4-mapped
        host = f"[::ffff:{address}]" if mapped else draw(ipv4_text(address))
    else:
        text, zone = draw(ipv6_text(address))
        if zone is not None:
            address = ipaddress.IPv6Address(f"{address}%{zone}")
        host = f"[{text}]"
    encoded = False
    if draw(st.integers(0, 5)) == 0:  # percent-encode one character of the host
        inner = host.strip("[]")
        # a character of the address (a zone's own "%25" is RFC 6874's, not an encoding)
        at = draw(st.integers(0, len(inner.split("%")[0]) - 1))
        inner = inner[:at] + f"%{ord(inner[at]):02x}" + inner[at + 1 :]
        host, encoded = (f"[{inner}]" if host.startswith("[") else inner), True
    scheme = draw(st.sampled_from(["http", "https", "davs", "dav", "HTTP"]))
    port = draw(st.sampled_from(["", ":8443", ":1094", ":80"]))
    path = draw(st.sampled_from(["/f", "/data/file?authz=x", "", "/#frag"]))
    return f"{scheme}://{draw(st.sampled_from(USERINFO))}{host}{port}{path}", address, encoded


@pytest.mark.fuzz
@settings(max_examples=fuzz.CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(remote())
def test_every_form_gets_the_tables_decision_and_connects_there(
    case: tuple[str, ad.IpAddress, bool],
) -> None:
    text, address, encoded = case
    allowed, connected = decide(text)
    if encoded:  # a host with percent-encoding is refused as not a host, never resolved
        assert not allowed, text
        return
    scoped = isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None
    if scoped and not (address.is_link_local or address.is_multicast):
        # a zone on any other address means nothing (and "%30" may be an encoded "0")
        assert not allowed, text
        return
    want = ad.classify(address).allowed
    assert allowed is want, (text, str(address), ad.classify(address).why)
    if allowed:
        assert connected == str(ad.connect_address(address)), (text, connected)


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.256",
        "1.2.3.4.5",
        "09",
        "0x1.0xfffffff",
        "256.0.0.1",
        "1..2",
        "a..b",
        "10.0.0.5 ",
        "a_b!",
        "[fe80::1%25]",
        "[fe80::1%25eth0:1]",
        "[2000::%25eth0]",
        "[2000:0:0:0:0:0:0:0%3000]",
        "[fe80::1%25" + "x" * 16 + "]",
    ],
)
def test_hosts_that_are_not_hosts_are_refused_before_any_lookup(host: str) -> None:
    with pytest.raises((HttpError, RemoteRefused)):
        url = remote_url(f"http://{host}/f", "Source")
        AllowList().pick(url.host, url.port)
