"""The processes dtnkit starts: one way to run a command to its end, start a child, pass it
the signals this process gets, and stop it with a deadline.  However a child ends, it is
reaped: no zombie, no pipe left open.

- :func:`run`: to its end, output captured; past ``timeout`` killed (its group too when it
  has one), reaped, and :class:`TimeoutExpired` raised.
- :func:`start`: a long-running :class:`Child` (a :class:`subprocess.Popen` that also knows
  how to stop), in a process group of its own when asked (``own_group``: a Ctrl-C at the
  terminal then reaches only dtnkit, which stops it, and a stop reaches what it started).
  ``with start(...) as child:`` stops and reaps it when the block ends.
- :meth:`Child.stop`: SIGTERM, ``grace_s`` to exit, SIGKILL, reap; :func:`stop_all` for
  several at once (their grace periods overlap).
- :func:`run_forwarding`: run a command for the user as ``sudo`` does: SIGINT, SIGTERM and
  SIGHUP go to it, it is waited for, its exit status is returned (128 + N for signal N).
- :func:`stop_pids`: a process another dtnkit run started (found by a PID file or a lab's
  state), through a pidfd so a PID reused meanwhile is never signalled; :func:`signal_pid`
  sends one such a signal the same way.

The names a caller needs from :mod:`subprocess` (``PIPE``, ``DEVNULL``, ``STDOUT``,
``CompletedProcess``, ``TimeoutExpired``, ``CalledProcessError``, ``SubprocessError``: the
base of the two) are here too.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from subprocess import (
    DEVNULL,
    PIPE,
    STDOUT,
    CalledProcessError,
    CompletedProcess,
    SubprocessError,
    TimeoutExpired,
)
from types import FrameType, TracebackType
from typing import IO, Any, AnyStr, Literal, overload

from dtnkit.host.signals import handling

__all__ = [
    "DEVNULL",
    "FORWARDED",
    "PIPE",
    "REAP_S",
    "STDOUT",
    "STOP_GRACE_S",
    "CalledProcessError",
    "Child",
    "CompletedProcess",
    "Stdio",
    "SubprocessError",
    "TimeoutExpired",
    "alive",
    "exit_status",
    "run",
    "run_forwarding",
    "signal_pid",
    "start",
    "stop_all",
    "stop_pid",
    "stop_pids",
]

#: how long a stopped process has between SIGTERM and SIGKILL, unless its caller says
STOP_GRACE_S = 3.0
#: how long a SIGKILLed process is waited for (one in uninterruptible sleep can take long)
REAP_S = 10.0
#: what :func:`run_forwarding` passes on, as ``sudo`` and ``ip netns exec`` do
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: a child's stdin, stdout or stderr as Popen takes it
Stdio = int | IO[Any] | None


class Child(subprocess.Popen[AnyStr]):
    """A process :func:`start` started: a :class:`subprocess.Popen` (``pid``, ``poll``,
    ``communicate``, ``stdout`` ...) that signals its group when it has one and stops with
    a deadline.  Leaving ``with`` stops it (:meth:`close`) instead of waiting forever."""

    #: started in a session and process group of its own (its PID is the group's ID)
    own_group: bool = False
    #: SIGTERM to SIGKILL when a ``with`` block ends (:func:`start`'s ``grace_s``)
    grace_s: float = STOP_GRACE_S

    def send(self, signum: int, *, group: bool | None = None) -> None:
        """Send ``signum`` to the child, or to its whole process group (``group``; the
        default: when it has one of its own).  A child already reaped gets nothing."""
        if self.own_group if group is None else group:
            try:
                os.killpg(self.pid, signum)
                # still in the group it leads: reached (a child that left it gets it below)
                if os.getpgid(self.pid) == self.pid:
                    return
            except (ProcessLookupError, PermissionError):
                pass
        self.send_signal(signum)  # Popen's: nothing once the child is reaped

    def stop(
        self,
        grace_s: float = STOP_GRACE_S,
        *,
        group: bool | None = None,
        reap_s: float | None = REAP_S,
    ) -> int | None:
        """SIGTERM, up to ``grace_s`` to exit (0: SIGKILL at once), SIGKILL, then reap,
        waiting at most ``reap_s`` (None: as long as it takes).  With its group (the
        default when it has one) the signals go to the group, and what the child left
        running there is killed too.  The exit status as Popen gives it (-N: signal N),
        None when the child is still not reaped."""
        group = self.own_group if group is None else group
        if self.poll() is None and grace_s > 0:
            self.send(signal.SIGTERM, group=group)
            with contextlib.suppress(TimeoutExpired):
                self.wait(grace_s)
        if self.poll() is None:
            self.send(signal.SIGKILL, group=group)
            with contextlib.suppress(TimeoutExpired):
                self.wait(reap_s)
        if group:
            # what it started and left behind; the group's ID cannot be a new process's
            # while any member is alive, so this reaches only them
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            else:  # they are not ours to reap: wait until they have died
                _wait_group_gone(self.pid, reap_s)
        return self.returncode

    def close(self, grace_s: float | None = None) -> int | None:
        """End of use: its stdin closed, stopped (:meth:`stop` with ``grace_s``, else
        :attr:`grace_s`) and reaped, its pipes closed."""
        try:
            if self.stdin is not None:
                with contextlib.suppress(OSError):
                    self.stdin.close()
            return self.stop(self.grace_s if grace_s is None else grace_s)
        finally:
            for stream in (self.stdout, self.stderr):
                if stream is not None:
                    stream.close()

    def __enter__(self) -> Child[AnyStr]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


@overload
def start(
    argv: Sequence[str],
    *,
    text: Literal[True],
    own_group: bool = ...,
    stdin: Stdio = ...,
    stdout: Stdio = ...,
    stderr: Stdio = ...,
    cwd: str | Path | None = ...,
    env: Mapping[str, str] | None = ...,
    errors: str | None = ...,
    pass_fds: Sequence[int] = ...,
    run_as: tuple[int, int] | None = ...,
    grace_s: float = ...,
) -> Child[str]: ...
@overload
def start(
    argv: Sequence[str],
    *,
    text: Literal[False] = ...,
    own_group: bool = ...,
    stdin: Stdio = ...,
    stdout: Stdio = ...,
    stderr: Stdio = ...,
    cwd: str | Path | None = ...,
    env: Mapping[str, str] | None = ...,
    errors: str | None = ...,
    pass_fds: Sequence[int] = ...,
    run_as: tuple[int, int] | None = ...,
    grace_s: float = ...,
) -> Child[bytes]: ...
@overload
def start(
    argv: Sequence[str],
    *,
    text: bool,
    own_group: bool = ...,
    stdin: Stdio = ...,
    stdout: Stdio = ...,
    stderr: Stdio = ...,
    cwd: str | Path | None = ...,
    env: Mapping[str, str] | None = ...,
    errors: str | None = ...,
    pass_fds: Sequence[int] = ...,
    run_as: tuple[int, int] | None = ...,
    grace_s: float = ...,
) -> Child[Any]: ...
def start(
    argv: Sequence[str],
    *,
    text: bool = False,
    own_group: bool = False,
    stdin: Stdio = None,
    stdout: Stdio = None,
    stderr: Stdio = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    errors: str | None = None,
    pass_fds: Sequence[int] = (),
    run_as: tuple[int, int] | None = None,
    grace_s: float = STOP_GRACE_S,
) -> Child[Any]:
    """Start ``argv``.  Streams as Popen takes them (None: this process's own; ``PIPE``,
    ``DEVNULL``, ``STDOUT``, a file).  ``own_group``: a new session and process group;
    ``run_as``: (uid, gid) without supplementary groups; ``pass_fds``: descriptors it keeps;
    ``grace_s``: how long it has between SIGTERM and SIGKILL when a ``with`` block ends.
    A missing program raises FileNotFoundError, as Popen does."""
    who: dict[str, Any] = (
        {} if run_as is None else {"user": run_as[0], "group": run_as[1], "extra_groups": []}
    )
    child: Child[Any] = Child(
        list(argv),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        text=text,
        errors=errors,
        pass_fds=tuple(pass_fds),
        start_new_session=own_group,
        **who,
    )
    child.own_group = own_group
    child.grace_s = grace_s
    return child


@overload
def run(
    argv: Sequence[str],
    *,
    text: Literal[True] = ...,
    timeout: float | None = ...,
    input: str | None = ...,
    capture: bool = ...,
    check: bool = ...,
    errors: str | None = ...,
    env: Mapping[str, str] | None = ...,
    cwd: str | Path | None = ...,
    own_group: bool = ...,
) -> CompletedProcess[str]: ...
@overload
def run(
    argv: Sequence[str],
    *,
    text: Literal[False],
    timeout: float | None = ...,
    input: bytes | None = ...,
    capture: bool = ...,
    check: bool = ...,
    errors: str | None = ...,
    env: Mapping[str, str] | None = ...,
    cwd: str | Path | None = ...,
    own_group: bool = ...,
) -> CompletedProcess[bytes]: ...
def run(
    argv: Sequence[str],
    *,
    text: bool = True,
    timeout: float | None = None,
    input: str | bytes | None = None,
    capture: bool = True,
    check: bool = False,
    errors: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    own_group: bool = False,
) -> CompletedProcess[Any]:
    """Run ``argv`` to its end: what it printed (``capture``: stdout and stderr apart) and
    its exit status.  ``input`` is its stdin, else it shares this process's.  Past
    ``timeout`` s it is killed (its group too with ``own_group``), reaped, and
    TimeoutExpired raised; any other exception (Ctrl-C) kills and reaps it likewise.
    ``check``: a non-zero status raises CalledProcessError.  A missing program raises
    FileNotFoundError."""
    pipe = PIPE if capture else None
    child = start(
        argv,
        text=text,
        errors=errors,
        env=env,
        cwd=cwd,
        own_group=own_group,
        stdin=PIPE if input is not None else None,
        stdout=pipe,
        stderr=pipe,
    )
    with child:
        try:
            out, err = child.communicate(input, timeout)
        except BaseException:
            child.stop(0)  # the deadline has passed (or Ctrl-C: Popen gave it its moment)
            raise
    done: CompletedProcess[Any] = CompletedProcess(child.args, child.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def stop_all(
    children: Iterable[Child[Any]], grace_s: float = STOP_GRACE_S, *, reap_s: float | None = REAP_S
) -> None:
    """Stop several children as :meth:`Child.stop` stops one, but signal them all first, so
    their grace periods run at once: at most ``grace_s`` for all."""
    children = list(children)
    for child in children:
        if child.poll() is None:
            child.send(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in children:
        with contextlib.suppress(TimeoutExpired):
            child.wait(max(0.0, deadline - time.monotonic()))
        child.stop(0, reap_s=reap_s)


def exit_status(returncode: int) -> int:
    """A shell's exit status for a Popen return code: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def _terminal_signals_reach(child: Child[Any]) -> bool:
    """True when a Ctrl-C at the controlling terminal reaches the child by itself (it is in
    the terminal's foreground process group): forwarding it too would deliver it twice,
    and a second Ctrl-C means "give up now" to many tools."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgid(child.pid)
    except OSError:
        return False
    finally:
        os.close(fd)


class _Forward:
    """The handler :func:`run_forwarding` puts on the signals it passes on.  It is in place
    before the child starts: a signal that comes meanwhile is held, and sent once the
    child exists (instead of ending dtnkit and leaving the child running)."""

    def __init__(self) -> None:
        self.child: Child[Any] | None = None
        self.held: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.child is None:
            self.held.append(signum)
        elif not (signum == signal.SIGINT and _terminal_signals_reach(self.child)):
            self.child.send(signum)

    def to(self, child: Child[Any]) -> None:
        self.child = child
        held, self.held = self.held, []
        for signum in held:  # it was not there when the terminal's group got them
            child.send(signum)


def run_forwarding(argv: Sequence[str], signums: Iterable[int] = FORWARDED) -> int:
    """Run ``argv`` to its end, as ``sudo`` and ``ip netns exec`` do for their command:
    SIGINT, SIGTERM and SIGHUP (``signums``) sent to this process go to the child, which
    is waited for, so it can save its state (a copy's resume journal, a server's drain).
    The exit status is the child's, 128 + N when signal N ended it.  It stays in this
    process's group, so the terminal's own Ctrl-C reaches it as it would reach the
    command run alone, and is not sent twice.  (Handlers only in the main thread.)"""
    forward = _Forward()
    with handling(signums, forward):
        child = start(argv)
        forward.to(child)
        try:
            code = child.wait()
        except BaseException:
            child.stop()  # this process is going (an error in Python code): not without it
            raise
    return exit_status(code)


def alive(pid: int) -> bool:
    """Is ``pid`` a live process (not a zombie)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _group_alive(pgid: int) -> bool:
    """Is a live (not zombie) process left in process group ``pgid``?"""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            return True
    return False


def _wait_group_gone(pgid: int, timeout_s: float | None) -> None:
    """Wait (at most ``timeout_s``) until no live process is left in group ``pgid``."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while _group_alive(pgid) and (deadline is None or time.monotonic() < deadline):
        time.sleep(0.005)  # a SIGKILLed process exits within the kernel's own time: bounded


def _send(pid: int, pidfd: int | None, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        if pidfd is None:
            os.kill(pid, signum)
        else:
            signal.pidfd_send_signal(pidfd, signum)


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is a child of this process (a lab built and torn
    down in one process); another's child is its parent's to collect."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _wait_gone(open_: dict[int, int | None], timeout_s: float | None, reap: bool) -> None:
    """Wait until each process of ``open_`` (PID -> pidfd, None without one) has exited,
    at most ``timeout_s`` (None: as long as it takes); those gone leave ``open_``, their
    pidfds closed."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while open_:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        fds = {fd: pid for pid, fd in open_.items() if fd is not None}
        # a pidfd is readable once its process has exited; one without: /proc is polled
        polled = len(fds) < len(open_)
        step = (0.02 if left is None else min(left, 0.02)) if polled else left
        done = [fds[fd] for fd in select.select(list(fds), [], [], step)[0]]
        done += [pid for pid, fd in open_.items() if fd is None and not alive(pid)]
        for pid in done:
            if reap:
                _reap(pid)
            fd = open_.pop(pid)
            if fd is not None:
                os.close(fd)


def _open_ours(pid: int, is_ours: Callable[[int], bool] | None) -> tuple[bool, int | None]:
    """Whether ``pid`` is a live process that ``is_ours`` accepts, and its pidfd (None on a
    kernel without pidfds: then signalled by PID).  The pidfd is opened before ``is_ours``
    is asked, so what was checked is what the pidfd reaches; the caller closes it."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return False, None
    except OSError:  # ENOSYS: a kernel without pidfds
        fd = None
    if (is_ours is not None and not is_ours(pid)) or (fd is None and not alive(pid)):
        if fd is not None:
            os.close(fd)
        return False, None
    return True, fd


def signal_pid(pid: int, signum: int, *, is_ours: Callable[[int], bool] | None = None) -> bool:
    """Send ``signum`` to a process another run started (a lab's delay stage, told to
    re-read its configuration), as :func:`stop_pids` signals: through a pidfd opened before
    ``is_ours`` is asked, so a PID a new process took meanwhile is never signalled.  True
    when it was sent."""
    ours, fd = _open_ours(pid, is_ours)
    if not ours:
        return False
    try:
        _send(pid, fd, signum)
    finally:
        if fd is not None:
            os.close(fd)
    return True


def stop_pids(
    pids: Iterable[int],
    grace_s: float = STOP_GRACE_S,
    *,
    is_ours: Callable[[int], bool] | None = None,
    reap: bool = True,
    reap_s: float | None = REAP_S,
) -> list[int]:
    """Stop processes by PID that this process may not have started (one a PID file or a
    lab's state names): SIGTERM to all, up to ``grace_s`` (0: SIGKILL at once), SIGKILL to
    those left, wait up to ``reap_s`` for them.  Each is opened as a pidfd first (where the
    kernel has them, 5.3 on), and only then checked with ``is_ours``: a PID a new process
    took meanwhile is never signalled.  ``reap``: collect the status of those that are this
    process's children.  The PIDs still alive at the end."""
    open_: dict[int, int | None] = {}
    try:
        for pid in dict.fromkeys(pids):
            ours, fd = _open_ours(pid, is_ours)
            if ours:
                open_[pid] = fd
        if open_ and grace_s > 0:
            for pid, fd in open_.items():
                _send(pid, fd, signal.SIGTERM)
            _wait_gone(open_, grace_s, reap)
        if open_:
            for pid, fd in open_.items():
                _send(pid, fd, signal.SIGKILL)
            _wait_gone(open_, reap_s, reap)
        return sorted(open_)
    finally:
        for fd in open_.values():
            if fd is not None:
                os.close(fd)


def stop_pid(
    pid: int,
    grace_s: float = STOP_GRACE_S,
    *,
    is_ours: Callable[[int], bool] | None = None,
    reap: bool = True,
    reap_s: float | None = REAP_S,
) -> bool:
    """:func:`stop_pids` for one: True when it is gone (or was never there, or is not
    ours by ``is_ours``), False when it outlived the SIGKILL's ``reap_s``."""
    return not stop_pids([pid], grace_s, is_ours=is_ours, reap=reap, reap_s=reap_s)
