"""Issue 12's done-when: in a real 80x40 terminal (tmux) `tune audit`, `tune list`, `lab status`,
`probe net` and `diagnose` print no line longer than 80 columns, split no word across lines
and cut no ID.

The commands run in a pane of a tmux server of this test's own (its own socket), on a lab path
of its own, with a snapshot saved in a temporary --state-dir.  What the pane shows is compared
with the same output unwrapped: the `--wide` form of the command (audit, list, status), the
stored probe result drawn wide, and the diagnosis of a JSON run drawn wide.  A word cut by a
wrap shows as a token of the pane that is only the start or the end of a word of the unwrapped
text; numbers may differ between the runs, so tokens without a letter are not compared.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from tests.support.wrapping import cut_words

from dtnkit.cli import measure_render, render
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath
from dtnkit.measure.store import ResultStore

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]
NEEDS = [t for t in ("tmux", "iperf3", "ping", "iptables") if shutil.which(t) is None]
WIDTH, HEIGHT = 80, 40
DTNKIT = [sys.executable, "-m", "dtnkit.cli.main"]
COMMANDS = ("audit", "list", "status", "probe", "diagnose")


def dtnkit_argv() -> list[str]:
    """How to start dtnkit: the console script beside this Python, else `python -m`."""
    script = Path(sys.executable).with_name("dtnkit")
    return [str(script)] if script.exists() else DTNKIT


@pytest.fixture
def path(tmp_path: Path) -> Iterator[LabPath]:
    with lab.path(
        f"tmux{secrets.token_hex(3)}", state_root=tmp_path / "lab", rtt_ms=10, rate_bps=500_000_000
    ) as p:
        yield p


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[list[str]]:
    """tmux on a socket of this test's own; its server is ended with the test."""
    sock = tmp_path / "tmux.sock"
    argv = ["tmux", "-S", str(sock), "-f", "/dev/null"]
    try:
        yield argv
    finally:
        subprocess.run([*argv, "kill-server"], capture_output=True, check=False)


def sections(screen: str) -> dict[str, str]:
    """The pane's text between the script's `=== tmux NAME` markers."""
    out: dict[str, str] = {}
    name = None
    for line in screen.splitlines():
        if line.startswith("=== tmux "):
            name = line.split()[2]
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


def progress(section: str, first: str) -> str:
    """The lines of *section* before the one that starts with *first*: what a command
    prints while it runs, before its result."""
    lines = section.splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.startswith(first))
    return "".join(lines[:end])


def wide_text(draw: object, *args: object) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=render.WIDE, highlight=False, soft_wrap=True)
    draw(con, *args)  # type: ignore[operator]
    return buf.getvalue()


@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_every_command_fits_80_columns(tmp_path: Path, path: LabPath, tmux: list[str]) -> None:
    state, db, lab_root = tmp_path / "state", tmp_path / "results.sqlite", tmp_path / "lab"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(DTNKIT_LAB_STATE=str(lab_root), DTNKIT_STATE_DIR=str(state), DTNKIT_DB=str(db))
    dtnkit = dtnkit_argv()
    ns = path.src.netns
    saved = subprocess.run(
        [
            *dtnkit,
            "tune",
            "save",
            "--netns",
            ns,
            "--label",
            "tmux acceptance snapshot with a rather long label",
            "--format",
            "json",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    snap_id = json.loads(saved.stdout)["id"]
    assert len(snap_id) > 50  # long enough that a cut would show
    peer = ["--peer", f"{path.name}/dst", "--netns", ns, "--duration", "2", "--interval", "0.4"]
    argvs = {
        "audit": ["tune", "audit", "--netns", ns],
        "list": ["tune", "list"],
        "status": ["lab", "status", path.name],
        "probe": ["probe", "net", *peer],
        "diagnose": ["diagnose", *peer],
    }
    channel = f"tmux-{secrets.token_hex(4)}"
    script = tmp_path / "pane.sh"
    lines = ["unset COLUMNS LINES"]
    for name in COMMANDS:
        lines += [
            f"echo '=== tmux {name}'",
            shlex.join([*dtnkit, *argvs[name]]),
            f"echo $? > {shlex.quote(str(tmp_path / name))}.rc",
        ]
    lines += [f"{shlex.join(tmux)} wait-for -S {channel}", "read -r _"]
    script.write_text("\n".join(lines) + "\n")
    subprocess.run(
        [
            *tmux,
            "new-session",
            "-d",
            "-x",
            str(WIDTH),
            "-y",
            str(HEIGHT),
            "-s",
            "tmux",
            f"sh {shlex.quote(str(script))}",
        ],
        env=env,
        check=True,
    )
    subprocess.run([*tmux, "wait-for", channel], check=True, timeout=90)
    size = subprocess.run(
        [*tmux, "display", "-p", "-t", "tmux", "#{pane_width}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert size == str(WIDTH)

    def capture(*flags: str) -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", "tmux", "-S", "-", "-E", "-", *flags],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    joined = capture("-J")  # a line the terminal had to wrap comes back whole
    shown = sections(joined)
    assert set(shown) == set(COMMANDS), joined
    codes = {n: int((tmp_path / f"{n}.rc").read_text()) for n in COMMANDS}
    assert codes["list"] == codes["status"] == codes["probe"] == 0, (codes, joined)
    assert codes["audit"] in (0, 3) and codes["diagnose"] in (0, 10, 11, 12, 15), codes

    # no line is wider than the terminal, nothing is cut short with an ellipsis
    long = [line for line in joined.splitlines() if len(line.rstrip()) > WIDTH]
    assert not long, long
    assert "…" not in joined
    # the snapshot ID and the result IDs stay whole on one line
    assert any(snap_id in line for line in shown["list"].splitlines()), shown["list"]
    results = ResultStore(db).results(limit=10)
    probe, diag = sorted(results, key=lambda r: r.id or 0)[-2:]
    assert f"net probe {probe.id}:" in shown["probe"]
    assert f"(result {diag.id})" in shown["diagnose"]

    # no word is split across lines: compare with the same output unwrapped
    def wide(*argv: str) -> str:
        return subprocess.run(
            [*dtnkit, *argv, "--wide"], env=env, capture_output=True, text=True, check=False
        ).stdout

    whole = {
        "audit": wide(*argvs["audit"]),
        "list": wide(*argvs["list"]),
        "status": wide(*argvs["status"]),
        # the progress lines ("network: iperf3 to X, 1 stream, 2 s", one per interval) are
        # printed before the stored result exists: their own words, a line of the screen
        # each (the width check above holds them to it)
        "probe": progress(shown["probe"], "net probe ")
        + wide_text(measure_render.probe_summary, probe),
    }
    doc = json.loads(
        subprocess.run(
            [*dtnkit, *argvs["diagnose"], "--format", "json"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    )
    # the JSON is another run's: its figures differ, its words do not; the progress lines
    # are this run's, as for the probe (an interval at "0 bit/s" on a loaded machine has a
    # word the verdict may not)
    whole["diagnose"] = progress(shown["diagnose"], "verdict:") + wide_text(
        measure_render.diagnosis, doc
    )
    for name in COMMANDS:
        assert "hidden to fit" not in whole[name]
        assert cut_words(shown[name], whole[name]) == [], (name, shown[name])


def test_the_cut_word_check_finds_a_cut() -> None:
    """The check above can fail: a word wrapped mid-word is found, a changed number is not."""
    whole = "net.core.rmem_default  ok  212992  because the window is small\n"
    assert cut_words("net.core.rmem_defa\nult  ok  212992\n", whole) == [
        "net.core.rmem_defa",
        "ult",
    ]
    assert cut_words("net.core.rmem_default ok 312992 because the\nwindow is small", whole) == []
    # cut in three, within a table cell (other columns' words on the same lines)
    assert cut_words("ok net.core.rm\nem_def  212992\nault", whole) == ["em_def", "net.core.rm"]
    # words only this run has (another verdict: "keep the host as it is") are not cuts
    assert cut_words("keep the host as it\nis", whole + "hosts items") == []
