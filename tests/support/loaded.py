"""What a fresh ``dtnkit`` process had loaded when it exited: its modules, and the dataclasses
of dtnkit's modules (each compiles its methods at import, ~3.5 M instructions), for the tests
that keep start-up quick without timing anything."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

#: run as ``python -c PROBE LISTING ARGV...``: ``dtnkit ARGV`` through the console entry point,
#: and at exit a JSON document in LISTING: ``modules`` (sorted) and ``dataclasses`` (names)
PROBE = r"""
import atexit, json, sys
out = sys.argv[1]
def dump():
    classes = sorted({v.__name__ for m in list(sys.modules.values())
                      if getattr(m, "__name__", "").startswith("dtnkit")
                      for v in list(vars(m).values())
                      if isinstance(v, type) and "__dataclass_fields__" in vars(v)
                      and v.__module__ == m.__name__})
    with open(out, "w") as fh:
        json.dump({"modules": sorted(sys.modules), "dataclasses": classes}, fh)
atexit.register(dump)
sys.argv = ["dtnkit", *sys.argv[2:]]
from dtnkit.cli.main import entry
entry()
"""


def probe(
    listing: Path, *argv: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``dtnkit ARGV`` in a fresh interpreter, its listing written to *listing* at exit."""
    return subprocess.run(
        [sys.executable, "-c", PROBE, str(listing), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def offending(loaded: Iterable[str], banned: tuple[str, ...]) -> list[str]:
    """Banned modules that were loaded (a banned package counts with any of its modules)."""
    return sorted(m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned))
