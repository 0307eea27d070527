#!/usr/bin/env python3
"""Wall time of the fleet playbooks over SSH on this machine's test hosts (root only).

    .venv/bin/python bench/bench_fleet.py [--repeat 3] [--forks 1,2,3] [--campaigns 1]

The hosts are tests/support/sshhosts.py's: the four end hosts of one lab path (20 ms RTT, a
200 Mbit/s cap between the pairs src1 -> dst1 and src2 -> dst2), each with its own sshd in
its own namespace; Ansible reaches each through ``ip netns exec NS nc``.

Site audit: ``ansible-playbook dtn.dtnkit.site_audit`` on N = 3 hosts (src1, dst1, src2), once
per --forks value per round, the order of the values rotated each round so a burst of load hits
all alike (interleaved); each run starts with no ControlPersist master (fresh connections, as a
site's first run).  Printed: the median, min and max wall time per forks value, the time per
host, and the ratio of each median to forks=1's in the same run.  A reference row, the same
N hosts' ``ansible -m ansible.builtin.command -a 'dtnkit tune audit --format json'`` with the
largest forks value, separates Ansible's own cost from the playbook's.

Campaign: ``ansible-playbook dtn.dtnkit.campaign`` on the two pairs with the ``buffers`` group
and 2 s probes, the hosts untuned first (TCP buffers capped at 64 KiB), as the tests run it,
into a per-host SQLite store; printed: its wall time and the campaign.json's own verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
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


def adhoc_audit(fleet: sshhosts.SshHosts, inv: Path, forks: int) -> float:
    fleet.stop_masters()
    start = time.monotonic()
    proc = fleet.ansible(inv, "all", "-f", str(forks), "-m", "ansible.builtin.command", "-a",
                         f"{fleet.dtnkit_path} tune audit --format json")
    took = time.monotonic() - start
    if "UNREACHABLE" in proc.stdout or ("FAILED" in proc.stdout and "rc=3" not in proc.stdout):
        raise SystemExit(f"ad-hoc audit failed: {proc.stdout[-2000:]}")
    return took


def campaign(fleet: sshhosts.SshHosts, inv: Path, dest: Path) -> tuple[float, dict[str, Any]]:
    untune(fleet)
    fleet.stop_masters()
    doc = {"dtnkit_out_dir": str(dest), "dtnkit_groups": ["buffers"],
           "dtnkit_probe_duration": "2s", "dtnkit_repeat": 2, "dtnkit_rtt": "20ms"}
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
    why = sshhosts.missing() or sshhosts.missing_ansible() or sshhosts.missing_collection()
    if why:
        raise SystemExit(f"bench_fleet: {why}")
    forks = [int(f) for f in args.forks.split(",")]
    base = Path(tempfile.mkdtemp(prefix=f"{args.prefix}-"))
    log(f"building 4 SSH hosts under {base}")
    with sshhosts.ssh_hosts(base / "hosts", prefix=args.prefix, pairs=2) as fleet:
        untune(fleet)
        inv3 = fleet.inventory(base / "audit.yml", hosts=AUDIT_HOSTS)
        inv4 = fleet.inventory(base / "campaign.yml")
        site_audit(fleet, inv3, max(forks), base / "warm")  # caches, .pyc on every side
        watch = CpuWatch()
        times: dict[int, list[float]] = {f: [] for f in forks}
        adhoc: list[float] = []
        for r in range(args.repeat):
            order = forks[r % len(forks):] + forks[:r % len(forks)]
            for f in order:
                times[f].append(site_audit(fleet, inv3, f, base / f"audit-{r}-{f}"))
                log(f"round {r + 1}: site audit forks={f}: {times[f][-1]:.1f} s")
            adhoc.append(adhoc_audit(fleet, inv3, max(forks)))
        n = len(AUDIT_HOSTS)
        out(f"Site audit of N = {n} hosts over SSH ({args.repeat} rounds, interleaved; "
            f"{os.cpu_count()} CPUs)")
        out()
        ref = statistics.median(times[forks[0]])
        rows = []
        for f in forks:
            med = statistics.median(times[f])
            rows.append([f"forks={f}", f"{med:.1f} s", f"{min(times[f]):.1f}-{max(times[f]):.1f}",
                         f"{med / n:.2f} s", f"{med / ref:.2f}"])
        med = statistics.median(adhoc)
        rows.append([f"ad-hoc command, forks={max(forks)}", f"{med:.1f} s",
                     f"{min(adhoc):.1f}-{max(adhoc):.1f}", f"{med / n:.2f} s", f"{med / ref:.2f}"])
        table(["run", "median", "min-max", "per host", f"ratio to forks={forks[0]}"], rows)
        out(watch.report())
        out()
        if args.campaigns:
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
            out("Campaign: 2 pairs, group buffers, 2 x (baseline, applied) probes of 2 s per pair")
            out()
            table(["run", "wall time", "verdicts (ratio of medians)"], rows)
            out(watch.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
