"""Parsers for sysctl files (``sysctl.conf``, ``sysctl.d``) and ``sysctl -a`` output.

The format (checked against the real captures under ``tests/fixtures/captured``):

sysctl
    ``/etc/sysctl.conf`` and ``sysctl.d(5)`` files: ``key = value`` or ``key=value``; ``#`` and
    ``;`` start comment lines; a leading ``-`` on the key means "ignore failure". A key may be
    written as a path (``net/ipv4/tcp_rmem``): if its first separator is ``/``, slashes and dots
    swap, so ``net/ipv4/conf/eth0.111/rp_filter`` is ``net.ipv4.conf.eth0/111.rp_filter``, the
    name ``sysctl -a`` prints. ``sysctl -a`` prints the same ``key = value`` form; multi-value
    keys (``tcp_rmem``) keep the TAB separators of ``/proc/sys``, and a value of several lines
    (``kernel.core_modes``) is printed as one ``key = line`` row per line.
"""

from __future__ import annotations

import re

from dtnkit.host.parsers import (
    ParseError,
    error_at,
)


def normalize_sysctl(value: str) -> str:
    """Strip and collapse every run of whitespace (tabs, spaces, newlines) to one space."""
    return " ".join(value.split())


_PATH_TO_DOTTED = str.maketrans("/.", "./")


def _sysctl_key(key: str) -> str:
    """Turn a path-style key (``net/ipv4/tcp_rmem``) into the dotted form.

    As in sysctl.d(5): when the first separator is ``/``, slashes and dots are swapped, so a dot
    inside a component (a VLAN interface ``eth0.111``) becomes ``/`` as ``sysctl -a`` prints it.
    """
    first = re.search(r"[./]", key)
    if first is None or first.group() == ".":
        return key
    return key.translate(_PATH_TO_DOTTED)


def parse_sysctl_conf(text: str) -> dict[str, str]:
    """Parse sysctl.conf / sysctl.d syntax or ``sysctl -a`` output into ``{key: value}``.

    Blank lines and ``#``/``;`` comment lines are skipped; a leading ``-`` on the key is dropped;
    path-style keys are converted to the dotted form; values are normalized with
    :func:`normalize_sysctl`. Later assignments win. An empty text gives ``{}``. A non-blank,
    non-comment line without ``=`` (or with an empty key) raises :class:`ParseError`.
    """
    source = "sysctl"
    if not isinstance(text, str):
        raise ParseError(f"{source}: expected text (str), got {type(text).__name__}")
    result: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            raise error_at(source, "expected 'key = value'", lineno, line)
        key = key.strip()
        if key.startswith("-"):
            key = key[1:].strip()
        if not key:
            raise error_at(source, "empty key", lineno, line)
        result[_sysctl_key(key)] = normalize_sysctl(value)
    return result
