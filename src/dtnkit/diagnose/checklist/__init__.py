"""``dtnkit checklist``: the DC27 site items and the HTTP-TPC troubleshooting checks, each
pass / warn / fail with its evidence (what was read, the value) and the next step.

Reads only, through the :class:`~dtnkit.host.host.Host` seam (a namespace, a captured tree):
the host is made read-only here, so a write anywhere below raises.  The tuning items run the
tune audit in-process and reuse its interface selection.  docs/monitoring.md ("Checklist")
says what each item looks at and its rules.

One module per family of items (``ipv6``, ``mtu``, ``scitags``, ``monitoring``, ``traffic``,
``tuning``), each declaring its items as :class:`~dtnkit.diagnose.checklist.base.Check`
values; ``runner.CHECKS`` lists them in the order they are printed and ``run_checklist``
gathers once what they read (``base.Facts``: the audit, the links, the processes, the peer).
"""

from dtnkit.diagnose.checklist.base import Check, Checklist, Evidence, Facts, Item, Options
from dtnkit.diagnose.checklist.runner import CHECKS, run_checklist

__all__ = ["CHECKS", "Check", "Checklist", "Evidence", "Facts", "Item", "Options", "run_checklist"]
