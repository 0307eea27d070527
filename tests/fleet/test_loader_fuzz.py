"""Property tests of the fleet report's loader: whatever bytes a file holds, and whatever a
real audit, experiment or campaign document is changed into, the loader either uses it or
skips it with one printable line; what it uses, the comparison, the tables and the page
(without figures) take without an error."""

from __future__ import annotations

import copy
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.fleet.documents import campaign, experiment, tree_audit

from dtnkit.cli.fleet import people
from dtnkit.cli.output import Printer
from dtnkit.environment import Environment
from dtnkit.fleet import compare, load, page

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)

AUDIT = tree_audit("dtn-b")
DOCS = {
    "h.audit.json": AUDIT,
    "campaign.json": campaign("h", "g", "f"),
    "x.experiment.json": experiment("h", "g"),
}


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (of keys and indexes) into doc."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):  # a few findings are enough
            out += paths(v, (*prefix, i))
    return out


PATHS = {name: paths(doc)[1:] for name, doc in DOCS.items()}


def replaced(doc: Any, path: tuple[Any, ...], value: Any, drop: bool) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for step in path[:-1]:
        node = node[step]
    if drop and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def check(directory: Path) -> None:
    """Load, compare, tables and page: nothing but a Skipped or a BadInput of the whole."""
    loaded = load.load_dir(directory)
    for s in loaded.skipped:
        line = s.line()
        assert line.isprintable() and s.file in line
    if not loaded.usable:
        return
    report = compare.compare(loaded, reference=loaded.audits[0].name if loaded.audits else None)
    json.dumps(report.as_dict(), allow_nan=False)
    out = io.StringIO()
    people(Printer(Environment(stdout=out, stderr=io.StringIO(), terminal_width=80)), report)
    assert "\x1b" not in out.getvalue()
    text = page.page(report, [])
    assert "<script" not in text.lower()


@SETTINGS
@given(data=st.binary(max_size=400), name=st.sampled_from(sorted(DOCS)))
def test_any_bytes(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="flrep-fuzz-") as tmp:
        (Path(tmp) / name).write_bytes(data)
        check(Path(tmp))


@SETTINGS
@given(
    name=st.sampled_from(sorted(DOCS)),
    pick=st.integers(min_value=0),
    value=json_values,
    drop=st.booleans(),
)
def test_a_real_document_changed_anywhere(name: str, pick: int, value: Any, drop: bool) -> None:
    path = PATHS[name][pick % len(PATHS[name])]
    doc = replaced(DOCS[name], path, value, drop)
    with tempfile.TemporaryDirectory(prefix="flrep-fuzz-") as tmp:
        (Path(tmp) / name).write_text(json.dumps(doc))
        (Path(tmp) / "other.audit.json").write_text(json.dumps(AUDIT))
        check(Path(tmp))


@SETTINGS
@given(
    text=st.text(min_size=1, max_size=40).filter(
        lambda s: "/" not in s and "\0" not in s and s not in (".", "..")
    )
)
def test_any_file_name(text: str) -> None:
    name = f"{text}.audit.json"
    if len(name.encode()) > 255:
        return
    with tempfile.TemporaryDirectory(prefix="flrep-fuzz-") as tmp:
        (Path(tmp) / name).write_text(json.dumps(AUDIT))
        loaded = load.load_dir(Path(tmp))
        assert len(loaded.audits) == 1 and loaded.audits[0].name.isprintable()
        check(Path(tmp))
