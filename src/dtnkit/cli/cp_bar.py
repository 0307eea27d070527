"""cp's progress bar on stderr: rich's bar with the bytes moved, the rate in bit/s (as iperf3
prints it) and the time left; drawn only while a person watches a terminal."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TimeRemainingColumn,
)
from rich.text import Text

from dtnkit.units import format_rate


class BitRate(ProgressColumn):
    """The rate in bit/s, as iperf3 prints it."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(
            format_rate(speed * 8) if speed is not None else "?", style="progress.data.speed"
        )


def progress(stderr: TextIO) -> Progress:
    """A transient bar on *stderr* (it disappears when the copy ends)."""
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(binary_units=True),
        BitRate(),
        TimeRemainingColumn(),
        console=Console(file=stderr),
        transient=True,
    )
