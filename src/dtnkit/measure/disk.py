"""The storage probe: real fio (sequential write, then read), beside the sampler."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from dtnkit.errors import ToolMissing
from dtnkit.host.host import Host
from dtnkit.measure.store import ProbeResult

Wrap = Callable[[Sequence[str]], list[str]]


@dataclass
class DiskSpec:
    path: str
    size_bytes: int = 256 * 2**20
    direct: bool = True
    jobs: int = 1
    interval_s: float = 5.0


def run_disk_probe(host: Host, spec: DiskSpec, *, wrap: Wrap | None = None) -> ProbeResult:
    from dtnkit.measure import fio
    from dtnkit.measure.sampler import Sampler, summarize

    ok, reasons = fio.can_run()
    if not ok:
        raise ToolMissing("the storage probe cannot run", "; ".join(reasons),
                          "install fio and run again")
    started = time.time()
    with Sampler(host, interval_s=spec.interval_s) as sampler:
        got = fio.run_disk_probe(spec.path, size_bytes=spec.size_bytes, direct=spec.direct,
                                 jobs=spec.jobs, wrap=wrap)
    raw = got.pop("raw", {})
    summary = {**got, "throughput_bps": float(got["read_bps"]) * 8}  # reading feeds a transfer
    summary.update({f"sampler_{k}": v for k, v in summarize(sampler.samples).items()})
    return ProbeResult(kind="disk", spec=asdict(spec), summary=summary, samples=sampler.samples,
                       raw=str(raw), netns=host.netns, started=started,
                       duration_s=time.time() - started)
