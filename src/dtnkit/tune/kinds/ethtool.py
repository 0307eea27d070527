"""Interface settings read and set with ethtool: rings (``-g``/``-G``), offload features
(``-k``/``-K``), adaptive coalescing (``-c``/``-C``) and pause frames (``-a``/``-A``).

Each kind's :meth:`commands` is the one argv that apply, restore and the boot-time udev rule
of ``--persist`` run.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from dtnkit.host.facts import Unavailable, ethtool_read
from dtnkit.host.host import Host
from dtnkit.host.parsers.ethtool import (
    FEATURE_NAMES,
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
from dtnkit.tune.kinds.base import (
    Argv,
    CommandTunable,
    DeviceTunable,
    Scope,
    Tunable,
    Value,
    check_bool,
    check_int,
    on_off,
)

ALREADY_SO = 80  # ethtool's exit status when the setting already has that value


class RingTunable(DeviceTunable, CommandTunable):
    kind = "ring"
    names = ("rx", "tx")
    ok_returncodes = frozenset({0, ALREADY_SO})

    def __init__(self, device: str, which: str) -> None:
        super().__init__(f"ring/{device}/{which}", Scope.INTERFACE, device, f"{which} ring")
        self.which = which

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device, name)

    def rings(self, host: Host) -> Rings | Unavailable:
        return ethtool_read(
            host, "-g", str(self.device), parse_ethtool_rings_json, parse_ethtool_rings_text
        )

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

    def commands(self, value: Value) -> list[Argv]:
        return [["ethtool", "-G", str(self.device), self.which, str(value)]]

    def failure(self, value: Value) -> str:
        return f"cannot set the {self.which} ring of {self.device} to {value}"

    def validate(self, value: Value) -> str | None:
        return check_int(value, 0, 2**32 - 1)  # ethtool's ring sizes are u32


class FeatureTunable(DeviceTunable, CommandTunable):
    kind = "feature"
    names = tuple(FEATURE_NAMES)

    def __init__(self, device: str, short: str) -> None:
        super().__init__(f"feature/{device}/{short}", Scope.INTERFACE, device, short)
        self.short = short
        self.long = FEATURE_NAMES[short]

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device, name)

    def features(self, host: Host) -> dict[str, Feature] | Unavailable:
        return ethtool_read(
            host, "-k", str(self.device), parse_ethtool_features_json, parse_ethtool_features_text
        )

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

    # ethtool -K can exit 0 and still refuse ("off [requested on]" under "Actual changes");
    # sub-features may be fixed while the group changes, so the re-read in verify decides.
    def commands(self, value: Value) -> list[Argv]:
        return [["ethtool", "-K", str(self.device), self.short, on_off(value)]]

    def failure(self, value: Value) -> str:
        return f"cannot turn {self.short} {on_off(value)} on {self.device}"

    def validate(self, value: Value) -> str | None:
        return check_bool(value)


class EthtoolSwitch(DeviceTunable, CommandTunable):
    """An on/off setting read with ``ethtool FLAG`` and set with ``ethtool SETFLAG IF NAME on``."""

    read_flag: ClassVar[str]
    set_flag: ClassVar[str]
    what: ClassVar[str]
    ok_returncodes = frozenset({0, ALREADY_SO})

    def __init__(self, device: str, which: str, label: str) -> None:
        super().__init__(f"{self.kind}/{device}/{which}", Scope.INTERFACE, device, label)
        self.which = which

    @abstractmethod
    def pick(self, host: Host) -> bool | Unavailable | None: ...

    def read(self, host: Host) -> Value | Unavailable:
        value = self.pick(host)
        return value if value is not None else Unavailable(f"the driver reports no {self.what}")

    def commands(self, value: Value) -> list[Argv]:
        return [["ethtool", self.set_flag, str(self.device), self.which, on_off(value)]]

    def failure(self, value: Value) -> str:
        return f"cannot set {self.label} {on_off(value)} on {self.device}"

    def validate(self, value: Value) -> str | None:
        return check_bool(value)


class CoalesceTunable(EthtoolSwitch):
    kind = "coalesce"
    names = ("adaptive-rx", "adaptive-tx")
    read_flag, set_flag, what = "-c", "-C", "adaptive mode"

    def __init__(self, device: str, which: str) -> None:
        super().__init__(device, which, which)

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device, name)

    def pick(self, host: Host) -> bool | Unavailable | None:
        co = ethtool_read(
            host,
            self.read_flag,
            str(self.device),
            parse_ethtool_coalesce_json,
            parse_ethtool_coalesce_text,
        )
        if isinstance(co, Unavailable):
            return co
        return co.adaptive_rx if self.which == "adaptive-rx" else co.adaptive_tx


class PauseTunable(EthtoolSwitch):
    kind = "pause"
    names = ("rx", "tx")
    read_flag, set_flag, what = "-a", "-A", "pause state"

    def __init__(self, device: str, which: str) -> None:
        super().__init__(device, which, f"pause {which}")

    @classmethod
    def build(cls, device: str, name: str) -> Tunable:
        return cls(device, name)

    def pick(self, host: Host) -> bool | Unavailable | None:
        pause = ethtool_read(
            host,
            self.read_flag,
            str(self.device),
            parse_ethtool_pause_json,
            parse_ethtool_pause_text,
        )
        if isinstance(pause, Unavailable):
            return pause
        return pause.rx if self.which == "rx" else pause.tx
