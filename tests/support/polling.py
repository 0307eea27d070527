"""Polling a real service's answer (Prometheus's API, a listening port) until it says what a
test waits for, bounded in time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    """Poll ``check`` until it returns something true; fail at the deadline saying what never
    happened (and the last answer)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:  # not listening yet
            last = exc
        else:
            if last:
                return last
        time.sleep(0.2)  # the poll's period, not a synchronisation: each poll asks again
    raise AssertionError(f"{what} not within {timeout:.0f}s (last answer: {last!r})")
