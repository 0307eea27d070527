"""What a long run reports while it works: the interface the lower layers call.

Probes, diagnose, experiments and lab builds take a :class:`Progress` (or None) and call it;
they never print.  ``dtnkit.cli.progress`` implements it for a terminal (and does nothing when
stderr is not one, or in JSON mode), so measure, diagnose and lab never import the CLI.  The
calls carry figures, not text: the CLI formats them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Interval:
    """One interval of a running measurement, as iperf3 prints one each second.

    ``start_s``/``end_s`` count from the start of the measurement; ``nbytes`` moved in the
    interval (None when unknown, e.g. a transfer whose bytes cannot be watched);
    ``retransmits`` in the interval (network probes); ``phase`` names a part of the run
    (fio's ``write`` and ``read``); ``done_bytes``/``total_bytes`` the progress of a run of
    known size.
    """

    start_s: float
    end_s: float
    nbytes: int | None = None
    retransmits: int | None = None
    phase: str = ""
    done_bytes: int | None = None
    total_bytes: int | None = None

    @property
    def bps(self) -> float | None:
        """Bit/s over the interval, or None."""
        span = self.end_s - self.start_s
        return self.nbytes * 8 / span if self.nbytes is not None and span > 0 else None


class Progress(Protocol):
    """The reporter: ``step`` starts a stage (k of n), ``interval`` reports inside it."""

    def step(self, what: str, k: int = 0, n: int = 0, *, eta_s: float | None = None) -> None:
        """Stage ``k`` of ``n`` starts (0 of 0: a stage that is not counted): ``what`` says
        what is measured or built now; ``eta_s`` the time left for the whole run, if known."""

    def interval(self, got: Interval) -> None:
        """One interval of the measurement that runs now."""


class Silent:
    """A reporter that says nothing (the default of every caller)."""

    def step(self, what: str, k: int = 0, n: int = 0, *, eta_s: float | None = None) -> None:
        pass

    def interval(self, got: Interval) -> None:
        pass


SILENT: Progress = Silent()
