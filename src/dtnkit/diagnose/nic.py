"""The rate an egress interface can send at: its link speed, or a shaper on its root qdisc
(a tbf, or an htb's top classes) when that is lower, as the NIC check of diagnose needs it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from dtnkit.errors import DtnkitError
from dtnkit.host.host import Host
from dtnkit.units import parse_rate

_HTB_CEIL = re.compile(r"^class htb \S+ root .*?\bceil (\S+)", re.MULTILINE)


@dataclass(frozen=True)
class LineRate:
    dev: str | None
    link_bps: float | None  # /sys/class/net/DEV/speed
    cap_bps: float | None = None  # a shaper on the root qdisc
    cap_kind: str = ""  # tbf | htb

    @property
    def bps(self) -> float | None:
        """What the interface can send at: the lower of its speed and its shaper."""
        rates = [r for r in (self.link_bps, self.cap_bps) if r]
        return min(rates) if rates else None


def egress_cap_bps(host: Host, dev: str) -> tuple[float, str] | None:
    """The rate a tbf root, or the fastest top htb class (its ceil), holds ``dev`` to."""
    res = host.query(["tc", "-j", "qdisc", "show", "dev", dev, "root"])
    try:
        roots = json.loads(res.stdout) if res.ok and res.stdout.strip() else []
    except json.JSONDecodeError:
        return None
    root = roots[0] if roots and isinstance(roots[0], dict) else {}
    if root.get("kind") == "tbf":
        rate = (root.get("options") or {}).get("rate")  # bytes/s in tc's JSON
        return (8.0 * rate, "tbf") if isinstance(rate, int | float) and rate > 0 else None
    if root.get("kind") == "htb":  # tc prints htb classes only as text
        res = host.query(["tc", "class", "show", "dev", dev])
        ceils = []
        for text in _HTB_CEIL.findall(res.stdout if res.ok else ""):
            try:
                ceils.append(parse_rate(text.lower(), lo=1, hi=10**13))
            except DtnkitError:  # an unreadable class is no evidence of a cap
                continue
        return (float(max(ceils)), "htb") if ceils else None
    return None


def line_rate(host: Host, dev: str | None, speed_mbps: int | None) -> LineRate:
    cap = egress_cap_bps(host, dev) if dev else None
    return LineRate(
        dev,
        speed_mbps * 1e6 if speed_mbps else None,
        cap[0] if cap else None,
        cap[1] if cap else "",
    )
