"""``--streams auto`` with untuned ends on a long path: the other streams' connections
opened beside the first request (first.Spare), and all the streams the formula gives
starting together when the rate is only an upper bound.  A real 50 ms / 1 Gbit/s lab path
behind 10 Gbit/s veths, a real ``dtnkit serve`` and the kernel's own windows; about 15 s."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from tests.support.serve_lab import ServeLab, serve_lab

from dtnkit.transfer.client import autostreams as au

MiB = 2**20
LAB_TOOLS = [t for t in ("iptables", "sysctl") if shutil.which(t) is None]
UNTUNED_WMEM = "4096 16384 4194304"  # the kernel's default: 3 MiB windows
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
    # "big": long enough for eight streams to leave slow start
    with serve_lab(
        tmp_path_factory.mktemp("ast"),
        f"autos{secrets.token_hex(2)}",
        rtt_ms=50,
        files={"f": 8 * MiB, "big": 64 * MiB},
        wrapper=TIMELINE,
    ) as lab_:
        lab_.sysctl("net.ipv4.tcp_wmem", UNTUNED_WMEM)
        yield lab_


def test_all_start_when_the_rate_is_only_an_upper_bound() -> None:
    """Untuned ends (3 MiB windows carry 503 Mbit/s at 50 ms) behind a 10 Gbit/s link: the
    formula asks for the cap of 8 and all 8 start together, as with a rate the user gave
    (before: 4 started and 4 more joined only once the 4 were bound by their windows,
    0.6 s late on a 50 ms / 5 Gbit/s lab path).  Tuned ends start one (``grow``)."""
    link = au.decide(0.05, 10e9, "link speed of dklink0", UNTUNED)
    assert link.streams == 8 and not link.grow
    assert link.as_dict()["start"] == 8
    assert link.short() == "8 streams: 10 Gbit/s x 50 ms / 3 MiB window"
    assert "join" not in link.reason and "capped at 8" in link.reason
    given = au.decide(0.05, 10e9, "--rate", UNTUNED)
    assert given.as_dict()["start"] == given.streams == 16
    tuned = au.decide(
        0.05, 10e9, "link speed of dklink0", au.BufferLimits(64 * MiB, 64 * MiB, 4 * MiB, 4 * MiB)
    )
    assert tuned.grow and tuned.as_dict()["start"] == 1
    assert tuned.short().startswith("1 of up to 2 streams: ")


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
def test_untuned_ends_start_all_their_streams_at_once(lab22: ServeLab) -> None:
    """50 ms / 1 Gbit/s, untuned ends, the link's 10 Gbit/s as the rate: the 8 streams of
    the cap all start before any of them ends, each on its own span, and none joins later
    (before: 4 started, and the copy watched whether they were bound by their windows)."""
    timeline = lab22.got.with_name("timeline.json")
    doc, err, seen = lab22.cp("--streams", "auto", "--timeline", str(timeline), name="big")
    auto = doc["streams_auto"]
    assert isinstance(auto, dict)
    assert auto["streams"] == 8 and auto["start"] == 8 and not auto["grow"], auto
    assert doc["streams"] == 8, err
    assert "--streams auto: 8 streams: rate 10 Gbit/s" in err and "joined" not in err, err
    events = json.loads(timeline.read_text())["events"]
    starts = [e["t"] for e in events if e["what"] == "stream starts"]
    ends = [e["t"] for e in events if e["what"] == "stream ends"]
    assert len(starts) == 8 and max(starts) < min(ends), events
    assert [m for m, _ in seen].count("GET") >= 8, seen  # a span each (and stolen tails)
