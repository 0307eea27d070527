"""Progress of long runs, for people at a terminal: one line per stage and per interval.

The lower layers report through :class:`dtnkit.progress.Progress` (figures, not text);
:func:`reporter` gives them a :class:`Reporter` writing to stderr when stderr is a terminal
and the output is for people, and the silent reporter otherwise (``--format json``, stderr
piped or redirected), so a script never sees a progress line.  Lines are whole lines, as
iperf3 prints its intervals, never rewritten in place: they stay readable in a scrollback,
a ``script`` log or tmux.

    [1/3] network: iperf3 to demo/dst, 4 streams, 10 s
        Interval        Transfer           Bitrate   Retr
        0.0-2.0 s       224 MiB         940 Mbit/s      0
"""

from __future__ import annotations

import threading
from typing import TextIO

from dtnkit.environment import Environment
from dtnkit.progress import SILENT, Interval, Progress
from dtnkit.units import format_eta, format_rate

INDENT = "    "


def size(n: float) -> str:
    """Bytes with IEC prefixes, three significant digits: ``224 MiB``, ``1.50 GiB``."""
    value, unit = float(n), 0
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    while value >= 999.5 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{int(value)} B"
    digits = 2 if value < 9.995 else 1 if value < 99.95 else 0
    return f"{value:.{digits}f} {units[unit]}"


def duration(seconds: float) -> str:
    """``45s``, ``3m20s``, ``1h05m`` (:func:`dtnkit.units.format_eta`)."""
    return format_eta(seconds)


class Reporter:
    """Writes progress lines on ``stream``; safe to call from the sampler's thread."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self._header = True  # the interval header is due before the next network interval

    def _write(self, line: str) -> None:
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # a closed terminal must not stop the run
                pass

    def step(self, what: str, k: int = 0, n: int = 0, *, eta_s: float | None = None) -> None:
        head = f"[{k}/{n}] " if n else ""
        tail = f", ETA {duration(eta_s)}" if eta_s is not None else ""
        self._header = True
        self._write(f"{head}{what}{tail}")

    def interval(self, got: Interval) -> None:
        span = f"{got.start_s:.1f}-{got.end_s:.1f} s"
        if got.nbytes is None:  # a transfer: only its time is known
            of = f" (moving {size(got.total_bytes)})" if got.total_bytes else ""
            self._write(f"{INDENT}{got.phase or 'running'}: {got.end_s:.0f} s{of}")
            return
        rate = format_rate(got.bps or 0.0)
        if got.phase:  # a phase of known size (fio's write, then read)
            done = ""
            if got.done_bytes is not None and got.total_bytes:
                pct = min(100.0, 100.0 * got.done_bytes / got.total_bytes)
                done = f"  {size(got.done_bytes)} of {size(got.total_bytes)} ({pct:.0f}%)"
            self._write(f"{INDENT}{got.phase:<5} {span:<13} {rate:>15}{done}")
            return
        if self._header:
            self._header = False
            self._write(f"{INDENT}{'Interval':<15} {'Transfer':<10} {'Bitrate':>15} {'Retr':>6}")
        retr = "" if got.retransmits is None else str(got.retransmits)
        self._write(f"{INDENT}{span:<15} {size(got.nbytes):<10} {rate:>15} {retr:>6}")


def reporter(env: Environment, fmt: str = "table") -> Progress:
    """A :class:`Reporter` on stderr when it is a terminal and ``fmt`` is for people, else
    the silent one."""
    if fmt == "json" or not env.stderr_isatty:
        return SILENT
    return Reporter(env.stderr)
