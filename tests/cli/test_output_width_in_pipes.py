"""Output for people takes the width of the terminal the person reads it in, also through a
pipe: `dtnkit tune audit | tee log` in an 80-column terminal draws 80 columns (before: 160,
the width dtnkit assumed whenever stdout was not a terminal).  $COLUMNS still wins; with no
terminal at all (cron, a service) the width is 80.

In a terminal, `dtnkit cp`'s progress bar and its notes (the `--streams auto` decision) never
share a line, and the decision is one line (`-v` says why in full).

The terminal is a real one: a pty of this test's own, or a pane of a tmux server of this
test's own (its own socket) at 80x40.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shlex
import shutil
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import HOSTS
from dtnkit.environment import FALLBACK_WIDTH, Environment, terminal_width

WIDTH, HEIGHT = 80, 40
TREE = str(HOSTS / "dtn-a")
NEEDS_TMUX = shutil.which("tmux") is None


def dtnkit_argv() -> list[str]:
    """How to start dtnkit: the console script beside this Python, else `python -m`."""
    script = Path(sys.executable).with_name("dtnkit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dtnkit"]


@pytest.fixture
def pty_of(request: pytest.FixtureRequest) -> Iterator[tuple[int, str]]:
    """A pty whose terminal is ``request.param`` columns wide: (its slave fd, its path)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, request.param, 0, 0))
    try:
        yield slave, os.ttyname(slave)
    finally:
        os.close(slave)
        os.close(master)


def lines_longest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


# ---- the width, from the streams and the controlling terminal --------------------------------
@pytest.mark.parametrize("pty_of", [97], indirect=True)
def test_stderr_on_a_terminal_gives_the_width_to_piped_stdout(pty_of: tuple[int, str]) -> None:
    fd, _ = pty_of
    with open(fd, "w", closefd=False) as tty:
        # stdout a pipe (not a terminal), stderr the terminal: `dtnkit ... | tee log`
        assert terminal_width({}, (subprocess.PIPE, tty), tty=None) == 97
        # $COLUMNS still wins
        assert terminal_width({"COLUMNS": "120"}, (tty,), tty=None) == 120


@pytest.mark.parametrize("pty_of", [93], indirect=True)
def test_the_controlling_terminal_gives_the_width_when_both_streams_are_piped(
    pty_of: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dtnkit ... 2>&1 | tee log`: neither stream is a terminal, /dev/tty is."""
    _, path = pty_of
    monkeypatch.setattr("sys.__stdout__", None)
    monkeypatch.setattr("sys.__stderr__", None)
    assert terminal_width({}, (), tty=path) == 93
    monkeypatch.setattr("dtnkit.environment.TTY", path)  # what from_os asks
    import io

    env = Environment.from_os({}, stdout=io.StringIO(), stderr=io.StringIO())
    assert env.terminal_width == 93


def test_without_any_terminal_the_width_is_80(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("sys.__stdout__", None)
    monkeypatch.setattr("sys.__stderr__", None)
    assert terminal_width({}, (), tty=None) == FALLBACK_WIDTH == 80
    assert terminal_width({}, (), tty=str(tmp_path / "no-such-tty")) == 80
    plain = tmp_path / "file"
    plain.write_text("")
    assert terminal_width({}, (), tty=str(plain)) == 80  # a file is no terminal


def test_a_run_without_a_terminal_fits_80_columns(tmp_path: Path) -> None:
    """A process with no terminal at all (its own session, as under cron or systemd)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    res = subprocess.run(
        [*dtnkit_argv(), "tune", "audit", "--tree", TREE],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        start_new_session=True,
        check=False,
    )
    assert res.returncode in (0, 3), res.stderr
    assert "compliant" in res.stdout
    assert lines_longest(res.stdout) <= 80, res.stdout  # before: up to 160
    wide = subprocess.run(
        [*dtnkit_argv(), "tune", "audit", "--tree", TREE],
        env={**env, "COLUMNS": "160"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        start_new_session=True,
        check=False,
    )
    assert lines_longest(wide.stdout) > 80  # the same audit has longer lines to give


# ---- in a real terminal: tmux ----------------------------------------------------------------
@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[list[str]]:
    """tmux on a socket of this test's own; its server is ended with the test."""
    argv = ["tmux", "-S", str(tmp_path / "tmux.sock"), "-f", "/dev/null"]
    try:
        yield argv
    finally:
        subprocess.run([*argv, "kill-server"], capture_output=True, check=False)


def run_in_pane(
    tmux: list[str], tmp_path: Path, commands: list[str], env: dict[str, str], timeout: float = 120
) -> str:
    """Run ``commands`` (shell lines) one after the other in an 80x40 pane; the pane's text,
    every line the terminal wrapped joined again."""
    channel = f"ht-{secrets.token_hex(4)}"
    script = tmp_path / "pane.sh"
    script.write_text(
        "\n".join(
            [
                "unset COLUMNS LINES",
                *commands,
                f"{shlex.join(tmux)} wait-for -S {channel}",
                "read -r _",
            ]
        )
        + "\n"
    )
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
            "ht",
            f"sh {shlex.quote(str(script))}",
        ],
        env=env,
        check=True,
    )
    subprocess.run([*tmux, "wait-for", channel], check=True, timeout=timeout)
    size = subprocess.run(
        [*tmux, "display", "-p", "-t", "ht", "#{pane_width}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert size == str(WIDTH)
    return subprocess.run(
        [*tmux, "capture-pane", "-p", "-J", "-t", "ht", "-S", "-", "-E", "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.skipif(NEEDS_TMUX, reason="needs tmux")
def test_audit_piped_to_tee_is_drawn_for_the_80_column_terminal(
    tmp_path: Path, tmux: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    audit = shlex.join([*dtnkit_argv(), "tune", "audit", "--tree", TREE])
    logs = {name: tmp_path / f"{name}.log" for name in ("tee", "both", "columns")}
    run_in_pane(
        tmux,
        tmp_path,
        [
            f"{audit} | tee {logs['tee']} > /dev/null",  # stderr is the terminal
            f"{audit} 2>&1 | tee {logs['both']} > /dev/null",  # only /dev/tty is
            f"COLUMNS=120 {audit} | tee {logs['columns']} > /dev/null",  # $COLUMNS wins
        ],
        env,
    )
    text = {name: path.read_text() for name, path in logs.items()}
    for name in ("tee", "both"):
        assert "compliant" in text[name], text[name]
        assert lines_longest(text[name]) <= WIDTH, (name, text[name])  # before: 160
    assert WIDTH < lines_longest(text["columns"]) <= 120, text["columns"]
    assert text["tee"] == text["both"]  # the same screen, whichever stream told the width


# ---- cp's progress bar and its notes ---------------------------------------------------------
NEEDS_LAB = [t for t in ("tmux", "iptables") if shutil.which(t) is None]


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(NEEDS_LAB), reason=f"needs {', '.join(NEEDS_LAB)}")
def test_cp_bar_and_auto_streams_note_keep_their_own_lines(tmp_path: Path, tmux: list[str]) -> None:
    """`dtnkit cp --streams auto` in an 80-column terminal, downloading over a 20 ms, 200
    Mbit/s lab path long enough for the bar to be drawn while the decision is said: the note
    is one line of its own (before: written into the bar's line, and wrapped over three),
    the summary too, and no piece of the bar is left; `-v` gives the reasoning in full."""
    from dtnkit.lab import path as lab

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    state = tmp_path / "lab"
    env["DTNKIT_LAB_STATE"] = str(state)
    root = tmp_path / "srv"
    root.mkdir()
    (root / "f").write_bytes(os.urandom(24 * 2**20))
    with (
        lab.path(
            f"ht{secrets.token_hex(3)}", state_root=state, rtt_ms=20, rate_bps=200_000_000
        ) as p,
        open(tmp_path / "serve.log", "w") as log,
    ):
        server = p.src.popen(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "serve",
                "--root",
                str(root),
                "--host",
                p.src.address,
                "--port",
                "0",
                "--anonymous-read",
                "--format",
                "json",
            ],
            stderr=log,
        )
        try:
            assert server.stdout is not None
            url = json.loads(server.stdout.readline())["url"] + "f"
            cp = ["ip", "netns", "exec", p.dst.netns, *dtnkit_argv(), "cp", url]
            screen = run_in_pane(
                tmux,
                tmp_path,
                [
                    "echo '=== plain'",
                    shlex.join([*cp, str(tmp_path / "a"), "--streams", "auto"]),
                    "echo '=== verbose'",
                    shlex.join([*cp, str(tmp_path / "b"), "--streams", "auto", "-v"]),
                    "echo '=== end'",
                ],
                env,
            )
        finally:
            server.terminate()
            server.wait(10)
    assert (tmp_path / "a").read_bytes() == (root / "f").read_bytes()
    plain = screen.split("=== plain\n", 1)[1].split("=== verbose\n", 1)[0]
    verbose = screen.split("=== verbose\n", 1)[1].split("=== end", 1)[0]
    for shown in (plain, verbose):
        lines = [line.rstrip() for line in shown.splitlines() if line.strip()]
        assert not any(c in shown for c in "━─╸╺"), shown  # no piece of the bar is left
        assert any(line.startswith("dtnkit cp: ") for line in lines), shown
        # every line is a note or the summary: nothing written into another line
        assert all(line.startswith(("dtnkit cp: ", "copied 1 file, ")) for line in lines), shown
        assert sum(line.startswith("copied 1 file, ") for line in lines) == 1, shown
    notes = [line.rstrip() for line in plain.splitlines() if line.startswith("dtnkit cp: ")]
    assert all(len(line) <= WIDTH for line in notes), notes  # one line of the screen each
    assert "stream" in notes[0] and "-v" in notes[0], notes
    assert "tcp_rmem max" not in plain and "tcp_rmem max" in verbose, (plain, verbose)
