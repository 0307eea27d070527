"""``qdisc/DEVICE/root``: the root qdisc of a device with its options and children, via ``tc``.

Its value is either the tree ``tc -j qdisc show`` gives (what a snapshot holds and restore puts
back) or a pacing recommendation (``maxrate_bps``, ``mq``, ``queues``), which apply and
``--persist`` both turn into commands with :meth:`QdiscTunable.pacing_commands`.
"""

from __future__ import annotations

import re
from typing import Any

from dtnkit.errors import DtnkitError
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers.tc import parse_tc_qdisc_json
from dtnkit.tune.kinds.base import (
    Argv,
    DeviceTunable,
    Scope,
    Tunable,
    Value,
    absolute,
    check_bool,
    check_int,
    check_name,
    type_name,
)


def _qdisc_args(kind: str, options: dict[str, Any]) -> list[str]:
    """tc arguments that recreate a qdisc from its `tc -j` options."""
    args: list[str] = []
    if kind == "tbf":
        args += ["rate", f"{options['rate']}bps", "burst", f"{options['burst']}b"]
        args += ["latency", f"{options.get('lat', 50000)}us"]
    elif kind in ("pfifo", "bfifo"):
        if "limit" in options:
            args += ["limit", str(options["limit"])]
    elif kind == "htb":
        if "default" in options:
            args += ["default", str(options["default"]).removeprefix("0x")]
        if "r2q" in options:
            args += ["r2q", str(options["r2q"])]
    elif kind == "fq":
        for name in ("limit", "flow_limit", "quantum", "initial_quantum", "buckets"):
            if name in options:
                args += [name, str(options[name])]
        if options.get("maxrate"):
            args += ["maxrate", f"{options['maxrate']}bps"]
    elif kind == "fq_codel":
        for name in ("limit", "flows", "quantum"):
            if name in options:
                args += [name, str(options[name])]
        for name in ("target", "interval"):
            if name in options:
                args += [name, f"{options[name]}us"]
    elif kind in ("mq", "pfifo_fast", "noqueue"):
        pass
    else:
        raise DtnkitError(f"cannot recreate a {kind} qdisc", "dtnkit does not know its options",
                          "restore it by hand with tc")
    return args


class QdiscTunable(DeviceTunable):
    """The root qdisc of a device, with its parameters and (for mq) its children."""

    kind = "qdisc"
    names = ("root",)
    persist_recommended = True

    def __init__(self, device: str) -> None:
        super().__init__(f"qdisc/{device}/root", Scope.INTERFACE, device, "root qdisc")

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device)

    def read(self, host: Host) -> Value | Unavailable:
        res = host.query(["tc", "-j", "qdisc", "show", "dev", str(self.device)])
        if not res.ok:
            return Unavailable(res.message())
        qdiscs = parse_tc_qdisc_json(res.stdout)
        roots = [q for q in qdiscs if q.root]
        if not roots:
            return Unavailable(f"no root qdisc on {self.device}")
        root = roots[0]
        major = _major(root.handle)
        children = [
            {"kind": q.kind, "handle": q.handle, "parent": q.parent, "options": q.options}
            for q in qdiscs
            if not q.root and q.parent and _major(q.parent) == major
        ]
        return {"kind": root.kind, "handle": root.handle, "options": root.options,
                "children": children}

    @staticmethod
    def is_default(value: dict[str, Any]) -> bool:
        """Attached by the kernel (handle 0:): deleting the root brings it back."""
        return _major(str(value.get("handle", ""))) == "0"

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        if not isinstance(current, dict) or not isinstance(want, dict):
            return False
        if "maxrate_bps" in want:  # a pacing recommendation
            return _pacing_matches(current, want)
        return _strip_handles(current) == _strip_handles(want)

    def show(self, value: Value) -> str:
        if not isinstance(value, dict):
            return super().show(value)
        if "maxrate_bps" in value:
            rate = value["maxrate_bps"]
            cap = f" maxrate {rate / 1e9:g}gbit" if rate else ""
            return f"mq + fq{cap}" if value.get("mq") else f"fq{cap}"
        kids = {c["kind"] for c in value.get("children", [])}
        if kids:
            return f"{value['kind']} + {'/'.join(sorted(kids))}"
        opts = " ".join(f"{k}={v}" for k, v in value.get("options", {}).items()
                        if k in ("rate", "burst", "limit", "maxrate"))
        return f"{value['kind']} {opts}".strip()

    def write(self, host: Host, value: Value) -> None:
        dev = str(self.device)
        if "maxrate_bps" in value:
            self._write_pacing(host, dev, value)
            return
        if self.is_default(value):
            res = host.change(["tc", "qdisc", "del", "dev", dev, "root"])
            if not res.ok and "handle of zero" not in res.stderr and "No such" not in res.stderr:
                raise DtnkitError(f"cannot reset the root qdisc of {dev}", res.message())
            return
        kind, handle = value["kind"], value.get("handle", "")
        root = ["tc", "qdisc", "replace", "dev", dev, "root", "handle", handle or "1:"]
        res = host.change([*root, kind, *_qdisc_args(kind, value.get("options", {}))])
        if not res.ok:
            raise DtnkitError(f"cannot set the root qdisc of {dev} to {kind}", res.message())
        major = _major(handle) if handle else "1"
        for child in value.get("children", []):
            if child["kind"] == "noqueue":
                continue
            parent = f"{major}:{_minor(child['parent'])}"
            res = host.change(["tc", "qdisc", "replace", "dev", dev, "parent", parent,
                               child["kind"], *_qdisc_args(child["kind"], child["options"])])
            if not res.ok:
                raise DtnkitError(f"cannot set qdisc {child['kind']} under {child['parent']} "
                                  f"on {dev}", res.message())

    def validate(self, value: Value) -> str | None:
        return validate_qdisc(value)

    def boot_commands(self, value: Value) -> list[Argv]:
        """Only dtnkit's own pacing is persisted, not an arbitrary qdisc."""
        if not (isinstance(value, dict) and "maxrate_bps" in value):
            return []
        return [absolute(argv) for argv in self.pacing_commands(str(self.device), value)]

    @staticmethod
    def pacing_commands(dev: str, want: dict[str, Any]) -> list[Argv]:
        """tc commands for fq pacing: under each queue of a new mq root, or as the root."""
        rate = int(want["maxrate_bps"])
        fq = ["fq"] + (["maxrate", f"{rate}bit"] if rate else [])
        if not want.get("mq"):
            return [["tc", "qdisc", "replace", "dev", dev, "root", *fq]]
        cmds = [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "mq"]]
        cmds += [["tc", "qdisc", "replace", "dev", dev, "parent", f"1:{queue:x}", *fq]
                 for queue in range(1, int(want["queues"]) + 1)]
        return cmds

    def _write_pacing(self, host: Host, dev: str, want: dict[str, Any]) -> None:
        for argv in self.pacing_commands(dev, want):
            res = host.change(argv)
            if not res.ok:
                raise DtnkitError(f"cannot set up fq pacing on {dev}", res.message())


def _major(handle: str) -> str:
    """The major number of a tc handle or parent: "8001:" -> "8001", ":20" and "0:" -> "0"."""
    major = handle.split(":", 1)[0]
    return major or "0"


def _minor(parent: str) -> str:
    return parent.split(":", 1)[1] if ":" in parent else parent


def _strip_handles(value: dict[str, Any]) -> dict[str, Any]:
    """A qdisc tree without the handles the kernel picks (children keyed by queue)."""
    return {
        "kind": value.get("kind"), "options": value.get("options"),
        "children": sorted((_minor(c["parent"]), c["kind"], sorted(c["options"].items(),
                                                                    key=str))
                           for c in value.get("children", [])),
    }


def _pacing_matches(current: dict[str, Any], want: dict[str, Any]) -> bool:
    fqs = [current] if current["kind"] == "fq" else []
    if current["kind"] == "mq":
        fqs = [c for c in current.get("children", []) if c["kind"] == "fq"]
        if not fqs or len(fqs) != len(current.get("children", [])):
            return False
    if not fqs:
        return False
    rate = int(want["maxrate_bps"])
    for fq in fqs:
        got = int(fq.get("options", {}).get("maxrate", 0) or 0) * 8  # tc -j: bytes/s
        if rate and abs(got - rate) > rate * 0.01:
            return False
    return True


# ---- validation of a qdisc value (snapshot tree or pacing recommendation) ------------------
_QDISC_KIND = re.compile(r"[a-z][a-z0-9_]{0,15}")
_HANDLE = re.compile(r"[0-9a-fA-F]{0,5}:[0-9a-fA-F]{0,5}")
#: options a kind cannot be recreated without
REQUIRED_OPTIONS: dict[str, tuple[str, ...]] = {"tbf": ("rate", "burst")}
#: options the tc arguments are built from: non-negative integers when present
INTEGER_OPTIONS = ("rate", "burst", "lat", "limit", "flow_limit", "quantum", "initial_quantum",
                   "buckets", "maxrate", "flows", "target", "interval", "r2q")
U64 = 2**64 - 1


def validate_qdisc(value: Value) -> str | None:
    """Why ``value`` is neither a qdisc tree as read nor a pacing recommendation (None: it is)."""
    if not isinstance(value, dict):
        return f"it must be an object, not {type_name(value)}"
    if "maxrate_bps" in value:
        extra = set(value) - {"maxrate_bps", "mq", "queues"}
        if extra:
            return f"unknown fields {sorted(extra)} in a pacing value"
        why = check_int(value["maxrate_bps"], 0, U64) or check_bool(value.get("mq", False))
        if not why and value.get("mq"):
            why = check_int(value.get("queues"), 1, 4096)
        return f"maxrate_bps/mq/queues: {why}" if why else None
    why = _check_node(value, root=True)
    if why:
        return why
    children = value.get("children", [])
    if not isinstance(children, list):
        return f"children must be a list, not {type_name(children)}"
    for i, child in enumerate(children):
        if not isinstance(child, dict):
            return f"children[{i}] must be an object, not {type_name(child)}"
        why = _check_node(child, root=False)
        if why:
            return f"children[{i}]: {why}"
    return None


def _check_node(node: dict[str, Any], *, root: bool) -> str | None:
    if "kind" not in node:
        return "it has no kind"
    why = check_name(node["kind"], _QDISC_KIND, "tbf")
    if why:
        return f"kind: {why}"
    for name in ("handle", "parent"):
        if name in node or (name == "parent" and not root):
            text = node.get(name)
            if not isinstance(text, str) or not _HANDLE.fullmatch(text):
                return f"{name} must be a tc handle such as 1: or :1, not {str(text)[:20]!r}"
    if "options" not in node and not root:
        return "it has no options"
    options = node.get("options", {})
    if not isinstance(options, dict):
        return f"options must be an object, not {type_name(options)}"
    missing = [o for o in REQUIRED_OPTIONS.get(node["kind"], ()) if o not in options]
    if missing:
        return f"a {node['kind']} qdisc needs options {', '.join(missing)}"
    for name in INTEGER_OPTIONS:
        if name in options:
            why = check_int(options[name], 0, U64)
            if why:
                return f"option {name}: {why}"
    return None
