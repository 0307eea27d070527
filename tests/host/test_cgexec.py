"""`python -m dtnkit.host.cgexec PROCS... -- ARGV`: the PID written into each procs file is the
command's own (it execs in place), its arguments arrive as given, and a failure to enter or
to find the command is an exit status, with nothing run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.host import cgexec


def test_the_command_runs_with_the_pid_written_into_each_procs_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.procs", tmp_path / "b.procs"
    proc = subprocess.run(
        cgexec.command([str(a), str(b)], ["sh", "-c", "echo $$; exit 3"]),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert a.read_text() == b.read_text() == proc.stdout.strip()


def test_a_procs_file_it_cannot_write_runs_nothing(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    proc = subprocess.run(
        cgexec.command([str(tmp_path / "no" / "cgroup.procs")], ["touch", str(ran)]),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == cgexec.CANNOT_ENTER
    assert "cannot enter" in proc.stderr
    assert not ran.exists()


def test_a_missing_command_is_127(tmp_path: Path) -> None:
    proc = subprocess.run(
        cgexec.command([str(tmp_path / "procs")], ["im-no-such-command"]),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == cgexec.NOT_FOUND
    assert "im-no-such-command: command not found" in proc.stderr


def test_no_separator_or_no_command_is_a_usage_error() -> None:
    assert cgexec.main(["x"]) == 2
    assert cgexec.main(["x", "--"]) == 2


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=20), max_size=5
    )
)
def test_arguments_arrive_as_given(args: list[str]) -> None:
    procs = Path(subprocess.check_output(["mktemp"], text=True).strip())
    try:
        show = [sys.executable, "-c", "import sys; print(repr(sys.argv[1:]))"]
        out = subprocess.run(
            cgexec.command([str(procs)], [*show, *args]),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        assert out.strip() == repr(args)
    finally:
        procs.unlink()
