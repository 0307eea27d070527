"""dtnkit.host.process.run_forwarding runs a command as ``sudo`` does: SIGINT, SIGTERM and
SIGHUP sent to dtnkit reach the command, dtnkit waits for it, and the exit status is the
command's own, or 128 + N when signal N ended it.  Real processes: a Python process runs
the helper, a shell is its command."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from dtnkit.host import process

#: dtnkit's side: run the command given as arguments, exit with what run_forwarding says
FORWARDER = (
    "import sys; from dtnkit.host.process import run_forwarding; "
    "sys.exit(run_forwarding(sys.argv[1:]))"
)
#: the command: on any of the three signals it cleans up (taking its time) and exits 3
TRAP = (
    "trap 'sleep 0.2; echo cleaned; exit 3' INT TERM HUP; echo ready; while :; do sleep 0.05; done"
)
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def forwarder(*command: str) -> subprocess.Popen[str]:
    """The forwarding process, started with the command and waited for until the command
    says ``ready`` (its trap is set).  In a session of its own: no terminal sends it or the
    command anything, so what reaches the command is what dtnkit forwarded."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FORWARDER, *command],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("signum", SIGNALS, ids=["INT", "TERM", "HUP"])
def test_a_forwarded_signal_reaches_the_commands_trap_and_its_status_is_kept(
    signum: signal.Signals,
) -> None:
    """Sent as soon as the command runs: a few times, since a signal that came before
    dtnkit's handlers were in place once ended dtnkit and left the command running."""
    for _ in range(5):
        proc = forwarder("sh", "-c", TRAP)
        try:
            proc.send_signal(signum)  # to dtnkit's process only
            out, err = proc.communicate(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the command too, if it was left
            proc.wait()
        assert out.strip() == "cleaned"  # the trap ran, and dtnkit waited for it to finish
        assert proc.returncode == 3, err  # the command's own status
        assert "Traceback" not in err


@pytest.mark.parametrize("signum", SIGNALS, ids=["INT", "TERM", "HUP"])
def test_a_command_ended_by_the_forwarded_signal_gives_128_plus_its_number(
    signum: signal.Signals,
) -> None:
    proc = forwarder("sh", "-c", "echo ready; exec sleep 60")
    try:
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 128 + signum, err


def test_the_status_is_the_commands_when_no_signal_comes() -> None:
    assert process.run_forwarding(["sh", "-c", "exit 7"]) == 7
    assert process.run_forwarding(["sh", "-c", "kill -KILL $$"]) == 128 + signal.SIGKILL


def test_the_previous_handlers_are_back_after() -> None:
    before = {s: signal.getsignal(s) for s in process.FORWARDED}
    process.run_forwarding(["true"])
    assert {s: signal.getsignal(s) for s in process.FORWARDED} == before


def test_exit_status_maps_signals_as_a_shell_does() -> None:
    assert [process.exit_status(c) for c in (0, 3, -2, -9, -15)] == [0, 3, 130, 137, 143]
