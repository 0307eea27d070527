"""The end-to-end probe: a real transfer, timed.  Rate = bytes moved / wall time.

Until the dtnkit mover exists the transfer is a command the user gives (xrdcp, gfal-copy,
curl, or a pipe), with ``{src}`` and ``{dst}`` replaced by the (shell-quoted) arguments.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host.host import Host
from dtnkit.measure.store import ProbeResult

Wrap = Callable[[Sequence[str]], list[str]]


@dataclass
class E2ESpec:
    src: str
    dst: str
    command: str | None = None
    bytes: int | None = None
    timeout_s: float = 3600.0
    interval_s: float = 5.0


def source_size(path: str) -> int:
    """Bytes in a file or block device."""
    try:
        with open(path, "rb") as fh:
            return fh.seek(0, os.SEEK_END)
    except OSError as exc:
        raise BadInput(f"cannot read the transfer source {path}", exc.strerror or str(exc),
                       "give an existing file or device, or --bytes") from exc


def run_e2e_probe(host: Host, spec: E2ESpec, *, wrap: Wrap | None = None) -> ProbeResult:
    from dtnkit.measure.sampler import Sampler, summarize

    if not spec.command:
        raise BadInput("no transfer command", "the dtnkit mover is not part of this version",
                       "give --command, e.g. 'xrdcp {src} {dst}' or 'curl -o {dst} {src}'")
    size = spec.bytes if spec.bytes is not None else source_size(spec.src)
    line = spec.command.format(src=shlex.quote(spec.src), dst=shlex.quote(spec.dst))
    # join the cgroup before entering the namespace: `ip netns exec` remounts /sys, so the
    # cgroup files are not visible inside it
    argv = host.argv(["sh", "-c", line])
    if wrap is not None:
        argv = wrap(argv)
    started = time.time()
    with Sampler(host, interval_s=spec.interval_s) as sampler:
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                                  timeout=spec.timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise DtnkitError("the transfer did not finish", f"{exc.timeout:g} s passed",
                              "raise --timeout or check the transfer") from exc
        wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise DtnkitError("the transfer command failed",
                          (proc.stderr or proc.stdout).strip()[-400:] or
                          f"exit status {proc.returncode}", "run the command by hand to see why")
    summary: dict[str, Any] = {"bytes": size, "seconds": wall,
                               "throughput_bps": size * 8 / wall if wall > 0 else 0.0}
    summary.update({f"sampler_{k}": v for k, v in summarize(sampler.samples).items()})
    return ProbeResult(kind="e2e", spec={**asdict(spec), "command_line": line}, summary=summary,
                       samples=sampler.samples, raw=proc.stdout + proc.stderr, netns=host.netns,
                       started=started, duration_s=time.time() - started)
