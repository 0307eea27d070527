"""dtnkit.host.process.signal_pid sends a signal to a process by PID (a lab's delay stage told
to re-read its configuration) only when the caller's ``is_ours`` accepts it, through a pidfd
opened before the check: a process that is not ours, or is gone, gets nothing.  Real
processes throughout."""

from __future__ import annotations

import signal

from dtnkit.host import process


def test_a_process_that_is_ours_gets_the_signal() -> None:
    with process.start(["sleep", "60"]) as child:
        asked: list[int] = []

        def is_ours(pid: int) -> bool:
            asked.append(pid)
            return True

        sent = process.signal_pid(child.pid, signal.SIGUSR1, is_ours=is_ours)
        assert sent and asked == [child.pid]
        # sleep's default for SIGUSR1: it ends (SIGHUP would be ignored under nohup)
        assert child.wait(10) == -signal.SIGUSR1


def test_a_process_that_is_not_ours_is_left_alone() -> None:
    with process.start(["sleep", "60"]) as child:
        assert not process.signal_pid(child.pid, signal.SIGUSR1, is_ours=lambda pid: False)
        assert child.poll() is None and process.alive(child.pid)
    assert child.returncode == -signal.SIGTERM  # the with block's stop, not the SIGUSR1


def test_a_process_gone_gets_nothing_and_nothing_raises() -> None:
    child = process.start(["true"])
    child.wait()
    assert not process.signal_pid(child.pid, signal.SIGUSR1)
