"""Readers that replaced a process per audit: irqbalance from /proc, TuneD's absence from PATH,
ethtool rings from one command.  Each is compared with the command it replaced."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.support.runners import CountingRunner

from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.runner import Result, SubprocessRunner
from dtnkit.tune.checks import IrqbalanceCheck
from dtnkit.tune.kinds.tuned import TunedTunable


def pgrep(name: str) -> bool:
    return subprocess.run(["pgrep", "-x", name], capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep (procps)")
def test_process_running_agrees_with_pgrep(tmp_path: Path) -> None:
    name = f"rtn{uuid.uuid4().hex[:8]}"  # 12 characters: within comm's 15
    binary = tmp_path / name
    shutil.copy("/bin/sleep", binary)
    host = Host.live()
    assert host.process_running(name) is False and not pgrep(name)
    proc = subprocess.Popen([str(binary), "30"])
    try:
        deadline = time.monotonic() + 20
        while not pgrep(name):  # Popen returns before the child's exec names it
            assert time.monotonic() < deadline, "the process never showed up in pgrep"
        assert host.process_running(name) is True
        assert host.process_running(name[:-1]) is False  # exact names only, as pgrep -x
        assert host.process_running("irqbalance") == pgrep("irqbalance")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert host.process_running(name) is False


def test_irqbalance_check_starts_no_process_on_a_live_host(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, ...]] = []
    real = SubprocessRunner.run

    def run(self: SubprocessRunner, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        seen.append(tuple(argv))
        return real(self, argv, stdin=stdin)

    monkeypatch.setattr(SubprocessRunner, "run", run)
    host = Host.live()
    running = host.process_running("irqbalance")
    assert running is not None
    assert IrqbalanceCheck().read(host) == ("running" if running else "stopped")
    assert seen == []
    # a runner of the caller's own sees the command, as a tree replays it
    own = CountingRunner()
    assert Host(runner=own).process_running("irqbalance") is None
    IrqbalanceCheck().read(Host(runner=own))
    assert own.calls == [("pgrep", "-x", "irqbalance")]


def test_tuned_absent_from_path_is_unavailable_without_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no tuned-adm here
    runner = CountingRunner()
    got = TunedTunable().read(Host(runner=runner))
    assert got == Unavailable("TuneD is not installed")
    assert runner.calls == []


@pytest.mark.needs_ethtool
def test_rings_are_read_with_one_ethtool() -> None:
    from dtnkit.tune.kinds.ethtool import RingTunable

    runner = CountingRunner()
    host = Host(runner=runner)
    dev = next((d for d in sorted(os.listdir("/sys/class/net")) if d != "lo"), "lo")
    RingTunable(dev, "rx").read(host)
    assert [argv for argv in runner.calls if argv[:1] == ("ethtool",)] == [("ethtool", "-g", dev)]
