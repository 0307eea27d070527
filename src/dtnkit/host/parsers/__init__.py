"""Parsers for the text printed by the Linux tools and files dtnkit reads.

Pure functions: text in, typed data (frozen dataclasses, dicts, lists) out. Nothing here runs a
command or opens a file. Every parser raises :class:`ParseError` (a ``ValueError``) when it
cannot make sense of its input -- empty text where output is mandatory, invalid JSON, JSON of the
wrong shape, a line that fits no known form -- and never leaks ``IndexError``, ``KeyError`` or
``json.JSONDecodeError``.

One module per tool (:mod:`.sysctl`, :mod:`.ethtool`, :mod:`.iproute`, :mod:`.tc`, :mod:`.proc`,
:mod:`.tuned`), each documenting the formats it reads, as printed by ethtool 6.1 / iproute2 6.1
(Debian 12) and by newer releases, checked against the real captures under
``tests/fixtures/captured``.  This package module holds what they share: the error type and
small helpers.
"""

from __future__ import annotations

import json
from typing import Any


class ParseError(ValueError):
    """Text that a parser cannot make sense of.

    The message names the source (tool or file) and, where there is one, the 1-based line
    number, which is also kept in :attr:`lineno`.
    """

    def __init__(self, message: str, *, lineno: int | None = None) -> None:
        super().__init__(message)
        self.lineno = lineno


def error_at(
    source: str, message: str, lineno: int | None = None, line: str | None = None
) -> ParseError:
    where = f"{source}: line {lineno}: " if lineno is not None else f"{source}: "
    shown = f": {line.strip()[:200]!r}" if line is not None else ""
    return ParseError(f"{where}{message}{shown}", lineno=lineno)


def require_text(text: str, source: str) -> None:
    if not isinstance(text, str):
        raise ParseError(f"{source}: expected text (str), got {type(text).__name__}")
    if not text.strip():
        raise ParseError(f"{source}: empty input")


def load_json(text: str, source: str, **kwargs: Any) -> Any:
    require_text(text, source)
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as exc:
        raise error_at(
            source, f"invalid JSON ({exc.msg}, column {exc.colno})", exc.lineno
        ) from None
    except RecursionError:
        raise ParseError(f"{source}: JSON nested too deeply") from None


def is_uint(value: str) -> bool:
    """Whether *value* is a whole number in ASCII digits (``str.isdigit`` alone also takes
    '²', which ``int()`` refuses, and other scripts' digits, which it reads); every number
    dtnkit reads from text is checked with this."""
    return value.isascii() and value.isdigit()


def int_or_str(value: str) -> int | str:
    return int(value) if is_uint(value) else value


def json_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParseError(f"{where}: {key!r} is not a string: {value!r}")
    return value


def req_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = opt_str(obj, key, where)
    if value is None:
        raise ParseError(f"{where}: missing {key!r}")
    return value
