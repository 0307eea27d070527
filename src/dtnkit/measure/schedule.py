"""The sampling schedule both samplers keep (a process's counters, a lab path's).

Ticks fall on ``t0 + k * interval`` from the start, not ``interval`` after the last reading
ends: slow reads on a loaded machine do not stretch the period (a 5 s probe sampled each
second still gets its five samples), and a tick missed while a reading ran is skipped, not
made up in a burst.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator


def ticks(stop: threading.Event, t0: float, interval_s: float) -> Iterator[None]:
    """Yield at each tick of the schedule that starts at *t0* (``time.monotonic()``) until
    *stop* is set; waiting is on *stop*, so setting it ends the loop at once."""
    k = 1
    while not stop.wait(max(0.0, t0 + k * interval_s - time.monotonic())):
        yield
        k = max(k + 1, int((time.monotonic() - t0) / interval_s) + 1)
