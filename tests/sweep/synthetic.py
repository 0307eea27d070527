"""A synthetic sweep run stored in a real results database (the store's own code), with a
known peak, drop, fluctuation, CPU and completion times: what the sweep analysis and report
tests analyse and report on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dtnkit.measure.tool import Transfer
from dtnkit.sweep.grid import Point
from dtnkit.sweep.store import PointResult, SweepStore

G = 1e9
BASE = Point(
    rtt_ms=5.0,
    rate_bps=10**9,
    loss=0.0,
    origins=1,
    cores=1.0,
    profile=None,
    tool="dtnkit-cp",
    file_size=2**20,
    streams=1,
    repeat=0,
    duration_s=6.0,
    bytes=None,
    sample_interval_s=1.0,
    time_limit_s=60.0,
)
# at 5 ms the curve peaks at 8 streams and falls 30 % past it; at 100 ms it peaks at 16
SHAPE = {
    5.0: {1: 0.30, 2: 0.60, 4: 0.85, 8: 0.95, 16: 0.665, 32: 0.70},
    100.0: {1: 0.05, 2: 0.10, 4: 0.25, 8: 0.60, 16: 0.80, 32: 0.68},
}
GRID_TOML = 'name = "synthetic"\n[axes]\nrtt = ["5ms", "100ms"]\nstreams = [1, 2, 4, 8, 16, 32]\n'


def results(
    repeats: int = 2,
    *,
    bound_at: tuple[float, int] | None = (100.0, 32),
    failed_at: tuple[float, int] | None = (5.0, 1),
) -> list[PointResult]:
    out = []
    for rtt, shape in SHAPE.items():
        for streams, frac in shape.items():
            for r in range(repeats):
                p = dataclasses.replace(BASE, rtt_ms=rtt, streams=streams, repeat=r)
                mean = frac * G * (1.01 if r else 0.99)
                # fluctuation: +-2 % below 85 % utilisation, +-10 % at or above it
                swing = 0.10 if frac >= 0.85 else 0.02
                samples = tuple(
                    (float(i + 1), mean * (1 + (swing if i % 2 else -swing))) for i in range(6)
                )
                ends = tuple(
                    Transfer(
                        start_s=0.0, end_s=1.0 + i * 0.1 + rtt / 100, bytes=2**20, verified=True
                    )
                    for i in range(streams)
                )
                bound = bound_at == (rtt, streams)
                fail = failed_at == (rtt, streams) and r == 0
                out.append(
                    PointResult(
                        point=p,
                        status="failed" if fail else "ok",
                        error="connection refused" if fail else "",
                        started=1.7e9,
                        elapsed_s=7.0,
                        tool_s=6.0,
                        samples=() if fail else samples,
                        series={"cpu_cores.0": [0.2 + frac * 0.6] * 6},
                        cpu_seconds=(6.0 * (0.2 + frac * 0.6),),
                        transfers=ends,
                        emulator_bound=bound,
                        emulator_why="delay stage at 97% of a core" if bound else "",
                    )
                )
    return out


def store_run(
    db: Path,
    name: str = "synth",
    *,
    grid_toml: str = GRID_TOML,
    environment: dict[str, object] | None = None,
    points: list[PointResult] | None = None,
) -> SweepStore:
    store = SweepStore(db)
    pts = results() if points is None else points
    store.create_run(name, grid_toml, environment or {"dtnkit": "test", "kernel": "6.1"}, len(pts))
    for p in pts:
        store.store_point(name, p)
    store.set_status(name, "done")
    return store
