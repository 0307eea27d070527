"""Kinds of settings registered by key prefix: a snapshot or profile key maps to its kind here.

A key is ``kind/[device/]name``; the part before the first ``/`` picks the kind, which builds
the tunable from the rest.  The order of :data:`KINDS` is the order in which apply writes the
kinds (and restore and undo unwind them in reverse).  Adding a kind: one module under
:mod:`dtnkit.tune.kinds` and one row here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from dtnkit.errors import BadInput
from dtnkit.host.host import Host
from dtnkit.tune.kinds.base import Tunable
from dtnkit.tune.kinds.cpu import GovernorTunable
from dtnkit.tune.kinds.ethtool import CoalesceTunable, FeatureTunable, PauseTunable, RingTunable
from dtnkit.tune.kinds.ipv6 import Ipv6Tunable
from dtnkit.tune.kinds.link import LinkTunable
from dtnkit.tune.kinds.qdisc import QdiscTunable
from dtnkit.tune.kinds.sysctl import SysctlTunable
from dtnkit.tune.kinds.tuned import TunedTunable
from dtnkit.tune.profile import KNOWN_KEYS, site_sysctl_allowed, site_sysctls_text

KINDS: dict[str, type[Tunable]] = {
    kind.kind: kind
    for kind in (
        SysctlTunable,
        LinkTunable,
        QdiscTunable,
        RingTunable,
        FeatureTunable,
        CoalesceTunable,
        PauseTunable,
        GovernorTunable,
        TunedTunable,
        Ipv6Tunable,
    )
}


def kind_for_key(key: str) -> type[Tunable]:
    """The kind a key's prefix names; BadInput for a prefix no kind is registered under."""
    prefix = key.partition("/")[0]
    kind = KINDS.get(prefix)
    if kind is None:
        raise BadInput(
            f"unknown setting {key!r}",
            f"no kind of setting has the prefix {prefix + '/'!r} (kinds: "
            f"{', '.join(p + '/' for p in KINDS)})",
            "check the key",
        )
    return kind


def tunable_for_key(key: str) -> Tunable:
    """Build the tunable a snapshot or profile key names (``kind/[device/]name``)."""
    tunable = kind_for_key(key).from_key(key.partition("/")[2])
    if tunable is None:
        raise BadInput(f"unknown setting {key!r}", "no tunable reads or writes it", "check the key")
    return tunable


def in_known_group(key: str) -> bool:
    """Whether a snapshot key belongs to a group dtnkit tunes: a profile key (``*`` standing
    for one device) or a sysctl a site profile may add."""
    if key.startswith("sysctl/") and site_sysctl_allowed(key.partition("/")[2]):
        return True
    return any(
        fnmatch.fnmatchcase(key, pattern.replace("*", "[!/]*"))
        if "*" in pattern
        else key == pattern
        for pattern in KNOWN_KEYS
        if not pattern.startswith("check/")
    )


def accept_snapshot_key(key: str, origin: str) -> Tunable:
    """The tunable of a snapshot key a kind claims and a known group holds; else BadInput."""
    tunable = tunable_for_key(key)
    if not tunable.snapshot_only and not in_known_group(key):
        raise BadInput(
            f"{origin} names {key!r}, which dtnkit does not tune",
            "snapshot keys are the profile keys of docs/profiles.md and the sysctls "
            f"a site profile may add: {site_sysctls_text()}",
            "remove the key, or restore from another snapshot",
        )
    return tunable


def prepare_scopes(host: Host, tunables: Sequence[Tunable]) -> None:
    """Ask the kernel for the scope of every setting at once (done when a namespace is
    targeted), so each kind probes once per run rather than once per key."""
    by_kind: dict[type[Tunable], list[Tunable]] = {}
    for t in tunables:
        by_kind.setdefault(type(t), []).append(t)
    for kind, group in by_kind.items():
        kind.prepare_scopes(host, group)
