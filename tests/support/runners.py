"""A runner for tests that count the commands dtnkit starts."""

from __future__ import annotations

from collections.abc import Sequence

from dtnkit.host.runner import Result, SubprocessRunner


class CountingRunner(SubprocessRunner):
    """Real commands, each one recorded (a runner of the test's own: a Host given it starts
    no forked probe)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        self.calls.append(tuple(argv))
        return super().run(argv, stdin=stdin)
