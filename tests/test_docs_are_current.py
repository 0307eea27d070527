"""The documentation reads as the current state of dtnkit, not as a diary of its making.

- no page names a work round (a session, an issue or a wave by number, a bench prefix made
  of one) or "the issue" as the reason for a design: git keeps the history;
- no heading is a date, a time of day, or an "After ..." / "Before ..." of a change;
- README.md is under 150 lines and links every page of docs/;
- docs/benchmarks.md is under 400 lines, and every table there sits in a section that gives
  the `python -m bench` command that reproduces it and the machine it ran on;
- every relative link between the pages resolves: the file, and its #anchor as GitHub makes
  anchors of headings;
- CHANGELOG.md (Keep a Changelog) has an [Unreleased] section, and its newest release is
  dtnkit's version.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dtnkit

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md", *DOCS]

#: what names a round of work rather than the software: (pattern, what it is)
WORK_ROUNDS = [
    (r"\bsessions? \d+", "a work session by number"),
    (r"\bissues?[- ]\d+", "an internal issue by number"),
    (r"\bthe issue('s)?\b", "the issue as the reason"),
    (r"\bwaves?\b", "a wave of work"),
    (r"\bround \d+\b", "a round of work by number"),
    (r"\b[smlb]\d{2}[a-z]?\b", "a work round's name (s18w, m22w, ...)"),
]
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
DATED_HEADING = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}:\d{{2}}\b|\b({MONTHS})\b"
    r"|^(After|Before)\b"
)
#: a release of CHANGELOG.md as Keep a Changelog writes it: `## [0.2.0] - 2027-01-15`
RELEASE = re.compile(r"^\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}$")
MACHINE = re.compile(r"\b2 (cores|CPUs|vCPUs)\b.*Debian 12|Debian 12.*\b2 (cores|CPUs|vCPUs)\b")
BENCH = re.compile(r"python -m bench [a-z]")


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of *text* outside fenced code blocks, inline code removed."""
    out: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, re.sub(r"`[^`]*`", "", line)))
    return out


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line number, level, title) of every heading outside code blocks."""
    found = []
    for number, line in prose(text):
        m = re.match(r"^(#{1,6}) (.+?)\s*$", line)
        if m:
            found.append((number, len(m.group(1)), m.group(2)))
    return found


def slugs(text: str) -> set[str]:
    """The anchors GitHub makes of the page's headings (a repeated one gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    raw = [line for _n, line in _lines_outside_fences(text) if re.match(r"^#{1,6} ", line)]
    for line in raw:
        title = line.lstrip("#").strip()
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _lines_outside_fences(text: str) -> list[tuple[int, str]]:
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_page_names_a_work_round(page: Path) -> None:
    text = page.read_text()
    bad = [
        f"{rel(page)}:{n}: {what}: {m.group(0)!r}"
        for n, line in enumerate(text.splitlines(), 1)
        for pattern, what in WORK_ROUNDS
        for m in re.finditer(pattern, line, flags=re.IGNORECASE)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_heading_is_a_date_or_a_change(page: Path) -> None:
    bad = [
        f"{rel(page)}:{n}: {title}"
        for n, _level, title in headings(page.read_text())
        if DATED_HEADING.search(title) and not RELEASE.match(title)
    ]
    assert not bad, "\n".join(bad)


def test_the_readme_is_short_and_links_every_page() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150, len(text.splitlines())
    missing = [rel(doc) for doc in DOCS if f"({rel(doc)})" not in text]
    assert not missing, f"pages the README does not link: {missing}"
    # the two commands, and how a site admin installs it, beside the run command
    assert "./dev/run.sh" in text and "./dev/test.sh" in text and "pipx install ." in text


def test_every_benchmark_table_has_its_command_and_machine() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(text.splitlines()) < 400, len(text.splitlines())
    sections: list[list[tuple[int, str]]] = [[]]
    for number, line in [*_lines_outside_fences(text), (0, "# end")]:
        if re.match(r"^#{1,6} ", line):
            sections.append([])
        sections[-1].append((number, line))
    whole = text.splitlines()
    bad = []
    tables = 0
    for section in sections:
        if not any(line.startswith("|") for _n, line in section):
            continue
        tables += 1
        first, last = section[0][0], section[-1][0]
        body = "\n".join(whole[max(first - 1, 0) : last])
        if not BENCH.search(body):
            bad.append(f"docs/benchmarks.md:{first}: a table without its python -m bench command")
        if not MACHINE.search(body):
            bad.append(
                f"docs/benchmarks.md:{first}: a table without the machine it ran on "
                "(2 cores ... Debian 12)"
            )
    assert tables >= 10 and not bad, "\n".join(bad)


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> list[tuple[int, str]]:
    return [(n, m.group(1)) for n, line in prose(page.read_text()) for m in LINK.finditer(line)]


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_resolves(page: Path) -> None:
    bad = []
    for n, target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            bad.append(f"{rel(page)}:{n}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in slugs(dest.read_text()):
            bad.append(f"{rel(page)}:{n}: {target}: no heading makes #{anchor}")
    assert not bad, "\n".join(bad)


def test_the_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    """The check itself: a missing file and a missing anchor are both found."""
    (tmp_path / "a.md").write_text(
        "# A page\n\n## The `x` option\n\n[ok](#the-x-option) [bad](#nope) [gone](b.md)\n"
    )
    page = tmp_path / "a.md"
    found = {t for _n, t in links(page)}
    assert found == {"#the-x-option", "#nope", "b.md"}
    assert "the-x-option" in slugs(page.read_text()) and "nope" not in slugs(page.read_text())


def test_the_changelog_is_versioned_with_the_package() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)
    assert releases[:1] == ["Unreleased"], releases
    assert releases[1:2] == [dtnkit.__version__], releases
    assert "keepachangelog.com" in text
