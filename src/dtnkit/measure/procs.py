"""The processes a measurement starts and must stop by a deadline, by PID: each in its own
session (so a terminal's Ctrl-C reaches only dtnkit, which then stops them), stopped with
SIGTERM then SIGKILL, and reaped.

- :class:`Procs`: one per sweep (or per load a tool runs alone): servers, tool clients,
  namespace anchors; everything started through it is stopped by :meth:`Procs.stop_all`,
  also after Ctrl-C or a failed point.
- :class:`Batch`: the one-shot transfer processes of one run (third-party copies), each run
  to its end or a deadline, all stopped by :meth:`Batch.close` however the run ends.

Every process a sweep starts goes through this module (the tools' and the servers').
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

STOP_GRACE_S = 3.0


class InNamespace(Protocol):
    """Where a command runs: ``argv`` gives the command line that runs it there (a lab
    host, or a :class:`~dtnkit.host.host.Host`)."""

    def argv(self, argv: Sequence[str]) -> list[str]: ...


class Procs:
    """Processes started for a sweep, or a load (servers, tool clients, namespace
    anchors)."""

    def __init__(self) -> None:
        self._procs: dict[int, subprocess.Popen[Any]] = {}
        self._lock = threading.Lock()

    def start(self, argv: Sequence[str], *, host: InNamespace | None = None,
              stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
              cwd: Path | None = None, env: dict[str, str] | None = None,
              text: bool = True) -> subprocess.Popen[Any]:
        """Start ``argv`` (in ``host``'s namespace when given: ``ip netns exec`` execs the
        command, so the PID is the command's) in a session of its own."""
        full = host.argv(argv) if host is not None else list(argv)
        proc = subprocess.Popen(full, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                cwd=cwd, env=env, text=text, start_new_session=True)
        with self._lock:
            self._procs[proc.pid] = proc
        return proc

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return [pid for pid, p in self._procs.items() if p.poll() is None]

    def forget(self, proc: subprocess.Popen[Any]) -> None:
        with self._lock:
            self._procs.pop(proc.pid, None)

    def stop(self, proc: subprocess.Popen[Any], grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the process's group (its session: it and what it started), SIGKILL after
        ``grace_s``; reap it."""
        stop_process(proc, grace_s)
        self.forget(proc)

    def stop_pid(self, pid: int, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the process PID if this registry started it (and it is not yet forgotten)."""
        with self._lock:
            proc = self._procs.get(pid)
        if proc is not None:
            self.stop(proc, grace_s)

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        with self._lock:
            procs = list(self._procs.values())
        for p in procs:  # signal all first, then wait: the grace periods overlap
            _signal(p, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            if p.poll() is None:
                _signal(p, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=5)
            _signal(p, signal.SIGKILL, group_only=True)  # what it left in its group
            self.forget(p)


def _signal(proc: subprocess.Popen[Any], sig: int, *, group_only: bool = False) -> None:
    """Signal the process group the process leads (started with start_new_session, its
    PID is the group's ID); the process itself too while it is unreaped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    if not group_only and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def stop_process(proc: subprocess.Popen[Any], grace_s: float = STOP_GRACE_S) -> None:
    if proc.poll() is None:
        _signal(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
    _signal(proc, signal.SIGKILL, group_only=True)


def stop_by_pid(proc: subprocess.Popen[Any], grace_s: float,
                reap_s: float | None = 10.0) -> None:
    """SIGTERM the process itself (not its group), SIGKILL after ``grace_s``, then reap it
    (waiting at most ``reap_s`` after the SIGKILL; None: as long as it takes)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(reap_s)


def alive(pid: int) -> bool:
    """Is PID a live process (not a zombie)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


class Batch:
    """The one-shot processes of one run: each run to its end or a deadline, all stopped by
    PID however the run ends (:meth:`close`); none started once closed."""

    def __init__(self, grace_s: float = 2.0) -> None:
        self.lock = threading.Lock()
        self.live: dict[int, subprocess.Popen[str]] = {}
        self.closed = False
        self.grace_s = grace_s

    def run(self, argv: Sequence[str], deadline: float, env: dict[str, str] | None = None
            ) -> tuple[int | None, str]:
        """Run to completion or ``deadline`` (then stopped: status None); the output."""
        with self.lock:
            if self.closed:
                return None, "not started: the point was stopped"
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace", start_new_session=True,
                                    env=env)
            self.live[proc.pid] = proc
        try:
            out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.01))
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            self.stop(proc)
            out = proc.communicate()[0] if proc.stdout and not proc.stdout.closed else ""
            return None, (out or "") + "\n(stopped at the point's deadline)"
        finally:
            with self.lock:
                self.live.pop(proc.pid, None)

    def stop(self, proc: subprocess.Popen[str]) -> None:
        """SIGTERM by PID, SIGKILL after the grace, reaped (however long that takes)."""
        stop_by_pid(proc, self.grace_s, reap_s=None)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            live = list(self.live.values())
        for proc in live:
            self.stop(proc)
