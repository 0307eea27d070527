"""Progress on long runs: the commands run as a user runs them, as subprocesses with stderr on a
pseudo-terminal, and print their progress lines there (with the right k of n); with stderr on
a pipe, or with ``--format json``, they print none.

Real tools throughout: iperf3 on localhost, fio in a temporary directory, ``dtnkit cp``
through a real ``dtnkit serve``, and a lab path for ``lab up``, ``experiment`` and ``diagnose``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.ports import free_port
from tests.support.served import serve_subprocess

from dtnkit.errors import ExitStatus

NET_LINE = re.compile(
    r"^ {4}\d+\.\d-\d+\.\d s +[\d.]+ (B|KiB|MiB|GiB) +[\d.]+ [kMGT]?bit/s"
    r" +\d+$",
    re.M,
)
DISK_LINE = re.compile(
    r"^ {4}(write|read) +\d+\.\d-\d+\.\d s +[\d.]+ [kMGT]?bit/s +"
    r"[\d.]+ (B|KiB|MiB|GiB) of 16\.0 MiB \(\d+%\)$",
    re.M,
)
NEEDS = [t for t in ("iperf3", "fio") if shutil.which(t) is None]


@dataclass
class Ran:
    code: int
    out: str  # stdout (a pipe)
    err: str  # stderr: what the terminal (or the pipe) got, \r\n made \n


def _drain(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's last writer closed it
            return
        if not chunk:
            return
        into.append(chunk)


def dtnkit(
    *argv: str, tty: bool = True, env: dict[str, str] | None = None, timeout: float = 120
) -> Ran:
    """``python -m dtnkit ARGV`` with stdout on a pipe and stderr on a pseudo-terminal (or,
    with ``tty=False``, on a pipe too)."""
    environ = {**os.environ, "COLUMNS": "80", **(env or {})}
    if not tty:
        proc = subprocess.run(
            [sys.executable, "-m", "dtnkit", *argv],
            capture_output=True,
            text=True,
            env=environ,
            timeout=timeout,
            check=False,
        )
        return Ran(proc.returncode, proc.stdout, proc.stderr)
    master, slave = os.openpty()
    got: list[bytes] = []
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dtnkit", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=environ,
        )
        os.close(slave)
        slave = -1
        reader = threading.Thread(target=_drain, args=(master, got), daemon=True)
        reader.start()
        out, _ = proc.communicate(timeout=timeout)
        reader.join(timeout=10)
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)
    return Ran(proc.returncode, out.decode(), b"".join(got).decode().replace("\r\n", "\n"))


def no_progress(text: str) -> bool:
    return not (
        NET_LINE.search(text)
        or DISK_LINE.search(text)
        or "Interval" in text
        or re.search(r"^\[\d+/\d+\]", text, re.M)
    )


# ---- probe net -------------------------------------------------------------------------------
@pytest.mark.skipif("iperf3" in NEEDS, reason="needs iperf3")
def test_probe_net_prints_an_interval_line_per_sample_on_a_terminal(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    ran = dtnkit(
        "probe",
        "net",
        "--peer",
        "localhost",
        "--duration",
        "3",
        "--interval",
        "1",
        "--port",
        str(free_port()),
        "--db",
        db,
    )
    assert ran.code == 0, ran.err
    assert "network: iperf3 to localhost, 1 stream, 3 s" in ran.err
    assert "Interval" in ran.err and "Bitrate" in ran.err and "Retr" in ran.err
    lines = NET_LINE.findall(ran.err)
    assert len(lines) >= 2, ran.err  # 3 s sampled each second: one line per sample
    assert no_progress(ran.out)  # progress goes to the terminal, never to stdout
    assert "net probe" in ran.out


@pytest.mark.skipif("iperf3" in NEEDS, reason="needs iperf3")
def test_probe_net_prints_no_progress_on_a_pipe_or_in_json(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    piped = dtnkit(
        "probe",
        "net",
        "--peer",
        "localhost",
        "--duration",
        "2",
        "--interval",
        "0.5",
        "--port",
        str(free_port()),
        "--db",
        db,
        tty=False,
    )
    assert piped.code == 0, piped.err
    assert piped.err == ""
    as_json = dtnkit(
        "probe",
        "net",
        "--peer",
        "localhost",
        "--duration",
        "2",
        "--interval",
        "0.5",
        "--port",
        str(free_port()),
        "--db",
        db,
        "--format",
        "json",
    )
    assert as_json.code == 0, as_json.err
    assert as_json.err == ""  # a terminal, but JSON mode: not a line
    assert json.loads(as_json.out)["kind"] == "net"


# ---- probe disk ------------------------------------------------------------------------------
@pytest.mark.skipif("fio" in NEEDS, reason="needs fio")
def test_probe_disk_reports_the_write_then_the_read(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = str(tmp_path / "r.sqlite")
    ran = dtnkit("probe", "disk", "--path", str(data), "--size", "16MiB", "--db", db)
    assert ran.code == 0, ran.err
    assert f"storage: fio on {data}, 16.0 MiB written, then read" in ran.err
    phases = [m.group(1) for m in DISK_LINE.finditer(ran.err)]
    assert "write" in phases and "read" in phases, ran.err
    assert phases.index("read") > max(i for i, p in enumerate(phases) if p == "write")
    assert list(data.iterdir()) == []  # the probe file is gone
    # the stored figures come from fio's final report, not from a status report
    stored = dtnkit("results", "list", "--db", db, "--format", "json", tty=False)
    summary = json.loads(stored.out)[0]["summary"]
    assert summary["size_bytes"] == 16 * 2**20 and summary["read_bps"] > 0

    quiet = dtnkit("probe", "disk", "--path", str(data), "--size", "16MiB", "--db", db, tty=False)
    assert quiet.code == 0 and quiet.err == "", quiet.err


# ---- probe e2e through a real dtnkit serve ---------------------------------------------------
TOKEN = "prg-token"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``dtnkit serve`` on 127.0.0.1 as a subprocess: its URL and root."""
    with serve_subprocess(tmp_path, TOKEN) as served:
        yield served


def test_probe_e2e_moves_with_dtnkit_cp_by_default_and_shows_it(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = served
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(2**20 + 3))
    ran = dtnkit(
        "probe",
        "e2e",
        str(src),
        f"{url}up.bin",
        "--interval",
        "0.5",
        "--db",
        str(tmp_path / "r.sqlite"),
        env={"DTNKIT_TOKEN": TOKEN},
    )
    assert ran.code == 0, ran.err
    assert (root / "up.bin").read_bytes() == src.read_bytes()
    assert f"end to end: {src} -> {url}up.bin with dtnkit cp" in ran.err
    assert re.search(r"^ {4}transfer: \d+ s$", ran.err, re.M), ran.err
    assert "e2e probe" in ran.out

    down = dtnkit(
        "probe",
        "e2e",
        f"{url}up.bin",
        str(tmp_path / "down.bin"),
        "--db",
        str(tmp_path / "r.sqlite"),
        "--format",
        "json",
    )
    assert down.code == 0 and down.err == "", down.err
    assert json.loads(down.out)["spec"]["tool"] == "dtnkit-cp"


@pytest.mark.parametrize(
    ("dst", "what", "hint"),
    [
        ("{tmp}/dst.bin", "no URL in", "--command 'cp {src} {dst}'"),
        ("root://peer//data/f", "dtnkit cp does not speak root://", "xrdcp"),
    ],
)
def test_probe_e2e_without_a_url_says_what_to_give(
    tmp_path: Path, dst: str, what: str, hint: str
) -> None:
    """Two local paths (or XRootD's protocol) and no --command: one error naming the way out,
    before any mover runs (it used to run dtnkit cp, which failed with its own error inside
    the probe's: two "Next:" on one line, exit 1)."""
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 4096)
    target = dst.format(tmp=tmp_path)
    ran = dtnkit(
        "probe",
        "e2e",
        str(src),
        target,
        "--db",
        str(tmp_path / "r.sqlite"),
        "--format",
        "json",
        tty=False,
    )
    assert ran.code == ExitStatus.BAD_INPUT, ran.err
    err = json.loads(ran.out)["error"]
    assert err["what"].startswith(what) and hint in err["next"], err
    assert ran.err.count("Next:") == 1 and len(ran.err.strip().splitlines()) == 1
    assert not (tmp_path / "dst.bin").exists()


def test_diagnose_refuses_an_e2e_without_a_url_before_probing(tmp_path: Path) -> None:
    """Checked before the network probe runs (it used to fail after 10 s of iperf3)."""
    db = tmp_path / "r.sqlite"
    ran = dtnkit(
        "diagnose",
        "--peer",
        "localhost",
        "--e2e",
        str(tmp_path / "a"),
        str(tmp_path / "b"),
        "--db",
        str(db),
        "--format",
        "json",
    )
    assert ran.code == ExitStatus.BAD_INPUT, ran.err
    assert json.loads(ran.out)["error"]["what"].startswith("no URL in")
    assert no_progress(ran.err) and not db.exists()  # no probe ran, nothing stored


# ---- lab up, experiment and diagnose on a lab path ------------------------------------------
@contextlib.contextmanager
def serve_in(netns: str, address: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`dtnkit serve` inside a namespace, on its address (a free port)."""
    root = tmp_path / "lab-served"
    root.mkdir()
    tokens = tmp_path / "lab-tokens"
    tokens.write_text(f"{TOKEN} read,write\n")
    proc = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            netns,
            sys.executable,
            "-m",
            "dtnkit",
            "serve",
            "--root",
            str(root),
            "--host",
            address,
            "--port",
            "0",
            "--tokens",
            str(tokens),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://[0-9.]+:[0-9]+/)", line)
        assert m, line
        yield m.group(1), root
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_lab_up_experiment_and_diagnose_count_their_steps(tmp_path: Path) -> None:
    """On a lab path: `lab up` (3 steps), an experiment (2 runs), and diagnose over all three
    layers, its end-to-end probe moving a file with dtnkit cp to a `dtnkit serve` in the dst
    host's namespace."""
    name = f"prg{secrets.token_hex(3)}"
    env = {"DTNKIT_LAB_STATE": str(tmp_path / "lab")}
    db, state = str(tmp_path / "r.sqlite"), str(tmp_path / "state")
    up = dtnkit("lab", "up", name, "--rtt", "10ms", env=env)
    try:
        assert up.code == 0, up.err
        steps = re.findall(r"^\[(\d)/(\d)\] (\w+)", up.err, re.M)
        assert steps == [("1", "3", "namespaces"), ("2", "3", "links"), ("3", "3", "path")]
        ns = f"dkl-{name}-src"
        for key in ("tcp_rmem", "tcp_wmem"):  # small buffers: the group has work to do
            subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sh",
                    "-c",
                    f"echo 4096 16384 65536 > /proc/sys/net/ipv4/{key}",
                ],
                check=True,
            )

        exp = dtnkit(
            "experiment",
            "--groups",
            "buffers",
            "--peer",
            f"{name}/dst",
            "--netns",
            ns,
            "--repeat",
            "1",
            "--duration",
            "2",
            "--interval",
            "0.5",
            "--rtt",
            "10ms",
            "--state-dir",
            state,
            "--db",
            db,
            env=env,
        )
        assert exp.code == 0, exp.err
        runs = re.findall(
            r"^\[(\d)/(\d)\] group buffers \(1 of 1\): (\w+) run 1 of 1(, ETA "
            r"\d+s)?$",
            exp.err,
            re.M,
        )
        assert [r[:3] for r in runs] == [("1", "2", "baseline"), ("2", "2", "applied")], exp.err
        assert runs[0][3] == "" and runs[1][3]  # the time left, once one run is timed
        assert len(NET_LINE.findall(exp.err)) >= 4  # the runs' own intervals

        data = tmp_path / "data"
        data.mkdir()
        src = data / "src.bin"
        src.write_bytes(os.urandom(2**20))
        status = json.loads(
            dtnkit(
                "lab", "status", name, "--no-measure", "--format", "json", env=env, tty=False
            ).out
        )
        dst = next(h for h in status["hosts"] if h["name"] == "dst")
        with serve_in(dst["netns"], dst["address"], tmp_path) as (url, root):
            diag = dtnkit(
                "diagnose",
                "--peer",
                f"{name}/dst",
                "--netns",
                ns,
                "--duration",
                "2",
                "--interval",
                "0.4",
                "--path",
                str(data),
                "--size",
                "16MiB",
                "--e2e",
                str(src),
                f"{url}up.bin",
                "--state-dir",
                state,
                "--db",
                db,
                env={**env, "DTNKIT_TOKEN": TOKEN},
            )
            assert diag.code != ExitStatus.ERROR, diag.err
            assert (root / "up.bin").read_bytes() == src.read_bytes()
        layers = re.findall(r"^\[(\d)/(\d)\] ([\w ]+):", diag.err, re.M)
        assert layers == [("1", "3", "network"), ("2", "3", "storage"), ("3", "3", "end to end")], (
            diag.err
        )
        assert NET_LINE.search(diag.err) and DISK_LINE.search(diag.err)
        assert "with dtnkit cp\n" in diag.err

        quiet = dtnkit(
            "diagnose",
            "--peer",
            f"{name}/dst",
            "--netns",
            ns,
            "--duration",
            "1",
            "--interval",
            "0.2",
            "--state-dir",
            state,
            "--db",
            db,
            "--format",
            "json",
            env=env,
        )
        assert quiet.err == "" and "verdict" in json.loads(quiet.out)
    finally:
        down = dtnkit("lab", "down", name, "--missing-ok", env=env, tty=False)
        assert down.code == 0, down.err
