"""Tunables: small objects that read, write and compare one setting of one host or device.

Each tunable has a flat key (``sysctl/net.core.rmem_max``, ``ring/ens5f1np1/rx``,
``qdisc/eth0/root``) that is also its key in snapshots, so a snapshot can be replayed by
building the tunable for each key (:func:`tunable_for_key`).  Apply and verify share one
comparison (:meth:`Tunable.satisfies`), so they cannot drift apart.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from dtnkit.errors import DtnkitError
from dtnkit.host.facts import Unavailable, ethtool_read
from dtnkit.host.host import Host
from dtnkit.host.parsers.ethtool import (
    Feature,
    Rings,
    parse_ethtool_coalesce_json,
    parse_ethtool_coalesce_text,
    parse_ethtool_features_json,
    parse_ethtool_features_text,
    parse_ethtool_pause_json,
    parse_ethtool_pause_text,
    parse_ethtool_rings_json,
    parse_ethtool_rings_text,
)
from dtnkit.host.parsers.proc import parse_governors
from dtnkit.host.parsers.sysctl import normalize_sysctl
from dtnkit.host.parsers.tc import parse_tc_qdisc_json
from dtnkit.host.parsers.tuned import parse_tuned_active

Value = Any  # JSON-able: str, int, bool, dict, None


class Scope(enum.StrEnum):
    HOST = "host"  # global to the kernel: one value for every namespace
    NETNS = "netns"  # per network namespace
    INTERFACE = "interface"


# sysctls that are global to the host (read-only or absent inside other namespaces)
HOST_GLOBAL_SYSCTLS = frozenset({
    "net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default",
    "net.core.netdev_max_backlog", "net.core.default_qdisc",
})


class Tunable(ABC):
    kind: ClassVar[str]
    restorable: ClassVar[bool] = True

    def __init__(self, key: str, scope: Scope, device: str | None, label: str) -> None:
        self.key = key
        self.scope = scope
        self.device = device
        self.label = label

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.key}>"

    @abstractmethod
    def read(self, host: Host) -> Value | Unavailable: ...

    def write(self, host: Host, value: Value) -> None:
        raise DtnkitError(f"{self.key} cannot be set", "it is audit-only")

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        if mode == "raise" and isinstance(current, int) and isinstance(want, int):
            return current >= want
        return bool(current == want)

    def target(self, current: Value, want: Value, mode: str) -> Value:
        """The value to write so that ``satisfies`` holds (raise-only keeps larger parts)."""
        return want

    def show(self, value: Value) -> str:
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "on" if value else "off"
        return str(value)


# ---- sysctl ----------------------------------------------------------------------------------
def _ints(value: Value) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str):
        try:
            return [int(x) for x in value.split()]
        except ValueError:
            return None
    return None


def _typed(text: str) -> Value:
    """A single integer as an int (typed JSON), anything else as normalised text."""
    try:
        return int(text)
    except ValueError:
        return text


class SysctlTunable(Tunable):
    kind = "sysctl"

    def __init__(self, name: str) -> None:
        scope = Scope.HOST if name in HOST_GLOBAL_SYSCTLS else Scope.NETNS
        super().__init__(f"sysctl/{name}", scope, None, name)
        self.name = name
        self.path = Host.sysctl_path(name)

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read(self.path)
        if text is None:
            return Unavailable(f"{self.path} does not exist on this kernel")
        return _typed(normalize_sysctl(text))

    def write(self, host: Host, value: Value) -> None:
        host.write(self.path, str(value))

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        cur, wnt = _ints(current), _ints(want)
        if cur is not None and wnt is not None and len(cur) == len(wnt):
            if mode == "raise":
                return all(c >= w for c, w in zip(cur, wnt, strict=True))
            return cur == wnt
        return normalize_sysctl(str(current)) == normalize_sysctl(str(want))

    def target(self, current: Value, want: Value, mode: str) -> Value:
        cur, wnt = _ints(current), _ints(want)
        if mode == "raise" and cur is not None and wnt is not None and len(cur) == len(wnt):
            return _typed(" ".join(str(max(c, w)) for c, w in zip(cur, wnt, strict=True)))
        return _typed(normalize_sysctl(str(want)))


# ---- link attributes -------------------------------------------------------------------------
class LinkTunable(Tunable):
    kind = "link"
    _files: ClassVar[dict[str, str]] = {"mtu": "mtu", "txqueuelen": "tx_queue_len"}

    def __init__(self, device: str, attr: str) -> None:
        if attr not in self._files:
            raise ValueError(attr)
        super().__init__(f"link/{device}/{attr}", Scope.INTERFACE, device, attr)
        self.attr = attr

    def read(self, host: Host) -> Value | Unavailable:
        text = host.read(f"/sys/class/net/{self.device}/{self._files[self.attr]}")
        if text is None:
            return Unavailable(f"no interface {self.device}")
        return int(text.strip())

    def write(self, host: Host, value: Value) -> None:
        res = host.change(["ip", "link", "set", "dev", str(self.device), self.attr, str(value)])
        if not res.ok:
            raise DtnkitError(f"cannot set {self.attr} {value} on {self.device}", res.message())


# ---- qdisc -----------------------------------------------------------------------------------
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


class QdiscTunable(Tunable):
    """The root qdisc of a device, with its parameters and (for mq) its children."""

    kind = "qdisc"

    def __init__(self, device: str) -> None:
        super().__init__(f"qdisc/{device}/root", Scope.INTERFACE, device, "root qdisc")

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

    @staticmethod
    def pacing_commands(dev: str, want: dict[str, Any]) -> list[list[str]]:
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


# ---- ethtool-backed --------------------------------------------------------------------------
class RingTunable(Tunable):
    kind = "ring"

    def __init__(self, device: str, which: str) -> None:
        super().__init__(f"ring/{device}/{which}", Scope.INTERFACE, device, f"{which} ring")
        self.which = which

    def rings(self, host: Host) -> Rings | Unavailable:
        return ethtool_read(host, "-g", str(self.device), parse_ethtool_rings_json,
                            parse_ethtool_rings_text)

    def read(self, host: Host) -> Value | Unavailable:
        rings = self.rings(host)
        if isinstance(rings, Unavailable):
            return rings
        value = getattr(rings, self.which)
        return value if value is not None else Unavailable(f"no {self.which} ring reported")

    def hw_max(self, host: Host) -> int | None:
        rings = self.rings(host)
        if isinstance(rings, Unavailable):
            return None
        value = getattr(rings, f"{self.which}_max")
        return int(value) if value is not None else None

    def write(self, host: Host, value: Value) -> None:
        res = host.change(["ethtool", "-G", str(self.device), self.which, str(value)])
        if not res.ok and res.returncode != 80:  # 80: already at that size
            raise DtnkitError(f"cannot set the {self.which} ring of {self.device} to {value}",
                              res.message())


FEATURES = {
    "gro": "generic-receive-offload",
    "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload",
    "rx": "rx-checksumming",
    "tx": "tx-checksumming",
    "lro": "large-receive-offload",
}


class FeatureTunable(Tunable):
    kind = "feature"

    def __init__(self, device: str, short: str) -> None:
        super().__init__(f"feature/{device}/{short}", Scope.INTERFACE, device, short)
        self.short = short
        self.long = FEATURES[short]

    def features(self, host: Host) -> dict[str, Feature] | Unavailable:
        return ethtool_read(host, "-k", str(self.device), parse_ethtool_features_json,
                            parse_ethtool_features_text)

    def read(self, host: Host) -> Value | Unavailable:
        feats = self.features(host)
        if isinstance(feats, Unavailable):
            return feats
        feat = feats.get(self.long)
        if feat is None:
            return Unavailable(f"the driver does not list {self.long}")
        return feat.on

    def fixed(self, host: Host) -> bool:
        feats = self.features(host)
        if isinstance(feats, Unavailable):
            return False
        feat = feats.get(self.long)
        return bool(feat and feat.fixed)

    def write(self, host: Host, value: Value) -> None:
        state = "on" if value else "off"
        res = host.change(["ethtool", "-K", str(self.device), self.short, state])
        # ethtool can exit 0 and still refuse ("off [requested on]" under "Actual changes");
        # sub-features may be fixed while the group changes, so the re-read in verify decides.
        if not res.ok:
            raise DtnkitError(f"cannot turn {self.short} {state} on {self.device}", res.message())


class _EthtoolSwitch(Tunable):
    """An on/off setting read with ``ethtool FLAG`` and set with ``ethtool SETFLAG IF NAME on``."""

    read_flag: ClassVar[str]
    set_flag: ClassVar[str]
    what: ClassVar[str]

    def __init__(self, device: str, which: str, label: str) -> None:
        super().__init__(f"{self.kind}/{device}/{which}", Scope.INTERFACE, device, label)
        self.which = which

    @abstractmethod
    def pick(self, host: Host) -> bool | Unavailable | None: ...

    def read(self, host: Host) -> Value | Unavailable:
        value = self.pick(host)
        return value if value is not None else Unavailable(f"the driver reports no {self.what}")

    def write(self, host: Host, value: Value) -> None:
        state = "on" if value else "off"
        res = host.change(["ethtool", self.set_flag, str(self.device), self.which, state])
        if not res.ok and res.returncode != 80:  # 80: already so
            raise DtnkitError(f"cannot set {self.label} {state} on {self.device}", res.message())


class CoalesceTunable(_EthtoolSwitch):
    kind = "coalesce"
    read_flag, set_flag, what = "-c", "-C", "adaptive mode"

    def __init__(self, device: str, which: str) -> None:
        super().__init__(device, which, which)

    def pick(self, host: Host) -> bool | Unavailable | None:
        co = ethtool_read(host, self.read_flag, str(self.device),
                          parse_ethtool_coalesce_json, parse_ethtool_coalesce_text)
        if isinstance(co, Unavailable):
            return co
        return co.adaptive_rx if self.which == "adaptive-rx" else co.adaptive_tx


class PauseTunable(_EthtoolSwitch):
    kind = "pause"
    read_flag, set_flag, what = "-a", "-A", "pause state"

    def __init__(self, device: str, which: str) -> None:
        super().__init__(device, which, f"pause {which}")

    def pick(self, host: Host) -> bool | Unavailable | None:
        pause = ethtool_read(host, self.read_flag, str(self.device),
                             parse_ethtool_pause_json, parse_ethtool_pause_text)
        if isinstance(pause, Unavailable):
            return pause
        return pause.rx if self.which == "rx" else pause.tx


# ---- cpu -------------------------------------------------------------------------------------
class GovernorTunable(Tunable):
    """The scaling governor of every CPU (value: {"cpu0": "powersave", ...})."""

    kind = "cpu"

    def __init__(self) -> None:
        super().__init__("cpu/governor", Scope.HOST, None, "scaling governor")

    @staticmethod
    def cpus(host: Host) -> list[str]:
        names = [n for n in host.listdir("/sys/devices/system/cpu")
                 if n.startswith("cpu") and n[3:].isdigit()]
        return sorted(names, key=lambda n: int(n[3:]))

    def read(self, host: Host) -> Value | Unavailable:
        out: dict[str, str] = {}
        for cpu in self.cpus(host):
            gov = host.read(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor")
            if gov is not None:
                out[cpu] = gov.strip()
        if not out:
            return Unavailable("no cpufreq driver (usual in VMs): the hypervisor sets the speed")
        return out

    def available(self, host: Host) -> list[str]:
        for cpu in self.cpus(host):
            text = host.read(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_available_governors")
            if text is not None:
                return parse_governors(text)
        return []

    def satisfies(self, current: Value, want: Value, mode: str) -> bool:
        if isinstance(current, dict) and isinstance(want, str):
            return all(v == want for v in current.values())
        return bool(current == want)

    def target(self, current: Value, want: Value, mode: str) -> Value:
        if isinstance(current, dict) and isinstance(want, str):
            return {cpu: want for cpu in current}
        return want

    def show(self, value: Value) -> str:
        if isinstance(value, dict):
            counts: dict[str, int] = {}
            for gov in value.values():
                counts[gov] = counts.get(gov, 0) + 1
            return ", ".join(f"{g} ({n} CPUs)" for g, n in sorted(counts.items()))
        return super().show(value)

    def write(self, host: Host, value: Value) -> None:
        if not isinstance(value, dict):
            raise DtnkitError("internal error: governor value must map CPUs to governors")
        for cpu, gov in value.items():
            host.write(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor", gov)


class TunedTunable(Tunable):
    kind = "tuned"

    def __init__(self) -> None:
        super().__init__("tuned/profile", Scope.HOST, None, "tuned-adm profile")

    def read(self, host: Host) -> Value | Unavailable:
        res = host.query(["tuned-adm", "active"])
        if res.returncode == 127:
            return Unavailable("TuneD is not installed")
        if not res.ok:
            return Unavailable(res.message())
        return parse_tuned_active(res.stdout)

    def write(self, host: Host, value: Value) -> None:
        argv = ["tuned-adm", "off"] if value is None else ["tuned-adm", "profile", str(value)]
        res = host.change(argv)
        # tuned-adm can exit 0 and fail: the re-read in verify is what counts
        if not res.ok:
            raise DtnkitError(f"`{' '.join(argv)}` failed", res.message())


# ---- registry --------------------------------------------------------------------------------
def tunable_for_key(key: str) -> Tunable:
    """Build the tunable a snapshot or profile key names (``kind/[device/]name``)."""
    kind, _, rest = key.partition("/")
    if kind == "sysctl" and rest:
        return SysctlTunable(rest)
    if kind == "cpu" and rest == "governor":
        return GovernorTunable()
    if kind == "tuned" and rest == "profile":
        return TunedTunable()
    device, _, name = rest.rpartition("/")
    if device:
        if kind == "link" and name in ("mtu", "txqueuelen"):
            return LinkTunable(device, name)
        if kind == "qdisc" and name == "root":
            return QdiscTunable(device)
        if kind == "ring" and name in ("rx", "tx"):
            return RingTunable(device, name)
        if kind == "feature" and name in FEATURES:
            return FeatureTunable(device, name)
        if kind == "coalesce" and name in ("adaptive-rx", "adaptive-tx"):
            return CoalesceTunable(device, name)
        if kind == "pause" and name in ("rx", "tx"):
            return PauseTunable(device, name)
    raise DtnkitError(f"unknown setting {key!r}", "no tunable reads or writes it")
