"""A measurement's processes (:class:`dtnkit.measure.procs.Procs`) stop with a deadline: the
ones asked for by PID (a sweep's namespace anchors) get SIGTERM together, SIGKILL when they
outlive the grace, and are reaped; a process the registry did not start, or was not asked
to stop, is left alone.  Real processes throughout."""

from __future__ import annotations

import os
import signal
import sys
import time

from dtnkit.host import process
from dtnkit.measure.procs import Procs

#: a Python child that ignores SIGTERM, says so, and sleeps
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_stop_pids_kills_those_past_the_grace_together_and_leaves_the_rest() -> None:
    procs = Procs()
    ignorers = [procs.start([sys.executable, "-c", IGNORES_TERM]) for _ in range(2)]
    other = procs.start(["sleep", "60"])
    outsider = process.start(["sleep", "60"])  # not the registry's: never touched
    try:
        for child in ignorers:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        grace = 2.0
        t0 = time.monotonic()
        procs.stop_pids([c.pid for c in ignorers] + [outsider.pid], grace)
        took = time.monotonic() - t0
        assert [c.returncode for c in ignorers] == [-signal.SIGKILL] * 2
        assert all(reaped(c.pid) and not process.alive(c.pid) for c in ignorers)
        assert grace <= took < 2 * grace  # one grace for both, not one each
        assert procs.pids == [other.pid]  # the stopped are forgotten; the other runs on
        assert outsider.poll() is None
    finally:
        procs.stop_all(0)
        outsider.close(0)
    assert other.returncode in (-signal.SIGTERM, -signal.SIGKILL) and reaped(other.pid)
