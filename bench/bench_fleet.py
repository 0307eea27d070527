#!/usr/bin/env python3
"""Wall time of the fleet playbooks over SSH on this machine's test hosts (root only).

    .venv/bin/python bench/bench_fleet.py [--repeat 3] [--forks 1,2,3] [--campaigns 1]

The hosts are tests/support/sshhosts.py's: the four end hosts of one lab path (20 ms RTT, a
200 Mbit/s cap between the pairs src1 -> dst1 and src2 -> dst2), each with its own sshd in
its own namespace; Ansible reaches each through ``ip netns exec NS nc``.

Site audit: ``ansible-playbook dtn.dtnkit.site_audit`` on N = 3 hosts (src1, dst1, src2) once
per --forks value per round, and on N = 1 (src1) with the first forks value, which gives the
fixed cost apart from the cost per host; beside them the audit module alone on the same 3
hosts (``ansible -m dtn.dtnkit.audit``: no playbook, no files written back), Ansible's own
floor.  Every case runs once per round, the order rotated each round, so a burst of load hits
all alike (interleaved), after one warm-up run each; each run starts with no ControlPersist
master (fresh connections, as a site's first run).  Printed: median, min and max wall time,
the time per host, and the ratio of each median to the same case's N = 3, first-forks median.

Campaign: ``ansible-playbook dtn.dtnkit.campaign`` on the two pairs with the ``buffers`` group
and 2 s probes, the hosts untuned first (TCP buffers capped at 64 KiB), as the tests run it,
into a per-host SQLite store; printed: its wall time and the campaign.json's own verdicts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support import sshhosts

from benchlib import CpuWatch, log, out, table

SMALL = "4096 16384 65536"
AUDIT_HOSTS = ["src1", "dst1", "src2"]


def untune(fleet: sshhosts.SshHosts) -> None:
    for h in fleet.hosts:
        for key in ("tcp_rmem", "tcp_wmem"):
            h.run(["sh", "-c", f"echo '{SMALL}' > /proc/sys/net/ipv4/{key}"])


def site_audit(fleet: sshhosts.SshHosts, inv: Path, forks: int, dest: Path) -> float:
    fleet.stop_masters()
    start = time.monotonic()
    proc = fleet.playbook(inv, "dtn.dtnkit.site_audit", "-f", str(forks), "-e",
                          json.dumps({"dtnkit_out_dir": str(dest)}))
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"site audit failed: {proc.stdout[-2000:]}{proc.stderr[-1000:]}")
    return took


def module_audit(fleet: sshhosts.SshHosts, inv: Path, forks: int) -> float:
    """The audit module alone, ad hoc (``ansible -m dtn.dtnkit.audit``): no playbook, no
    files fetched back."""
    fleet.stop_masters()
    start = time.monotonic()
    proc = fleet.ansible(inv, "all", "-f", str(forks), "-m", "dtn.dtnkit.audit", "-a",
                         "dtnkit_path={{ dtnkit_path }}", "-o")
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"ad-hoc audit failed: {proc.stdout[-2000:]}{proc.stderr[-1000:]}")
    return took


def campaign(fleet: sshhosts.SshHosts, inv: Path, dest: Path) -> tuple[float, dict[str, Any]]:
    untune(fleet)
    fleet.stop_masters()
    doc = {"dtnkit_out_dir": str(dest), "dtnkit_groups": ["buffers"],
           "dtnkit_probe_duration": "2s", "dtnkit_repeat": 1, "dtnkit_rtt": "20ms"}
    start = time.monotonic()
    proc = fleet.playbook(inv, "dtn.dtnkit.campaign", "-e", json.dumps(doc), timeout=900)
    took = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"campaign failed: {proc.stdout[-3000:]}{proc.stderr[-1000:]}")
    result: dict[str, Any] = json.loads((dest / "campaign.json").read_text())
    return took, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the site audit")
    parser.add_argument("--forks", default="1,2,3", help="Ansible forks values, e.g. 1,2,3")
    parser.add_argument("--campaigns", type=int, default=1, help="campaign runs (0: none)")
    parser.add_argument("--prefix", default="s20sb", help="start of the lab path's name")
    args = parser.parse_args()
    why = sshhosts.missing() or sshhosts.missing_ansible() or \
        sshhosts.missing_collection("plugins/modules")
    if why:
        raise SystemExit(f"bench_fleet: {why}")
    playbooks = sshhosts.missing_collection() is None
    if not playbooks:
        log(f"no playbooks yet ({sshhosts.missing_collection()}): the audit module only")
    forks = [int(f) for f in args.forks.split(",")]
    base = Path(tempfile.mkdtemp(prefix=f"{args.prefix}-"))
    log(f"building 4 SSH hosts under {base}")
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, base, ignore_errors=True)
        fleet = stack.enter_context(sshhosts.ssh_hosts(base / "hosts", prefix=args.prefix,
                                                       pairs=2))
        untune(fleet)
        inv3 = fleet.inventory(base / "audit.yml", hosts=AUDIT_HOSTS)
        inv1 = fleet.inventory(base / "audit1.yml", hosts=AUDIT_HOSTS[:1])
        inv4 = fleet.inventory(base / "campaign.yml")
        n = len(AUDIT_HOSTS)
        # (case, N hosts, forks values, run(forks, tag) -> seconds)
        cases: list[tuple[str, int, list[int], Callable[[int, str], float]]] = []
        if playbooks:
            cases.append(("site_audit playbook", n, forks,
                          lambda f, tag: site_audit(fleet, inv3, f, base / f"audit-{tag}")))
            cases.append(("site_audit playbook", 1, forks[:1],
                          lambda f, tag: site_audit(fleet, inv1, f, base / f"audit1-{tag}")))
        cases.append(("audit module, ad hoc", n, forks,
                      lambda f, tag: module_audit(fleet, inv3, f)))
        for _, _, fs, run in cases:  # warm-up: caches and .pyc on every side
            run(max(fs), "warm")
        watch = CpuWatch()
        times: dict[tuple[str, int, int], list[float]] = {
            (c, hosts, f): [] for c, hosts, fs, _ in cases for f in fs}
        runs = [(c, hosts, run, f) for c, hosts, fs, run in cases for f in fs]
        for r in range(args.repeat):
            for c, hosts, run, f in runs[r % len(runs):] + runs[:r % len(runs)]:
                times[c, hosts, f].append(run(f, f"{r}-{f}"))
                log(f"round {r + 1}: {c}, N={hosts}, forks={f}: "
                    f"{times[c, hosts, f][-1]:.1f} s")
        out(f"Site audit over SSH ({args.repeat} rounds, interleaved; {os.cpu_count()} CPUs; "
            "fresh SSH connections each run)")
        out()
        rows = []
        for c, hosts, fs, _ in cases:
            ref = statistics.median(times[c, n, forks[0]])
            for f in fs:
                got = times[c, hosts, f]
                med = statistics.median(got)
                rows.append([c, str(hosts), str(f), f"{med:.1f} s",
                             f"{min(got):.1f}-{max(got):.1f}", f"{med / hosts:.2f} s",
                             f"{med / ref:.2f}"])
        table(["run", "N", "forks", "median", "min-max", "per host",
               f"ratio to N={n}, forks={forks[0]}"], rows)
        if playbooks:
            one = statistics.median(times["site_audit playbook", 1, forks[0]])
            three = statistics.median(times["site_audit playbook", n, forks[0]])
            out(f"site_audit playbook, forks={forks[0]}: {one:.1f} s fixed (N=1) + "
                f"{(three - one) / (n - 1):.1f} s per further host")
            out()
        out(watch.report())
        out()
        if args.campaigns and playbooks:
            watch = CpuWatch()
            rows = []
            for k in range(args.campaigns):
                took, doc = campaign(fleet, inv4, base / f"campaign-{k}")
                log(f"campaign {k + 1}: {took:.1f} s")
                verdicts = "; ".join(
                    f"{p['client']}->{p['server']}: " + ", ".join(
                        f"{r['group']} {r['verdict']} x{r['ratio'] or 0:.2f}"
                        for r in p["results"])
                    for p in doc["pairs"])
                rows.append([str(k + 1), f"{took:.1f} s", verdicts])
            out("Campaign: 2 pairs, group buffers, one baseline and one applied probe of 2 s "
                "per pair")
            out()
            table(["run", "wall time", "verdicts (ratio of medians)"], rows)
            out(watch.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
