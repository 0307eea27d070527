"""What every tool running a load (:class:`~dtnkit.measure.probes.load.LoadSpec`) shares:
its processes run, each within the load's deadline (:class:`Runs`), the workers that run them
at once (:func:`in_threads`), and the clock of a load bounded by a duration
(:class:`DataClock`): it starts when data first flows, so a tool's set-up (connecting, TLS,
first requests) is not measured time, as iperf3's own ``-t`` does.

Every tool stops what it started at the deadline and says so in ``ToolRun.failed``
(:data:`DEADLINE_MESSAGE`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from dtnkit.host import process
from dtnkit.measure.procs import InNamespace, Procs
from dtnkit.measure.tool import tail

#: how often a copy that may be cut at the duration is looked at (and data's start watched)
CUT_POLL_S = 0.05
#: bytes the receiving link must take before data counts as flowing: more than the TLS
#: handshakes and HTTP heads of a point's first requests
DATA_FLOWS_BYTES = 64 * 1024
DEADLINE_MESSAGE = "the point's time limit ({limit:g} s) passed: its processes were stopped"


def split_streams(streams: int, origins: int) -> list[int]:
    """``streams`` spread over ``origins`` as evenly as can be (the first get one more)."""
    return [streams // origins + (1 if i < streams % origins else 0) for i in range(origins)]


class Runs:
    """Processes of one load's tool: run, wait within the deadline, collect output."""

    def __init__(
        self, procs: Procs, host: InNamespace, workdir: Path | None, deadline: float, t0: float
    ) -> None:
        self.procs, self.host, self.workdir = procs, host, workdir
        self.deadline, self.t0 = deadline, t0
        self.raw: list[str] = []
        self.timed_out = False
        self.lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(
        self, argv: Sequence[str], env: dict[str, str] | None = None
    ) -> tuple[int | None, str, str, float, float]:
        """(exit status or None when stopped at the deadline, stdout, stderr, start, end).
        ``env``: variables added to this process's environment (a token: never in argv,
        where ``ps`` and the stored raw output would show it)."""
        code, out, err, start, end, _cut = self.run_until(argv, env)
        return code, out, err, start, end

    def run_until(
        self,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        cut: Callable[[], bool] | None = None,
    ) -> tuple[int | None, str, str, float, float, bool]:
        """:meth:`run`, and the process is stopped as soon as ``cut()`` (asked every
        :data:`CUT_POLL_S`) says so: then the status is None and the last item True."""
        start = self.now()
        if env is not None:  # the caller's own tokens never reach a lab server
            env = {
                **{
                    k: v for k, v in os.environ.items() if k not in ("DTNKIT_TOKEN", "BEARER_TOKEN")
                },
                **env,
            }
        proc = self.procs.start(argv, host=self.host, cwd=self.workdir, env=env)
        was_cut = False
        try:
            while True:
                left = max(0.0, self.deadline - time.monotonic())
                try:
                    out, err = proc.communicate(
                        timeout=left if cut is None else min(left, CUT_POLL_S)
                    )
                    code: int | None = proc.returncode
                    break
                except process.TimeoutExpired:  # communicate keeps what it read so far
                    late = time.monotonic() >= self.deadline
                    if not late and (cut is None or not cut()):
                        continue
                    self.procs.stop(proc)
                    out, err = proc.communicate()
                    code = None
                    if late:
                        with self.lock:
                            self.timed_out = True
                    else:
                        was_cut = True
                    break
        finally:
            self.procs.forget(proc)
        end = self.now()
        with self.lock:
            self.raw.append(
                f"$ {shlex.join(argv)}\n{tail(out, 4096)}{tail(err, 4096)}"
                + ("(cut at the duration)\n" if was_cut else "")
            )
        return code, out, err, start, end, was_cut

    def output(self) -> str:
        """What the processes printed, in the order they ended (the tail kept)."""
        return tail("\n".join(self.raw))


def in_threads(n: int, fn: Callable[[int], None]) -> None:
    """``fn(0)`` .. ``fn(n-1)`` at once, each in a thread; the first error is raised here."""
    errors: list[BaseException] = []

    def body(k: int) -> None:
        try:
            fn(k)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class DataClock:
    """When a point's data started to flow, and so when its duration is over.

    The start is the first moment the receiving link has taken :data:`DATA_FLOWS_BYTES`
    more than at the tool's start (watched every :data:`CUT_POLL_S` by one thread), or the
    start of a completed copy's own transfer, whichever comes first.  Without the link's
    counter (``received`` None, or unreadable) the duration counts from the tool's start.
    ``duration`` None: nothing is cut (``bytes`` points run every copy to its end)."""

    def __init__(
        self, runs: Runs, duration: float | None, received: Callable[[], int | None] | None
    ) -> None:
        self.runs, self.duration, self.received = runs, duration, received
        self.data_from: float | None = None
        self.how = "link" if received is not None else "tool start"
        self._done = threading.Event()

    def seen(self, t: float) -> None:
        """A copy completed: its data flowed from ``t`` on (the watch can stop)."""
        with self.runs.lock:
            if self.data_from is None or t < self.data_from:
                self.data_from, self.how = t, "first copy"
        self._done.set()

    def end(self) -> float | None:
        """When the duration is over, from the tool's start (None: not known yet, or no
        duration)."""
        if self.duration is None:
            return None
        if self.data_from is not None:
            return self.data_from + self.duration
        return None if self.received is not None else self.duration

    def over(self) -> bool:
        """The duration has passed since data started to flow (never without a duration)."""
        end = self.end()
        return end is not None and self.runs.now() >= end

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        if self.duration is None or self.received is None:
            yield
            return
        base = self._read()
        thread = threading.Thread(
            target=self._watch, args=(base,), daemon=True, name="dtnkit-sweep-data-clock"
        )
        thread.start()
        try:
            yield
        finally:
            self._done.set()
            thread.join()

    def _read(self) -> int | None:
        try:
            return self.received() if self.received is not None else None
        except (OSError, KeyError, ValueError):
            return None

    def _watch(self, base: int | None) -> None:
        while not self._done.wait(CUT_POLL_S):
            now, got = self.runs.now(), self._read()
            if got is None or base is None:
                with self.runs.lock:  # the counter cannot be read: count from the start
                    self.received, self.how = None, "tool start"
                return
            if got - base >= DATA_FLOWS_BYTES:
                with self.runs.lock:
                    if self.data_from is None or now < self.data_from:
                        self.data_from = now
                    self.how = "link"
                return
