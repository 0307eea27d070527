"""Ctrl-C at the terminal on a `dtnkit cp` run under `dtnkit lab exec` (tmux types it):
the copy keeps its journal, and the rerun resumes from the kept blocks."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.errors import ExitStatus
from dtnkit.transfer.client.journals import journal_path, part_path

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]
NEEDS = [t for t in ("ip", "iptables") if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")


def dtnkit_argv() -> list[str]:
    script = Path(sys.executable).with_name("dtnkit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dtnkit.cli.main"]


@pytest.fixture
def lab_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(
        DTNKIT_LAB_STATE=str(tmp_path / "lab"),
        DTNKIT_STATE_DIR=str(tmp_path / "state"),
        DTNKIT_DB=str(tmp_path / "results.sqlite"),
    )
    return env


@pytest.fixture
def lab_name(lab_env: dict[str, str]) -> Iterator[str]:
    """A small rate-capped path, built and removed the way a user does (`lab up`/`lab down`)."""
    name = f"lxs{secrets.token_hex(3)}"
    subprocess.run(
        [*dtnkit_argv(), "lab", "up", name, "--rtt", "10ms", "--rate", "100mbit"],
        env=lab_env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        yield name
    finally:
        subprocess.run(
            [*dtnkit_argv(), "lab", "down", name, "--missing-ok"],
            env=lab_env,
            check=False,
            capture_output=True,
            timeout=120,
        )


def _started(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """Start argv and wait for its first line, `ready` (the command's trap is in place)."""
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=30)
    return proc


def _wait_for(what: str, check: object, timeout: float = 120) -> None:
    """Poll ``check`` (a condition on the disk, not a timing guess) until it holds."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@needs_tools
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_ctrl_c_on_a_cp_under_lab_exec_keeps_its_journal_and_the_rerun_resumes(
    tmp_path: Path, lab_env: dict[str, str], lab_name: str
) -> None:
    dtnkit = dtnkit_argv()
    hosts = json.loads(
        subprocess.run(
            [*dtnkit, "lab", "status", lab_name, "--no-measure", "--format", "json"],
            env=lab_env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    src_addr = next(h["address"] for h in hosts["hosts"] if h["name"] == "src")
    root = tmp_path / "srv"
    root.mkdir()
    data = os.urandom(48 * 2**20)  # about 4 s at the path's 100 Mbit/s
    (root / "f.bin").write_bytes(data)
    serve = subprocess.Popen(
        [
            *dtnkit,
            "lab",
            "exec",
            lab_name,
            "src",
            "--",
            *dtnkit,
            "serve",
            "--root",
            str(root),
            "--host",
            src_addr,
            "--port",
            "0",
            "--anonymous-read",
            "--quiet",
        ],
        env=lab_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    sock = tmp_path / "tmux.sock"
    tmux = ["tmux", "-S", str(sock), "-f", "/dev/null"]
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert "listening on " in line, line
        url = line.split("listening on ", 1)[1].split()[0] + "f.bin"
        dst = tmp_path / "got" / "f.bin"
        dst.parent.mkdir()
        cp = shlex.join(
            [
                *dtnkit,
                "lab",
                "exec",
                lab_name,
                "dst",
                "--",
                *dtnkit,
                "cp",
                url,
                str(dst),
                "--block-size",
                "1M",
                "--format",
                "json",
            ]
        )
        out = {n: tmp_path / n for n in ("first", "second")}
        lines = ["trap : INT"]  # the pane's shell outlives the Ctrl-C; its children do not
        for n, path in out.items():
            lines += [
                f"{cp} > {path}.json; echo $? > {path}.rc",
                f"{shlex.join(tmux)} wait-for -S {n}-{sock.name}",
            ]
        lines.append("read -r _")
        script = tmp_path / "pane.sh"
        script.write_text("\n".join(lines) + "\n")
        subprocess.run(
            [
                *tmux,
                "new-session",
                "-d",
                "-x",
                "80",
                "-y",
                "30",
                "-s",
                "lxs",
                f"sh {shlex.quote(str(script))}",
            ],
            env=lab_env,
            check=True,
        )
        part = part_path(dst)
        # mid-copy: at least 8 MiB of the 48 MiB on disk (the part file is sparse until then)
        _wait_for(
            "the copy to start", lambda: part.exists() and part.stat().st_blocks * 512 >= 8 * 2**20
        )
        subprocess.run([*tmux, "send-keys", "-t", "lxs", "C-c"], check=True)
        subprocess.run([*tmux, "wait-for", f"first-{sock.name}"], check=True, timeout=120)
        assert int(Path(f"{out['first']}.rc").read_text()) == ExitStatus.INTERRUPTED
        assert journal_path(dst).exists() and not dst.exists()
        subprocess.run([*tmux, "wait-for", f"second-{sock.name}"], check=True, timeout=180)
        assert int(Path(f"{out['second']}.rc").read_text()) == 0
        doc = json.loads(Path(f"{out['second']}.json").read_text())
        assert doc["resumed_blocks"] > 0, doc
        assert dst.read_bytes() == data
        assert not journal_path(dst).exists()
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
        if serve.stdout is not None:
            serve.stdout.close()
