"""One client address cannot take every connection slot of `dtnkit serve`: beyond its share
(`--max-connections-per-client`, default an eighth of the cap, at least 64) its new
connections get 503 at once, while another client is still served.

Two client addresses on one machine: 127.0.0.2 (the hog) and 127.0.0.1 (the legitimate
client) are both loopback addresses; the server listens on 127.0.0.1."""

from __future__ import annotations

import http.client
import socket
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.polling import until
from tests.support.rawhttp import LockedLog

from dtnkit.transfer.server import start_server
from dtnkit.transfer.server.conn import ConnLimits, client_key, per_client_default

CAP = 40
EACH = 10


def _connect_from(source: str, port: int) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def _answer(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            return out
        if not data:
            return out
        out += data


def test_one_address_holding_its_share_leaves_the_rest_to_others(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 1000)
    log = LockedLog()
    with start_server(
        tmp_path, anonymous_read=True, max_connections=CAP, max_connections_per_client=EACH, log=log
    ) as h:
        hog = [_connect_from("127.0.0.2", h.port) for _ in range(CAP)]  # silent, no token
        try:
            until("the hog's connections admitted", lambda: h.connections == EACH, 10)
            # every one past its share was answered 503 and closed, none hangs
            refused = [_answer(s) for s in hog[EACH:]]
            assert all(a.startswith(b"HTTP/1.1 503 ") for a in refused), refused[:2]
            assert b"from your address" in refused[0]
            # the legitimate client is served meanwhile, on several connections
            clients = [
                http.client.HTTPConnection("127.0.0.1", h.port, timeout=10) for _ in range(EACH)
            ]
            for c in clients:
                c.request("GET", "/f")
                r = c.getresponse()
                assert (r.status, r.read()) == (200, b"x" * 1000)
            for c in clients:
                c.close()
            # the hog gets a slot back once it closes one
            hog[0].close()
            until("the closed slot freed", lambda: h.connections == EACH - 1, 10)
            again = _connect_from("127.0.0.2", h.port)
            hog.append(again)
            again.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert _answer(again).startswith(b"HTTP/1.1 200 ")
        finally:
            for s in hog:
                s.close()
    # told once for the episode, not once per refused connection
    assert log.text().count("the per-client limit") == 1


def test_the_default_share_is_an_eighth_of_the_cap_at_least_64_at_most_half() -> None:
    assert per_client_default(18_394) == 2299
    assert per_client_default(758) == 94
    assert per_client_default(200) == 64
    assert per_client_default(40) == 20
    assert per_client_default(1) == 1
    assert all(1 <= per_client_default(cap) <= max(1, cap // 2) for cap in range(1, 5000))
    assert ConnLimits(max_connections=100, max_per_client=500).per_client == 100


def test_by_default_one_address_cannot_fill_a_small_cap(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 1000)
    with start_server(tmp_path, anonymous_read=True, max_connections=CAP, quiet=True) as h:
        hog = [_connect_from("127.0.0.2", h.port) for _ in range(CAP * 2)]
        try:
            until("the hog's share admitted", lambda: h.connections == CAP // 2, 10)
            c = http.client.HTTPConnection("127.0.0.1", h.port, timeout=10)
            c.request("GET", "/f")
            r = c.getresponse()
            assert (r.status, r.read()) == (200, b"x" * 1000)
            c.close()
        finally:
            for s in hog:
                s.close()


@pytest.mark.parametrize(
    "peer,key",
    [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
    ],
)
def test_a_client_is_an_ipv4_address_or_an_ipv6_64(peer: str, key: str) -> None:
    assert client_key(peer) == key


@given(st.ip_addresses(v=6), st.integers(0, 2**64 - 1))
def test_every_ipv6_address_of_one_64_counts_as_one_client(address: IPv6Address, low: int) -> None:
    other = IPv6Address(int(address) >> 64 << 64 | low)
    if address.ipv4_mapped is None and other.ipv4_mapped is None:
        assert client_key(str(address)) == client_key(str(other))
        assert client_key(str(address)).endswith("/64")
