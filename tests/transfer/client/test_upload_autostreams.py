"""``--streams auto`` for uploads makes the download's one-stream-first decision (issue 11, WAN
speed: uploads at most 1.1x the download time).

On a 50 ms / 1 Gbit/s lab path with tuned ends (32 MiB windows), the link rate (10 Gbit/s
veths) asks for 2 streams; a download starts one stream and adds the others only when it is
window-bound (``StreamsDecision.grow``), but an upload sent a two-stream session at once: 1.19x the
time of the download (``python -m bench wan --only upload``).  Now an upload with
``grow`` sends one PUT (the window of one stream carries the path, and two BBR flows leaving
startup together into one queue lose more), and says so.  With ``--rate`` (the path's own
rate) or untuned ends (no ``grow``) the formula's streams go through a session as before.

Requests and connections are counted by the relay of test_upload_round_trips.py in front of a
real ``dtnkit serve`` over real sockets; the decision is the real one, made on the real
first connection's RTT, with this host's limits and link speed given.
"""

from __future__ import annotations

from pathlib import Path

from tests.transfer.client import test_upload_round_trips as trips
from tests.transfer.client.test_upload_round_trips import BLOCK, TripRelay, opts, source

from dtnkit.transfer.client import autostreams as au
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.policy import StreamPolicy
from dtnkit.transfer.server import ServerHandle

MiB = 2**20
TUNED = au.BufferLimits(
    tcp_rmem_max=64 * MiB, tcp_wmem_max=64 * MiB, rmem_max=4 * MiB, wmem_max=4 * MiB
)  # `dtnkit tune apply` in a lab namespace
#: a link so fast that even loopback's RTT (tens of microseconds) asks for several streams
FAST_LINK = (1e16, "link speed of test0")

# that test's fixtures: its relay in front of a real serve, the journals' state directory
relayed = trips.relayed
state_dir = trips.state_dir


def auto(limits: au.BufferLimits, rate_bps: int | None = None) -> StreamPolicy:
    return StreamPolicy.auto(rate_bps, lambda: limits, lambda _a: FAST_LINK)


def test_auto_upload_with_grow_sends_one_put(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """Before: a session of the formula's streams (POST start, ranges on 8 connections,
    commit) where a download of the same decision starts one GET."""
    handle, root, relay = relayed
    src, data = source(tmp_path, 22)
    streams = auto(TUNED)
    said: list[str] = []
    streams.on_grow = said.append
    summary = copy(
        str(src), f"http://127.0.0.1:{relay.port}/one.bin", opts(streams=1), streams=streams
    )
    assert (root / "one.bin").read_bytes() == data
    decision = streams.decision
    assert decision is not None and decision.grow and decision.streams > 1
    assert relay.requests() == [(0, "HEAD"), (0, "PUT")]  # no session, one connection
    assert summary.files[0].upload_streams == 1
    doc = summary.as_dict()
    assert doc["streams"] == 1 and doc["upload_streams"] == 1
    assert len(said) == 1 and said[0].startswith("1 stream: ")
    assert "one PUT" in said[0] and "--streams N" in said[0]
    assert handle.counters.get("range_bytes", 0) == 0


def test_auto_upload_with_the_paths_rate_keeps_its_session(
    relayed: tuple[ServerHandle, Path, TripRelay], tmp_path: Path
) -> None:
    """The path's own rate (--rate): several streams from the start, through an upload
    session, as before (so do windows that carry less than 1 Gbit/s: no ``grow``,
    test_autostreams_rules.py; loopback's RTT cannot show that here)."""
    handle, root, relay = relayed
    src, data = source(tmp_path, 23)
    streams = auto(TUNED, 10**16)
    summary = copy(
        str(src),
        f"http://127.0.0.1:{relay.port}/many.bin",
        opts(streams=1, block_size=BLOCK),
        streams=streams,
    )
    assert (root / "many.bin").read_bytes() == data
    assert streams.decision is not None and not streams.decision.grow
    assert streams.decision.streams > 1
    seen = relay.requests()
    kinds = [r for _c, r in seen]
    assert kinds[0] == "POST start" and kinds.count("POST commit") == 1
    # the commit on a connection a stream ended with (opened beside the start: a stream
    # that found no block left has carried no range on it), not on a new one
    on = next(c for c, r in seen if r == "POST commit")
    assert [r for c, r in seen if c == on][-1] == "POST commit"
    used = summary.files[0].upload_streams
    assert used is not None and used > 1 and relay.connections == used
    assert handle.counters["range_bytes"] == len(data)
