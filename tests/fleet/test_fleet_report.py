"""`dtnkit fleet report DIR` on real audits (of three namespaces, one changed, and of the
captured host trees), a campaign and an experiment: the table at 80 columns, the JSON, the
HTML page and its figures (rendered by headless Chromium), and every kind of hostile file
skipped with one line naming it."""

from __future__ import annotations

import html.parser
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Netns
from tests.fleet.documents import (
    campaign,
    compliant,
    dtnkit,
    experiment,
    tree_audit,
    write,
)
from tests.support.chromium import chromium, console_lines, probed_figures, with_probe

from dtnkit.errors import ExitStatus
from dtnkit.fleet.load import MAX_FILE_BYTES

CC = "sysctl/net.ipv4.tcp_congestion_control"
PROBING = "sysctl/net.ipv4.tcp_mtu_probing"


# ---------------------------------------------------------------- three real hosts


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """DIR with the real audits of three namespaces (prefix flrep): the second with reno as
    its congestion control, the third with MTU probing on; and a campaign on them."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and ip to audit namespaces")
    base = tmp_path_factory.mktemp("flrep-site")
    spaces = [Netns(prefix="flrep") for _ in range(3)]
    try:
        for ns in spaces:
            ns.create()
        spaces[1].set_sysctl("net.ipv4.tcp_congestion_control", "reno")
        spaces[2].set_sysctl("net.ipv4.tcp_mtu_probing", "1")
        d = base / "audits"
        d.mkdir()
        names = []
        for i, ns in enumerate(spaces, 1):
            code, out, err = dtnkit(base, "tune", "audit", "--netns", ns.name, "--format", "json")
            assert code in (0, 3), err
            names.append(f"dtn{i}.example.org")
            (d / f"{names[-1]}.audit.json").write_text(out)
        write(d, "campaign.json", campaign(*names))
        yield d, names
    finally:
        for ns in spaces:
            ns.delete()


@pytest.mark.needs_root
def test_three_namespaces_at_80_columns(site: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, names = site
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d), "--reference", names[0])
    assert code == ExitStatus.DRIFT, err  # fresh namespaces do not follow the profile
    assert err == ""
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    assert lines[0] == f"fleet report of {d}"
    assert lines[1].startswith("3 hosts against profile dtn: 0 compliant, campaign done")
    differ = out[out.index("values that differ between hosts") : out.index("against the profile")]
    assert "net.ipv4.tcp_congestion_control" in differ and "reno" in differ
    assert "net.ipv4.tcp_mtu_probing" in differ
    ref = out[out.index(f"against the reference host {names[0]}") :]
    assert names[1] in ref and "reno" in ref
    assert "tuning verdicts" in out and "gated" in out


@pytest.mark.needs_root
def test_three_namespaces_as_json(site: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, names = site
    code, out, _ = dtnkit(
        tmp_path, "fleet", "report", str(d), "--reference", names[0], "--format", "json"
    )
    doc = json.loads(out)
    assert code == doc["exit_status"] == ExitStatus.DRIFT
    assert doc["schema"] == "dtnkit.fleet-report/1" and doc["profile"] == "dtn"
    assert [h["host"] for h in doc["hosts"]] == names
    assert all(
        h["audited_host"].endswith(")") and "netns flrep" in h["audited_host"] for h in doc["hosts"]
    )
    differing = {x["key"]: x["values"] for x in doc["differing"]}
    assert differing[CC][names[1]] == "reno" and differing[CC][names[0]] != "reno"
    assert differing[PROBING] == {names[0]: 0, names[1]: 0, names[2]: 1}
    one, two, three = doc["hosts"]
    assert one["against_reference"] == [] or all(x["key"] != CC for x in one["against_reference"])
    assert {x["key"]: (x["value"], x["reference_value"]) for x in two["against_reference"]}[CC] == (
        "reno",
        differing[CC][names[0]],
    )
    assert [x["key"] for x in three["against_reference"] if x["key"].startswith("sysctl/")] == [
        PROBING
    ]
    # congestion differs from the profile on the reno host only (the profile wants bbr)
    assert two["groups"]["congestion"]["differs"] == one["groups"]["congestion"]["differs"] + 1
    assert three["groups"]["congestion"]["differs"] == one["groups"]["congestion"]["differs"] - 1
    # an interface is compared by its place in the audit (nicN), not by its name
    assert all("/dkv" not in x["key"] for x in doc["differing"])
    mtu = next(
        x
        for x in one["against_profile"]
        if x["key"].startswith("link/") and x["key"].endswith("/mtu")
    )
    assert mtu["compared_as"] == "link/nic1/mtu" != mtu["key"]
    assert doc["campaign"]["pairs"][0]["results"][2]["verdict"] == "gated"


# ---------------------------------------------------------------- captured trees


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Two real audits of captured trees (dtn-a, dtn-b), an experiment and a campaign."""
    d = tmp_path / "fleet"
    d.mkdir()
    write(d, "dtn-a.audit.json", tree_audit("dtn-a"))
    write(d, "dtn-b.audit.json", tree_audit("dtn-b"))
    write(d, "campaign.json", campaign("dtn-a", "dtn-b", "dtn-b"))
    write(d, "ab.experiment.json", experiment("dtn-a", "dtn-b"))
    return d


def test_a_compliant_fleet_exits_0(tmp_path: Path) -> None:
    d = tmp_path / "ok"
    d.mkdir()
    doc = compliant(tree_audit("dtn-b"))
    write(d, "one.audit.json", doc)
    write(d, "two.audit.json", doc)
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d), "--reference", "one")
    assert (code, err) == (0, "")
    assert "2 compliant" in out and "every host has the same values" in out
    assert "no host differs from the profile" in out
    assert "every host has the values of the reference host one" in out


def test_page_and_figures_written_with_o(fleet: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "rep"
    code, out, err = dtnkit(
        tmp_path, "fleet", "report", str(fleet), "-o", str(out_dir), "--format", "json"
    )
    assert code == ExitStatus.DRIFT, err
    doc = json.loads(out)
    assert doc["written"]["figures"] == ["compliance", "differences", "verdicts"]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(doc["written"]["files"])
    assert json.loads((out_dir / "fleet.json").read_text())["hosts"] == doc["hosts"]
    page = (out_dir / "report.html").read_text()
    for name in ("dtn-a", "dtn-b", "experiment ab", "dtn-a -&gt; dtn-b", "gated"):
        assert name in page
    # the figures are embedded: the page alone is the report
    assert page.count("src='data:image/png;base64,") == 3


def test_html_alone_and_the_flags_refused(fleet: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(fleet), "--html", str(page))
    assert code == ExitStatus.DRIFT and f"open {page}" in out
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".html") == ["page.html"]
    code, _, err = dtnkit(
        tmp_path, "fleet", "report", str(fleet), "--html", str(page), "-o", str(tmp_path / "o")
    )
    assert code == ExitStatus.USAGE and err.count("\n") == 1 and "-o and --html" in err
    for args, says in (
        (["--reference", "nope"], "no host 'nope'"),
        (["--profile", "nope"], "no audit against profile 'nope'"),
    ):
        code, out, err = dtnkit(tmp_path, "fleet", "report", str(fleet), *args)
        assert code == ExitStatus.BAD_INPUT and out == "", err
        assert err.count("\n") == 1 and says in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_reference_by_the_audited_host_name(fleet: Path, tmp_path: Path) -> None:
    code, out, _ = dtnkit(
        tmp_path, "fleet", "report", str(fleet), "--reference", "tree:dtn-a", "--format", "json"
    )
    assert (code, json.loads(out)["reference"]) == (ExitStatus.DRIFT, "dtn-a")


def test_audits_against_another_profile_are_skipped_or_chosen(fleet: Path, tmp_path: Path) -> None:
    other = tree_audit("dtn-a")
    other["profile"] = "measurement"
    write(fleet, "odd.audit.json", other)
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(fleet), "--format", "json")
    assert err == (
        "dtnkit: warning: skipped odd.audit.json: audited against profile "
        "measurement, not dtn (--profile measurement reports it)\n"
    )
    assert [h["host"] for h in json.loads(out)["hosts"]] == ["dtn-a", "dtn-b"]
    code, out, err = dtnkit(
        tmp_path, "fleet", "report", str(fleet), "--profile", "measurement", "--format", "json"
    )
    assert [h["host"] for h in json.loads(out)["hosts"]] == ["odd"] and err.count("\n") == 2
    assert code == ExitStatus.DRIFT


def test_a_doc_whose_flag_disagrees_with_its_findings(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    doc = tree_audit("dtn-b")
    doc["compliant"] = True  # the findings differ: they win
    write(d, "liar.audit.json", doc)
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d))
    assert code == ExitStatus.DRIFT and "liar" in out
    assert "dtnkit: note: liar.audit.json says compliant is true, but its findings say false" in err


# ---------------------------------------------------------------- hostile files


def _good() -> bytes:
    return json.dumps(tree_audit("dtn-b")).encode()


def _mutate(change: Any) -> bytes:
    doc = tree_audit("dtn-b")
    change(doc)
    return json.dumps(doc).encode()


HOSTILE: dict[str, tuple[str, bytes, str]] = {
    "malformed": ("m.audit.json", b"{not json", "it is corrupt: invalid JSON"),
    "truncated": ("t.audit.json", _good()[:5000], "it is corrupt: invalid JSON"),
    "deep": ("d.audit.json", b"[" * 200_000 + b"]" * 200_000, "nested deeper than 32"),
    "not UTF-8": ("u.audit.json", b'{"schema": "\xff"}', "not UTF-8 text: byte 0xff"),
    "NaN": (
        "n.audit.json",
        _good().replace(b'"rtt_ms": 100.0', b'"rtt_ms": NaN'),
        "NaN is not a number",
    ),
    "huge number": (
        "h.audit.json",
        _good().replace(b'"rtt_ms": 100.0', b'"rtt_ms": 1e999'),
        "1e999 is out of range",
    ),
    "key twice": (
        "k.audit.json",
        b'{"schema": "dtnkit.audit/1", "schema": "x"}',
        "the key 'schema' is given twice",
    ),
    "empty": ("e.audit.json", b"", "it is empty"),
    "wrong schema": (
        "s.audit.json",
        _mutate(lambda d: d.update(schema="dtnkit.snapshot/1")),
        "schema is 'dtnkit.snapshot/1', not 'dtnkit.audit/2'",
    ),
    "not an object": ("l.audit.json", b"[1, 2]", "the document is a list, not an object"),
    "bad status": (
        "b.audit.json",
        _mutate(lambda d: d["findings"][3].update(status="fine")),
        "findings[3].status is 'fine', not one of ok, differs",
    ),
    "findings missing": (
        "f.audit.json",
        _mutate(lambda d: d.pop("findings")),
        "findings is missing",
    ),
    "error report": (
        "x.audit.json",
        b'{"error": {"what": "needs root", "why": "", "next": ""}}',
        "it is an error report, not a result: the command failed there (needs root)",
    ),
    "campaign verdict": (
        "campaign.json",
        json.dumps(
            {
                **campaign("a", "b", "c"),
                "pairs": [
                    {
                        "client": "a",
                        "server": "b",
                        "results": [{"group": "buffers", "verdict": "great"}],
                    }
                ],
            }
        ).encode(),
        "pairs[0].results[0].verdict is 'great', not one of helps",
    ),
    "experiment ratio": (
        "q.experiment.json",
        json.dumps(
            {**experiment("a", "b"), "groups": [{"group": "g", "verdict": "helps", "ratio": "big"}]}
        ).encode(),
        "groups[0].ratio is a string 'big', not a finite number or null",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_file_is_skipped_with_one_line(case: str, tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.audit.json").write_bytes(_good())
    name, data, says = HOSTILE[case]
    (d / name).write_bytes(data)
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d), "--format", "json")
    assert code == ExitStatus.DRIFT, err  # the good host is reported
    assert err.startswith(f"dtnkit: warning: skipped {name}: ") and err.count("\n") == 1, err
    assert says in err
    doc = json.loads(out)
    assert [h["host"] for h in doc["hosts"]] == ["good"]
    assert doc["skipped"] == [{"file": name, "why": err.split(": ", 3)[3].rstrip("\n")}]


def test_files_that_are_not_plain_files(tmp_path: Path) -> None:
    """A symlink to a (valid) audit outside DIR, a FIFO (would block a reader), a directory
    and a file past the size cap: each skipped, none read."""
    outside = tmp_path / "secret.json"
    outside.write_bytes(_good())
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.audit.json").write_bytes(_good())
    (d / "link.audit.json").symlink_to(outside)
    os.mkfifo(d / "fifo.audit.json")
    (d / "dir.audit.json").mkdir()
    with open(d / "big.audit.json", "wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_FILE_BYTES + 1)
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d), "--format", "json")
    assert code == ExitStatus.DRIFT
    why = {s["file"]: s["why"] for s in json.loads(out)["skipped"]}
    assert why == {
        "big.audit.json": f"it is too large: {MAX_FILE_BYTES + 1} bytes, at most {MAX_FILE_BYTES}",
        "dir.audit.json": "it is not a regular file",
        "fifo.audit.json": "it is not a regular file",
        "link.audit.json": "it is a symbolic link: not followed (copy the file itself into "
        "the directory)",
    }
    assert err.count("\n") == 4


def test_odd_file_names(tmp_path: Path) -> None:
    """Control characters and undecodable bytes in a name are shown as \\xNN, on one line."""
    d = tmp_path / "in"
    d.mkdir()
    raw = os.fsencode(str(d)) + b"/caf\xe9 \xff.audit.json"
    with open(raw, "wb") as fh:
        fh.write(_good())
    (d / "we\nird\x1b[31m.audit.json").write_bytes(b"{")
    (d / "sp ace \u202e.audit.json").write_bytes(_good())
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d), "--format", "json")
    assert code == ExitStatus.DRIFT
    assert err == (
        "dtnkit: warning: skipped we\\x0aird\\x1b[31m.audit.json: it is corrupt: "
        "invalid JSON: Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1)\n"
    )
    assert [h["host"] for h in json.loads(out)["hosts"]] == ["caf\\xe9 \\xff", "sp ace \\u202e"]
    code, out, _ = dtnkit(tmp_path, "fleet", "report", str(d))
    assert "\x1b" not in out and "\u202e" not in out and "caf\\xe9 \\xff" in out


def test_nothing_usable_is_one_error(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.audit.json").write_bytes(b"nope")
    (d / "notes.txt").write_text("hello")
    code, out, err = dtnkit(tmp_path, "fleet", "report", str(d))
    assert code == ExitStatus.BAD_INPUT and out == ""
    assert err.splitlines() == [
        "dtnkit: warning: skipped a.audit.json: it is corrupt: invalid JSON: Expecting value: "
        "line 1 column 1 (char 0)",
        f"dtnkit: error: nothing to report in {d}: 1 file skipped, none usable. Next: give "
        "the directory the site audit wrote (DIR/HOST.audit.json)",
    ]
    for where in (tmp_path / "missing", d / "notes.txt", tmp_path / "empty"):
        if where.name == "empty":
            where.mkdir()
        code, out, err = dtnkit(tmp_path, "fleet", "report", str(where), "--format", "json")
        assert code == ExitStatus.BAD_INPUT and err.count("\n") == 1, err
        assert "Traceback" not in err and json.loads(out)["error"]["exit_status"] == 9


# ---------------------------------------------------------------- the page is inert


class Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


EVIL = "<script>alert(1)</script>"


def test_values_from_the_documents_are_escaped(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    doc = tree_audit("dtn-b")
    doc["host"] = EVIL
    doc["findings"][4]["current"] = "</td></tr></table>" + EVIL
    doc["findings"][4]["why"] = "<img src=x onerror=alert(2)>"
    write(d, "<img src=x onerror=alert(3)>.audit.json", doc)
    write(d, "plain.audit.json", tree_audit("dtn-b"))
    write(d, "<b>x.experiment.json", experiment(EVIL, "plain"))
    write(d, "campaign.json", campaign(EVIL, "plain", "<i>c"))
    page = tmp_path / "p.html"
    code, _, err = dtnkit(
        tmp_path, "fleet", "report", str(d), "--html", str(page), "--reference", "plain"
    )
    assert code == ExitStatus.DRIFT, err
    text = page.read_text()
    parser = Tags()
    parser.feed(text)
    tags = {t for t, _ in parser.tags}
    assert tags <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "h3",
        "h4",
        "p",
        "code",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "figure",
        "img",
        "figcaption",
    }, tags
    imgs = [a for t, a in parser.tags if t == "img"]
    assert len(imgs) == 3 and all(
        str(a["src"]).startswith("data:image/png;base64,")
        and set(a) == {"class", "src", "alt", "width"}
        for a in imgs
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=alert(3)&gt;" in text


@pytest.mark.needs_chromium
def test_the_page_renders_in_chromium_with_every_figure(fleet: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "rep"
    code, out, err = dtnkit(
        tmp_path,
        "fleet",
        "report",
        str(fleet),
        "-o",
        str(out_dir),
        "--reference",
        "dtn-a",
        "--format",
        "json",
    )
    assert code == ExitStatus.DRIFT, err
    page = out_dir / "report.html"
    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, page, f"--screenshot={shot}", height=2000)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc) == []
    proc = chromium(tmp_path, with_probe(page, tmp_path / "probe.html"), "--dump-dom", height=2000)
    figs = probed_figures(proc)
    assert figs is not None, proc.stderr[-2000:]
    assert console_lines(proc) == []
    assert len(figs) == len(json.loads(out)["written"]["figures"]) == 3
    from matplotlib.image import imread

    image = imread(str(shot))
    assert image.shape[:2] == (2000, 1000)
    for complete, nat_w, nat_h, left, top, width, height in figs:
        assert complete == 1 and nat_w >= 400 and nat_h >= 150
        assert top + height <= 2000, "the window is too short for the page"
        region = image[top : top + height, left : left + width, :3]
        dark = (region.sum(axis=2) < 2.4).mean()  # a share of non-white pixels
        assert 0.01 < dark < 0.95, (top, dark)


def test_markup_controls_and_missing_glyphs_in_names(tmp_path: Path) -> None:
    """rich markup, a terminal escape and characters the figures' font lacks, in a host
    name, a group and a campaign's pair: shown as written (escaped), no warning printed."""
    d = tmp_path / "in"
    d.mkdir()
    doc = tree_audit("dtn-b")
    doc["findings"][4]["group"] = "[red]grp\x1b[2J"
    doc["findings"][4]["current"] = "[blink]1 2 3"
    write(d, "[bold]host.audit.json", doc)
    write(d, "plain.audit.json", tree_audit("dtn-b"))
    write(d, "campaign.json", campaign("\u4e2d\u6587\U0001f600", "[bold]host", "plain"))
    code, out, err = dtnkit(
        tmp_path,
        "fleet",
        "report",
        str(d),
        "--reference",
        "[bold]host",
        "-o",
        str(tmp_path / "o"),
        columns=200,
    )
    assert code == ExitStatus.DRIFT and err == "", err
    assert "\x1b" not in out and "[bold]host" in out and "[red]grp\\x1b[2J 1" in out
    assert "against the reference host [bold]host" in out and "[blink]1 2 3" in out
