"""Kinds of settings registered by key prefix: a snapshot or profile key maps to its kind here.

A key is ``kind/[device/]name``; the part before the first ``/`` picks the kind, which builds
the tunable from the rest.  The order of :data:`KINDS` is the order in which apply writes the
kinds (and restore and undo unwind them in reverse).  Adding a kind: one module under
:mod:`dtnkit.tune.kinds` and one row here.
"""

from __future__ import annotations

from dtnkit.errors import BadInput
from dtnkit.tune.kinds.base import Tunable
from dtnkit.tune.kinds.cpu import GovernorTunable
from dtnkit.tune.kinds.ethtool import CoalesceTunable, FeatureTunable, PauseTunable, RingTunable
from dtnkit.tune.kinds.link import LinkTunable
from dtnkit.tune.kinds.qdisc import QdiscTunable
from dtnkit.tune.kinds.sysctl import SysctlTunable
from dtnkit.tune.kinds.tuned import TunedTunable

KINDS: dict[str, type[Tunable]] = {
    kind.kind: kind
    for kind in (SysctlTunable, LinkTunable, QdiscTunable, RingTunable, FeatureTunable,
                 CoalesceTunable, PauseTunable, GovernorTunable, TunedTunable)
}


def kind_for_key(key: str) -> type[Tunable]:
    """The kind a key's prefix names; BadInput for a prefix no kind is registered under."""
    prefix = key.partition("/")[0]
    kind = KINDS.get(prefix)
    if kind is None:
        raise BadInput(f"unknown setting {key!r}",
                       f"no kind of setting has the prefix {prefix + '/'!r} (kinds: "
                       f"{', '.join(p + '/' for p in KINDS)})",
                       "check the key")
    return kind


def tunable_for_key(key: str) -> Tunable:
    """Build the tunable a snapshot or profile key names (``kind/[device/]name``)."""
    tunable = kind_for_key(key).from_key(key.partition("/")[2])
    if tunable is None:
        raise BadInput(f"unknown setting {key!r}", "no tunable reads or writes it",
                       "check the key")
    return tunable
