"""``--streams auto`` with untuned ends on a long path (issue 11): the other streams'
connections opened beside the first request (first.Spare), and, when the rate is only an
upper bound, four streams starting instead of the cap of eight, more joining only while all
are bound by their windows (policy.all_bound).  A real 50 ms / 1 Gbit/s lab path behind
10 Gbit/s veths, a real ``dtnkit serve`` and the kernel's own windows; about 20 s."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from tests.support.serve_lab import ServeLab, serve_lab

from dtnkit.transfer.client import autostreams as au
from dtnkit.transfer.client import policy

MiB = 2**20
LAB_TOOLS = [t for t in ("iptables", "sysctl") if shutil.which(t) is None]
UNTUNED_WMEM = "4096 16384 4194304"  # the kernel's default: 3 MiB windows
SMALL_WMEM = "4096 16384 1048576"  # 768 KiB windows: four carry 503 Mbit/s at 50 ms
UNTUNED = au.BufferLimits(
    tcp_rmem_max=32 * MiB, tcp_wmem_max=4 * MiB, rmem_max=4 * MiB, wmem_max=4 * MiB
)

_F = TypeVar("_F", bound=Callable[..., None])


def on_lab(test: _F) -> _F:
    """Root, network namespaces and the lab's tools."""
    for mark in (
        pytest.mark.needs_root,
        pytest.mark.needs_netns,
        pytest.mark.skipif(bool(LAB_TOOLS), reason=f"needs {', '.join(LAB_TOOLS)}"),
    ):
        test = mark(test)
    return test


# `dtnkit cp` with a timeline: when each connection starts its handshake and when the
# first request's answer (the HEAD) arrives, as JSON on the last line of stderr
TIMELINE = """
import json, sys, time
from dtnkit.transfer.client import pace
events = []
plain_connect = pace.PacedHTTPConnection.connect
plain_answer = pace.PacedHTTPConnection.getresponse
def connect(self):
    events.append(["connect", time.monotonic()])
    plain_connect(self)
def getresponse(self):
    r = plain_answer(self)
    events.append(["answer", time.monotonic(), self._method])
    return r
pace.PacedHTTPConnection.connect = connect
pace.PacedHTTPConnection.getresponse = getresponse
from dtnkit.cli.main import main
try:
    code = main(sys.argv[1:])
finally:
    print(json.dumps(events), file=sys.stderr)
raise SystemExit(code)
"""


@pytest.fixture(scope="module")
def lab22(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeLab]:
    # "big": long enough for four streams to leave slow start and show what holds them
    with serve_lab(
        tmp_path_factory.mktemp("ast"),
        f"autos{secrets.token_hex(2)}",
        rtt_ms=50,
        files={"f": 8 * MiB, "big": 64 * MiB},
        wrapper=TIMELINE,
    ) as lab_:
        lab_.sysctl("net.ipv4.tcp_wmem", UNTUNED_WMEM)
        yield lab_


def test_four_start_when_the_rate_is_only_an_upper_bound() -> None:
    """Untuned ends (3 MiB windows carry 503 Mbit/s at 50 ms) behind a 10 Gbit/s link: the
    formula asks for the cap of 8, but the path may be a tenth of the link: 4 start and the
    others may join (before: 8 at once, no ``start``).  A rate the user gave is the path's:
    all start; tuned ends start one (``grow``), as before."""
    link = au.decide(0.05, 10e9, "link speed of dklink0", UNTUNED)
    assert link.streams == 8 and link.start == au.START_UNKNOWN == 4 and not link.grow
    assert "a download starts 4: the rate is only an upper bound" in link.reason
    assert link.as_dict()["start"] == 4
    given = au.decide(0.05, 10e9, "--rate", UNTUNED)
    assert given.start == 0 and given.as_dict()["start"] == given.streams
    few = au.decide(0.05, 1e9, "link speed of dklink0", UNTUNED)  # 2 streams: all start
    assert few.streams == 2 and few.start == 0
    tuned = au.decide(
        0.05, 10e9, "link speed of dklink0", au.BufferLimits(64 * MiB, 64 * MiB, 4 * MiB, 4 * MiB)
    )
    assert tuned.grow and tuned.start == 0 and tuned.as_dict()["start"] == 1


@pytest.mark.serial
@on_lab
def test_the_other_streams_connect_beside_the_head(lab22: ServeLab) -> None:
    """Three streams: the two others' TCP handshakes start as soon as the streams are
    decided, before the HEAD's answer (its round trip and theirs overlap).  Before: they
    started once the spans were cut, after the HEAD, a round trip and more later."""
    _doc, err, seen = lab22.cp("--streams", "3", wrapped=True)
    events = json.loads(err.strip().splitlines()[-1])
    head = next(t for kind, t, *rest in events if kind == "answer" and rest == ["HEAD"])
    early = [t for kind, t, *_ in events if kind == "connect" and t < head]
    assert len(early) == 3, events  # the first connection and the two others
    assert [m for m, _ in seen].count("GET") >= 3, seen


@pytest.mark.serial
@on_lab
def test_untuned_ends_start_four_streams_not_eight(lab22: ServeLab) -> None:
    """The cell of issue 11: 50 ms / 1 Gbit/s, untuned ends, the link's 10 Gbit/s as the
    rate.  Before: 8 streams at once (16 MiB in flight into 6 MiB plus a one-BDP queue:
    6-17 % retransmitted).  Now 4 start; together they stop growing at what the path
    carries (75 % of their windows), so no others join."""
    doc, err, seen = lab22.cp("--streams", "auto", name="big")
    auto = doc["streams_auto"]
    assert isinstance(auto, dict)
    assert auto["streams"] == 8 and auto["start"] == 4, auto
    assert doc["streams"] == 4, err
    assert "4 streams: " in err and (
        "the path, not the windows, holds them" in err or "the file was done before" in err
    ), err
    # four spans of 16 MiB (one may be cut where a stream that ended took its tail)
    assert sum(n == 16 * MiB for m, n in seen if m == "GET") >= 2, seen


@pytest.mark.serial
@on_lab
def test_more_join_while_all_are_window_bound(lab22: ServeLab) -> None:
    """768 KiB windows at both ends: four streams carry 503 Mbit/s of the 1 Gbit/s path,
    all bound by their windows, so four more join (the cap of 8 for a link's rate).  This
    held before too (8 at once): it guards the faster paths against the start of 4.  The
    four that join do so on connections opened while the first four started: no TCP
    handshake ends after the first of them joined (before: each opened its own then)."""
    timeline = lab22.got.with_name("timeline.json")
    lab22.sysctl("net.ipv4.tcp_wmem", SMALL_WMEM)
    try:
        doc, err, seen = lab22.cp("--streams", "auto", "--timeline", str(timeline), name="big")
    finally:
        lab22.sysctl("net.ipv4.tcp_wmem", UNTUNED_WMEM)
    auto = doc["streams_auto"]
    assert isinstance(auto, dict) and auto["start"] == 4
    assert doc["streams"] == 8, err
    assert "4 streams moved" in err and "bound by them, so 4 more joined" in err, err
    assert [m for m, _ in seen].count("GET") >= 8, seen
    events = json.loads(timeline.read_text())["events"]
    joined = min(e["t"] for e in events if e["what"] == "stream starts" and e["stream"] >= 4)
    handshakes = [e["t"] for e in events if e["what"] == "tcp"]
    assert len(handshakes) >= 8 and max(handshakes) < joined, events


def test_the_rules_constants_agree_with_their_docs() -> None:
    """The numbers docs/transfer.md names for ``--streams auto``'s start."""
    assert au.START_UNKNOWN == 4
    assert policy.ALL_BOUND_SHARE == 0.8 and policy.ALL_BOUND_RTTS == 2
    assert policy.ALL_BOUND_SPELLS == 2
