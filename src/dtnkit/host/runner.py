"""How commands run: for real (:class:`SubprocessRunner`), or any object with ``run``.

A :class:`Result` is what a command printed and how it ended; runners never raise for a
failing command, so callers decide what a non-zero exit means.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Result:
    """What a command printed and how it ended."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def message(self) -> str:
        """The most useful one-line description of a failure."""
        text = (self.stderr or self.stdout).strip().splitlines()
        first = text[0] if text else f"exit status {self.returncode}"
        return f"`{' '.join(self.argv)}` failed: {first}"


class Runner(Protocol):
    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result: ...


class SubprocessRunner:
    """Runs commands for real.  A missing binary is exit 127, as a shell reports it."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        from dtnkit.host import process  # here: a live host audit starts no process

        argv = tuple(argv)
        try:
            proc = process.run(
                argv,
                input=stdin,
                errors="replace",  # output that is not UTF-8: U+FFFD, as Host.read reads files
                timeout=self.timeout,
                env={**os.environ, "LC_ALL": "C"},
            )
        except FileNotFoundError:
            return Result(argv, 127, "", f"{argv[0]}: command not found")
        except process.TimeoutExpired:
            return Result(argv, 124, "", f"timed out after {self.timeout:.0f} s")
        return Result(argv, proc.returncode, proc.stdout, proc.stderr)
