"""Keeps a captured tree consistent with the changes dtnkit makes to it.

A :class:`~dtnkit.host.host.FixtureRunner` records each change command.  For the commands
whose effect later reads must see, this module rewrites the captured outputs the way the real
tool would then print them (ring sizes, features, adaptive coalescing, pause) or the tree's
files (``ip link set``).  Anything else fails loudly, exit 1, "not modelled": a test that
needs it must say so.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dtnkit.host.host import FixtureRunner, Result

_ETHTOOL_SET = {"-G": "-g", "-K": "-k", "-C": "-c", "-A": "-a"}
_FEATURE_NAMES = {
    "gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload", "rx": "rx-checksumming", "tx": "tx-checksumming",
    "lro": "large-receive-offload",
}


def apply_change(runner: FixtureRunner, argv: tuple[str, ...]) -> Result:
    from dtnkit.host.host import Result

    if len(argv) >= 5 and argv[0] == "ethtool" and argv[1] in _ETHTOOL_SET:
        dev, pairs = argv[2], list(zip(argv[3::2], argv[4::2], strict=False))
        ok = _ethtool(runner, argv[1], dev, pairs)
        if ok:
            return Result(argv, 0, "", "")
        return Result(argv, 1, "", f"fixture: cannot model {' '.join(argv)}")
    if argv[:3] == ("ip", "link", "set") and len(argv) == 7 and argv[3] == "dev":
        files = {"mtu": "mtu", "txqueuelen": "tx_queue_len"}
        if argv[5] in files and runner.root is not None:
            path = runner.root / "sys/class/net" / argv[4] / files[argv[5]]
            if path.exists():
                path.write_text(argv[6] + "\n")
                return Result(argv, 0, "", "")
    return Result(argv, 1, "", f"fixture: not modelled: {' '.join(argv)}")


def _ethtool(runner: FixtureRunner, flag: str, dev: str, pairs: list[tuple[str, str]]) -> bool:
    read_flag = _ETHTOOL_SET[flag]
    changed = False
    for key in (("ethtool", "--json", read_flag, dev), ("ethtool", read_flag, dev)):
        cap = runner.captures.get(key)
        if cap is None or cap.returncode != 0:
            continue
        text = cap.stdout
        for name, value in pairs:
            new = (_json_set if key[1] == "--json" else _text_set)(flag, text, name, value)
            if new is None:
                return False
            text = new
        cap.stdout = text
        cap.save(key)
        changed = True
    return changed


def _json_set(flag: str, text: str, name: str, value: str) -> str | None:
    doc: Any = json.loads(text)
    obj = doc[0]
    on = value == "on"
    if flag == "-G":
        obj[name] = int(value)
    elif flag == "-K":
        long = _FEATURE_NAMES.get(name, name)
        if long not in obj:
            return None
        obj[long]["active"] = on
    elif flag == "-C" or flag == "-A":
        obj[name] = on
    return json.dumps(doc, indent=2) + "\n"


def _text_set(flag: str, text: str, name: str, value: str) -> str | None:
    if flag == "-G":
        head, sep, tail = text.partition("Current hardware settings:")
        label = {"rx": "RX", "tx": "TX", "rx-mini": "RX Mini", "rx-jumbo": "RX Jumbo"}[name]
        tail, n = re.subn(rf"(?m)^({label}:\s+)\S+", rf"\g<1>{value}", tail, count=1)
        return head + sep + tail if sep and n else None
    if flag == "-K":
        long = _FEATURE_NAMES.get(name, name)
        new, n = re.subn(rf"(?m)^(\s*{re.escape(long)}: )(on|off)", rf"\g<1>{value}", text)
        return new if n else None
    if flag == "-C":
        label = "RX" if name == "adaptive-rx" else "TX"
        new, n = re.subn(r"(?m)^(Adaptive RX: \S+\s+TX: \S+)$",
                         lambda m: _adaptive(m.group(1), label, value), text)
        return new if n else None
    if flag == "-A":
        label = {"rx": "RX", "tx": "TX", "autoneg": "Autonegotiate"}[name]
        new, n = re.subn(rf"(?m)^({label}:\s+)(on|off)", rf"\g<1>{value}", text)
        return new if n else None
    return None


def _adaptive(line: str, which: str, value: str) -> str:
    return re.sub(rf"({which}: )\S+", rf"\g<1>{value}", line)
