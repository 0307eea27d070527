"""The fleet page's differences figure: the reference host has no bar against itself, and
its row says it is the reference, so a reader does not take the missing bar for a gap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.fleet.documents import tree_audit, write

from dtnkit import htmlpage
from dtnkit.fleet import compare, load, page


def test_the_reference_hosts_row_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "dtn-a.audit.json", tree_audit("dtn-a"))
    write(tmp_path, "dtn-b.audit.json", tree_audit("dtn-b"))
    report = compare.compare(load.load_dir(tmp_path), reference="dtn-a")
    rows: dict[str, list[str]] = {}
    save = htmlpage.save

    def catch(fig: Any, stem: str, *args: Any, **kw: Any) -> Any:
        rows[stem] = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
        return save(fig, stem, *args, **kw)

    monkeypatch.setattr(htmlpage, "save", catch)
    page.figures(report, svg=False)
    assert rows["differences"] == ["dtn-a (reference)", "dtn-b"]
    assert rows["compliance"] == ["dtn-a", "dtn-b"]  # the other figures name hosts only
