"""Round trips of an upload to ``dtnkit serve`` (issue 11, WAN speed: uploads at most 1.1x
the download time), counted by an HTTP-aware TCP relay in front of a real server over real
sockets.

Each round trip an upload spends waiting costs one RTT on a WAN (50 ms on the lab path).
Before this work a session upload with two streams made five TCP (and TLS) connections: a
HEAD on its own, the session start on its own, one per stream, the commit on its own; and
each stream waited for the answer to every range before it sent the next one.  A single PUT
made its HEAD and its PUT on two connections.  Now: the session start on the first stream's
connection (no HEAD: the start carries ``If-None-Match: *``), the ranges of each stream
pipelined, the commit on a connection a stream ended with; a single PUT after its HEAD on
the same connection.

The relay holds each answer to a range PUT until the client has started its next
request on that connection, or :data:`HOLD` seconds: an answer held that long means the
client waited for it before sending more (a round trip spent idle, a "turn").  A pipelining
client never makes the relay wait, so the count does not depend on timing; only the last
range of each stream waits (nothing follows it on that connection).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.support.relay import Relay
from tests.transfer.client.test_upload import TOKEN, payload, serve

from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import DestinationExists
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle

BLOCK = 64 * 1024
BLOCKS = 8
SIZE = BLOCKS * BLOCK - 777  # eight ranges, the last one short
HOLD = 2.0  # seconds an answer to a range PUT waits for the client's next request


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(d))
    return d


@dataclass
class Link:
    """One client connection through the relay."""

    index: int
    requests: list[str] = field(default_factory=list)  # 'METHOD [action]' in order
    started: int = 0  # request heads begun by the client
    ranges: int = 0  # range PUTs begun
    ranges_answered: int = 0  # range PUTs whose answer went back to the client
    client: socket.socket | None = None
    upstream: socket.socket | None = None
    cond: threading.Condition = field(default_factory=threading.Condition)


class TripRelay(Relay):
    """127.0.0.1:port -> the server, parsing both directions (Content-Length framing)."""

    def __init__(self, target: int) -> None:
        self.links: list[Link] = []
        self.turns = 0  # answers to range PUTs the client waited for before sending more
        #: cut the first connection on which two range PUTs are on their way, unanswered
        self.cut_pipelined = False
        self.cut_link: int | None = None  # the connection that was cut
        self.cut = threading.Event()
        #: hold the answer to the session start until this many connections are open (or
        #: HOLD seconds: then start_waited is set), to see what the client opened meanwhile
        self.start_held_for = 0
        self.start_waited = False
        self.opened = threading.Condition()
        super().__init__(target)

    @property
    def connections(self) -> int:
        return len(self.links)

    def requests(self) -> list[tuple[int, str]]:
        """(connection, request) for every request, by connection then order."""
        return [(link.index, r) for link in self.links for r in link.requests]

    def connected(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            link = Link(len(self.links), client=client, upstream=upstream)
            self.links.append(link)
        with self.opened:
            self.opened.notify_all()
        threading.Thread(target=self._up, args=(client, upstream, link), daemon=True).start()
        threading.Thread(target=self._down, args=(upstream, client, link), daemon=True).start()

    @staticmethod
    def _frames(
        sock: socket.socket,
        on_head: Callable[[bytes], None] | None = None,
        bodyless: Callable[[bytes], bool] | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """(head, body) of each message on *sock*; *on_head* is called with a head as soon
        as it is complete (before its body arrives); *bodyless(head)*: it has no body
        whatever its Content-Length says (an answer to a HEAD)."""
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            if on_head is not None:
                on_head(head)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                key, _, value = line.partition(b":")
                if key.strip().lower() == b"content-length":
                    length = int(value)
            if bodyless is not None and bodyless(head):
                length = 0
            while len(buf) < length:
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
            yield head, buf[:length]
            buf = buf[length:]

    def _up(self, client: socket.socket, upstream: socket.socket, link: Link) -> None:
        def began(head: bytes) -> None:
            text = head.decode("latin-1")
            lines = text.split("\r\n")
            fields = {
                k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
            }
            kind = lines[0].split()[0]
            if "dtnkit-upload" in fields:
                kind += " " + fields["dtnkit-upload"]
            elif "content-range" in fields:
                kind += " range"
            with link.cond:
                link.requests.append(kind)
                link.started += 1
                if kind == "PUT range":
                    link.ranges += 1
                    if link.ranges == 2 and link.ranges_answered == 0:
                        self._cut(link)  # before _down may answer the first
                link.cond.notify_all()

        with contextlib.suppress(OSError):
            for head, body in self._frames(client, began):
                upstream.sendall(head + b"\r\n\r\n" + body)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _cut(self, link: Link) -> None:
        """Cut *link* (two ranges on their way, pipelined, no answer yet) if it is the first."""
        with self._lock:
            if not self.cut_pipelined or self.cut.is_set():
                return
            self.cut_link = link.index
            self.cut.set()
        with contextlib.suppress(OSError):
            assert link.client is not None and link.upstream is not None
            link.client.shutdown(socket.SHUT_RDWR)
            link.upstream.shutdown(socket.SHUT_RDWR)

    def _down(self, upstream: socket.socket, client: socket.socket, link: Link) -> None:
        answered = 0

        def bodyless(head: bytes) -> bool:
            with link.cond:
                asked = link.requests[answered] if answered < len(link.requests) else ""
            return asked == "HEAD" or head.split(b" ")[1:2] in ([b"100"], [b"204"], [b"304"])

        with contextlib.suppress(OSError):
            for head, body in self._frames(upstream, bodyless=bodyless):
                if head.split(b" ")[1:2] == [b"100"]:
                    client.sendall(head + b"\r\n\r\n")
                    continue
                answered += 1
                with link.cond:
                    asked = link.requests[answered - 1]
                if asked == "POST start" and self.start_held_for:
                    with self.opened:
                        if not self.opened.wait_for(
                            lambda: self.connections >= self.start_held_for, HOLD
                        ):
                            self.start_waited = True
                with link.cond:
                    held = link.requests[answered - 1] == "PUT range"
                    if held and not link.cond.wait_for(
                        functools.partial(lambda n: link.started > n, answered), HOLD
                    ):
                        with self._lock:
                            self.turns += 1
                    if self.cut_link == link.index:
                        return  # cut: nothing more goes back
                    if held:
                        link.ranges_answered += 1
                    client.sendall(head + b"\r\n\r\n" + body)
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_WR)


@pytest.fixture
def relayed(tmp_path: Path) -> Iterator[tuple[ServerHandle, Path, TripRelay]]:
    root = tmp_path / "srv"
    root.mkdir()
    with serve(root) as handle:
        relay = TripRelay(handle.port)
        try:
            yield handle, root, relay
        finally:
            relay.close()


def opts(**kw: object) -> CopyRequest:
    base: dict[str, object] = {
        "token": TOKEN,
        "block_size": BLOCK,
        "streams": 2,
        "backoff": 0.01,
        "retries": 2,
        "stall_timeout": 10.0,
        "checksum": "adler32",
        "overwrite": False,
    }  # as cp without -f
    base.update(kw)
    return CopyRequest(**base)  # type: ignore[arg-type]


def source(tmp_path: Path, seed: int = 19) -> tuple[Path, bytes]:
    data = payload(SIZE, seed)
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    return src, data


def test_a_session_upload_pipelines_its_ranges_on_two_connections(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """Before: HEAD, start, two streams and the commit on five connections, and every range
    waited for its answer (eight turns)."""
    handle, root, relay = relayed
    src, data = source(tmp_path)
    summary = copy(str(src), f"http://127.0.0.1:{relay.port}/up.bin", opts())
    assert (root / "up.bin").read_bytes() == data
    assert summary.files[0].digest is not None and summary.files[0].upload_streams == 2
    assert relay.turns <= 2  # only the last range of each stream waited for its answer
    seen = relay.requests()
    assert [r for _c, r in seen if r != "PUT range"] == ["POST start", "POST commit"]
    assert "HEAD" not in [r for _c, r in seen]  # the start carries If-None-Match: * itself
    assert [r for _c, r in seen].count("PUT range") == BLOCKS
    assert relay.connections == 2  # the start on the first stream's, the commit on a stream's
    assert relay.links[0].requests[0] == "POST start"
    assert handle.counters["range_bytes"] == SIZE  # every range once


def test_the_other_streams_connect_while_the_session_start_is_asked(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """Four streams: the relay holds the answer to the session start until four connections
    are open, and they are, without waiting it out: the three other streams' connections
    (TCP, and TLS on https) open beside the start, so their handshakes overlap its round
    trip.  Before: they opened once the start was answered, two round trips later on TLS
    (an 8-stream upload took 1.03x the time on a 50 ms / 5 Gbit/s jumbo lab path)."""
    _handle, root, relay = relayed
    relay.start_held_for = 4
    src, data = source(tmp_path, 23)
    summary = copy(str(src), f"http://127.0.0.1:{relay.port}/four.bin", opts(streams=4))
    assert (root / "four.bin").read_bytes() == data
    assert summary.files[0].upload_streams == 4
    assert not relay.start_waited, relay.requests()
    assert relay.connections == 4  # no connection more than the streams
    assert relay.links[0].requests[0] == "POST start"


def test_a_single_put_asks_its_head_on_the_put_connection(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """Before: the HEAD (refusing an existing file) and the PUT on two connections (two
    handshakes more on TLS).  The PUT still waits for the HEAD's answer: a server that
    ignores If-None-Match (XRootD 5.5.3) truncates the target on a PUT's head alone."""
    _handle, root, relay = relayed
    src, data = source(tmp_path, 7)
    copy(str(src), f"http://127.0.0.1:{relay.port}/one.bin", opts(streams=1))
    assert (root / "one.bin").read_bytes() == data
    assert relay.requests() == [(0, "HEAD"), (0, "PUT")]


def test_a_single_put_to_an_existing_file_sends_no_body(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """The HEAD answers 200: DestinationExists, nothing of the PUT sent."""
    handle, root, relay = relayed
    src, _data = source(tmp_path, 8)
    (root / "old.bin").write_bytes(b"old")
    with pytest.raises(DestinationExists):
        copy(str(src), f"http://127.0.0.1:{relay.port}/old.bin", opts(streams=1))
    assert (root / "old.bin").read_bytes() == b"old"
    assert handle.counters.get("received_bytes", 0) == 0
    assert relay.requests() == [(0, "HEAD")]
    assert not [p for p in os.listdir(root) if "dtnkit-part" in p]


def test_an_existing_file_is_refused_by_the_session_start_before_any_byte(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """No HEAD before the session start: its If-None-Match: * refuses it, nothing sent."""
    handle, root, relay = relayed
    src, _data = source(tmp_path, 9)
    (root / "there.bin").write_bytes(b"old")
    with pytest.raises(DestinationExists):
        copy(str(src), f"http://127.0.0.1:{relay.port}/there.bin", opts())
    assert (root / "there.bin").read_bytes() == b"old"
    assert next(r for _c, r in relay.requests()) == "POST start"
    assert "PUT range" not in [r for _c, r in relay.requests()]
    assert handle.counters.get("received_bytes", 0) == 0


def test_a_resent_range_keeps_the_pipeline_and_the_file_right(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """A stream cut in the middle of its pipeline (the server gone from under both of its
    unanswered ranges) sends them again on a new connection; the file is whole and
    verified, no part file is left."""
    handle, root, relay = relayed
    src, data = source(tmp_path, 11)
    relay.cut_pipelined = True  # whichever stream's connection has two ranges out first
    summary = copy(str(src), f"http://127.0.0.1:{relay.port}/cut.bin", opts())
    assert relay.cut.is_set() and relay.cut_link is not None
    cut = relay.links[relay.cut_link]
    assert (
        cut.ranges == 2
        and cut.ranges_answered == 0
        and cut.requests[-2:]
        == [
            "PUT range",
            "PUT range",
        ]
    )
    assert (root / "cut.bin").read_bytes() == data
    assert summary.files[0].retries >= 1
    assert not [p for p in os.listdir(root) if "dtnkit-part" in p]
    assert handle.counters["range_bytes"] >= SIZE
