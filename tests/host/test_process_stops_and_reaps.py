"""dtnkit.host.process stops what it starts with a deadline and always reaps it: a child
that ignores SIGTERM is killed at the deadline, a process group is stopped whole, a
timed-out run takes its group with it, and no sequence of starts, signals and stops leaves
a zombie, a live process or an open descriptor behind.  Real processes throughout."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtnkit.host import process

#: a Python child that ignores SIGTERM, says so, and sleeps
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)
#: a Python child that notes each SIGTERM (its time) and goes on sleeping
NOTES_TERM = (
    "import signal, sys, time\n"
    "def note(n, f): print('term', time.monotonic(), flush=True)\n"
    "signal.signal(signal.SIGTERM, note)\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(60)\n"
)
#: a group leader that dies on SIGTERM and leaves two children that ignore it
LEAVES_IGNORERS = (
    "sh -c 'trap \"\" TERM; exec sleep 60' & echo $!; "
    "sh -c 'trap \"\" TERM; exec sleep 60' & echo $!; wait"
)


def reaped(pid: int) -> bool:
    """PID is not an unreaped child of this process (waitpid knows no such child)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def children_of(ppid: int) -> set[int]:
    """Every process (zombies too) whose parent is ``ppid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == ppid:
            found.add(int(entry.name))
    return found


def started_and_ready(argv: list[str], **kw: object) -> process.Child[str]:
    child = process.start(argv, text=True, stdout=process.PIPE, **kw)  # type: ignore[call-overload]
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def test_a_child_that_ignores_sigterm_is_killed_at_the_deadline_and_reaped() -> None:
    child = started_and_ready([sys.executable, "-c", IGNORES_TERM])
    t0 = time.monotonic()
    status = child.stop(grace_s=0.5)
    waited = time.monotonic() - t0
    assert status == -signal.SIGKILL  # SIGTERM did nothing: the deadline's SIGKILL ended it
    assert waited >= 0.5  # it had its grace before that
    assert reaped(child.pid) and not process.alive(child.pid)
    child.close()


def test_a_child_that_exits_on_sigterm_is_not_killed() -> None:
    child = process.start(["sleep", "60"])
    assert child.stop(grace_s=30) == -signal.SIGTERM
    assert reaped(child.pid)


def test_a_process_group_is_stopped_whole() -> None:
    child = process.start(
        ["sh", "-c", LEAVES_IGNORERS], own_group=True, text=True, stdout=process.PIPE
    )
    assert child.stdout is not None
    left = [int(child.stdout.readline()), int(child.stdout.readline())]
    assert all(process.alive(pid) for pid in left)
    child.stop(grace_s=0.3)
    assert reaped(child.pid)
    assert not any(process.alive(pid) for pid in left), left  # they ignored SIGTERM: killed
    child.close()


def test_without_a_group_of_its_own_only_the_child_is_stopped() -> None:
    """The control for the test above: the grandchildren are out of reach by PID alone."""
    child = process.start(["sh", "-c", LEAVES_IGNORERS], text=True, stdout=process.PIPE)
    assert child.stdout is not None
    left = [int(child.stdout.readline()), int(child.stdout.readline())]
    try:
        child.close(grace_s=0.3)
        assert all(process.alive(pid) for pid in left)
    finally:
        assert process.stop_pids(left, 0) == []


def test_a_run_past_its_timeout_is_killed_with_its_group_and_reaped() -> None:
    before = children_of(os.getpid())
    with pytest.raises(process.TimeoutExpired) as caught:
        process.run(["sh", "-c", "sleep 60 & echo $!; wait"], timeout=0.5, own_group=True)
    grandchild = int(caught.value.output or b"")
    assert not process.alive(grandchild)
    assert children_of(os.getpid()) <= before


def test_run_gives_output_and_status_and_check_raises() -> None:
    done = process.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert process.run(["cat"], input="in").stdout == "in"
    with pytest.raises(process.CalledProcessError):
        process.run(["false"], check=True)
    with pytest.raises(FileNotFoundError):
        process.run(["/nonexistent/dtnkit-no-such-program"])


def test_leaving_a_with_block_by_an_error_stops_and_reaps() -> None:
    with pytest.raises(RuntimeError), process.start(["sleep", "60"], stdout=process.PIPE) as c:
        raise RuntimeError("the caller's own failure")
    assert c.returncode == -signal.SIGTERM
    assert c.stdout is not None and c.stdout.closed
    assert reaped(c.pid)


def test_stop_all_gives_every_child_its_sigterm_before_any_deadline_passes() -> None:
    grace = 2.0
    children = [started_and_ready([sys.executable, "-c", NOTES_TERM]) for _ in range(2)]
    process.stop_all(children, grace)
    terms = []
    for child in children:
        assert child.returncode == -signal.SIGKILL
        assert reaped(child.pid)
        out = child.stdout.read() if child.stdout else ""
        terms.append(float(out.split()[1]))
        child.close()
    # one after the other, the second SIGTERM would come a whole grace after the first
    assert abs(terms[1] - terms[0]) < grace


def test_stop_pids_stops_only_a_process_that_is_ours() -> None:
    """A process this one did not start (an orphan, as a lab's delay stage is to `lab
    down`): left alone when ``is_ours`` says no, stopped when it says yes."""
    out = process.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"]).stdout
    pid = int(out)
    try:
        assert process.stop_pids([pid], 0.5, is_ours=lambda p: False) == []
        assert process.alive(pid)
        assert process.stop_pid(pid, 5.0, is_ours=lambda p: p == pid)
        assert not process.alive(pid)
    finally:
        process.stop_pids([pid], 0)
    assert process.stop_pid(pid)  # gone already: nothing to do


def test_stop_pids_reaps_a_child_of_this_process() -> None:
    """A lab built and torn down in one process: its delay stage is a child, stopped by PID."""
    child = process.start(["sleep", "60"])
    assert process.stop_pid(child.pid, 5.0)
    assert reaped(child.pid)


# ---- no sequence of operations leaks ----------------------------------------------------------
KINDS = {
    "sleeper": ["sleep", "60"],
    "ignorer": [sys.executable, "-c", IGNORES_TERM],
    "group": ["sh", "-c", LEAVES_IGNORERS],
    "quick": ["true"],
}
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGSTOP, signal.SIGCONT]
START = st.tuples(st.just("start"), st.sampled_from(sorted(KINDS)), st.booleans(), st.booleans())
#: a short command to its end, or a long one past its timeout (killed with its group)
RUNS = {
    "to its end": (["sh", "-c", "sleep 0.05 & wait"], None),
    "past its timeout": (["sh", "-c", "sleep 30 & wait"], 0.1),
}
SIGNAL = st.tuples(st.just("signal"), st.integers(0, 7), st.sampled_from(SIGNALS))
STOP = st.tuples(st.just("stop"), st.integers(0, 7), st.sampled_from([0.0, 0.05, 0.2]))
CLOSE = st.tuples(st.just("close"), st.integers(0, 7))
RUN = st.tuples(st.just("run"), st.sampled_from(sorted(RUNS)))
STOP_ALL = st.tuples(st.just("stop_all"))
OPS = st.lists(st.one_of(START, SIGNAL, STOP, CLOSE, RUN, STOP_ALL), max_size=10)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_no_sequence_of_start_signal_stop_leaks(ops: list[tuple[object, ...]]) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    kids_before = children_of(os.getpid())
    children: list[process.Child[bytes]] = []
    for op in ops:
        name = op[0]
        if name == "start":
            _, kind, own_group, piped = op
            # a leader without a group of its own leaves its children behind (the test
            # above shows it): "group" always has one
            children.append(
                process.start(
                    KINDS[str(kind)],
                    own_group=bool(own_group) or kind == "group",
                    stdout=process.PIPE if piped else process.DEVNULL,
                    grace_s=0.2,
                )
            )
        elif name == "signal" and children:
            children[int(op[1]) % len(children)].send(int(op[2]))  # type: ignore[call-overload]
        elif name == "stop" and children:
            children[int(op[1]) % len(children)].stop(float(op[2]))  # type: ignore[arg-type]
        elif name == "close" and children:
            children[int(op[1]) % len(children)].close()
        elif name == "run":
            argv, timeout = RUNS[str(op[1])]
            with contextlib.suppress(process.TimeoutExpired):
                process.run(argv, own_group=True, timeout=timeout)
        elif name == "stop_all":
            process.stop_all(children, 0.1)
    for child in children:
        child.close()
    assert children_of(os.getpid()) <= kids_before  # no zombie, nothing still running
    assert len(os.listdir("/proc/self/fd")) == fds_before  # no pipe left open
    for child in children:
        assert not process.alive(child.pid)
