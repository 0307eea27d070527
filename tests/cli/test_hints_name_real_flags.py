"""Every hint dtnkit can print names options that exist.

The source is read, not run: every string literal of ``src/dtnkit`` (f-strings with their
values as ``{}``, implicit concatenations joined, as the user reads them).

- A command line in a text (``dtnkit tune apply --dry-run``, ``dtnkit serve --tpc-allow
  {}``): each ``--flag`` and ``-x`` after the command's words, up to where the command ends,
  is an option of that very command (its click parser, hidden options included).
- A next step without a command (``pass --ca-file ...``, ``rerun with -p/--parents``): the
  ``next_step`` of an error, or a text saying ``next:`` or ``rerun with`` (docstrings left
  out): each flag is an option of a command that shows the module's errors (``SHOWN_BY``:
  data, so a new module with such a hint must say whose it is) or of ``dtnkit`` itself
  (``--traceback``).  Another program's command line in a hint (``xrdcp -f``, ``curl -o``,
  ``iperf3 -s``) is that program's (``OTHER_PROGRAMS``).

A hint that a real run prints is checked by running it too (tests/cli/
test_e2e_mover_hints.py, tests/transfer/test_cp_parents.py, tests/transfer/
test_tpc_refused_hint.py); this test covers the ones no run reaches.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from dtnkit.cli.main import cli

SRC = Path(__file__).parents[2] / "src" / "dtnkit"
FLAG = re.compile(r"(?<![\w.}-])--?[a-zA-Z][\w-]*(?:\.[\w-]+)*")
#: another program's command line (up to where it ends): its options are that program's
OTHER_PROGRAMS = re.compile(
    r"\b(xrdcp|curl|iperf3|htpasswd|losetup|gfal-copy|fio|ethtool|"
    r"sysctl|ip|tc|ss|sudo|node_exporter's|openssl|davix-get)\b"
    r"[^`;\n()']*"
)
#: where a command line in a text ends (prose follows, or another program's arguments)
END = re.compile(r"`|;|\n|\(|\)|\]\s|, | or | and | -- |: | to |\. |\.$|'|\"")
#: error classes whose third argument (or next_step=) is the next step the user reads
ERRORS = re.compile(
    r"(Error|BadInput|NeedsRoot|ToolMissing|Locked|FatalHttp|Refused|"
    r"Mismatch|Answer)$"
)

#: module (dotted, a prefix) -> the commands that print its next steps; a bare flag in
#: one of them must be an option of each
_PROBES = ("probe net", "probe disk", "probe e2e", "diagnose", "experiment")
_TUNE = (
    "tune audit",
    "tune apply",
    "tune save",
    "tune diff",
    "tune restore",
    "tune list",
    "tune show",
    "tune delete",
    "tune profiles",
)
_LAB = ("lab up", "lab set", "lab down", "lab status", "lab exec", "lab list")
SHOWN_BY: dict[str, tuple[str, ...]] = {
    "dtnkit.transfer.client": ("cp",),
    "dtnkit.transfer.server": ("serve",),
    "dtnkit.transfer": ("cp", "serve"),
    "dtnkit.cli.cp": ("cp",),
    "dtnkit.cli.serve": ("serve",),
    "dtnkit.cli.main": ("cp",),  # `-h`, on every command
    "dtnkit.measure.tools.command": ("probe e2e", "diagnose", "experiment"),
    "dtnkit.measure.tools.dtnkit_cp": ("probe e2e", "diagnose", "experiment"),
    "dtnkit.measure.tools.timed": ("probe e2e", "diagnose", "experiment"),
    "dtnkit.measure.tools.fio": ("probe disk", "diagnose", "experiment"),
    "dtnkit.measure.tools.iperf3": ("probe net", "diagnose", "experiment"),
    "dtnkit.measure.probes.net": ("probe net", "diagnose", "experiment"),
    "dtnkit.measure.probes.disk": ("probe disk", "diagnose", "experiment"),
    "dtnkit.measure.probes.e2e": ("probe e2e", "diagnose", "experiment"),
    "dtnkit.measure": _PROBES,
    "dtnkit.cli.measure": _PROBES,
    "dtnkit.diagnose.checklist": ("checklist",),
    "dtnkit.diagnose.campaign": (
        "fleet campaign gate",
        "fleet campaign judge",
        "fleet campaign server start",
        "fleet campaign server stop",
    ),
    "dtnkit.diagnose": ("diagnose", "experiment"),
    "dtnkit.cli.checklist": ("checklist",),
    "dtnkit.host": ("tune audit", "tune apply", "checklist", "metrics"),
    "dtnkit.cli.lab": _LAB,
    "dtnkit.lab": _LAB,
    "dtnkit.cli.tune": _TUNE,
    "dtnkit.tune": _TUNE,
    "dtnkit.cli.sweep": ("sweep run", "sweep analyze", "sweep list", "sweep report"),
    "dtnkit.cli.sweep_analyze": ("sweep analyze", "sweep report"),
    "dtnkit.sweep": ("sweep run", "sweep analyze", "sweep report"),
    "dtnkit.monitor": ("exporter", "metrics"),
    "dtnkit.cli.monitor": ("exporter", "metrics"),
    "dtnkit.db": ("results list", "results push"),
    "dtnkit.cli.fleet": ("fleet report",),
    "dtnkit.fleet": ("fleet report",),
    "dtnkit.htmlpage": ("sweep report", "fleet report"),
}


@dataclass(frozen=True)
class Text:
    module: str
    line: int
    text: str
    next_step: bool  # an error's next step, or a text that says next:/rerun with

    @property
    def where(self) -> str:
        return f"{self.module.replace('.', '/')}.py:{self.line}"


def _joined(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
            for v in node.values
        )
    return None


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def texts() -> Iterator[Text]:
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text(), str(path))
        steps: set[int] = set()  # ids of the nodes that are an error's next step
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ERRORS.search(_call_name(node)):
                if len(node.args) >= 3:
                    steps.add(id(node.args[2]))
                steps.update(id(k.value) for k in node.keywords if k.arg == "next_step")
        seen: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):  # its parts are not texts of their own
                seen.update(id(v) for v in node.values)
            if id(node) in seen:
                continue
            if isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            ) and ast.get_docstring(node, clean=False):
                seen.add(id(node.body[0].value))  # type: ignore[attr-defined]
                continue
            text = _joined(node)
            if text is None:
                continue
            hinted = re.search(r"\b[Nn]ext:|\brerun with\b", text) is not None
            yield Text(module, getattr(node, "lineno", 0), text, id(node) in steps or hinted)


def command(words: list[str]) -> click.Command | None:
    cmd: click.Command = cli
    ctx = click.Context(cli)
    for word in words:
        if not isinstance(cmd, click.Group):
            return None
        sub = cmd.get_command(ctx, word)
        if sub is None:
            return None
        cmd = sub
    return cmd


def options(cmd: click.Command) -> set[str]:
    """Its options, hidden ones too, and those of ``dtnkit`` itself (--traceback)."""
    return {"--help", "-h"} | {
        o
        for c in (cmd, cli)
        for p in c.params
        for o in [*p.opts, *p.secondary_opts]
        if o.startswith("-")
    }


def command_lines(text: str) -> Iterator[tuple[str, set[str], tuple[int, int]]]:
    """(the command's words, the flags given it, where in *text*) of each `dtnkit WORDS ...`."""
    for m in re.finditer(r"\bdtnkit((?: [a-z][a-z-]*)+)", text):
        words = m.group(1).split()
        cmd = None
        while words:
            cmd = command(words)
            if cmd is not None:
                break
            words.pop()
        if cmd is None or text[m.start() + len("dtnkit " + " ".join(words)) :][:1] == ":":
            continue  # "dtnkit on this host", "dtnkit cp: ..." (a message's prefix)
        start = m.start() + len("dtnkit " + " ".join(words))
        end = END.search(text, start)
        span = text[start : end.start() if end else len(text)]
        yield " ".join(words), set(FLAG.findall(span)), (m.start(), start + len(span))


def shown_by(module: str) -> tuple[str, ...] | None:
    best = max(
        (k for k in SHOWN_BY if module == k or module.startswith(k + ".")), key=len, default=None
    )
    return SHOWN_BY[best] if best is not None else None


def problems() -> list[str]:
    bad: list[str] = []
    for t in texts():
        rest = t.text
        for words, flags, (a, b) in command_lines(t.text):
            cmd = command(words.split())
            assert cmd is not None
            bad += [
                f"{t.where}: `dtnkit {words}` has no {flag} (in {t.text[a:b]!r})"
                for flag in sorted(flags - options(cmd))
            ]
            rest = rest[:a] + " " * (b - a) + rest[b:]
        if not t.next_step:
            continue
        rest = OTHER_PROGRAMS.sub(" ", rest)
        rest = re.sub(r"--command '[^']*'", "--command", rest)
        flags = set(FLAG.findall(rest))
        if not flags:
            continue
        owners = shown_by(t.module)
        if owners is None:
            bad.append(
                f"{t.where}: a next step naming {sorted(flags)}: say in SHOWN_BY "
                f"which commands print {t.module}'s hints"
            )
            continue
        known: set[str] = set()
        for owner in owners:
            cmd = command(owner.split())
            assert cmd is not None, owner
            known |= options(cmd)
        bad += [
            f"{t.where}: no command of {', '.join(owners)} has {flag} (next step {t.text!r})"
            for flag in sorted(flags - known)
        ]
    return bad


def test_every_hint_names_options_its_command_has() -> None:
    bad = problems()
    assert not bad, "hints naming options that do not exist:\n" + "\n".join(bad)


def test_the_walk_finds_the_hints_it_checks() -> None:
    """The check itself: it reads command lines and next steps where they are."""
    found = {(t.module, t.text) for t in texts() if t.next_step}
    assert any("rerun with -p/--parents" in text for _m, text in found)
    lines = [words for t in texts() for words, _f, _s in command_lines(t.text)]
    assert {"tune apply", "serve", "cp", "sweep analyze"} <= set(lines)
    assert shown_by("dtnkit.transfer.client.session") == ("cp",)
    assert shown_by("dtnkit.transferx") is None


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("next: `dtnkit tune apply --dry-run` shows", ("tune apply", {"--dry-run"})),
        ("dtnkit lab down --all [--prefix P]", ("lab down", {"--all", "--prefix"})),
        ("dtnkit serve --tpc-allow {} (or a CIDR range)", ("serve", {"--tpc-allow"})),
        ("dtnkit lab exec demo src -- iperf3 -c 10.252.0.2", ("lab exec", set())),
        ("dtnkit cp -p/--parents x", ("cp", {"-p", "--parents"})),
    ],
)
def test_a_command_line_is_read_up_to_its_end(text: str, want: tuple[str, set[str]]) -> None:
    ((words, flags, _span),) = command_lines(text)
    assert (words, flags) == want


def test_a_made_up_flag_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A hint naming an option its command lacks fails the check (a file of this test's)."""
    pkg = tmp_path / "dtnkit" / "transfer" / "client"
    pkg.mkdir(parents=True)
    (pkg / "fake.py").write_text(
        "from dtnkit.errors import BadInput\n"
        "def f():\n"
        "    raise BadInput('x', 'y', 'pass --no-such-flag, or run `dtnkit serve "
        "--no-such-either`')\n"
    )
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", tmp_path / "dtnkit")
    bad = problems()
    assert any("no command of cp has --no-such-flag" in b for b in bad), bad
    assert any("`dtnkit serve` has no --no-such-either" in b for b in bad), bad
