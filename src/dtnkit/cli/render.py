"""Tables and messages for people (rich): the pieces every command's tables share.  JSON
output never passes through here; each command family draws its own tables beside its command
(``tune/tables``, ``tune/audit_table``, ``measure_render``, ``lab_render``, or in the
command's module).

Tables take the terminal's width: :func:`fitted` hides the columns that matter least until the
rest fits without cutting a word (a value too long for the terminal stays whole: IDs can be
copied), wraps long text inside its cell, and says what it hid; ``--wide`` shows every column
unwrapped.  Every value is formatted by :mod:`dtnkit.units` (``format_*``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dtnkit.environment import Environment

#: the width of a --wide console: lines as long as their content
WIDE = 100_000
#: blanks between two columns
GAP = 2


def console(env: Environment, *, wide: bool = False) -> Console:
    """Output for people at the terminal's width (``wide``: unwrapped)."""
    if wide:
        return Console(file=env.stdout, width=WIDE, highlight=False, soft_wrap=True)
    return Console(
        file=env.stdout, width=max(env.terminal_width, 20), highlight=False, soft_wrap=False
    )


def whole(con: Console, text: str) -> None:
    """A line that holds a path, an ID or a command to copy: printed whole, never wrapped
    (at the terminal's edge the terminal folds it), so it is copied and found whole."""
    con.print(text, soft_wrap=True)


def is_wide(con: Console) -> bool:
    return con.width >= WIDE


@dataclass(frozen=True)
class Col:
    """A column of a :func:`fitted` table."""

    header: str
    #: 0: always shown; when the terminal is narrow the highest rank is hidden first
    rank: int = 0
    #: False: a cell is never wrapped (IDs, keys: they stay whole to be copied)
    wrap: bool = True
    justify: Literal["left", "right"] = "left"
    #: the narrowest this column may be (other columns are hidden first)
    least: int = 0


def _plain(cell: str) -> list[str]:
    return Text.from_markup(cell).plain.splitlines() or [""]


def _widths(col: Col, cells: Sequence[str]) -> tuple[int, int]:
    """(narrowest without cutting a word, natural) width of a column."""
    lines = [line for cell in [escape(col.header), *cells] for line in _plain(cell)]
    longest = max(cell_len(line) for line in lines)
    if not col.wrap:
        return longest, longest
    words = [cell_len(w) for line in lines for w in line.split()] or [0]
    least = min(max(max(words), col.least), longest)
    return least, longest


def _need(measured: Sequence[tuple[int, int]], idx: Sequence[int]) -> int:
    return sum(measured[i][0] for i in idx) + GAP * (len(idx) - 1)


def fits(con: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> bool:
    """Whether the columns that are always shown (rank 0) fit ``con`` without cutting a word."""
    measured = [_widths(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    return (
        is_wide(con) or _need(measured, [i for i, c in enumerate(cols) if c.rank == 0]) <= con.width
    )


def fitted(
    con: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]], title: str | None = None
) -> tuple[Table, list[str]]:
    """A table of ``rows`` (rich markup) that fits ``con``: the table and the headers of the
    columns hidden to make it fit."""
    measured = [_widths(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    shown = list(range(len(cols)))
    room = con.width

    def need(idx: list[int]) -> int:
        return _need(measured, idx)

    if not is_wide(con):
        while need(shown) > room:
            rank, victim = max((cols[i].rank, i) for i in shown)
            if rank == 0:
                break  # nothing more may go; print_fitted prints records instead
            shown.remove(victim)
    widths = {i: measured[i][0] for i in shown}
    spare = room - need(shown)
    needy = [i for i in shown if widths[i] < measured[i][1]]
    while spare > 0 and needy:  # fair shares of the spare room, up to each natural width
        share = max(spare // len(needy), 1)
        for i in sorted(needy, key=lambda i: measured[i][1] - widths[i]):
            give = min(share, measured[i][1] - widths[i], spare)
            widths[i] += give
            spare -= give
        needy = [i for i in needy if widths[i] < measured[i][1]]
    table = Table(
        box=None,
        pad_edge=False,
        padding=(0, GAP // 2),
        header_style="bold",
        title=title,
        title_justify="left",
        title_style="bold",
    )
    for i in shown:
        c = cols[i]
        table.add_column(
            escape(c.header),
            width=widths[i],
            no_wrap=not c.wrap,
            overflow="fold",
            justify=c.justify,
        )
    for r in rows:
        table.add_row(*(r[i] for i in shown))
    return table, [cols[i].header for i in range(len(cols)) if i not in shown]


def print_fitted(
    con: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]], title: str | None = None
) -> list[str]:
    """Print a :func:`fitted` table and say what it hid; returns the hidden headers.  When
    even the columns that are always shown do not fit, each row is printed as a record (its
    first cell, then ``header: value`` lines), so no word is cut."""
    if not fits(con, cols, rows):
        if title:
            con.print(f"[bold]{escape(title)}[/]")
        for r in rows:  # the first cell whole, even past the edge: IDs are never cut
            con.print(f"[bold]{r[0]}[/]", no_wrap=True, overflow="ignore", crop=False)
            for c, cell in zip(cols[1:], r[1:], strict=True):
                if Text.from_markup(cell).plain.strip():
                    con.print(f"  {escape(c.header)}: {cell}")
        return []
    table, hidden = fitted(con, cols, rows, title)
    con.print(table)
    if hidden:
        con.print(
            f"[dim]({', '.join(hidden)} hidden to fit {con.width} columns: --wide shows them)[/]"
        )
    return hidden
