"""Traffic told apart (LHCOPN, LHCONE, R&E, commodity): a fact of the network, which this host
shows only as evidence (its default routes and policy-routing rules)."""

from __future__ import annotations

import json

from dtnkit.diagnose.checklist.base import Check, ChecklistStatus, Facts, Item
from dtnkit.host import facts


def _traffic_type(item: Item, f: Facts) -> None:
    host = f.host
    for family in ("-4", "-6"):
        routes = facts.default_routes(host, family)
        if isinstance(routes, list):
            for r in routes[:2]:
                item.saw(
                    f"ip {family} route show default",
                    f"via {r.gateway or '-'} dev {','.join(r.devs) or '-'}",
                )
    res = host.query(["ip", "-j", "rule", "show"])
    if res.ok:
        try:
            rules = json.loads(res.stdout)
        except ValueError:
            rules = None
        if isinstance(rules, list):
            extra = [
                r
                for r in rules
                if isinstance(r, dict) and r.get("table") not in ("local", "main", "default")
            ]
            item.saw("ip -j rule show", f"{len(extra)} policy rules beyond local/main/default")
    item.status = ChecklistStatus.WARN
    item.summary = (
        "a network-side fact: this host cannot see which path (LHCOPN, LHCONE, "
        "R&E, commodity) its prefixes take"
    )
    item.next = (
        "ask the network team which prefixes are announced to LHCONE/LHCOPN; "
        "mark transfers with SciTags so R&E networks can tell flows apart"
    )


TRAFFIC_TYPE = Check(
    "traffic-type", "dc27", "traffic told apart: LHCOPN, LHCONE, R&E, commodity", _traffic_type
)
