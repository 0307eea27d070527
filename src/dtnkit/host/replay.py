"""Replay of a captured host tree: command outputs from ``cmd/*.txt``, kept consistent.

:class:`FixtureRunner` replays captured command outputs.  For the change commands whose effect
later reads must see, the model at the end of this module rewrites the captured outputs the way
the real tool would then print them (ring sizes, features, adaptive coalescing, pause) or the
tree's files (``ip link set``).  Anything else fails loudly, exit 1, "not modelled": a test
that needs it must say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dtnkit.errors import DtnkitError
from dtnkit.host.parsers.ethtool import FEATURE_NAMES
from dtnkit.host.runner import Result
from dtnkit.host.tree import Tree


@dataclass
class Capture:
    returncode: int
    stdout: str
    stderr: str
    path: str | None = None  # in the tree: cmd/NAME.txt
    tree: Tree | None = None

    def save(self, argv: tuple[str, ...]) -> None:
        """Write the capture back to its file (the tree then stays changed for later runs)."""
        if self.path is None or self.tree is None:
            return
        head = [f"$ {' '.join(argv)}"]
        if self.returncode:
            head.append(f"# exit: {self.returncode}")
        body = self.stdout
        if self.stderr and not self.stdout:
            head.append("# stream: stderr")
            body = self.stderr
        self.tree.write_bytes(self.path, ("\n".join(head) + "\n" + body).encode())


class FixtureRunner:
    """Replays captured command outputs from a tree's ``cmd/`` directory.

    Each ``cmd/*.txt`` file starts with ``$ <argv>``, then optional ``# exit: N`` and
    ``# stream: stderr`` lines, then the output verbatim.  Commands that change the host
    (``Host.change``) are recorded in :attr:`changes` and succeed; a small model keeps
    later reads consistent with them (the model below).
    """

    def __init__(self, tree: Tree) -> None:
        self.tree = tree  # cmd/ and the files `ip link set` changes, opened without links
        self.captures: dict[tuple[str, ...], Capture] = {}
        self.changes: list[tuple[str, ...]] = []
        for name in tree.listdir("cmd"):
            if name.endswith(".txt") and not name.startswith(".") and tree.is_file(f"cmd/{name}"):
                argv, capture = self._load(tree, f"cmd/{name}")
                self.captures[argv] = capture

    @staticmethod
    def _load(tree: Tree, path: str) -> tuple[tuple[str, ...], Capture]:
        lines = tree.read_bytes(path).decode(errors="replace").split("\n")
        if not lines or not lines[0].startswith("$ "):
            raise DtnkitError(
                f"fixture {tree.root / path} is malformed",
                "its first line must be `$ <command>`",
                "fix the fixture file",
            )
        argv = tuple(lines[0][2:].split())
        code, stream, i = 0, "stdout", 1
        while i < len(lines) and lines[i].startswith("# "):
            name, _, value = lines[i][2:].partition(":")
            if name.strip() == "exit":
                code = int(value)
            elif name.strip() == "stream":
                stream = value.strip()
            i += 1
        body = "\n".join(lines[i:])
        if stream == "stderr":
            return argv, Capture(code, "", body, path, tree)
        return argv, Capture(code, body, "", path, tree)

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        key = tuple(argv)
        capture = self.captures.get(key)
        if capture is None:
            return Result(key, 127, "", f"not captured in fixture: {' '.join(key)}")
        return Result(key, capture.returncode, capture.stdout, capture.stderr)

    def record_change(self, argv: Sequence[str]) -> Result:
        key = tuple(argv)
        self.changes.append(key)
        return _apply_change(self, key)


# ---- the model of changes ---------------------------------------------------------------
_ETHTOOL_SET = {"-G": "-g", "-K": "-k", "-C": "-c", "-A": "-a"}
# What switching to a TuneD profile writes to the tree's sysctls: the [sysctl] sections of
# TuneD's own profiles (redhat-performance/tuned, profiles/<name>/tuned.conf; network-
# throughput includes throughput-performance, whose [sysctl] holds no network buffers).
# TuneD's rollback of the previous profile's values on a switch is not modelled.
TUNED_SYSCTLS: dict[str, dict[str, str]] = {
    "network-throughput": {
        "net.ipv4.tcp_rmem": "4096\t131072\t16777216",
        "net.ipv4.tcp_wmem": "4096\t16384\t16777216",
    },
}


def _apply_change(runner: FixtureRunner, argv: tuple[str, ...]) -> Result:
    if len(argv) >= 5 and argv[0] == "ethtool" and argv[1] in _ETHTOOL_SET:
        dev, pairs = argv[2], list(zip(argv[3::2], argv[4::2], strict=False))
        ok = _ethtool(runner, argv[1], dev, pairs)
        if ok:
            return Result(argv, 0, "", "")
        return Result(argv, 1, "", f"fixture: cannot model {' '.join(argv)}")
    if argv[:1] == ("tuned-adm",) and argv[1:2] in (("profile",), ("off",)):
        return _tuned(runner, argv)
    if argv[:3] == ("ip", "link", "set") and len(argv) == 7 and argv[3] == "dev":
        files = {"mtu": "mtu", "txqueuelen": "tx_queue_len"}
        if argv[5] in files and "/" not in argv[4]:
            path = f"sys/class/net/{argv[4]}/{files[argv[5]]}"
            if runner.tree.is_file(path):
                runner.tree.write_bytes(path, (argv[6] + "\n").encode())
                return Result(argv, 0, "", "")
    return Result(argv, 1, "", f"fixture: not modelled: {' '.join(argv)}")


def _tuned(runner: FixtureRunner, argv: tuple[str, ...]) -> Result:
    """``tuned-adm profile NAME...`` / ``tuned-adm off``: the active profile as ``tuned-adm
    active`` then prints it, and the profile's sysctls (:data:`TUNED_SYSCTLS`) in the tree."""
    active = runner.captures.get(("tuned-adm", "active"))
    if active is None or active.returncode != 0:
        return Result(argv, 1, "", "fixture: TuneD is not installed in this tree")
    names = argv[2:]
    if argv[1] == "profile" and not names:
        return Result(argv, 1, "", "fixture: tuned-adm profile needs a name")
    active.stdout = (
        f"Current active profile: {' '.join(names)}\n" if names else "No current active profile.\n"
    )
    active.save(("tuned-adm", "active"))
    for name in names:
        for key, value in TUNED_SYSCTLS.get(name, {}).items():
            path = "proc/sys/" + key.replace(".", "/")
            if runner.tree.is_file(path):
                runner.tree.write_bytes(path, (value + "\n").encode())
    return Result(argv, 0, "", "")


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
        long = FEATURE_NAMES.get(name, name)
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
        long = FEATURE_NAMES.get(name, name)
        new, n = re.subn(rf"(?m)^(\s*{re.escape(long)}: )(on|off)", rf"\g<1>{value}", text)
        return new if n else None
    if flag == "-C":
        label = "RX" if name == "adaptive-rx" else "TX"
        new, n = re.subn(
            r"(?m)^(Adaptive RX: \S+\s+TX: \S+)$",
            lambda m: _adaptive(m.group(1), label, value),
            text,
        )
        return new if n else None
    if flag == "-A":
        label = {"rx": "RX", "tx": "TX", "autoneg": "Autonegotiate"}[name]
        new, n = re.subn(rf"(?m)^({label}:\s+)(on|off)", rf"\g<1>{value}", text)
        return new if n else None
    return None


def _adaptive(line: str, which: str, value: str) -> str:
    return re.sub(rf"({which}: )\S+", rf"\g<1>{value}", line)
