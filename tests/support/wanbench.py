"""bench/bench_cp_wan.py loaded as a module, for the tests of its pure parts (verdicts, orders,
floors): each test file under a module name of its own, removed again afterwards."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_cp_wan.py"


@contextlib.contextmanager
def loaded(name: str) -> Iterator[ModuleType]:
    """The bench script as module *name* (its own imports, e.g. benchlib, found beside it)."""
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location(name, BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
        sys.path.remove(str(BENCH.parent))


#: Where the bench keeps its labs' state (its STATE_ROOT).
STATE_ROOT = Path("/run/dtnkit/bench-wan")


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
            if f"dtnkit-wanbench-{prefix}-".encode() in cmdline:
                found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def own_leftovers(prefix: str) -> list[str]:
    """Namespaces, name files, work directories and processes carrying a run's prefix."""
    from dtnkit.lab import path as lab

    found = [n for n in lab._netns_list() if n.startswith(f"dkl-{prefix}")]
    found += [str(d) for d in Path("/etc/netns").glob(f"dkl-{prefix}*")]
    found += [str(d) for d in Path("/dev/shm").glob(f"dtnkit-wanbench-{prefix}-*")]
    return found + own_processes(prefix)


def clean(prefix: str) -> None:
    """Remove whatever a run with *prefix* left (a test's own, whatever the test did)."""
    from dtnkit.lab import path as lab

    lab.down_all(state_root=STATE_ROOT, prefix=prefix)
    for d in Path("/dev/shm").glob(f"dtnkit-wanbench-{prefix}-*"):
        shutil.rmtree(d, ignore_errors=True)
