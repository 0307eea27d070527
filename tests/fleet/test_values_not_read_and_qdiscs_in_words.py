"""`dtnkit fleet report` on real audits (two namespaces and the root namespace of this
machine), read as a person reads it: a value an audit could not read (a host-wide setting
seen from inside a namespace, a ring the veth driver does not report) is "not read", never a
difference between hosts or from the reference host; a qdisc is shown in words as `tc qdisc
show` prints it, never as JSON, in the 80-column table and on the page.  Whatever a document
holds where a qdisc should be, the tables and the page take it."""

from __future__ import annotations

import html.parser
import io
import itertools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import Netns, sh
from tests.fleet.documents import dtnkit, tree_audit

from dtnkit.cli.fleet import people
from dtnkit.cli.output import Printer
from dtnkit.environment import Environment
from dtnkit.fleet import compare, load, page

NS1, NS2, ROOT = "dtn-ns1", "dtn-ns2", "dtn-root"
TBF = ("tbf", "rate", "1gbit", "burst", "64kb", "latency", "10ms")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """DIR with the real audits of two namespaces (the second with a tbf on dkv0) and of
    the root namespace; and the line `tc qdisc show` prints for that tbf."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("needs root, ip and tc to audit namespaces")
    base = tmp_path_factory.mktemp("fleet-not-read")
    d = base / "audits"
    d.mkdir()
    spaces = [Netns(prefix="fnr"), Netns(prefix="fnr")]
    try:
        for ns in spaces:
            ns.create()
        sh("tc", "-n", spaces[1].name, "qdisc", "add", "dev", "dkv0", "root", *TBF)
        tc_line = sh("tc", "-n", spaces[1].name, "qdisc", "show", "dev", "dkv0").stdout
        for name, argv in (
            (NS1, ["--netns", spaces[0].name]),
            (NS2, ["--netns", spaces[1].name]),
            (ROOT, []),
        ):
            code, out, err = dtnkit(base, "tune", "audit", *argv, "--format", "json")
            assert code in (0, 3), err
            (d / f"{name}.audit.json").write_text(out)
        yield d, tc_line
    finally:
        for ns in spaces:
            ns.delete()


def _unread(d: Path) -> dict[str, set[str]]:
    """setting -> the hosts whose audit has it as null; a sysctl as `tune audit` names it,
    an interface's setting by the interface's place in its audit (nic1, nic2, ...)."""
    out: dict[str, set[str]] = {}
    for name in (NS1, NS2, ROOT):
        doc = json.loads((d / f"{name}.audit.json").read_text())
        place = {i["device"]: f"nic{n}" for n, i in enumerate(doc["interfaces"], 1)}
        for f in doc["findings"]:
            if f["current"] is None:
                key = f["key"].removeprefix("sysctl/")
                if f["device"] in place:
                    key = key.replace(f"/{f['device']}/", f"/{place[f['device']]}/", 1)
                out.setdefault(key, set()).add(name)
    return out


def _table(out: str, title: str) -> list[list[str]]:
    """The rows of the table under ``title`` as a person reads them: a row starts on a line
    whose last column (the hosts) has text; the lines under it continue its cells.  The table
    ends at a blank line or at the note under it."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    header = lines[start + 1]
    cols = [header.index(n) for n in header.split()]
    rows: list[list[str]] = []
    for line in lines[start + 2 :]:
        if not line.strip() or re.match(r"\d+ settings? not read", line):
            break
        cells = [line[a:b].strip() for a, b in zip(cols, [*cols[1:], None], strict=True)]
        if cells[-1] or not rows:
            rows.append(cells)
        else:
            rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells, strict=True)]
    return rows


def _settings(rows: list[list[str]]) -> dict[str, list[tuple[str, str]]]:
    """setting -> [(value, hosts)] of a differing table."""
    out: dict[str, list[tuple[str, str]]] = {}
    name = ""
    for setting, value, hosts in rows:
        name = setting or name
        out.setdefault(name, []).append((value, hosts))
    return out


def _tc_options(line: str) -> dict[str, str]:
    return dict(itertools.pairwise(line.split()))


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_the_table_at_80_columns_counts_no_value_not_read(
    site: tuple[Path, str], tmp_path: Path
) -> None:
    d, tc_line = site
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d), "--reference", ROOT)
    assert code in (0, 3), err
    assert max(len(line) for line in out.splitlines()) <= 80, out
    differ = _settings(_table(out, "values that differ between hosts"))
    unread = _unread(d)
    assert unread, "the namespaces' audits read everything: nothing is tested"
    for setting, values in differ.items():
        read = {v for v, _ in values if v != "not read"}
        assert len(read) >= 2, (setting, values)  # a difference needs two values read
        for value, hosts in values:
            if value == "not read":  # named, as such, with the hosts that could not read it
                assert set(hosts.split(", ")) == unread[setting], (setting, hosts)
    # a host-wide sysctl no namespace reads is no difference: only the root read it
    for key in ("net.core.netdev_max_backlog", "net.ipv4.tcp_mem"):
        assert unread.get(key) == {NS1, NS2}
        assert key not in differ
    assert re.search(r"\b\d+ settings not read on some hosts, not compared there", out)
    assert "{" not in out and '"kind"' not in out  # no JSON anywhere
    # the qdisc in words, as tc prints it (the tbf of the second namespace)
    qdisc = dict((hosts, value) for value, hosts in differ["qdisc/nic1/root"])
    tbf = qdisc[NS2]
    assert tbf.startswith("tbf rate ")
    words = tbf.split()
    shown = dict(zip(words[1::2], words[2::2], strict=True))
    assert shown == {k: _tc_options(tc_line)[k] for k in ("rate", "burst", "lat")}, tc_line
    assert qdisc[NS1] == "noqueue"
    # against the reference: nothing one of the two could not read
    ref = _table(out, f"against the reference host {ROOT}")
    assert ref and all("not read" not in " ".join(r) for r in ref), ref
    assert not {r[0] for r in ref if r[0]} & {k for k, h in unread.items() if ROOT not in h}


class _Tables(html.parser.HTMLParser):
    """Every table of the page after each h2 heading, as rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.heading = ""
        self.where: list[str] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.where.append(tag)
        if tag == "h2":
            self.heading = ""
        elif tag == "tr":
            self.tables.setdefault(self.heading, []).append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if self.where:
            self.where.pop()
        if tag in ("td", "th") and self.cell is not None:
            self.tables[self.heading][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.where and self.where[-1] == "h2":
            self.heading += data
        elif self.cell is not None:
            self.cell.append(data)


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_the_page_names_values_not_read_and_shows_qdiscs_in_words(
    site: tuple[Path, str], tmp_path: Path
) -> None:
    d, tc_line = site
    out_dir = tmp_path / "rep"
    code, out, err = dtnkit(
        tmp_path,
        "fleet",
        "report",
        str(d),
        "-o",
        str(out_dir),
        "--reference",
        ROOT,
        "--format",
        "json",
    )
    assert code in (0, 3), err
    doc = json.loads(out)
    parser = _Tables()
    parser.feed((out_dir / "report.html").read_text())
    tables = parser.tables
    unread = _unread(d)
    differ = tables["Values that differ between hosts"]
    assert differ[0] == ["setting", "group", "value", "hosts"]
    by_setting: dict[str, list[tuple[str, str]]] = {}
    for setting, _group, value, hosts in differ[1:]:
        by_setting.setdefault(setting, []).append((value, hosts))
    for setting, values in by_setting.items():
        assert len({v for v, _ in values if v != "not read"}) >= 2, (setting, values)
    qdiscs = dict((h, v) for v, h in by_setting["qdisc/nic1/root"])
    assert qdiscs[NS1] == "noqueue" and qdiscs[NS2].startswith("tbf rate ")
    words = qdiscs[NS2].split()
    assert (
        dict(zip(words[1::2], words[2::2], strict=True)).items() <= _tc_options(tc_line).items()
    ), (qdiscs[NS2], tc_line)
    for rows in tables.values():  # no JSON in any cell of any table
        assert not any(c.startswith(("{", "[")) or '"kind"' in c for r in rows for c in r)
    not_read = {
        r[0].removeprefix("sysctl/"): set(r[2].split(", ")) for r in tables["Values not read"][1:]
    }
    assert not_read == unread
    # the JSON keeps the data: values read, and the hosts that could not read apart
    for x in doc["differing"]:
        assert None not in x["values"].values()
    assert {u["key"].removeprefix("sysctl/") for u in doc["not_read"]} == set(unread)
    against = [x for h in doc["hosts"] for x in h["against_reference"] or []]
    assert against and all(x["value"] is not None or x["only_on"] == "reference" for x in against)
    assert all(x["reference_value"] is not None or x["only_on"] == "host" for x in against)


# ---------------------------------------------------------------- anything as a qdisc

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
qdisc_like = st.fixed_dictionaries(
    {"kind": st.sampled_from(["tbf", "htb", "mq", "fq", "fq_codel", "pfifo", "x"]) | scalars},
    optional={
        "handle": json_values,
        "options": st.dictionaries(
            st.sampled_from(
                [
                    "rate",
                    "burst",
                    "lat",
                    "limit",
                    "default",
                    "target",
                    "maxrate",
                    "flows",
                    "ecn",
                    "bands",
                ]
            )
            | st.text(max_size=8),
            json_values,
            max_size=5,
        ),
        "children": st.lists(json_values, max_size=3),
        "classes": st.lists(json_values, max_size=3),
        "untouched": json_values,
        "maxrate_bps": json_values,
        "mq": json_values,
    },
)
AUDIT = tree_audit("dtn-b")
QDISC = next(i for i, f in enumerate(AUDIT["findings"]) if f["key"].startswith("qdisc/"))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(current=qdisc_like | json_values, recommended=qdisc_like | json_values)
def test_anything_where_a_qdisc_should_be_is_shown_on_one_line(
    current: Any, recommended: Any
) -> None:
    doc = json.loads(json.dumps(AUDIT))
    doc["findings"][QDISC].update(current=current, recommended=recommended, status="differs")
    with tempfile.TemporaryDirectory(prefix="fleet-qdisc-") as tmp:
        (Path(tmp) / "a.audit.json").write_text(json.dumps(doc))
        (Path(tmp) / "b.audit.json").write_text(json.dumps(AUDIT))
        loaded = load.load_dir(Path(tmp))
        if not loaded.audits:
            return  # skipped with its line: the loader's own tests check that
        report = compare.compare(loaded, reference="b")
        out = io.StringIO()
        people(Printer(Environment(stdout=out, stderr=io.StringIO(), terminal_width=80)), report)
        text = out.getvalue()
        assert "\x1b" not in text and max(len(line) for line in text.splitlines()) <= 80
        shown = page.setting_text(doc["findings"][QDISC]["key"], current, 400)
        assert "\n" not in shown and len(shown) <= 400
        assert "<script" not in page.page(report, []).lower()
