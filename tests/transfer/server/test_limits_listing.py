"""Directory listings cost the server a read and a stat of every member (10 PROPFINDs of
200k entries took 112 s of its CPU), so one token reads at most ``--listing-slots`` of them
at a time, as for digests: the others wait (up to the hashing wait), then get 503 with
Retry-After, while other tokens' listings go on.

The two listings that hold the slots are held by their clients, who read the answer's head
and not its body: the server blocks sending it, slot in hand, for as long as the test likes,
so no timing decides who holds what."""

from __future__ import annotations

import http.client
import os
import socket
from pathlib import Path

from dtnkit.transfer import tokens
from dtnkit.transfer.server import start_server
from dtnkit.transfer.server.limits import Limits

ENTRIES = 20_000  # a listing of several MiB: far more than the socket buffers hold


def listing(port: int, token: str, method: str = "PROPFIND") -> tuple[socket.socket, bytes]:
    """Send a listing request; return the socket and the first bytes of the answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(
        f"{method} /big/ HTTP/1.1\r\nHost: h\r\nDepth: 1\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    return s, s.recv(4096)


def test_one_token_reads_two_listings_at_once_others_are_not_held(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(ENTRIES):
        os.close(os.open(big / f"a-member-with-a-long-enough-name-{i:06d}", os.O_CREAT))
    store = tokens.parse("greedy read\nother read\n")
    with start_server(
        tmp_path, tokens=store, quiet=True, limits=Limits(hash_wait=1.0, listing_slots=2)
    ) as h:
        held = [listing(h.port, "greedy") for _ in range(2)]
        try:
            assert all(first.startswith(b"HTTP/1.1 207 ") for _s, first in held)
            third, answer = listing(h.port, "greedy")
            third.close()
            assert answer.startswith(b"HTTP/1.1 503 "), answer[:100]
            assert b"Retry-After: 10" in answer and b"directory listings" in answer
            plain, answer = listing(h.port, "greedy", "GET")  # a GET listing counts too
            plain.close()
            assert answer.startswith(b"HTTP/1.1 503 "), answer[:100]
            c = http.client.HTTPConnection("127.0.0.1", h.port, timeout=30)
            c.request("PROPFIND", "/big/", headers={"Depth": "1", "Authorization": "Bearer other"})
            r = c.getresponse()
            body = r.read()
            c.close()
            assert r.status == 207 and body.count(b"<D:response>") == ENTRIES + 1
        finally:
            for s, _first in held:
                s.close()
        # the slots come back when the held listings end
        again, answer = listing(h.port, "greedy")
        again.close()
        assert answer.startswith(b"HTTP/1.1 207 ")
