"""The processes a measurement starts and must stop by a deadline: each in its own session
(so a terminal's Ctrl-C reaches only dtnkit, which then stops them), started and stopped
(SIGTERM, then SIGKILL, reaped) by :mod:`dtnkit.host.process`; what is kept here is which
processes a sweep or a run owns.

- :class:`Procs`: one per sweep (or per load a tool runs alone): servers, tool clients,
  namespace anchors; everything started through it is stopped by :meth:`Procs.stop_all`,
  also after Ctrl-C or a failed point.
- :class:`Batch`: the one-shot transfer processes of one run (third-party copies), each run
  to its end or a deadline, all stopped by :meth:`Batch.close` however the run ends.

Every process a sweep starts goes through this module (the tools') or
:mod:`dtnkit.host.process` (the servers').
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from dtnkit.host import process

STOP_GRACE_S = process.STOP_GRACE_S


class InNamespace(Protocol):
    """Where a command runs: ``argv`` gives the command line that runs it there (a lab
    host, or a :class:`~dtnkit.host.host.Host`)."""

    def argv(self, argv: Sequence[str]) -> list[str]: ...


class Procs:
    """Processes started for a sweep, or a load (servers, tool clients, namespace
    anchors)."""

    def __init__(self) -> None:
        self._procs: dict[int, process.Child[Any]] = {}
        self._lock = threading.Lock()

    def start(
        self,
        argv: Sequence[str],
        *,
        host: InNamespace | None = None,
        stdout: process.Stdio = process.PIPE,
        stderr: process.Stdio = process.PIPE,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        text: bool = True,
    ) -> process.Child[Any]:
        """Start ``argv`` (in ``host``'s namespace when given: ``ip netns exec`` execs the
        command, so the PID is the command's) in a session of its own."""
        full = host.argv(argv) if host is not None else list(argv)
        proc = process.start(
            full,
            text=text,
            own_group=True,
            stdin=process.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
        )
        with self._lock:
            self._procs[proc.pid] = proc
        return proc

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return [pid for pid, p in self._procs.items() if p.poll() is None]

    def forget(self, proc: process.Child[Any]) -> None:
        with self._lock:
            self._procs.pop(proc.pid, None)

    def stop(self, proc: process.Child[Any], grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the process's group (its session: it and what it started), SIGKILL after
        ``grace_s``; reap it."""
        proc.stop(grace_s)
        self.forget(proc)

    def stop_pid(self, pid: int, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the process PID if this registry started it (and it is not yet forgotten)."""
        self.stop_pids([pid], grace_s)

    def stop_pids(self, pids: Iterable[int], grace_s: float = STOP_GRACE_S) -> None:
        """Stop those of ``pids`` this registry started (and has not yet forgotten), their
        grace periods at once."""
        with self._lock:
            procs = [self._procs[pid] for pid in pids if pid in self._procs]
        self._stop(procs, grace_s)

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop them all, their grace periods at once."""
        with self._lock:
            procs = list(self._procs.values())
        self._stop(procs, grace_s)

    def _stop(self, procs: list[process.Child[Any]], grace_s: float) -> None:
        try:
            process.stop_all(procs, grace_s)
        finally:
            for p in procs:
                self.forget(p)


class Batch:
    """The one-shot processes of one run: each run to its end or a deadline, all stopped by
    PID however the run ends (:meth:`close`); none started once closed."""

    def __init__(self, grace_s: float = 2.0) -> None:
        self.lock = threading.Lock()
        self.live: dict[int, process.Child[str]] = {}
        self.closed = False
        self.grace_s = grace_s

    def run(
        self, argv: Sequence[str], deadline: float, env: dict[str, str] | None = None
    ) -> tuple[int | None, str]:
        """Run to completion or ``deadline`` (then stopped: status None); the output."""
        with self.lock:
            if self.closed:
                return None, "not started: the point was stopped"
            proc = process.start(
                argv,
                text=True,
                errors="replace",
                own_group=True,
                stdin=process.DEVNULL,
                stdout=process.PIPE,
                stderr=process.STDOUT,
                env=env,
            )
            self.live[proc.pid] = proc
        try:
            out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.01))
            return proc.returncode, out
        except process.TimeoutExpired:
            self.stop(proc)
            out = proc.communicate()[0] if proc.stdout and not proc.stdout.closed else ""
            return None, (out or "") + "\n(stopped at the point's deadline)"
        finally:
            with self.lock:
                self.live.pop(proc.pid, None)

    def stop(self, proc: process.Child[str]) -> None:
        """SIGTERM by PID (not its group), SIGKILL after the grace, reaped (however long that
        takes)."""
        proc.stop(self.grace_s, group=False, reap_s=None)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            live = list(self.live.values())
        for proc in live:
            self.stop(proc)
