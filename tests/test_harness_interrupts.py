"""The test run's own harness: every child it starts can be interrupted with Ctrl-C, also
when pytest itself was started as a shell's background job (SIGINT ignored, inherited)."""

from __future__ import annotations

import subprocess
import sys


def test_a_child_of_the_run_gets_sigint_s_default_handler() -> None:
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert out.strip() == "True"  # not ignored: the ctrl-c tests' children stop on SIGINT
