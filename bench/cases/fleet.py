"""How long do the fleet playbooks take over SSH, per host and as a whole?

The hosts are tests/support/sshhosts.py's: the four end hosts of one lab path (20 ms RTT, a
200 Mbit/s cap between the pairs src1 -> dst1 and src2 -> dst2), each with its own sshd in its
own namespace; Ansible reaches each through ``ip netns exec NS nc`` (root only).

Site audit: ``ansible-playbook dtn.dtnkit.site_audit`` on N = 3 hosts (src1, dst1, src2) once
per --forks value per round, and on N = 1 (src1) with the first forks value (the fixed cost
apart from the cost per host); beside them the audit module alone on the same 3 hosts
(``ansible -m dtn.dtnkit.audit``), Ansible's own floor.  Interleaved, after one warm-up run
each; each run starts with no ControlPersist master (fresh connections, as a site's first run).
Campaign: ``ansible-playbook dtn.dtnkit.campaign`` on the two pairs with the ``buffers`` group
and 2 s probes, the hosts untuned first (TCP buffers capped at 64 KiB): its wall time and the
campaign.json's own verdicts.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import sshhosts

from bench.lib import Bench, CannotRun, Case
from bench.lib.loopback import ints

SMALL = "4096 16384 65536"
AUDIT_HOSTS = ["src1", "dst1", "src2"]


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--forks", type=ints, default=[1, 2, 3], help="Ansible forks (default 1,2,3)")
    p.add_argument("--campaigns", type=int, default=1, help="campaign runs (0: none)")


def quick(args: argparse.Namespace) -> None:
    args.forks, args.campaigns = [3], 0


def untune(fleet: sshhosts.SshHosts) -> None:
    for h in fleet.hosts:
        for key in ("tcp_rmem", "tcp_wmem"):
            h.run(["sh", "-c", f"echo '{SMALL}' > /proc/sys/net/ipv4/{key}"])


def site_audit(fleet: sshhosts.SshHosts, inv: Path, forks: int, dest: Path) -> float:
    fleet.stop_masters()
    start = time.monotonic()
    proc = fleet.playbook(
        inv,
        "dtn.dtnkit.site_audit",
        "-f",
        str(forks),
        "-e",
        json.dumps({"dtnkit_out_dir": str(dest)}),
    )
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"site audit failed: {proc.stdout[-2000:]}{proc.stderr[-1000:]}")
    return took


def module_audit(fleet: sshhosts.SshHosts, inv: Path, forks: int) -> float:
    fleet.stop_masters()
    start = time.monotonic()
    proc = fleet.ansible(
        inv,
        "all",
        "-f",
        str(forks),
        "-m",
        "dtn.dtnkit.audit",
        "-a",
        "dtnkit_path={{ dtnkit_path }}",
        "-o",
    )
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"ad-hoc audit failed: {proc.stdout[-2000:]}{proc.stderr[-1000:]}")
    return took


def campaign(fleet: sshhosts.SshHosts, inv: Path, dest: Path) -> tuple[float, dict[str, Any]]:
    untune(fleet)
    fleet.stop_masters()
    doc = {
        "dtnkit_out_dir": str(dest),
        "dtnkit_groups": ["buffers"],
        "dtnkit_probe_duration": "2s",
        "dtnkit_repeat": 1,
        "dtnkit_rtt": "20ms",
    }
    start = time.monotonic()
    proc = fleet.playbook(inv, "dtn.dtnkit.campaign", "-e", json.dumps(doc), timeout=900)
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"campaign failed: {proc.stdout[-3000:]}{proc.stderr[-1000:]}")
    result: dict[str, Any] = json.loads((dest / "campaign.json").read_text())
    return took, result


def run(b: Bench) -> None:
    why = (
        sshhosts.missing()
        or sshhosts.missing_ansible()
        or sshhosts.missing_collection("plugins/modules")
    )
    if why:
        raise CannotRun(why)
    playbooks = sshhosts.missing_collection() is None
    forks = b.args.forks
    base = b.workdir(where="/tmp")
    fleet = b.stack.enter_context(sshhosts.ssh_hosts(base / "hosts", prefix=b.prefix, pairs=2))
    untune(fleet)
    inv3 = fleet.inventory(base / "audit.yml", hosts=AUDIT_HOSTS)
    inv1 = fleet.inventory(base / "audit1.yml", hosts=AUDIT_HOSTS[:1])
    n = len(AUDIT_HOSTS)
    runs: dict[str, Callable[[], float]] = {}
    counter = [0]

    def dest(tag: str) -> Path:
        counter[0] += 1
        return base / f"{tag}-{counter[0]}"

    def playbook(inv: Path, forks: int, tag: str) -> float:
        return site_audit(fleet, inv, forks, dest(tag))

    for f in forks:
        if playbooks:
            runs[f"site_audit playbook, N={n}, forks={f}"] = functools.partial(
                playbook, inv3, f, "audit"
            )
        runs[f"audit module, ad hoc, N={n}, forks={f}"] = functools.partial(
            module_audit, fleet, inv3, f
        )
    if playbooks:
        runs[f"site_audit playbook, N=1, forks={forks[0]}"] = functools.partial(
            playbook, inv1, forks[0], "audit1"
        )
    for fn in runs.values():  # warm-up: caches and .pyc on every side
        fn()
    got = b.rounds_of(runs, label="site audit")
    rows = []
    for name in runs:
        t = got.get(name)
        hosts = 1 if "N=1" in name else n
        med = statistics.median(t)
        rows.append([name, f"{med:.1f} s", f"{min(t):.1f}-{max(t):.1f}", f"{med / hosts:.2f} s"])
    b.table(
        ["run", "median", "min-max", "per host"],
        rows,
        title=f"Site audit over SSH ({b.rounds} rounds, interleaved; fresh SSH "
        "connections each run)",
    )
    if playbooks:
        one = got.median(f"site_audit playbook, N=1, forks={forks[0]}") or 0.0
        three = got.median(f"site_audit playbook, N={n}, forks={forks[0]}") or 0.0
        b.note(
            f"site_audit playbook, forks={forks[0]}: {one:.1f} s fixed (N=1) + "
            f"{(three - one) / (n - 1):.1f} s per further host."
        )
    if b.args.campaigns and playbooks:
        inv4 = fleet.inventory(base / "campaign.yml")
        rows = []
        for k in range(b.args.campaigns):
            took, doc = campaign(fleet, inv4, base / f"campaign-{k}")
            verdicts = "; ".join(
                f"{p['client']}->{p['server']}: "
                + ", ".join(
                    f"{r['group']} {r['verdict']} x{r['ratio'] or 0:.2f}" for r in p["results"]
                )
                for p in doc["pairs"]
            )
            rows.append([str(k + 1), f"{took:.1f} s", verdicts])
        b.table(
            ["run", "wall time", "verdicts (ratio of medians)"],
            rows,
            title="Campaign: 2 pairs, group buffers, one baseline and one applied probe of "
            "2 s per pair",
        )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=3,
    needs_root=True,
    quick_help="forks 3 only, no campaign, one round",
)
