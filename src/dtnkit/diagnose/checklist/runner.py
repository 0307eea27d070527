"""The checklist's items in the order they are printed (docs/monitoring.md), and the run:
gather once what the items read, then judge each."""

from __future__ import annotations

from dtnkit.diagnose.checklist import ipv6, monitoring, mtu, scitags, traffic, tuning
from dtnkit.diagnose.checklist.base import Check, Checklist, Facts, Options
from dtnkit.diagnose.checklist.peer import PeerFacts
from dtnkit.diagnose.checklist.procs import processes
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host import facts
from dtnkit.host.host import Host
from dtnkit.tune.audit import Audit, host_label
from dtnkit.tune.judging import Judging
from dtnkit.tune.profile import Profile

#: every item, in the order printed; the ones that ``needs_peer`` only with --peer
CHECKS: tuple[Check, ...] = (
    ipv6.ADDRESS,
    ipv6.ROUTE,
    ipv6.PEER,
    mtu.JUMBO_FRAMES,
    mtu.PATH_MTU,
    scitags.SCITAGS,
    monitoring.PERFSONAR,
    tuning.TUNED,
    monitoring.FLOW_MONITORING,
    traffic.TRAFFIC_TYPE,
    tuning.TCP_RMEM,
    tuning.UDP_GRO_FORWARDING,
    tuning.SLOW_START_IDLE,
    tuning.TCP_FRTO,
)


def gather(host: Host, judging: Judging, opts: Options, profile: Profile | None = None) -> Facts:
    """What the items read, once: the audit (or why it could not run), the links and data
    interfaces, the processes, and the peer's probes.  ``host`` is made read-only first."""
    host = host.read_only_view()
    j = judging
    try:
        audit: Audit | None = j.audit(host, profile or j.load_profile())
        audit_error = ""
    except BadInput:
        raise  # --iface names an interface this host does not have
    except DtnkitError as exc:
        audit, audit_error = None, exc.render()
    if audit is not None:
        links, devices = audit.ctx.ifaces, audit.ctx.devices
    else:
        links = facts.interfaces(host)
        devices = facts.select_interfaces(
            links, list(j.ifaces) or None, facts.default_route_devices(host)
        )
    procs = processes(host)
    peer = PeerFacts.probe(host, opts.peer, links) if opts.peer else None
    return Facts(host, j, opts, audit, audit_error, links, devices, procs, peer)


def run_checklist(
    host: Host, judging: Judging, opts: Options, profile: Profile | None = None
) -> Checklist:
    """Every item, in the order of :data:`CHECKS`.  Never writes.  The tuning items judge by
    ``judging`` (``profile``: its profile, when the caller loaded it already) and every next
    step carries its scope and flags."""
    got = gather(host, judging, opts, profile)
    items = [check.run(got) for check in CHECKS if got.peer is not None or not check.needs_peer]
    return Checklist(host_label(got.host), opts.peer.text if opts.peer else None, items)
