"""Parsers for ``tc qdisc show``, ``tc -j qdisc show`` and ``tc -d class show``.

The formats, as printed by iproute2 6.1 (Debian 12) and by newer releases, checked against
the real captures under ``tests/fixtures/captured``:

``tc qdisc show`` / ``tc -j qdisc show``
    Text: ``qdisc KIND HANDLE [dev IF] root|parent ID [refcnt N] OPTIONS...``; with ``-s``,
    indented statistics rows follow. JSON: a list of ``{"kind", "handle", "root": true |
    "parent": ID, "refcnt", "options": {...}}``.

``tc -d class show``
    Text only (iproute2 6.1 prints htb classes as text even with ``-j``): ``class KIND CLASSID
    root|parent ID [leaf HANDLE] OPTIONS...``, e.g. ``class htb 1:10 parent 1:1 leaf 10: prio 0
    quantum 3000 rate 100Mbit ceil 1Gbit linklayer ethernet burst 1600b/1 mpu 0b cburst
    1375b/1 mpu 0b level 0``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dtnkit.host.parsers import (
    ParseError,
    error_at,
    int_or_str,
    load_json,
    opt_str,
    req_str,
    require_text,
)


@dataclass(frozen=True, slots=True)
class Qdisc:
    """One queueing discipline from ``tc qdisc show``.

    ``parent`` is ``None`` for the root qdisc. ``options`` is the JSON ``options`` object as
    given; from text it is ``{"raw": "<option tokens>"}`` plus every ``key value`` pair that
    splits reliably (a lowercase word followed by tokens that start with a digit; an int where
    the token is all digits, else the string; several values become a list).
    """

    kind: str
    handle: str
    parent: str | None
    root: bool
    options: dict[str, object]


def parse_tc_qdisc_json(text: str) -> list[Qdisc]:
    """Parse ``tc -j qdisc show [dev IF]``."""
    source = "tc -j qdisc"
    data = load_json(text, source)
    if not isinstance(data, list):
        raise ParseError(f"{source}: expected a JSON list, got {type(data).__name__}")
    qdiscs: list[Qdisc] = []
    for position, entry in enumerate(data):
        where = f"{source}: item {position}"
        if not isinstance(entry, dict):
            raise ParseError(f"{where} is not an object: {entry!r}")
        root = entry.get("root", False)
        if not isinstance(root, bool):
            raise ParseError(f"{where}: 'root' is not a boolean: {root!r}")
        options = entry.get("options", {})
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise ParseError(f"{where}: 'options' is not an object: {options!r}")
        qdiscs.append(
            Qdisc(
                kind=req_str(entry, "kind", where),
                handle=req_str(entry, "handle", where),
                parent=opt_str(entry, "parent", where),
                root=root,
                options=dict(options),
            )
        )
    return qdiscs


_OPTION_KEY_RE = re.compile(r"[a-z][a-z0-9_]*")


def _split_qdisc_options(tokens: list[str]) -> dict[str, object]:
    options: dict[str, object] = {"raw": " ".join(tokens)}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not _OPTION_KEY_RE.fullmatch(token):
            continue
        values: list[int | str] = []
        while index < len(tokens) and tokens[index][:1].isdigit():
            values.append(int_or_str(tokens[index]))
            index += 1
        if values and token not in options:
            options[token] = values[0] if len(values) == 1 else values
    return options


def parse_tc_qdisc_text(text: str) -> list[Qdisc]:
    """Parse ``tc qdisc show [dev IF]`` (indented ``-s`` statistics rows are skipped)."""
    source = "tc qdisc"
    require_text(text, source)
    qdiscs: list[Qdisc] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line[:1].isspace():
            continue
        tokens = line.split()
        if tokens[0] != "qdisc" or len(tokens) < 4 or not tokens[2].endswith(":"):
            raise error_at(source, "expected 'qdisc KIND HANDLE root|parent ID ...'", lineno, line)
        kind, handle = tokens[1], tokens[2]
        index = 3
        if tokens[index] == "dev":
            index += 2
        parent: str | None = None
        root = False
        if index < len(tokens) and tokens[index] == "root":
            root = True
            index += 1
        elif index + 1 < len(tokens) and tokens[index] == "parent":
            parent = tokens[index + 1]
            index += 2
        else:
            raise error_at(source, "expected 'root' or 'parent ID'", lineno, line)
        if index + 1 < len(tokens) and tokens[index] == "refcnt":
            index += 2
        qdiscs.append(
            Qdisc(
                kind=kind,
                handle=handle,
                parent=parent,
                root=root,
                options=_split_qdisc_options(tokens[index:]),
            )
        )
    return qdiscs


@dataclass(frozen=True, slots=True)
class TcClass:
    """One class from ``tc -d class show``.

    iproute2 6.1 prints classes as text even with ``-j``, so this reads the text: ``class KIND
    CLASSID root|parent ID [leaf HANDLE] OPTIONS...``.  ``options`` maps each option word to
    the token after it, first occurrence only (``burst 1600b/1 mpu 0b cburst ...`` gives
    ``burst: "1600b/1"``, ``mpu: "0b"``); ``leaf`` is the attached qdisc's handle, if shown.
    """

    kind: str
    classid: str
    parent: str | None
    leaf: str | None
    options: dict[str, str]


def parse_tc_class_text(text: str) -> list[TcClass]:
    """Parse ``tc [-d] class show dev IF`` (empty output: no classes; stats rows skipped)."""
    source = "tc class"
    classes: list[TcClass] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line[:1].isspace():
            continue
        tokens = line.split()
        if tokens[0] != "class" or len(tokens) < 4 or ":" not in tokens[2]:
            raise error_at(source, "expected 'class KIND CLASSID root|parent ID ...'", lineno, line)
        kind, classid = tokens[1], tokens[2]
        index = 3
        parent: str | None = None
        if tokens[index] == "root":
            index += 1
        elif tokens[index] == "parent" and index + 1 < len(tokens):
            parent = tokens[index + 1]
            index += 2
        else:
            raise error_at(source, "expected 'root' or 'parent ID'", lineno, line)
        leaf: str | None = None
        if index + 1 < len(tokens) and tokens[index] == "leaf":
            leaf = tokens[index + 1]
            index += 2
        options: dict[str, str] = {}
        rest = tokens[index:]
        position = 0
        while position + 1 < len(rest):
            token = rest[position]
            if not _OPTION_KEY_RE.fullmatch(token):
                position += 1
                continue
            options.setdefault(token, rest[position + 1])
            position += 2
        classes.append(
            TcClass(kind=kind, classid=classid, parent=parent, leaf=leaf, options=options)
        )
    return classes
