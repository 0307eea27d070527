"""Bad input gets one clear error (what, why, next), a documented exit code, and no change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import Netns
from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["tune", "audit", "--group", "nosuch"], "unknown group nosuch"),
        (["tune", "audit", "--iface", "dknosuch0"], "unknown interface dknosuch0"),
        (["tune", "audit", "--profile", "nosuch"], "unknown profile 'nosuch'"),
        (["tune", "audit", "--rtt", "fast"], "bad RTT"),
        (["tune", "audit", "--netns", "../../etc"], "bad namespace name"),
        (["tune", "audit", "--netns", "dknosuchns"], "no network namespace"),
        (["tune", "show", "nosuch", "--state-dir", "/nonexistent-dk"], "no snapshot"),
        (["tune", "restore", "--state-dir", "/nonexistent-dk"], "no baseline has been saved"),
        (["tune", "apply", "--wait", "nan", "--state-dir", "/nonexistent-dk"], "bad --wait"),
        (["tune", "apply", "--wait", "-5s", "--state-dir", "/nonexistent-dk"], "bad --wait"),
        (["tune", "restore", "last", "--wait", "1h", "--state-dir", "/nonexistent-dk"], "wait"),
    ],
)
def test_bad_input_is_one_line_with_what_why_next(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == ExitStatus.BAD_INPUT
    assert err.startswith("dtnkit: error: ")
    assert fragment in err
    assert "Next:" in err or "pick" in err or "see" in err
    assert out == ""


def test_json_mode_errors_are_json_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(capsys, "tune", "audit", "--group", "nosuch", "--format", "json")
    assert code == ExitStatus.BAD_INPUT
    doc = json.loads(out)
    assert doc["error"]["exit_status"] == ExitStatus.BAD_INPUT
    assert doc["error"]["what"] == "unknown group nosuch"
    assert "groups:" in doc["error"]["why"]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "tune", "audit", "--format", "yaml")
    assert code == ExitStatus.USAGE
    assert "yaml" in err


def test_malformed_profile_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[tune\n")
    state = tmp_path / "state"
    code, _, err = run(capsys, "tune", "apply", "--profile", str(bad), "--state-dir", str(state))
    assert code == ExitStatus.BAD_INPUT
    assert "not valid TOML" in err
    assert not state.exists()


def test_help_lists_every_tune_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "tune", "--help")
    assert code == 0
    for cmd in ("audit", "apply", "save", "list", "show", "diff", "restore", "delete"):
        assert cmd in out


@pytest.mark.needs_root
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["tune", "apply", "--group", "congestion", "--state-dir", "{pub}/state"], "needs root"),
        (["lab", "up", "dknobody", "--rtt", "10ms"], "dtnkit lab needs root"),
    ],
)
def test_non_root_gets_a_clear_message(argv: list[str], fragment: str) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux)")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    # a world-readable copy of the package: the checkout may sit under a private home
    pub = Path(tempfile.mkdtemp(prefix="dkcli-"))
    try:
        pub.chmod(0o755)
        shutil.copytree(Path(__file__).parents[2] / "src" / "dtnkit", pub / "dtnkit")
        env = {**os.environ, "PYTHONPATH": str(pub), "PYTHONDONTWRITEBYTECODE": "1"}
        probe = subprocess.run(
            [*nobody, sys.executable, "-c", "import click, rich, dtnkit"],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        if probe.returncode != 0:
            pytest.skip(f"this Python cannot run as an unprivileged user: {probe.stderr[-200:]}")
        args = [a.format(pub=pub) for a in argv]
        code = f"import sys; from dtnkit.cli.main import main; sys.exit(main({args!r}))"
        proc = subprocess.run(
            [*nobody, sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
    finally:
        shutil.rmtree(pub, ignore_errors=True)
    assert proc.returncode == ExitStatus.NEEDS_ROOT, proc.stderr
    assert fragment in proc.stderr and "sudo" in proc.stderr
    assert not Path("/run/dtnkit/lab/dknobody").exists()


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_missing_ethtool_is_named_with_the_package(
    netns: Netns,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = netns.state()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("ip", "tc", "cat", "test", "ls", "tee", "pgrep"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bindir))
    code, _, err = run(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--group",
        "offloads",
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert code == ExitStatus.TOOL_MISSING
    assert "`ethtool` is not installed" in err and "apt-get install ethtool" in err
    # groups that need no ethtool still work
    code, _, _ = run(capsys, "tune", "audit", "--netns", netns.name, "--group", "congestion")
    assert code in (ExitStatus.OK, ExitStatus.DRIFT)
    monkeypatch.undo()
    assert netns.state() == before
