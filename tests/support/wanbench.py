"""bench/bench_cp_wan.py loaded as a module, for the tests of its pure parts (verdicts, orders,
floors): each test file under a module name of its own, removed again afterwards."""

from __future__ import annotations

import contextlib
import importlib.util
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
