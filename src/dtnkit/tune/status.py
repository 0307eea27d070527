"""An audited item's status: the one list every audit output, the fleet report and the drift
metrics count by."""

from __future__ import annotations

from enum import StrEnum


class AuditStatus(StrEnum):
    """Where an item stands against the profile.  A ``StrEnum``: its value is what the JSON,
    the tables and the metrics' labels show, and the order here is the order of ``counts``."""

    OK = "ok"  # the current value satisfies the recommendation
    DIFFERS = "differs"  # it does not
    UNSUPPORTED = "unsupported"  # the host cannot read or change it (no such key, fixed ...)
    UNKNOWN = "unknown"  # dtnkit cannot judge it here (give: the option that would decide it)
    HOST_SCOPE = "host-scope"  # global to the host, audited inside a namespace: never written


#: not compliant: an item that differs, or one dtnkit cannot judge (no proof that it complies)
NOT_COMPLIANT = frozenset({AuditStatus.DIFFERS, AuditStatus.UNKNOWN})
