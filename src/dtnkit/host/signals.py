"""Signals this process is sent: one way to handle some for the length of a block.

Python lets only the main thread install a handler; elsewhere the block runs with the
handlers it has.  The previous handlers come back however the block ends.  Kept apart from
:mod:`dtnkit.host.process` so a command that starts no process (``cp``) need not load
``subprocess`` to handle SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any

SignalHandler = Callable[[int, FrameType | None], Any]


@contextlib.contextmanager
def handling(signums: Iterable[int], handler: SignalHandler) -> Iterator[bool]:
    """``handler`` for each of ``signums`` while the block runs; the previous handlers are
    put back after.  Yields whether they were installed (False outside the main thread)."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in signums:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield bool(previous)
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def interrupting(*signums: int) -> contextlib.AbstractContextManager[bool]:
    """Each of ``signums`` unwinds the block as Ctrl-C does (KeyboardInterrupt), so what
    undoes a half-done step on Ctrl-C undoes it on SIGTERM (systemd, ``timeout``) too."""
    return handling(signums, _interrupt)
