"""The processes a sweep starts, by PID: each in its own session (so a terminal's Ctrl-C
reaches only the sweep, which then stops them), stopped with SIGTERM then SIGKILL, and
reaped.  One :class:`Procs` per sweep: everything started through it is stopped by
:meth:`Procs.stop_all`, also after Ctrl-C or a failed point.
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
from typing import Any

from dtnkit.lab.path import LabHost

STOP_GRACE_S = 3.0


class Procs:
    """Processes started for a sweep (servers, tool clients, namespace anchors)."""

    def __init__(self) -> None:
        self._procs: dict[int, subprocess.Popen[Any]] = {}
        self._lock = threading.Lock()

    def start(self, argv: Sequence[str], *, host: LabHost | None = None,
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
