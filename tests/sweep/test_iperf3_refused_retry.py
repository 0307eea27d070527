"""`iperf3 -s` closes and reopens its listening socket between tests, so a point that starts
right after the previous one can be refused: the iperf3 tool tries again, a bounded number of
times, and a server that stays away is still one failed point."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dtnkit.host.host import Host
from dtnkit.lab.path import LabHost
from dtnkit.measure.probes.load import Origin
from dtnkit.measure.procs import Procs
from dtnkit.measure.tool import ToolContext
from dtnkit.measure.tools import iperf3, workers
from dtnkit.sweep.grid import parse_grid_flags
from dtnkit.sweep.runner import load_of

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3")


class HereHost(LabHost):
    """This process's own namespace (the tool's commands run unwrapped)."""

    def argv(self, argv: Sequence[str]) -> list[str]:
        return list(argv)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # bound, never listened on, then closed: refuses


def test_a_refusing_server_is_tried_again_then_one_failed_point(tmp_path: Path) -> None:
    host = HereHost("src", "src", "", "127.0.0.1", "")
    point = parse_grid_flags(
        ["rtt=5ms", "streams=1", "duration=1s", "sample_interval=1s"]
    ).points()[0]
    origin = Origin(0, "iperf3", host, closed_port(), "", 0, None)
    context = ToolContext(deadline=time.monotonic() + 30, workdir=tmp_path, procs=Procs())
    started = time.monotonic()
    run = iperf3.Iperf3().run(Host(), load_of(point, (origin,), None), context)
    assert "Connection refused" in run.failed
    assert run.raw.count("$ iperf3") == iperf3.REFUSED_TRIES  # tried again, and no more
    assert time.monotonic() - started < 15
    assert [t.error for t in run.transfers] and all(t.end_s is None for t in run.transfers)


def test_retries_stop_at_the_first_answer(tmp_path: Path, monkeypatch: Any) -> None:
    """A refusal then a real server: the second try measures."""
    host = HereHost("src", "src", "", "127.0.0.1", "")
    port = closed_port()
    point = parse_grid_flags(
        ["rtt=5ms", "streams=1", "duration=1s", "sample_interval=1s"]
    ).points()[0]
    spec = load_of(point, (Origin(0, "iperf3", host, port, "", 0, None),), None)
    procs = Procs()
    context = ToolContext(deadline=time.monotonic() + 60, workdir=tmp_path, procs=procs)
    server: list[Any] = []
    real_run = workers.Runs.run

    def first_refused_then_serve(self: Any, argv: Sequence[str], *a: Any, **k: Any) -> Any:
        res = real_run(self, argv, *a, **k)
        if not server:  # after the first refusal, the server appears (as iperf3 -s re-listens)
            server.append(procs.start(["iperf3", "-s", "-p", str(port), "-B", "127.0.0.1"]))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # readiness: its port accepts
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
        return res

    monkeypatch.setattr(workers.Runs, "run", first_refused_then_serve)
    try:
        run = iperf3.Iperf3().run(Host(), spec, context)
    finally:
        for p in server:
            procs.stop(p)
    assert run.failed == "", run.raw[-500:]
    assert run.raw.count("$ iperf3 -c") == 2
    assert run.transfers[0].bytes > 0
