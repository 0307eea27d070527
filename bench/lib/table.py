"""The one table printer: Markdown (what goes into docs/) or plain text that fits 80 columns."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

WIDTH = 80
STYLES = ("md", "text")
#: the first column (what a row is) never takes more than this share of a text table
FIRST_SHARE = 0.4
GAP = "  "


def _clean(cell: object) -> str:
    return " ".join(str(cell).split())  # one line per cell, whatever it held


def markdown(head: Sequence[object], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table; a cell's "|" is escaped so it cannot open a column."""

    def line(cells: Sequence[object]) -> str:
        return "| " + " | ".join(_clean(c).replace("|", "\\|") for c in cells) + " |"

    return [line(head), "|" + "---|" * len(head), *(line(_pad(r, len(head))) for r in rows)]


def _pad(row: Sequence[object], n: int) -> list[object]:
    return [*row[:n], *[""] * (n - len(row))]


def _wrap(cell: str, width: int) -> list[str]:
    return textwrap.wrap(cell, width, break_long_words=True, break_on_hyphens=False) or [""]


def _block(cols: list[int], head: list[str], rows: list[list[str]], widths: list[int]) -> list[str]:
    """Columns *cols* as aligned text; cells wrapped to their column's width."""
    out = []
    for k, cells in enumerate([head, *rows]):
        wrapped = [_wrap(cells[c], widths[c]) for c in cols]
        for i in range(max(len(w) for w in wrapped)):
            parts = [
                (w[i] if i < len(w) else "").ljust(widths[c])
                for w, c in zip(wrapped, cols, strict=True)
            ]
            out.append(GAP.join(parts).rstrip())
        if k == 0:
            out.append(GAP.join("-" * widths[c] for c in cols))
    return out


def text(head: Sequence[object], rows: Sequence[Sequence[object]], width: int = WIDTH) -> list[str]:
    """Aligned columns no wider than *width*: columns that do not fit go into a further block
    that repeats the first column; a cell longer than its column wraps onto more lines."""
    n = len(head)
    h = [_clean(c) for c in head]
    body = [[_clean(c) for c in _pad(r, n)] for r in rows]
    natural = [max(len(x) for x in [h[c], *(r[c] for r in body)]) for c in range(n)]
    widths = list(natural)
    widths[0] = max(
        1, min(natural[0], int(width * FIRST_SHARE)) if n > 1 else min(natural[0], width)
    )
    room = width - widths[0] - len(GAP)  # what one further column may take
    for c in range(1, n):
        widths[c] = max(1, min(natural[c], room))
    if n == 1:
        return _block([0], h, body, widths)
    out: list[str] = []
    group: list[int] = []
    used = widths[0]
    for c in range(1, n):
        if group and used + len(GAP) + widths[c] > width:
            out += [*_block([0, *group], h, body, widths), ""]
            group, used = [], widths[0]
        group.append(c)
        used += len(GAP) + widths[c]
    return out + _block([0, *group], h, body, widths)


def render(
    head: Sequence[object], rows: Sequence[Sequence[object]], style: str = "md", width: int = WIDTH
) -> str:
    if style not in STYLES:
        raise ValueError(f"table style {style!r}: one of {', '.join(STYLES)}")
    lines = markdown(head, rows) if style == "md" else text(head, rows, width)
    return "\n".join(lines)
