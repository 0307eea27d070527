"""The samplers' schedule (:func:`dtnkit.measure.schedule.ticks`): ticks on ``t0 + k x
interval`` whatever a reading costs; a reading that overruns ticks is followed by the next
tick on the schedule, not by a burst of the missed ones; a set stop ends it.  A clock of the
test's own, so nothing here waits."""

from __future__ import annotations

import threading

import pytest

from dtnkit.measure import schedule


class Clock:
    def __init__(self) -> None:
        self.now = 100.0


class StopAfter(threading.Event):
    """A stop whose ``wait`` moves the test's clock by the timeout (the wait ran out), and
    that is set after *n* waits."""

    def __init__(self, clock: Clock, n: int) -> None:
        super().__init__()
        self.clock, self.n = clock, n
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(round(timeout, 6))
        if len(self.waits) > self.n:
            return True
        self.clock.now += timeout
        return False


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(schedule.time, "monotonic", lambda: c.now)
    return c


def test_ticks_fall_on_the_schedule_whatever_a_reading_costs(clock: Clock) -> None:
    stop = StopAfter(clock, 4)
    at = []
    for _ in schedule.ticks(stop, clock.now, 1.0):
        at.append(round(clock.now - 100.0, 6))
        clock.now += 0.3  # each reading takes 0.3 s
    assert at == [1.0, 2.0, 3.0, 4.0]
    assert stop.waits == [1.0, 0.7, 0.7, 0.7, 0.7]


def test_a_reading_that_overruns_skips_the_missed_ticks_and_keeps_the_phase(
    clock: Clock,
) -> None:
    stop = StopAfter(clock, 3)
    at = []
    for _ in schedule.ticks(stop, clock.now, 1.0):
        at.append(round(clock.now - 100.0, 6))
        clock.now += 2.5 if len(at) == 1 else 0.1  # the first reading misses two ticks
    # 1.0, then (the reading ended at 3.5) 4.0 and 5.0: never 2.0 and 3.0 late, in a burst
    assert at == [1.0, 4.0, 5.0]
    assert stop.waits[:3] == [1.0, 0.5, 0.9]


def test_a_stop_set_before_the_first_tick_yields_nothing(clock: Clock) -> None:
    stop = threading.Event()
    stop.set()
    assert list(schedule.ticks(stop, clock.now, 1.0)) == []
