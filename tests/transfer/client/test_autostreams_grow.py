"""Several download streams on a real 100 ms lab path, a real ``dtnkit serve`` and the kernel's
own windows: ``--streams auto`` starting one stream and adding the others only when it is
bound by its window (policy.window_bound), and a stream that ends its span taking the tail
of a slower one's (engine.Shares).  Root and network namespaces; about 15 s."""

from __future__ import annotations

import json
import re
import secrets
import shutil
from collections.abc import Iterator

import pytest
from tests.support.serve_lab import ServeLab, serve_lab

from dtnkit.transfer.client import autostreams as au
from dtnkit.transfer.client import blocks, policy

MiB = 2**20
LAB_TOOLS = [t for t in ("iptables", "sysctl") if shutil.which(t) is None]
TUNED = "4096 131072 67108864"  # as `dtnkit tune apply` sets them for this path (64 MiB)
UNTUNED_WMEM = "4096 16384 4194304"  # the kernel's default: 4 MiB

pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.needs_netns,
    pytest.mark.skipif(bool(LAB_TOOLS), reason=f"needs {', '.join(LAB_TOOLS)}"),
]

# the first connection the client makes (the first request's, which carries the first
# stream) gets a 256 KiB receive buffer: a real kernel window, ~2.6 MB/s at 100 ms
SLOW_FIRST = """
import sys
from dtnkit.transfer.client import session
made = []
plain = session.Session.connect
def connect(self):
    conn = plain(self)
    made.append(conn)
    if len(made) == 1:
        conn.rcvbuf = 256 * 1024
    return conn
session.Session.connect = connect
from dtnkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def lab21(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeLab]:
    # "big": long enough for the first stream to leave slow start and show what holds it;
    # "huge": for the others to join after a second helped (policy.join_pays: with "big",
    # about 30 MiB are left by then, fewer round trips than a joiner's window needs to grow)
    with serve_lab(
        tmp_path_factory.mktemp("grow"),
        f"grws{secrets.token_hex(2)}",
        rtt_ms=100,
        files={"f": 32 * MiB, "big": 96 * MiB, "huge": 192 * MiB},
        wrapper=SLOW_FIRST,
    ) as lab_:
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            lab_.sysctl(key, TUNED, "dst")
        yield lab_


@pytest.mark.serial
def test_auto_keeps_one_stream_when_the_path_not_the_window_holds_it(lab21: ServeLab) -> None:
    """Tuned ends (32 MiB windows), a 1 Gbit/s path behind 10 Gbit/s veths: the link rate
    asks for 4 streams, but one already carries what the path does.  Before: 4 streams from
    the start (a HEAD and four ranged GETs), which lost to one on this path (BBR flows into
    one queue); now one GET of the whole file, and the others never start."""
    lab21.sysctl("net.ipv4.tcp_wmem", TUNED, "src")
    doc, err, seen = lab21.cp("--streams", "auto", name="big")
    auto = doc["streams_auto"]
    assert isinstance(auto, dict)
    assert auto["rate_from"] == "link speed of dklink0" and auto["streams"] > 1, auto
    assert doc["streams"] == 1, err
    assert [m for m, _ in seen if m == "GET"] == ["GET"], seen
    assert auto.get("grow") is True and "one stream starts" in str(auto["reason"])
    assert "1 stream: the first stream's rate stopped growing" in err
    assert "the path, not a window, holds it" in err


@pytest.mark.serial
def test_auto_adds_streams_when_the_far_end_window_holds_the_first(lab21: ServeLab) -> None:
    """The same client, a server with the kernel's default 4 MiB send buffer: the first
    stream stops growing at what that window carries, which the path does not explain, so
    the others join and take equal parts of the first one's tail."""
    lab21.sysctl("net.ipv4.tcp_wmem", UNTUNED_WMEM, "src")
    try:
        doc, err, seen = lab21.cp("--streams", "auto", name="huge")
    finally:
        lab21.sysctl("net.ipv4.tcp_wmem", TUNED, "src")
    auto = doc["streams_auto"]
    assert isinstance(auto, dict) and isinstance(auto["streams"], int)
    assert auto["streams"] >= 2 and auto.get("grow") is True
    assert "an untuned sender's window (4 MiB)" in err or "bound by it" in err, err
    # a second stream joined first; the others joined when the two carried more
    # (policy.second_helps), as they do on an idle machine
    assert "with a second stream they moved" in err, err
    if "its window held it" in err:
        assert doc["streams"] == auto["streams"], err
        assert len([n for m, n in seen if m == "GET"]) >= auto["streams"], seen
    else:
        # on a loaded one the pair's spells can read less than that on average (1 of 10 runs
        # beside two busy test suites): then two, and the figure that says so
        m = re.search(r"(\d+)% of the first's \S+ MiB alone: the path, not a window", err)
        assert m and int(m.group(1)) < 100 * policy.HELPS_GAIN, err
        assert doc["streams"] == 2, err


@pytest.mark.serial
def test_the_first_stream_to_join_finds_its_connection_open(lab21: ServeLab) -> None:
    """A stream that starts alone while others may join: the first to join starts on a
    connection opened beside the first request (its TCP and TLS handshakes done long
    before), not one opened when it joins (the copy's timeline shows when)."""
    lab21.sysctl("net.ipv4.tcp_wmem", UNTUNED_WMEM, "src")
    line = lab21.got.parent / "join-timeline.json"
    try:
        doc, err, _seen = lab21.cp("--streams", "auto", "--timeline", str(line), name="big")
    finally:
        lab21.sysctl("net.ipv4.tcp_wmem", TUNED, "src")
    assert isinstance(doc["streams"], int) and doc["streams"] >= 2, err
    events = json.loads(line.read_text())["events"]
    joined = next(e["t"] for e in events if e["what"] == "stream starts" and e["stream"] == 1)
    first_get = next(e for e in events if e["what"] == "GET sent" and "range" in e)
    tcp = next(
        e["t"] for e in events if e["what"] == "tcp" and e["connection"] == first_get["connection"]
    )
    assert first_get["connection"] != 0
    # opened at the decision, a round trip or more before the first stream's data, and
    # long (seconds of window-bound receiving) before the join
    assert tcp < joined - 0.5, (tcp, joined, events)


@pytest.mark.serial
def test_a_stream_that_ends_its_span_takes_the_tail_of_a_slower_one(lab21: ServeLab) -> None:
    """Two streams of 16 MiB each; the first one's connection has a 256 KiB receive buffer
    (about 2.6 MB/s here), the second runs at the path's rate.  Before, the second ended
    after ~1 s and the copy waited ~6 s for the first; now the second takes half of what the
    first has left, again and again, on its own open connection: more GETs than streams,
    and the first one's GET is cut long before its 16 MiB."""
    lab21.sysctl("net.ipv4.tcp_wmem", UNTUNED_WMEM, "src")
    try:
        doc, _err, seen = lab21.cp("--streams", "2", wrapped=True)
    finally:
        lab21.sysctl("net.ipv4.tcp_wmem", TUNED, "src")
    assert doc["streams"] == 2
    gets = [n for m, n in seen if m == "GET"]
    assert len(gets) >= 3, seen  # the two spans and at least one tail taken
    # only the fast stream's span went whole (before: both); the slow one was cut (the
    # server logs what it finished sending: nothing, or less than the span)
    assert sorted(gets)[-1] == 16 * MiB and sorted(gets)[-2] < 16 * MiB, seen


def test_the_rules_constants_agree_with_their_docs() -> None:
    """The numbers the docs name (docs/transfer.md "--streams auto")."""
    assert au.SOLO_RATE == 10**9
    assert 4 * MiB == policy.UNTUNED_SEND_BUFFER
    assert policy.FLAT_ROUNDS == 3 and policy.BOUND_SHARE == 0.8
    assert policy.HELPS_GAIN == 1.5 and policy.HELPS_SPELLS == 2
    assert 8 * MiB == policy.HELPS_SPELL_CHUNKS * blocks.CHUNK
