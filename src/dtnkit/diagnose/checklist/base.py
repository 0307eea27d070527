"""What the checklist is made of: an item with its evidence, the checklist, what the checks
read (gathered once per run), and a check's declaration (its id, section, title and the
function that judges it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dtnkit.diagnose.checklist.peer import PeerFacts
from dtnkit.diagnose.checklist.procs import Proc
from dtnkit.diagnose.sitecfg import PeerAddress
from dtnkit.host.facts import Interface
from dtnkit.host.host import Host
from dtnkit.tune.audit import Audit
from dtnkit.tune.judging import Judging

CHECKLIST_SCHEMA = "dtnkit.checklist/1"


class ChecklistStatus(StrEnum):
    """How an item of the checklist came out, best first: an item's status only gets worse
    (:meth:`Item.worst`).  A ``StrEnum``: its value is what the JSON and the table show, and
    the order here is the order of ``counts``."""

    PASS = "pass"
    WARN = "warn"  # worth a look; may be the network's, not the host's
    FAIL = "fail"


@dataclass(frozen=True)
class Evidence:
    source: str  # what was read: a file, a command line, a process
    value: str

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "value": self.value}


@dataclass
class Item:
    id: str
    section: str  # dc27 | troubleshooting
    title: str
    status: ChecklistStatus = ChecklistStatus.PASS
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    next: str = ""

    def saw(self, source: str, value: object) -> None:
        self.evidence.append(Evidence(source, str(value)))

    def worst(self, status: ChecklistStatus) -> None:
        order = list(ChecklistStatus)
        if order.index(status) > order.index(self.status):
            self.status = status

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "section": self.section,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "evidence": [e.as_dict() for e in self.evidence],
            "next": self.next or None,
        }


@dataclass
class Checklist:
    host: str
    peer: str | None
    items: list[Item]

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(ChecklistStatus, 0)
        for item in self.items:
            counts[item.status] += 1
        return counts

    @property
    def ok(self) -> bool:
        """No item fails (warnings are allowed: some facts are the network's, not the host's)."""
        return not any(i.status == ChecklistStatus.FAIL for i in self.items)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": CHECKLIST_SCHEMA,
            "host": self.host,
            "peer": self.peer,
            "ok": self.ok,
            "counts": self.counts,
            "items": [i.as_dict() for i in self.items],
        }


@dataclass
class Options:
    """What only the checklist looks at; what the host is judged by (profile, RTT, speed,
    interfaces) and where (namespace, tree) is the :class:`Judging`."""

    peer: PeerAddress | None = None
    perfsonar: str | None = None


@dataclass(frozen=True, slots=True)
class Facts:
    """What the checks read, gathered once per run; ``host`` is the read-only view."""

    host: Host
    judging: Judging
    opts: Options
    audit: Audit | None
    audit_error: str  # why the audit could not run ("" when it ran)
    links: dict[str, Interface]
    devices: list[tuple[str, str]]  # the data interfaces (device, why chosen)
    procs: list[Proc]
    peer: PeerFacts | None  # with --peer only


@dataclass(frozen=True, slots=True)
class Check:
    """One item of the checklist, declared once: its id, section and title, and the function
    that judges it (sets the item's status, summary, evidence and next step)."""

    id: str
    section: str  # dc27 | troubleshooting
    title: str
    judge: Callable[[Item, Facts], None]
    #: judged only with --peer
    needs_peer: bool = False

    def run(self, facts: Facts) -> Item:
        item = Item(self.id, self.section, self.title)
        self.judge(item, facts)
        return item


def as_int(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def sysctl_fix(j: Judging, assignment: str) -> str:
    """``sysctl -w KEY=VALUE`` where the checklist looked, and where to keep it."""
    cmd = f"sysctl -w {assignment}"
    if j.tree is not None:
        return j.shell(cmd, j.command("tune", "audit"))
    if j.netns:  # /etc/sysctl.d is read in the host's namespace only
        return f"{j.shell(cmd)} (and wherever the namespace is set up)"
    return f"{cmd} (and the same in /etc/sysctl.d)"
