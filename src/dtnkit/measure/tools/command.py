"""The end-to-end tool ``command``: a transfer command the user gives, timed.

``{src}`` and ``{dst}`` in the template are replaced by the (shell-quoted) arguments; the
command runs under ``sh -c`` on the probing host (inside its namespace), e.g. ``xrdcp {src}
{dst}``, ``curl -o {dst} {src}`` or a pipe.  The bytes moved are ``--bytes`` or the size of
the source.

A load (:class:`~dtnkit.measure.probes.load.LoadSpec`, a sweep point, ``command:NAME``):
``streams`` concurrent runs of the template on the tool's host, without a shell (the
template is split into words first, then each word is filled in:
:data:`~dtnkit.measure.probes.load.PLACEHOLDERS`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.host.host import Host
from dtnkit.measure.probes.e2e import KIND as E2E_KIND
from dtnkit.measure.probes.e2e import E2ESpec, rate_summary, source_size
from dtnkit.measure.probes.load import LoadSpec
from dtnkit.measure.procs import Procs
from dtnkit.measure.tool import ToolContext, ToolRun, Transfer
from dtnkit.measure.tools.timed import run_timed
from dtnkit.measure.tools.workers import DEADLINE_MESSAGE, Runs, in_threads


class Command:
    name = "command"
    kind = E2E_KIND
    about = "a transfer command with {src} and {dst} (--command), timed"
    package = "the transfer command"

    def can_run(self) -> tuple[bool, list[str]]:
        return True, []  # the command is checked by running it: sh says what is missing

    def parse(self, text: str) -> dict[str, Any]:
        """Nothing: a command's output has no known form; the rate is bytes / wall time."""
        return {}

    def run(self, host: Host, spec: E2ESpec | LoadSpec, context: ToolContext) -> ToolRun:
        if isinstance(spec, LoadSpec):
            return run_load(host, spec, context)
        if not spec.command:
            raise BadInput(
                "no transfer command",
                "the command tool runs the one you give",
                "give --command, e.g. 'xrdcp {src} {dst}' or 'curl -o {dst} {src}'",
            )
        given = spec.cp_options()
        if given:
            raise BadInput(
                f"{given[0]} with --command",
                "is passed to the default mover, "
                "dtnkit cp, only: a command gets what its own line says",
                "put the option in the command, or leave out --command",
            )
        size = spec.bytes if spec.bytes is not None else source_size(spec.src)
        line = spec.command.format(src=shlex.quote(spec.src), dst=shlex.quote(spec.dst))
        # join the cgroup before entering the namespace: `ip netns exec` remounts /sys, so the
        # cgroup files are not visible inside it
        argv = context.argv(host.argv(["sh", "-c", line]))
        done = run_timed(
            host,
            argv,
            spec,
            failed="the transfer command failed",
            next_step="run the command by hand to see why",
            progress=context.progress,
        )
        return ToolRun(
            {**rate_summary(size, done.wall), **self.parse(done.proc.stdout)},
            done.proc.stdout + done.proc.stderr,
            done.samples,
            {"command_line": line},
        )


def fields(spec: LoadSpec, workdir: Path, k: int) -> dict[str, str]:
    """The values of run ``k``'s placeholders."""
    origin = spec.origins[k % len(spec.origins)]
    name = origin.files[(k // len(spec.origins)) % len(origin.files)] if origin.files else ""
    url = f"{origin.url_base}/{name}" if origin.url_base else ""
    return {
        "rtt_ms": "",
        "rate_bps": "",
        **spec.fields,
        "src": url,
        "url": url,
        "dst": str(workdir / f"out{k}"),
        "host": origin.host.address,
        "port": str(origin.port),
        "origin": str(origin.index),
        "streams": str(spec.streams),
        "file_size": str(spec.file_size),
        "duration": f"{spec.duration_s:g}" if spec.duration_s is not None else "",
        "bytes": str(spec.bytes) if spec.bytes is not None else "",
        "workdir": str(workdir),
    }


def run_load(host: Host, spec: LoadSpec, context: ToolContext) -> ToolRun:
    """``streams`` concurrent runs of the template (see the module's text)."""
    if context.workdir is None:
        raise BadInput(
            "no directory for the command's runs",
            "each run writes {dst} in a directory of the load's own",
            "give the run a workdir",
        )
    workdir = context.workdir
    words = shlex.split(spec.command or "")
    deadline = (
        context.deadline if context.deadline is not None else time.monotonic() + spec.time_limit_s
    )
    procs = context.procs or Procs()
    runs = Runs(procs, host, workdir, deadline, time.monotonic())
    transfers: list[Transfer | None] = [None] * spec.streams

    def one(k: int) -> None:
        values = fields(spec, workdir, k)
        argv = [w.format(**values) for w in words]
        code, _, err, start, end = runs.run(argv)
        error = (
            ""
            if code == 0
            else (
                "stopped at the time limit"
                if code is None
                else f"exit status {code}: {err.strip()[-200:]}".rstrip(": ")
            )
        )
        size = 0
        with contextlib.suppress(OSError):
            size = os.stat(values["dst"]).st_size
        transfers[k] = Transfer(start, None if error else end, size, False, error)

    try:
        in_threads(spec.streams, one)
    finally:
        if context.procs is None:
            procs.stop_all()
    done = tuple(t for t in transfers if t is not None)
    bad = [t for t in done if t.error]
    failed = (
        DEADLINE_MESSAGE.format(limit=spec.time_limit_s)
        if runs.timed_out
        else (f"{len(bad)} of {len(done)} runs failed: {bad[0].error}" if bad else "")
    )
    return ToolRun({}, runs.output(), transfers=done, failed=failed)
