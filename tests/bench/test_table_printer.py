"""bench/lib/table.py, the one table printer: Markdown whose cells cannot open a column, and
text that never passes 80 columns (wide tables split into blocks that repeat the first
column, long cells wrap)."""

from __future__ import annotations

from bench.lib.table import markdown, render, text
from hypothesis import given
from hypothesis import strategies as st

CELL = st.text(st.characters(blacklist_categories=("Cs",)), max_size=120)


def test_markdown_escapes_a_pipe_and_pads_short_rows() -> None:
    lines = markdown(["a", "b"], [["x|y", "z"], ["only"]])
    assert lines == ["| a | b |", "|---|---|", "| x\\|y | z |", "| only |  |"]


@given(st.lists(CELL, min_size=1, max_size=12), st.lists(st.lists(CELL, max_size=12), max_size=6))
def test_text_never_passes_80_columns(head: list[str], rows: list[list[str]]) -> None:
    assert all(len(line) <= 80 for line in text(head, rows))


@given(
    st.lists(
        st.lists(st.text("abcdefghij", min_size=1, max_size=9), min_size=3, max_size=3),
        min_size=1,
        max_size=5,
    )
)
def test_text_keeps_every_short_cell(rows: list[list[str]]) -> None:
    out = render(["what", "median s", "runs"], rows, "text")
    for row in rows:
        assert all(cell in out for cell in row)


def test_a_wide_table_repeats_the_first_column_in_each_block() -> None:
    head = ["measurement", *(f"column number {i}" for i in range(8))]
    out = text(head, [["cp auto XRootD", *(f"{i}.00" for i in range(8))]])
    blocks = "\n".join(out).split("\n\n")
    assert len(blocks) > 1
    assert all(b.startswith("measurement") and "cp auto XRootD" in b for b in blocks)
    assert all(len(line) <= 80 for line in out)
