"""What does the sweep runner cost per point beyond the tool's own run?

For each tool (iperf3, dtnkit-cp) three cases, interleaved:
  * kept: the same path and the servers kept running between points (a grid's inner axis,
    streams, changing: the common case);
  * path: every point changes the RTT (a `LabPath.set`), the servers kept;
  * restart: every point changes the RTT and starts and stops its servers (a change of
    origins, cores, file size or tool).
Per point: overhead = the point's wall time (``elapsed_s``, from the lab change to the servers'
stop) minus the tool's measured time (``tool_s``), and the ratio of the two; the phases' own
seconds.  The first point of each sweep (the lab path's build, the PKI) is left out.
"""

from __future__ import annotations

import argparse
import functools
import statistics
from pathlib import Path

from bench.lib import Bench, Case
from dtnkit.sweep import store
from dtnkit.sweep.grid import parse_grid_flags
from dtnkit.sweep.runner import Sweep, SweepOptions

Got = tuple[float, float, dict[str, float]]
PHASES = ("path_s", "servers_start_s", "servers_stop_s")
CASES = ("kept", "path", "restart")
TOOLS = ("iperf3", "dtnkit-cp")


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=float, default=2.0, help="seconds per point (default 2)")
    p.add_argument("--points", type=int, default=4, help="points per sweep (+1 left out)")


def quick(args: argparse.Namespace) -> None:
    args.points = 2


def sweep_once(b: Bench, tmp: Path, tool: str, case: str, k: int) -> list[Got]:
    """(overhead s, elapsed / tool, the phases' seconds) of each point but the first."""
    points, duration = b.args.points, b.args.duration
    if case == "kept":
        axes = [f"streams={','.join(str(2**i) for i in range(points + 1))}", "rtt=10ms"]
    else:  # path, restart
        axes = ["streams=2", f"rtt={','.join(f'{5 * (i + 1)}ms' for i in range(points + 1))}"]
    grid = parse_grid_flags(
        [
            *axes,
            f"tool={tool}",
            f"duration={duration}s",
            f"sample_interval={min(1.0, duration / 2)}s",
            "rate=1gbit",
            "file_size=4MiB",
        ],
        known_profiles=[],
    )
    name = f"b{k}"
    opts = SweepOptions(
        name=name,
        db_path=tmp / "bench.db",
        lab_name=f"{b.prefix}s{k}",
        lab_state_root=tmp / "lab",
        state_dir=tmp / "state",
        workdir=tmp / f"work-{k}",
        reuse_servers=case != "restart",
        keep_lab=False,
    )
    summary = Sweep(grid, grid.to_toml(), opts).run()
    if summary.failed:
        b.log(f"{tool} {case}: {summary.failures}")
    got = []
    for p in store.load_points(opts.db_path, name)[1:]:
        if p.status == "ok" and p.tool_s:
            phases = p.extra.get("phases_s") or {}
            assert isinstance(phases, dict)
            got.append((p.elapsed_s - p.tool_s, p.elapsed_s / p.tool_s, phases))
    return got


def run(b: Bench) -> None:
    tmp = b.workdir()
    results: dict[tuple[str, str], list[Got]] = {}
    counter = [0]

    def one(tool: str, case: str) -> float:
        counter[0] += 1
        got = sweep_once(b, tmp, tool, case, counter[0])
        results.setdefault((tool, case), []).extend(got)
        return statistics.median([o for o, _, _ in got]) if got else float("nan")

    b.rounds_of(
        {f"{t} {c}": functools.partial(one, t, c) for t in TOOLS for c in CASES}, label="overhead"
    )
    rows = []
    for (tool, case), got in results.items():
        if not got:
            rows.append([tool, case, "0", *["-"] * (3 + len(PHASES))])
            continue
        over = [o for o, _, _ in got]
        rows.append(
            [
                tool,
                case,
                str(len(got)),
                f"{statistics.median(over):.2f}",
                f"{max(over):.2f}",
                f"{statistics.median(x for _, x, _ in got):.2f}",
                *[f"{statistics.median(ph.get(k, 0.0) for _, _, ph in got):.2f}" for k in PHASES],
            ]
        )
    b.table(
        [
            "tool",
            "servers and path",
            "points",
            "overhead median (s)",
            "overhead max (s)",
            "point / tool time (median)",
            "path change (s)",
            "servers start (s)",
            "servers stop (s)",
        ],
        rows,
        title=f"Overhead per point, {b.args.duration:g} s points through a 1 Gbit/s lab path",
    )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=2,
    needs_root=True,
    tools=("iperf3",),
    quick_help="one round, 2 points",
)
