"""What a run of ``python -m bench wan`` leaves behind, found by its prefix (its lab paths, its
work directories, the processes that carry them), and how a test removes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.lib.wan.lab import STATE_ROOT, WORK_PREFIX

__all__ = ["STATE_ROOT", "clean", "own_leftovers", "own_processes"]


def own_processes(prefix: str) -> list[str]:
    """Command lines of the processes that carry a run's work directory (its servers: dtnkit
    serve, XRootD, iperf3 -s --logfile)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if f"{WORK_PREFIX}{prefix}-".encode() in cmdline:
                found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def own_leftovers(prefix: str) -> list[str]:
    """Namespaces, name files, work directories and processes carrying a run's prefix."""
    from dtnkit.lab import path as lab

    found = [n for n in lab._netns_list() if n.startswith(f"dkl-{prefix}")]
    found += [str(d) for d in Path("/etc/netns").glob(f"dkl-{prefix}*")]
    found += [str(d) for d in Path("/dev/shm").glob(f"{WORK_PREFIX}{prefix}-*")]
    return found + own_processes(prefix)


def clean(prefix: str) -> None:
    """Remove whatever a run with *prefix* left (a test's own, whatever the test did)."""
    from dtnkit.lab import path as lab

    lab.down_all(state_root=STATE_ROOT, prefix=prefix)
    for d in Path("/dev/shm").glob(f"{WORK_PREFIX}{prefix}-*"):
        shutil.rmtree(d, ignore_errors=True)
