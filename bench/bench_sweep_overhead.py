#!/usr/bin/env python3
"""The sweep runner's overhead per point: what a point costs beyond the tool's own run
(the lab path's change, server start and stop, the sampler, the profile, the store).

    .venv/bin/python bench/bench_sweep_overhead.py [--duration 2] [--points 4] [--quick]

For each tool (iperf3, dtnkit-cp) three cases, interleaved (A B C A B C ...):
  * kept: the same path and the servers kept running between points (a grid's inner axis,
    streams, changing: the common case);
  * path: every point changes the RTT (a `LabPath.set`), the servers kept (what a sweep does
    when only the path's settings change);
  * restart: every point changes the RTT and starts and stops its servers (a change of
    origins, cores, file size or tool).
Per point: overhead = the point's wall time (`elapsed_s`, from the lab change to the servers'
stop) minus the tool's measured time (`tool_s`, the sampler's window around the tool), and
the ratio of the two.  The first point of each sweep (the lab path's build, the PKI) is left
out.  Root only (lab paths).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import CpuWatch, log, out, table
from dtnkit.sweep import store
from dtnkit.sweep.grid import parse_grid_flags
from dtnkit.sweep.runner import Sweep, SweepOptions

Got = tuple[float, float, dict[str, float]]
PHASES = ("path_s", "servers_start_s", "servers_stop_s")


def sweep_once(tmp: Path, tool: str, case: str, duration: float, points: int, k: int
               ) -> list[Got]:
    """(overhead s, elapsed / tool, the phases' seconds) of each point but the first."""
    if case == "kept":
        axes = [f"streams={','.join(str(2 ** i) for i in range(points + 1))}", "rtt=10ms"]
    else:  # path, restart
        axes = ["streams=2", f"rtt={','.join(f'{5 * (i + 1)}ms' for i in range(points + 1))}"]
    grid = parse_grid_flags([*axes, f"tool={tool}", f"duration={duration}s",
                             f"sample_interval={min(1.0, duration / 2)}s", "rate=1gbit",
                             "file_size=4MiB"], known_profiles=[])
    name = f"b{k}"
    opts = SweepOptions(name=name, db_path=tmp / "bench.db", lab_name=f"swb{k}",
                        lab_state_root=tmp / "lab", state_dir=tmp / "state",
                        workdir=Path(f"/dev/shm/dtnkit-bench-sweep-{k}"),
                        reuse_servers=case != "restart", keep_lab=False)
    summary = Sweep(grid, grid.to_toml(), opts).run()
    if summary.failed:
        log(f"{tool} {case}: {summary.failures}")
    got = []
    for p in store.load_points(opts.db_path, name)[1:]:
        if p.status == "ok" and p.tool_s:
            phases = p.extra.get("phases_s") or {}
            assert isinstance(phases, dict)
            got.append((p.elapsed_s - p.tool_s, p.elapsed_s / p.tool_s, phases))
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per point")
    parser.add_argument("--points", type=int, default=4, help="points per sweep (+1 left out)")
    parser.add_argument("--rounds", type=int, default=2, help="sweeps per case, interleaved")
    parser.add_argument("--quick", action="store_true", help="one round, 2 points")
    args = parser.parse_args()
    rounds, points = (1, 2) if args.quick else (args.rounds, args.points)
    watch = CpuWatch()
    results: dict[tuple[str, str], list[Got]] = {}
    k = 0
    with tempfile.TemporaryDirectory(prefix="dtnkit-bench-sweep-") as tmp:
        for r in range(rounds):
            for tool in ("iperf3", "dtnkit-cp"):
                for case in ("kept", "path", "restart"):
                    k += 1
                    log(f"round {r + 1}: {tool}, {case}")
                    results.setdefault((tool, case), []).extend(
                        sweep_once(Path(tmp), tool, case, args.duration, points, k))
    rows = []
    for (tool, case), got in results.items():
        if not got:
            rows.append([tool, case, "0", *["-"] * (3 + len(PHASES))])
            continue
        over = [o for o, _, _ in got]
        ratio = [x for _, x, _ in got]
        rows.append([tool, case, str(len(got)), f"{statistics.median(over):.2f}",
                     f"{max(over):.2f}", f"{statistics.median(ratio):.2f}",
                     *[f"{statistics.median(ph.get(k, 0.0) for _, _, ph in got):.2f}"
                       for k in PHASES]])
    out(f"Overhead per point, {args.duration:g} s points through a 1 Gbit/s lab path:")
    out()
    table(["tool", "servers and path", "points", "overhead median (s)", "overhead max (s)",
           "point / tool time (median)", "path change (s)", "servers start (s)",
           "servers stop (s)"], rows)
    out(watch.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
