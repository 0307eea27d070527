"""Run a command inside cgroups from its birth: this process writes its own PID into each
``cgroup.procs`` file it is given, then execs the command (same PID: every thread and child
of the command starts inside).  Lab's slow disk, sweep's CPU quotas and ``measure disk
--cgroup`` start their tools through it::

    python -m dtnkit.host.cgexec /sys/fs/cgroup/q/cgroup.procs -- fio --filename=...

Exit status 126 when a procs file cannot be written (nothing is run then), 127 when the
command is not found; otherwise the command's own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

CANNOT_ENTER = 126
NOT_FOUND = 127


def command(procs_files: Sequence[str], argv: Sequence[str]) -> list[str]:
    """The argv that runs *argv* inside the cgroups of *procs_files* (``cgroup.procs``
    paths)."""
    return [sys.executable, "-m", "dtnkit.host.cgexec", *procs_files, "--", *argv]


def main(args: Sequence[str]) -> int:
    """Enter the cgroups and exec the command (returns only when that fails)."""
    if "--" not in args:
        print(
            "usage: python -m dtnkit.host.cgexec PROCS_FILE... -- COMMAND [ARG...]", file=sys.stderr
        )
        return 2
    cut = list(args).index("--")
    files, argv = args[:cut], args[cut + 1 :]
    if not argv:
        print("dtnkit.host.cgexec: no command to run", file=sys.stderr)
        return 2
    for path in files:
        try:
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            print(
                f"dtnkit.host.cgexec: cannot enter {path}: {exc.strerror or exc}", file=sys.stderr
            )
            return CANNOT_ENTER
    sys.stdout.flush()
    try:
        os.execvp(argv[0], list(argv))
    except FileNotFoundError:
        print(f"dtnkit.host.cgexec: {argv[0]}: command not found", file=sys.stderr)
        return NOT_FOUND
    except OSError as exc:
        print(f"dtnkit.host.cgexec: {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return CANNOT_ENTER
    return CANNOT_ENTER  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
