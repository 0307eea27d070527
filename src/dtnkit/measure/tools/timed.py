"""One timed transfer process for the end-to-end tools: run it beside the sampler, within
the probe's time limit, and turn a non-zero exit into one clear error."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dtnkit.errors import DtnkitError
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.measure.probes.e2e import E2ESpec
from dtnkit.measure.sampler import Sampler
from dtnkit.progress import SILENT, Interval, Progress


@dataclass
class Timed:
    proc: process.CompletedProcess[str]
    wall: float  # seconds, process start included
    samples: list[dict[str, Any]]


def elapsed(progress: Progress, total_bytes: int | None) -> Callable[[dict[str, Any]], None]:
    """A sampler callback reporting each sample as an interval of the running transfer (its
    bytes are not watched: the mover may write anywhere, or to another host)."""
    last = [0.0]

    def on_sample(sample: dict[str, Any]) -> None:
        end = float(sample.get("t_s") or 0.0)
        start, last[0] = last[0], end
        progress.interval(Interval(start, end, phase="transfer", total_bytes=total_bytes))

    return on_sample


Failure = Callable[[process.CompletedProcess[str]], DtnkitError]


def run_timed(
    host: Host,
    argv: list[str],
    spec: E2ESpec,
    *,
    failed: str,
    next_step: str,
    progress: Progress = SILENT,
    failure: Failure | None = None,
) -> Timed:
    """Run *argv* (already wrapped for the host's namespace and cgroup) and time it;
    ``failed`` names the transfer in the error when it exits non-zero (or ``failure`` makes
    that error from the finished process: a mover whose own error says more)."""
    with Sampler(
        host, interval_s=spec.interval_s, on_sample=elapsed(progress, spec.bytes)
    ) as sampler:
        t0 = time.monotonic()
        try:
            proc = process.run(argv, timeout=spec.timeout_s)
        except process.TimeoutExpired as exc:
            raise DtnkitError(
                "the transfer did not finish",
                f"the probe's limit of {exc.timeout:g} s passed",
                "run the transfer by hand to see where it stalls",
            ) from exc
        wall = time.monotonic() - t0
    if proc.returncode != 0:
        if failure is not None:
            raise failure(proc)
        raise DtnkitError(
            failed,
            (proc.stderr or proc.stdout).strip()[-400:] or f"exit status {proc.returncode}",
            next_step,
        )
    return Timed(proc, wall, sampler.samples)
