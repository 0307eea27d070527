"""Where the captured and synthetic tool outputs live, and how tests read them.

``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local`` (captured on
the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail) and
``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CAPTURED = FIXTURES / "captured"
LOCAL = CAPTURED / "local"
MAIL = CAPTURED / "mail"
SYNTHETIC = FIXTURES / "synthetic"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def captured(name: str) -> str:
    return read(CAPTURED / name)


def local(name: str) -> str:
    return read(LOCAL / name)


def synthetic(name: str) -> str:
    return read(SYNTHETIC / name)
