"""Parsers for ``tuned-adm active`` and ``tuned-adm verify``.

The formats (checked against the real captures under ``tests/fixtures/captured``):

tuned
    ``tuned-adm active``: ``Current active profile: NAME`` or ``No current active profile.``
    (or, with the daemon stopped, ``It seems that tuned daemon is not running, preset profile
    is not activated.`` / ``Preset profile: NAME``). ``tuned-adm verify``: ``Verification
    succeeded, ...`` or ``Verification failed, ...`` followed by advice lines.
"""

from __future__ import annotations

from dtnkit.host.parsers import (
    ParseError,
    error_at,
    require_text,
)


def parse_tuned_active(text: str) -> str | None:
    """The active tuned profile from ``tuned-adm active``; ``None`` when none is active.

    A stopped daemon ("preset profile is not activated") also gives ``None``. A merged profile
    (``a b``) is returned as printed.
    """
    source = "tuned-adm active"
    require_text(text, source)
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("Current active profile:"):
            profile = stripped.partition(":")[2].strip()
            if not profile:
                raise error_at(source, "empty profile name", lineno, line)
            return profile
        if stripped == "No current active profile.":
            return None
        if "preset profile is not activated" in stripped:
            return None
    raise ParseError(f"{source}: no 'Current active profile:' or 'No current active profile.' line")


def parse_tuned_verify(text: str) -> tuple[bool, list[str]]:
    """``(passed, lines)`` from ``tuned-adm verify`` stdout; ``lines`` are the non-blank lines."""
    source = "tuned-adm verify"
    require_text(text, source)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("Verification succeeded"):
            return True, lines
        if line.startswith("Verification failed"):
            return False, lines
    raise ParseError(f"{source}: no 'Verification succeeded' or 'Verification failed' line")
