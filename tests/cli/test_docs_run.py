"""Docs that run: every ``dtnkit`` command in the fenced ``console``/``sh``/``bash`` blocks of
README.md and docs/*.md.

Two checks, so a command that stops working or a documented flag that does not exist fails CI:

- ``test_documented_command_parses``: every command line (run or skipped) is parsed by the real
  click command, in-process and without running it: unknown flags, wrong values of typed
  options and missing arguments fail here, with the doc's file:line.
- ``test_documented_block_runs``: every block is run as written, in order, as real ``dtnkit``
  processes, except the statements of ``SKIP`` (one table, a reason each).  What cannot be
  literal on a test machine is substituted, and every substitution is declared below
  (``PLACEHOLDERS``, ``SUBSTITUTIONS``, ``SHRINK``, ``ADDED``; ``World`` holds what they
  point to): the state dir, results store and lab state are temporary; the host a ``tune``
  command reads is a namespace of the test; lab path names get this test's prefix; each
  host:port of a URL is a temporary ``dtnkit serve``; durations and sizes are tiny, except
  for ``PARTIAL`` commands, run as written until their work starts.  Each command must exit
  with a status the docs give for it (``EXPECTED``); a failure names the doc's file:line, the
  command as written and as run, the exit and stderr's last line.
- ``test_every_flag_in_the_docs_inline_code_exists``: a ``--flag`` in inline code is an option
  of some dtnkit command, or another tool's listed in ``OTHER_FLAGS``.
- ``test_documented_lines_outside_console_blocks_parse``: a ``dtnkit`` line shown in another
  fence (```text) or an indented block is not run, but it parses.

The blocks run in parallel (each in its own lab path, namespace, servers and directories), so
the whole check takes about as long as its slowest block; ``S18D_TIMES=1`` prints each block's
seconds on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest
from tests.conftest import Netns
from tests.support.xrootd import (
    XROOTD_USER,
    Pki,
    Xrootd,
    make_pki,
    missing,
    missing_xrootd,
    running_xrootd,
)

from dtnkit.cli.main import cli, main
from dtnkit.environment import Environment
from dtnkit.errors import DtnkitError

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGS = ("console", "sh", "bash", "shell")
BIN = Path(sys.executable).parent
DTNKIT = str(BIN / "dtnkit")
PREFIX = "docs"  # lab paths dkl-docs*, namespaces docs*
TOKENS = {"TOKEN": "docs-token-1f3a", "TOKEN_A": "docs-token-a9e2", "TOKEN_B": "docs-token-b07c"}


def _no_bonding() -> bool:
    """This kernel cannot make a bond (no bonding driver: e.g. a Firecracker VM's kernel)."""
    name = f"{PREFIX}{secrets.token_hex(4)}"
    try:
        subprocess.run(["ip", "netns", "add", name], capture_output=True, check=True)
        return (
            subprocess.run(
                ["ip", "-n", name, "link", "add", "bond0", "type", "bond"],
                capture_output=True,
                check=False,
            ).returncode
            != 0
        )
    except (OSError, subprocess.CalledProcessError):
        return True
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def _no_xrootd() -> bool:
    return bool(missing_xrootd() or missing("xrdcp"))


@dataclass(frozen=True)
class Skip:
    reason: str
    when: Callable[[], bool] | None = None  # skipped only when this says so (else: always)


# --------------------------------------------------------------------------------------------
# What is not run here, and why: (file, the statement as written without its comment) -> reason.
# Each entry must still be in the docs (test_the_docs_have_blocks_and_the_skip_table_is_current),
# and is still parsed.
_FLEET = (
    "needs an inventory of SSH hosts: tests/fleet/test_playbooks_over_ssh.py runs the "
    "playbooks over SSH against four hosts in namespaces"
)
SKIP: dict[tuple[str, str], str | Skip] = {
    ("docs/tune.md", "dtnkit tune audit --iface bond0"): Skip(
        "needs the bonding driver for a bond0 in the test's namespace, and this kernel has none",
        _no_bonding,
    ),
    (
        "docs/tune.md",
        "dtnkit tune apply --persist",
    ): "writes the real host's /etc/sysctl.d and a udev rule (refused in a namespace, exit 9)",
    (
        "docs/measure.md",
        "dtnkit probe e2e /data/f root://peer//data/f --command 'xrdcp -f {src} {dst}'",
    ): Skip("needs XRootD (a temporary one stands for root://peer) and xrdcp", _no_xrootd),
    (
        "docs/measure.md",
        "dtnkit probe net --peer 192.0.2.10 --cc bbr --fq-rate 5G --reverse",
    ): "needs another site running iperf3 -s at 192.0.2.10 (a documentation address)",
    (
        "docs/transfer.md",
        "sudo .venv/bin/pytest tests/interop -q",
    ): "the interop test suite itself: it runs in the same CI run",
    # the example grid's run metro-1 takes 1.5 hours (below); test_analyze_a_real_run.py and the
    # README's tour run sweep analyze and report on a small grid
    (
        "docs/sweep.md",
        "dtnkit sweep analyze metro-1",
    ): "needs a stored run metro-1: test_analyze_a_real_run.py analyses one",
    (
        "docs/sweep.md",
        "dtnkit sweep analyze metro-1 --target 900mbit --baseline dtn --save-streams default",
    ): "needs a stored run metro-1 with a profile dtn: test_analyze_command.py runs these flags",
    (
        "docs/sweep.md",
        "dtnkit sweep report metro-1 -o sweep-report",
    ): "needs a stored run metro-1: test_analyze_a_real_run.py reports on one",
    (
        "docs/sweep.md",
        "dtnkit sweep report metro-1 -o sweep-report --point 3f9a0c",
    ): "needs a stored run metro-1 with that point: test_sweep_report.py runs --point",
    (
        "docs/sweep.md",
        "dtnkit sweep run docs/examples/sweep-grid.toml --name metro-1",
    ): "the example grid: 168 points of 30 s, about 1.5 hours (the tiny grid above runs)",
    (
        "docs/sweep.md",
        "dtnkit sweep run docs/examples/sweep-grid.toml --name metro-1 --resume",
    ): "resumes the 1.5-hour example grid (tests/sweep/test_run.py tests --resume)",
    # the README's fleet tour: tests/fleet/test_playbooks_over_ssh.py runs the site audit, report
    # and rollback lines as written against four SSH hosts in namespaces, and the campaign
    # with the same variables
    (
        "README.md",
        "ansible-playbook -i inventory.yml dtn.dtnkit.site_audit -e dtnkit_out_dir=$PWD/site",
    ): _FLEET,
    (
        "README.md",
        "ansible-playbook -i inventory.yml dtn.dtnkit.campaign --check --diff -e "
        'dtnkit_out_dir=$PWD/site -e \'{"dtnkit_groups": ["buffers", '
        '"congestion"]}\'',
    ): _FLEET,
    (
        "README.md",
        "ansible-playbook -i inventory.yml dtn.dtnkit.campaign -e "
        'dtnkit_out_dir=$PWD/site -e \'{"dtnkit_groups": ["buffers", '
        '"congestion"]}\'',
    ): _FLEET,
    (
        "README.md",
        "dtnkit fleet report site/ -o site/report",
    ): "reads the site audit the playbook above writes: tests/fleet/test_playbooks_over_ssh.py "
    "runs both as written",
    ("README.md", "ansible-playbook -i inventory.yml dtn.dtnkit.rollback"): _FLEET,
}


def _fio_started(world: World) -> bool:
    """The disk probe has checked its options and its directory: its fio file is there."""
    from dtnkit.measure.tools.fio import PROBE_FILE

    return (world.tmp / "data" / PROBE_FILE).exists()


# Commands that would take too long whole: run as written (the SHRINK substitutions left out)
# until they have started their work, then interrupted (exit 130), so a size or option they
# refuse still fails.  command words -> (why, the sign that the work started).
PARTIAL: dict[tuple[str, ...], tuple[str, Callable[[World], bool]]] = {
    ("probe", "disk"): ("fio of up to 2 GiB, written then read", _fio_started),
}


def partial(text: str) -> tuple[str, Callable[[World], bool]] | None:
    """The PARTIAL entry of a statement (by its command words), if any."""
    for words, entry in PARTIAL.items():
        if text.startswith(" ".join(("dtnkit", *words)) + " "):
            return entry
    return None


# Text substitutions, applied to every statement before it runs (and, for the placeholders,
# before it is parsed): (pattern, replacement or a function of the block's world, why).
Sub = tuple[str, "str | Callable[[World], str]", str]
PLACEHOLDERS: list[tuple[str, str, str]] = [
    (r"\[(--[^\[\]]*?)\]", r"\1", "a synopsis: [--opt ...] runs with the option"),
    (r"\[(--[^\[\]]*?)\]", r"\1", "a synopsis: nested [...]"),
    (r"(?<=--command )\.\.\.", "'cp {src} {dst}'", "a synopsis: --command ..."),
    (r"(?<=--e2e )SRC DST\b", "/data/f /scratch/f", "SRC DST of diagnose: local files"),
    (r"\bSRC DST\b", "https://dtn1:8443/data/f /scratch/f", "SRC DST: a copy of the docs"),
]
SUBSTITUTIONS: list[Sub] = [
    (r"\b(demo|nicfull)\b", lambda w: w.lab, "lab path names: this test's prefix"),
    (r"\bdk-src\b", lambda w: w.netns().name, "a namespace: one of the test's own"),
    (r"(?<![\w/.])/data\b", lambda w: str(w.tmp / "data"), "/data: a directory of the test"),
    (
        r"(?<![\w/.])/scratch\b",
        lambda w: str(w.tmp / "scratch"),
        "/scratch: a directory of the test",
    ),
    (r"(?<![\w/.])/etc/dtnkit/tokens\b", lambda w: str(w.tokens), "the tokens file"),
    (r"(?<=--tokens )tokens\b", lambda w: str(w.tokens), "the tokens file"),
    (
        r"~/\.dtnkit-token\b",
        lambda w: str(w.tmp / "dtnkit-token"),
        "the client's token file (~ is the home of the test's user)",
    ),
    (r"\bhost\.pem\b", lambda w: str(w.pki.cert), "the test CA's certificate"),
    (r"\bhost\.key\b", lambda w: str(w.pki.key), "the test CA's key"),
    (r"(?<=--ca-file )ca\.pem\b", lambda w: str(w.pki.ca_file), "the test CA"),
    (
        r"\bpeer-site\.json\b",
        lambda w: w.snapshot_file("peer-site"),
        "another host's snapshot: one saved from a second namespace",
    ),
    (r"\bours\.json\b", lambda w: w.snapshot_file("ours"), "ours: one saved from the first"),
    (r"(?<=--host )0\.0\.0\.0\b", "127.0.0.1", "listen on loopback only"),
    (
        r"--from-experiment (ID|exp-\S+)",
        lambda w: f"--from-experiment {w.last_experiment()}",
        "the experiment the block ran",
    ),
    (r"\bID\b", lambda w: w.last_result(), "the result the block stored"),
]
# ... and these, to keep runs short (not for PARTIAL statements)
SHRINK: list[Sub] = [
    (r"--duration \d+(ms|s|m)?\b", "--duration 1", "durations: 1 s"),
    (r"(\bprobe net\b.*\s)-t \d+(ms|s|m)?\b", r"\1-t 1", "durations (iperf3's -t): 1 s"),
    (r"--repeat \d+\b", "--repeat 1", "one repetition"),
    (r"(?<=--size )\d+[KMG]iB\b", "8MiB", "fio sizes: 8 MiB"),
    (r"(iperf3 -c \S+)( -t \d+)?", r"\1 -t 1", "iperf3 client: 1 s"),
    (
        r"(?<=--rate )\d+gbit\b",
        "200mbit",
        "lab rate caps: 200 Mbit/s (the delay stage is userspace: less CPU)",
    ),
]
# Options a statement gets when it lacks them, by command: (command words, option, value, why).
ADDED: list[tuple[tuple[str, ...], str, str | Callable[[World], str], str]] = [
    (("probe", "net"), "--duration", "1", "1 s runs (unless -t is given)"),
    (("diagnose",), "--duration", "1", "1 s runs"),
    (("experiment",), "--duration", "1", "1 s runs"),
    (("experiment",), "--repeat", "1", "one repetition"),
    (("diagnose",), "--size", "8MiB", "fio sizes: 8 MiB"),
    (("serve",), "--port", "0", "a kernel-chosen port"),
    (("serve",), "--quiet", "", "no access log"),
]
# tune commands that read or write "this host": they work on a namespace of the test instead
# (host-wide items, such as the TuneD profile of `apply --tuned`, are host-scope there: left
# alone)
TUNE_ON_HOST = {"audit", "apply", "save", "diff", "restore"}

# Exit statuses the docs give (docs/reference.md, "Exit codes"): 3 = drift for audit and
# diff, diagnose 0 or 10-15 by the layer that binds.
EXPECTED: dict[tuple[str, ...], set[int]] = {
    ("tune", "audit"): {0, 3},
    ("tune", "diff"): {0, 3},
    ("diagnose",): {0, 10, 11, 12, 13, 14, 15},
    ("checklist",): {0, 3},
}
RUN_TIMEOUT = 90.0


# --------------------------------------------------------------------------------------------
# The docs' blocks


@dataclass(frozen=True)
class Stmt:
    """One statement of a block: a command line (continuations joined), or a shell loop."""

    file: str
    line: int
    text: str  # without the trailing comment

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def is_dtnkit(self) -> bool:
        return self.text.startswith("dtnkit ")

    def __str__(self) -> str:
        return self.where


@dataclass(frozen=True)
class Block:
    file: str
    line: int  # of the opening fence
    stmts: tuple[Stmt, ...]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def strip_comment(line: str) -> str:
    """*line* without its shell comment (a # after a blank, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _depth(text: str) -> int:
    words = re.findall(r"(?:^|[;\s])(do|done)(?=$|[;\s])", text)
    return words.count("do") - words.count("done")


def parse_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    rel = str(path.relative_to(root))
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, lang = i + 1, fence.group(1)
        i += 1
        body: list[tuple[int, str]] = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang not in LANGS:
            continue
        stmts: list[Stmt] = []
        pending, first = "", 0
        for number, raw in body:
            code = strip_comment(raw)
            if not code and not pending:
                continue
            first = first or number
            if code.endswith("\\"):
                pending += code[:-1].rstrip() + " "
                continue
            pending = (pending + code.strip()).strip()
            if _depth(pending) > 0:  # a loop: until its `done`
                pending += "\n"
                continue
            stmts.append(Stmt(rel, first, pending))
            pending, first = "", 0
        blocks.append(Block(rel, start, tuple(stmts)))
    return blocks


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in parse_blocks(doc)]


def commands(stmt: Stmt) -> list[str]:
    """The dtnkit command lines of a statement: `dtnkit results list | show ID | export ...`
    (one command's subcommands as alternatives) is three; a loop's body lines are each one."""
    out: list[str] = []
    for line in re.split(r"[;\n]", stmt.text):
        line = re.sub(r"^\s*(do|then)\s+", "", line).strip()
        if not line.startswith("dtnkit "):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        words = parts[0].split()
        out.append(parts[0])
        for alt in parts[1:]:
            out.append(" ".join([*words[:2], alt]))
    return out


def skip_reason(stmt: Stmt) -> str | None:
    entry = SKIP.get((stmt.file, stmt.text))
    if entry is None or isinstance(entry, str):
        return entry
    return entry.reason if entry.when is None or entry.when() else None


def placeholders(text: str) -> str:
    for pattern, repl, _why in PLACEHOLDERS:
        text = re.sub(pattern, repl, text)
    return text


def substitute(text: str, world: World, shrink: bool = True) -> str:
    """*text* with the placeholders and SUBSTITUTIONS (and SHRINK) applied for *world*."""
    text = placeholders(text)
    for pattern, repl, _why in SUBSTITUTIONS + (SHRINK if shrink else []):
        if re.search(pattern, text):
            if isinstance(repl, str):
                text = re.sub(pattern, repl, text)
            else:
                value = repl(world)
                text = re.sub(pattern, lambda _m: value, text)  # noqa: B023 - used at once
    return text


def fake_pki(directory: Path) -> Pki:
    """Files where a Pki's are (for parsing only: click checks they exist)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = [directory / n for n in ("ca.pem", "cert.pem", "key.pem")]
    for f in files:
        f.write_text("")
    return Pki(directory, files[0], directory, files[1], files[2])


def expand_vars(text: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), text)


# --------------------------------------------------------------------------------------------
# Parsing without running


def resolve(argv: list[str]) -> tuple[tuple[str, ...], click.Context]:
    """(command words, click context with the parsed parameters) of `dtnkit ARGV`, parsed by
    the real command without invoking it."""
    ctx, args = parsed(cli, "dtnkit", argv, None)
    command: click.Command = cli
    words: list[str] = []
    while isinstance(command, click.Group):
        name, sub, args = command.resolve_command(ctx, args)
        assert name is not None and sub is not None, argv
        words.append(name)
        ctx, args = parsed(sub, name, args, ctx)
        command = sub
    return tuple(words), ctx


def parsed(
    command: click.Command, name: str, args: list[str], parent: click.Context | None
) -> tuple[click.Context, list[str]]:
    """*command*'s context with its own options parsed, and the words after them.  What
    ``make_context`` does, but through ``Command.parse_args`` for a group too: a group's own
    keeps its subcommand's name apart in ``protected_args``, which click 8.2 deprecates (and
    a warning filter around it is not safe while other threads run)."""
    # the command's own context settings, as make_context applies them: without them a
    # context has click's default `--help` alone, and the command caches the help option it
    # first makes, so a later `dtnkit probe net -h` in this process would be refused
    ctx = command.context_class(command, info_name=name, parent=parent, **command.context_settings)
    with ctx.scope(cleanup=False):
        rest = click.Command.parse_args(command, ctx, list(args))
    return ctx, rest


PARSE_CASES = [
    (stmt, line) for block in all_blocks() for stmt in block.stmts for line in commands(stmt)
]


@pytest.mark.parametrize(
    ("stmt", "line"), PARSE_CASES, ids=[f"{s.where}:{line[7:40]}" for s, line in PARSE_CASES]
)
def test_documented_command_parses(stmt: Stmt, line: str, tmp_path: Path) -> None:
    """Parsed with the same substitutions as a run (files that must exist do), creating
    nothing: no namespace, no lab path, no server."""
    world = World(tmp_path, fake_pki(tmp_path / "pki"), dry=True)
    text = expand_vars(substitute(line, world), TOKENS).removesuffix("&").strip()
    argv = shlex.split(text)
    try:
        resolve(argv[1:])
    except (click.ClickException, DtnkitError) as exc:
        pytest.fail(f"{stmt.where}: {line!r} does not parse: {_message(exc)}", pytrace=False)


def _message(exc: click.ClickException | DtnkitError) -> str:
    return exc.format_message() if isinstance(exc, click.ClickException) else exc.render()


# Flags in the docs' inline code that are not dtnkit's: (file, flag) -> whose.  A flag of a
# bench case must also be in bench/ (its case file or bench/lib).
OTHER_FLAGS: dict[tuple[str, str], str] = {
    ("docs/transfer.md", "--speed-limit"): "curl",
    ("docs/fleet.md", "--check"): "ansible-playbook",
    ("docs/fleet.md", "--diff"): "ansible-playbook",
    ("docs/transfer.md", "--speed-time"): "curl",
    ("docs/transfer.md", "--capath"): "davix and XRootD clients",
    ("docs/transfer.md", "--checksum-mode"): "gfal-copy",
    ("docs/architecture.md", "--status-interval"): "fio",
    ("docs/measure.md", "--status-interval"): "fio",
    # dtnkit serve's SciTags and metrics options, from the other branches of issue 14
    ("docs/monitoring.md", "--scitag"): "dtnkit serve (SciTags, issue 14)",
    ("docs/monitoring.md", "--firefly-dest"): "dtnkit serve (SciTags, issue 14)",
    ("docs/monitoring.md", "--metrics"): "dtnkit serve (metrics, issue 14)",
    **{("docs/benchmarks.md", f): "bench script" for f in ("--cold",)},
    ("docs/benchmarks.md", "--cksum"): "xrdcp",
}
# a long option, dotted ones too (Prometheus's --web.listen-address)
FLAG = r"(?<![\w-])--[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*"
# inline code that is another program's command line (its flags are that program's)
OTHER_PROGRAMS = re.compile(
    r"^(sudo )?((\.venv/bin/)?python )?(-m bench |bench/|unshare |git |"
    r"fasterdata-tuning\.sh |nfqdelay |iperf3 )"
)


def dtnkit_flags() -> set[str]:
    """Every long option of every dtnkit command (hidden ones too), and --help."""
    flags = {"--help"}
    ctx = click.Context(cli)

    def walk(cmd: click.Command) -> None:
        for p in cmd.params:
            flags.update(o for o in [*p.opts, *p.secondary_opts] if o.startswith("--"))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub)

    walk(cli)
    return flags


def test_every_flag_in_the_docs_inline_code_exists() -> None:
    """`--flag` in a doc's inline code is an option of some dtnkit command, or is listed in
    OTHER_FLAGS as another tool's (a bench case's must be in bench/)."""
    known = dtnkit_flags()
    bench = "".join(p.read_text() for p in (ROOT / "bench").rglob("*.py"))
    bad: list[str] = []
    for doc in DOCS:
        rel = str(doc.relative_to(ROOT))
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for span in re.findall(r"`([^`]+)`", line):
                if OTHER_PROGRAMS.match(span):
                    continue
                for flag in re.findall(FLAG, span):
                    owner = OTHER_FLAGS.get((rel, flag))
                    if flag in known or (
                        owner and (owner != "bench script" or f'"{flag}"' in bench)
                    ):
                        continue
                    bad.append(f"{rel}:{number}: {flag} (in `{span}`)")
    assert not bad, "flags no dtnkit command has:\n" + "\n".join(bad)


def command_flags(words: list[str]) -> set[str]:
    """The long options of `dtnkit WORDS` (hidden ones too)."""
    cmd: click.Command | None = cli
    ctx2 = click.Context(cli)
    for word in words:
        assert isinstance(cmd, click.Group), words
        cmd = cmd.get_command(ctx2, word)
        assert cmd is not None, words
    return {"--help"} | {
        o for p in cmd.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")
    }


def test_every_flag_in_a_commands_table_is_that_commands() -> None:
    """In every page, a section titled with commands (## `dtnkit cp` ...) lists in its
    tables' first column only options of those commands."""
    bad: list[str] = []
    for doc in DOCS:
        rel = str(doc.relative_to(ROOT))
        flags: set[str] | None = None
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if line.startswith("#"):
                named = re.findall(r"`dtnkit ([a-z ]+)`", line)
                flags = set().union(*(command_flags(n.split()) for n in named)) if named else None
            elif flags is not None and line.startswith("| `"):
                cell = line.split("|")[1]
                bad += [
                    f"{rel}:{number}: {flag}"
                    for flag in re.findall(FLAG, cell)
                    if flag not in flags
                ]
    assert not bad, "options the section's commands do not have:\n" + "\n".join(bad)


BENCH_COMMAND = re.compile(
    r"(?:^|`)(?:sudo )?(?:env -u \S+ )?(?:\.venv/bin/)?python -m bench "
    r"([a-z][a-z-]*)([^`]*)"
)


def bench_commands() -> list[tuple[str, str, str]]:
    """(where, case, the rest of the line) of every `python -m bench CASE ...` in a block, in
    an indented code block (each `;`-separated command, its comment left out) or in a line's
    inline code."""
    found = [
        (stmt.where, m.group(1), m.group(2))
        for block in all_blocks()
        for stmt in block.stmts
        if (m := BENCH_COMMAND.match(stmt.text))
    ]
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            where = f"{doc.relative_to(ROOT)}:{number}"
            found += [
                (where, m.group(1), m.group(2))
                for m in BENCH_COMMAND.finditer(line)
                if m.group(0).startswith("`")
            ]
            if line.startswith("    ") and "python -m bench " in line:
                found += [
                    (where, m.group(1), m.group(2))
                    for part in strip_comment(line.strip()).split(";")
                    if (m := BENCH_COMMAND.match(part.strip()))
                ]
    return found


def test_the_bench_commands_of_the_docs_name_real_cases_and_flags() -> None:
    """A benchmark line of a block is not run (SKIP) or is a quick one, and a bench command in
    inline code is not run either; but each names a case of `python -m bench` and only
    options that case takes."""
    from bench.lib.core import case_names, load_case, parser_for

    commands = bench_commands()
    assert len(commands) >= 20, commands
    bad: list[str] = []
    for where, name, rest in commands:
        if name not in case_names():
            bad.append(f"{where}: no case {name}")
            continue
        case, doc = load_case(name)
        options = parser_for(name, case, doc)._option_string_actions
        bad += [
            f"{where}: {name} has no {flag}"
            for flag in re.findall(FLAG, rest)
            if flag not in options
        ]
    assert not bad, "\n".join(bad)


def test_the_docs_have_blocks_and_the_skip_table_is_current() -> None:
    blocks = all_blocks()
    stmts = {(s.file, s.text) for b in blocks for s in b.stmts}
    assert len(blocks) >= 15 and len(PARSE_CASES) >= 80, (len(blocks), len(PARSE_CASES))
    stale = [key for key in SKIP if key not in stmts]
    assert not stale, f"SKIP names statements no longer in the docs: {stale}"


def test_a_flag_that_does_not_exist_fails_the_parse() -> None:
    """The check itself: a made-up flag, a bad choice and a missing argument are refused."""
    for argv in (
        ["tune", "audit", "--connect-timeout", "5"],
        ["cp", "a"],
        ["tune", "audit", "--format", "yaml"],
        ["probe", "net", "--bogus"],
    ):
        with pytest.raises((click.ClickException, DtnkitError)):
            resolve(argv)


def test_parsing_a_line_leaves_the_commands_as_they_were(environment: Environment) -> None:
    """resolve() parses with the real command objects: the `-h` they answer before it, they
    answer after it (click caches each command's help option from the first context)."""
    for argv, words in (
        (["probe", "net", "--peer", "x"], ["probe", "net"]),
        (["tune", "audit"], ["tune", "audit"]),
        (["cp", "a", "b"], ["cp"]),
    ):
        resolve(argv)
        assert main([*words, "-h"], environment) == 0, argv
    # `dtnkit` itself too: its subcommands now declare `-h` themselves, so only the root
    # shows whether the parser gave a context its command's own settings
    assert main(["-h"], environment) == 0


def test_the_parser_reads_the_docs_shapes(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n```console\n# a comment\ndtnkit a --b 'c # d'   # e\n"
        "for h in 1 2; do\n  dtnkit lab exec x $h -- true\ndone\n"
        "dtnkit cp x \\\n    y\ndtnkit results list | show ID\n```\n"
        "```toml\nx = 1\n```\n"
    )
    (block,) = parse_blocks(doc, tmp_path)
    assert [(s.line, s.text) for s in block.stmts] == [
        (4, "dtnkit a --b 'c # d'"),
        (5, "for h in 1 2; do\ndtnkit lab exec x $h -- true\ndone"),
        (8, "dtnkit cp x y"),
        (10, "dtnkit results list | show ID"),
    ]
    assert commands(block.stmts[1]) == ["dtnkit lab exec x $h -- true"]
    assert commands(block.stmts[3]) == ["dtnkit results list", "dtnkit results show ID"]


# --------------------------------------------------------------------------------------------
# Running


def _cmd_words(argv: list[str]) -> tuple[str, ...]:
    words = [a for a in argv[1:3] if not a.startswith("-")]
    return (
        tuple(words[:1])
        if words[:1] in (["diagnose"], ["experiment"], ["serve"], ["cp"])
        else tuple(words[:2])
    )


def expected(argv: list[str]) -> set[int]:
    words = _cmd_words(argv)
    for key, codes in EXPECTED.items():
        if words[: len(key)] == key:
            return codes
    return {0}


@dataclass
class Server:
    proc: subprocess.Popen[str]
    root: Path
    netloc: str  # as the test reaches it


@dataclass
class World:
    """Everything one block's run creates: directories, a namespace, a lab path, servers."""

    tmp: Path
    pki: Pki
    lab: str = field(default_factory=lambda: f"{PREFIX}{secrets.token_hex(3)}")
    servers: dict[str, Server] = field(default_factory=dict)
    serve_template: list[str] | None = None
    _netns: Netns | None = None
    _peer_netns: Netns | None = None
    _xrootd: Xrootd | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    dry: bool = False  # parsing only: names, no namespace or lab path created

    def __post_init__(self) -> None:
        for d in ("data", "scratch", "state", "lab", "srv"):
            (self.tmp / d).mkdir(parents=True, exist_ok=True)
        self.tokens.write_text("".join(f"{t} read,write\n" for t in TOKENS.values()))
        # the client's token file the docs use (~/.dtnkit-token: SUBSTITUTIONS), as the
        # README's tour makes it
        (self.tmp / "dtnkit-token").write_text(TOKENS["TOKEN"] + "\n")

    @property
    def tokens(self) -> Path:
        return self.tmp / "tokens"

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DTNKIT_TOKEN", "BEARER_TOKEN", "COLUMNS")
        }
        env.update(TOKENS)
        env.update(
            DTNKIT_STATE_DIR=str(self.tmp / "state"),
            DTNKIT_DB=str(self.tmp / "results.sqlite"),
            DTNKIT_LAB_STATE=str(self.tmp / "lab"),
            PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            SSL_CERT_FILE=str(self.pki.ca_file),
        )  # the site's CA: in the trust store
        return env

    def netns(self) -> Netns:
        if self.dry:
            return Netns(prefix=PREFIX)
        if self._netns is None:
            ns = Netns(prefix=PREFIX)
            ns.create()
            self._netns = ns
            # `--iface bond0`: a bond over one of its veths
            ns_run = ["ip", "-n", ns.name]
            subprocess.run(
                [*ns_run, "link", "add", "bond0", "type", "bond"], check=False, capture_output=True
            )
            for step in (["dkv1", "down"], ["dkv1", "master", "bond0"], ["bond0", "up"]):
                subprocess.run([*ns_run, "link", "set", *step], check=False, capture_output=True)
        return self._netns

    def snapshot_file(self, name: str) -> str:
        """A snapshot file, as a site copies one from a host: saved (in a state dir of its
        own) from the test's namespace, or from a second one for the peer's."""
        path = self.tmp / f"{name}.json"
        if self.dry:
            path.write_text("{}")
            return str(path)
        if not path.exists():
            ns = self.netns() if name == "ours" else self.extra_netns()
            proc = subprocess.run(
                [
                    DTNKIT,
                    "tune",
                    "save",
                    "--netns",
                    ns.name,
                    "--state-dir",
                    str(self.tmp / "other-state"),
                    "--format",
                    "json",
                ],
                capture_output=True,
                text=True,
                check=True,
                env=self.env,
            )
            shutil.copy(json.loads(proc.stdout)["path"], path)
        return str(path)

    def extra_netns(self) -> Netns:
        if self._peer_netns is None:
            self._peer_netns = Netns(prefix=PREFIX)
            self._peer_netns.create()
        return self._peer_netns

    # results of the block's own store
    def _store(self) -> Any:
        from dtnkit.measure.store import ResultStore

        return ResultStore(self.tmp / "results.sqlite")

    def last_experiment(self) -> str:
        if self.dry:
            return "exp-20261130T020000-1a2b"
        exps = self._store().experiments()
        return str(exps[0]["id"]) if exps else "no-experiment-ran"

    def last_result(self) -> str:
        if self.dry:
            return "1"
        rows = self._store().results(limit=1)
        return str(rows[0].id) if rows else "0"

    # servers: one `dtnkit serve` per host:port the block names
    def server(self, scheme: str, hostport: str) -> Server:
        if hostport in self.servers:
            return self.servers[hostport]
        tls = scheme in ("https", "davs")
        root = self.tmp / "srv" / hostport.replace(":", "-")
        root.mkdir(parents=True, exist_ok=True)
        args = list(self.serve_template or ["--root", "/data", "--tokens", str(self.tokens)])
        args = [str(root) if a == str(self.tmp / "data") or a == "/data" else a for a in args]
        if tls:
            args += ["--cert", str(self.pki.cert), "--key", str(self.pki.key)]
        # the docs' hosts are this machine's loopback here: let COPY reach them
        args += [
            "--tpc-allow",
            "127.0.0.1",
            "--tpc-allow",
            "localhost",
            "--port",
            "0",
            "--quiet",
            "--format",
            "json",
        ]
        proc = subprocess.Popen(
            [DTNKIT, "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first:
            raise AssertionError(
                f"dtnkit serve {shlex.join(args)} did not start: {proc.communicate()[1].strip()}"
            )
        port = json.loads(first)["url"].rsplit(":", 1)[1].strip("/")
        # the test certificate names localhost and 127.0.0.1
        srv = Server(proc, root, f"{'localhost' if tls else '127.0.0.1'}:{port}")
        self.servers[hostport] = srv
        return srv

    def urls(self, text: str) -> str:
        """Each scheme://host:port/ of the docs as one of the test's servers, and root://HOST/
        as a temporary XRootD."""

        def one(m: re.Match[str]) -> str:
            scheme, hostport = m.group(1), m.group(2)
            return f"{scheme}://{self.server(scheme, hostport).netloc}/"

        def xroot(m: re.Match[str]) -> str:
            return f"root://127.0.0.1:{self.xrootd().port}/"

        text = re.sub(r"\broot://[A-Za-z0-9.-]+(:\d+)?/", xroot, text)
        return re.sub(r"\b(https?|davs?)://([A-Za-z0-9.-]+:\d+)/", one, text)

    def xrootd(self) -> Xrootd:
        """One XRootD for the block (its /data writable by the user XRootD runs as)."""
        if self._xrootd is None:
            self._xrootd = self._stack.enter_context(running_xrootd(self.pki))
            data = self._xrootd.root / "data"
            data.mkdir()
            if os.geteuid() == 0:
                ent = pwd.getpwnam(XROOTD_USER)
                os.chown(data, ent.pw_uid, ent.pw_gid)
        return self._xrootd

    def local(self, url_or_path: str) -> Path | None:
        """Where a copy's end is on this machine (a server's file, or a local path)."""
        m = re.match(r"^\w+://([^/]+)/(.*)$", url_or_path)
        if not m:
            return Path(url_or_path) if url_or_path.startswith(str(self.tmp)) else None
        for srv in self.servers.values():
            if srv.netloc == m.group(1):
                return srv.root / m.group(2)
        return None

    def made_lab(self) -> bool:
        """Whether the block left anything of its lab path: its state, or a namespace."""
        if (self.tmp / "lab" / self.lab).exists():
            return True
        listed = subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, check=False
        ).stdout.split()
        return any(n.startswith(f"dkl-{self.lab}-") for n in listed)

    def stop(self) -> None:
        for srv in self.servers.values():
            srv.proc.terminate()
        for srv in self.servers.values():
            try:
                srv.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                srv.proc.kill()
                srv.proc.communicate()
        self._stack.close()
        if self.made_lab():  # (most blocks make none: no dtnkit start to learn that)
            subprocess.run(
                [DTNKIT, "lab", "down", self.lab, "--missing-ok"],
                env=self.env,
                capture_output=True,
                check=False,
            )
        for ns in (self._netns, self._peer_netns):
            if ns is not None:
                ns.delete()


DATA = os.urandom(3 * 2**20 + 5)


def seed(path: Path, tree: bool) -> None:
    """A source the docs assume exists: a 3 MiB file, or a small tree."""
    if path.exists():
        return
    if tree:
        (path / "sub").mkdir(parents=True)
        (path / "a").write_bytes(DATA[:1000])
        (path / "sub" / "b").write_bytes(DATA[1000:5000])
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(DATA)


def remove(path: Path | None) -> None:
    if path is None or not path.exists():
        return
    if path.is_dir():
        shutil.rmtree(path)
    elif path.is_file():
        path.unlink()


@dataclass
class Outcome:
    block: Block
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


# blocks whose lines are alternatives (each copy starts from the same state), not a sequence
ALTERNATIVES = ("docs/transfer.md", "docs/measure.md")


class BlockRun:
    def __init__(self, block: Block, world: World) -> None:
        self.block, self.w = block, world
        self.out = Outcome(block)

    def text(self, stmt: Stmt) -> str:
        return substitute(stmt.text, self.w, shrink=partial(stmt.text) is None)

    def run(self) -> Outcome:
        start = time.monotonic()
        texts = " ".join(s.text for s in self.block.stmts)
        uses_lab = re.search(r"\b(demo|nicfull)\b", texts)
        builds_lab = re.search(r"dtnkit lab up (demo|nicfull)\b", texts)
        try:
            if uses_lab and not builds_lab:  # the tour's earlier block built it
                self.check(
                    f"{self.block.where} (the lab path the block uses)",
                    [DTNKIT, "lab", "up", self.w.lab, "--rtt", "10ms", "--rate", "200mbit"],
                    {0},
                )
            for stmt in self.block.stmts:
                reason = skip_reason(stmt)
                if reason:
                    self.out.skipped.append(f"{stmt.where}: {stmt.text}: {reason}")
                    continue
                self.statement(stmt)
        except Exception as exc:  # reported as the block's failure
            self.out.failures.append(f"{self.block.where}: {type(exc).__name__}: {exc}")
        finally:
            self.w.stop()
            self.out.seconds = time.monotonic() - start
        return self.out

    def statement(self, stmt: Stmt) -> None:
        text = self.w.urls(self.text(stmt))
        if not stmt.is_dtnkit or "\n" in text:
            self.out.ran.append(stmt.text)
            self.check(f"{stmt.where}: {stmt.text}", ["bash", "-c", text], {0})
            return
        for line in commands(Stmt(stmt.file, stmt.line, text)):
            self.command(stmt, line)

    def command(self, stmt: Stmt, line: str) -> None:
        env = self.w.env
        argv = shlex.split(expand_vars(line, env))
        background = argv[-1] == "&"
        argv = argv[:-1] if background else argv
        words = _cmd_words(argv)
        try:
            _, ctx = resolve(argv[1:])
        except (click.ClickException, DtnkitError) as exc:
            self.out.failures.append(f"{stmt.where}: {line}\n  does not parse: {_message(exc)}")
            return
        params = ctx.params
        if (
            words[:1] == ("tune",)
            and words[1:2]
            and words[1] in TUNE_ON_HOST
            and not params.get("netns")
            and not params.get("tree")
        ):
            argv += ["--netns", self.w.netns().name]
        for cmd, opt, value, _why in ADDED:
            if (
                words[: len(cmd)] == cmd
                and opt not in argv
                and not (opt == "--duration" and words == ("probe", "net") and "-t" in argv)
            ):
                if cmd == ("diagnose",) and opt == "--size" and "--path" not in argv:
                    continue
                val = value if isinstance(value, str) else value(self.w)
                argv += [opt, val] if val else [opt]
        if words == ("serve",):
            self.out.ran.append(stmt.text)
            self.serve(stmt, argv, background)
            return
        if words == ("cp",) or words == ("probe", "e2e"):
            self.prepare_copy(str(params["src"]), str(params["dst"]), bool(params.get("recursive")))
        if params.get("e2e"):
            e2e_src, e2e_dst = params["e2e"]
            self.prepare_copy(str(e2e_src), str(e2e_dst), tree=False)
        if words[:1] in (("cp",), ("probe",), ("diagnose",), ("experiment",)) and not {
            "--token",
            "--src-token",
            "--dst-token",
            "--token-file",
        } & set(argv):
            env["DTNKIT_TOKEN"] = TOKENS["TOKEN"]  # as docs/reference.md says: the default token
        self.out.ran.append(line)
        entry = partial(stmt.text)
        if entry:
            self.until_started(
                f"{stmt.where}: {line}", [DTNKIT, *argv[1:]], expected(argv), entry[1]
            )
        else:
            self.check(f"{stmt.where}: {line}", [DTNKIT, *argv[1:]], expected(argv), env)
        daemon = re.search(r"lab exec (\S+) (\S+) -- iperf3 -s -D", line)
        if daemon:  # iperf3 -D returns before it listens: the next line would race it
            self.wait_listening(f"dkl-{daemon.group(1)}-{daemon.group(2)}", 5201)

    def wait_listening(self, netns: str, port: int) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ss = subprocess.run(
                ["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"],
                capture_output=True,
                text=True,
                check=False,
            )
            if ss.stdout.strip():
                return
            time.sleep(0.05)  # polls a condition (the daemon's socket)
        self.out.failures.append(f"{self.block.where}: nothing listens on {port} in {netns}")

    def until_started(
        self, what: str, argv: list[str], codes: set[int], started: Callable[[World], bool]
    ) -> None:
        """Run *argv* until *started*, then interrupt it as Ctrl-C would (its process group)
        and expect exit 130; if it ends first, its exit must be one of *codes*."""
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.w.env,
            cwd=ROOT,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + RUN_TIMEOUT
        while proc.poll() is None and not started(self.w) and time.monotonic() < deadline:
            time.sleep(0.02)  # polls a condition; the probe itself takes seconds
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            codes = {130}
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
        if proc.returncode not in codes:
            self.out.failures.append(
                f"{what}\n  ran: {shlex.join(a.replace(str(BIN) + '/', '') for a in argv)}\n"
                f"  exit {proc.returncode}, expected {sorted(codes)}; stderr: {_last(err)}"
            )

    def prepare_copy(self, src: str, dst: str, tree: bool) -> None:
        where = self.w.local(src)
        if where is not None:
            seed(where, tree)
        if self.block.file in ALTERNATIVES and not dst.endswith("/"):  # not "into a dir"
            remove(self.w.local(dst))

    def serve(self, stmt: Stmt, argv: list[str], background: bool) -> None:
        """`dtnkit serve ... &` (the README): the template of the block's servers, started for
        every host it names.  In the foreground (docs/transfer.md): started, must print its
        URL, then stopped by SIGTERM and exit 0."""
        args = [a for a in argv[2:] if a != "--quiet"]
        port = args.index("--port")
        del args[port : port + 2]
        if background:
            self.w.serve_template = args
            for m in re.finditer(
                r"\b(https?|davs?)://([A-Za-z0-9.-]+:\d+)/",
                " ".join(s.text for s in self.block.stmts),
            ):
                self.w.server(m.group(1), m.group(2))
            return
        args = [str(self.w.tmp / "data") if a == str(self.w.tmp / "data") else a for a in args]
        proc = subprocess.Popen(
            [DTNKIT, "serve", *args, "--port", "0", "--quiet"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.w.env,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        if not re.search(r"listening on https?://", first) or proc.returncode != 0:
            self.out.failures.append(
                f"{stmt.where}: {stmt.text}\n  ran: dtnkit serve "
                f"{shlex.join(args)}\n  first line {first!r}, exit "
                f"{proc.returncode}: {_last(err)}"
            )

    def check(
        self, what: str, argv: list[str], codes: set[int], env: dict[str, str] | None = None
    ) -> None:
        """Run *argv* to its end; its exit must be one of *codes*."""
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                env=env or self.w.env,
                timeout=RUN_TIMEOUT,
                check=False,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            self.out.failures.append(
                f"{what}\n  ran: {shlex.join(argv)}\n  timed out after {RUN_TIMEOUT:.0f} s"
            )
            return
        if proc.returncode not in codes:
            self.out.failures.append(
                f"{what}\n  ran: {shlex.join(a.replace(str(BIN) + '/', '') for a in argv)}\n"
                f"  exit {proc.returncode}, expected {sorted(codes)}; stderr: "
                f"{_last(proc.stderr) or _last(proc.stdout)}"
            )


def _last(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(empty)"


# post-conditions of a block, beyond the exits: the README's mover block copies what it says
def check_readme_mover(w: World) -> list[str]:
    roots = {k: s.root for k, s in w.servers.items()}
    scratch = w.tmp / "scratch"
    checks = {
        "/scratch/g": scratch / "g",
        "dtn1:8080/f": roots["dtn1:8080"] / "f",
        "dtn1:8080/dir/sub/b": roots["dtn1:8080"] / "dir" / "sub" / "b",
        "dtn1:8080/run7/raw/f (cp -p)": roots["dtn1:8080"] / "run7" / "raw" / "f",
        "xrootd.example:1094/store/f": roots["xrootd.example:1094"] / "store" / "f",
        "dtn2:8080/f": roots["dtn2:8080"] / "f",
        "dtn2:8080/g": roots["dtn2:8080"] / "g",
    }
    want = {"dtn1:8080/dir/sub/b": DATA[1000:5000]}
    return [
        f"README.md mover block: {name} is not the source's bytes"
        for name, path in checks.items()
        if not path.is_file() or path.read_bytes() != want.get(name, DATA)
    ]


def check_readme_report(w: World) -> list[str]:
    """The README's sweep block: 'one HTML page: /scratch/tour/report.html'."""
    page = w.tmp / "scratch" / "tour" / "report.html"
    return (
        []
        if page.is_file() and page.stat().st_size > 0
        else [f"README.md sweep block: no {page} (the README says the report is there)"]
    )


POST: dict[tuple[str, str], Callable[[World], list[str]]] = {
    ("README.md", "dtnkit serve --root /data --tokens /etc/dtnkit/tokens &"): check_readme_mover,
    ("README.md", "dtnkit sweep report tour -o /scratch/tour"): check_readme_report,
}


def _setup(block: Block, world: World) -> None:
    """Before a block: the directories its URLs name exist on their servers (the README's
    xrootd.example has /store), except where a copy is to make them (cp -p)."""
    for stmt in block.stmts:
        if re.search(r"\scp (.*\s)?(-p|--parents)\s", stmt.text):
            continue
        for m in re.finditer(r"://([A-Za-z0-9.-]+:\d+)/(\S+)/\S*", stmt.text):
            root = world.tmp / "srv" / m.group(1).replace(":", "-")
            (root / m.group(2)).mkdir(parents=True, exist_ok=True)


def run_block(block: Block, tmp: Path, pki: Pki) -> tuple[Outcome, World]:
    world = World(tmp, pki)
    _setup(block, world)
    out = BlockRun(block, world).run()
    for stmt in block.stmts:
        post = POST.get((stmt.file, stmt.text))
        if post and not out.failures:
            out.failures += post(world)
    return out, world


RUN_BLOCKS = [b for b in all_blocks() if b.stmts]
_lock = threading.Lock()


@pytest.fixture(scope="module")
def outcomes(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, Outcome]]:
    """Every selected block run once, in parallel (each in its own world)."""
    selected = {
        block.where
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and hasattr(item, "callspec")
        and isinstance(block := item.callspec.params.get("block"), Block)
    }
    pki = make_pki(tmp_path_factory.mktemp("docs-pki"))
    base = tmp_path_factory.mktemp("docs-docs")
    results: dict[str, Outcome] = {}

    def one(index: int, block: Block) -> None:
        out, _ = run_block(block, base / f"b{index}", pki)
        with _lock:
            results[block.where] = out
        if os.environ.get("S18D_TIMES"):
            print(f"{block.where}: {out.seconds:.1f} s", file=sys.__stderr__)

    def cost(block: Block) -> int:  # the longest first: the run ends with short blocks
        return sum(
            4 if s.text.startswith(("dtnkit experiment", "dtnkit diagnose")) else 1
            for s in block.stmts
        )

    order = sorted((b for b in RUN_BLOCKS if b.where in selected), key=cost, reverse=True)
    with ThreadPoolExecutor(max_workers=6) as pool:
        for f in [pool.submit(one, i, b) for i, b in enumerate(order)]:
            f.result()
    yield results


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(
    shutil.which("iperf3") is None
    or shutil.which("fio") is None
    or shutil.which("openssl") is None,
    reason="needs iperf3, fio and openssl",
)
@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[b.where for b in RUN_BLOCKS])
def test_documented_block_runs(block: Block, outcomes: dict[str, Outcome]) -> None:
    out = outcomes[block.where]
    if out.failures:
        pytest.fail("\n".join(out.failures), pytrace=False)
    # a block that cannot run here (a long benchmark, the interop suite itself) passes only
    # when each of its lines is in the skip table with its reason (its flags are still checked
    # by test_documented_command_parses)
    assert out.ran or out.skipped, f"{block.where}: nothing ran and no line is in the skip table"


def loose_lines(path: Path, root: Path = ROOT) -> list[Stmt]:
    """The `dtnkit` lines the docs show outside console blocks: in other fences (```text) and
    in indented code blocks, their comment and a trailing redirection or pipe left out."""
    rel = str(path.relative_to(root))
    out: list[Stmt] = []
    fence: str | None = None
    prev_blank = True
    indented = False
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^```(\w*)\s*$", raw)
        if m:
            fence = None if fence is not None else m.group(1)
            continue
        if fence is None:
            indented = raw.startswith("    ") and (prev_blank or indented)
            prev_blank = not raw.strip()
        in_code = (fence is not None and fence not in LANGS) or (fence is None and indented)
        code = strip_comment(raw.strip())
        if in_code and code.startswith("dtnkit "):
            code = re.split(r"\s(?:\d?>>?|\|)\s", code)[0].strip()
            out.append(Stmt(rel, number, code))
    return out


LOOSE = [s for doc in DOCS for s in loose_lines(doc)]


@pytest.mark.parametrize("stmt", LOOSE, ids=[f"{s.where}:{s.text[7:40]}" for s in LOOSE])
def test_documented_lines_outside_console_blocks_parse(stmt: Stmt, tmp_path: Path) -> None:
    """A `dtnkit` line of a ```text fence or an indented block is not run, but it parses."""
    world = World(tmp_path, fake_pki(tmp_path / "pki"), dry=True)
    text = expand_vars(substitute(stmt.text, world), TOKENS).removesuffix("&").strip()
    try:
        resolve(shlex.split(text)[1:])
    except (click.ClickException, DtnkitError) as exc:
        pytest.fail(f"{stmt.where}: {stmt.text!r} does not parse: {_message(exc)}", pytrace=False)


def test_loose_lines_are_found() -> None:
    assert len(LOOSE) >= 10, LOOSE
    assert any(s.file == "docs/fleet.md" for s in LOOSE)
    assert any(s.file == "docs/measure.md" for s in LOOSE)
