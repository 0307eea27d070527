"""The end-to-end tool ``command``: a transfer command the user gives, timed.

``{src}`` and ``{dst}`` in the template are replaced by the (shell-quoted) arguments; the
command runs under ``sh -c`` on the probing host (inside its namespace), e.g. ``xrdcp {src}
{dst}``, ``curl -o {dst} {src}`` or a pipe.  The bytes moved are ``--bytes`` or the size of
the source.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from typing import Any

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host.host import Host
from dtnkit.measure.probes.e2e import KIND as E2E_KIND
from dtnkit.measure.probes.e2e import E2ESpec, rate_summary, source_size
from dtnkit.measure.sampler import Sampler
from dtnkit.measure.tool import Context, ToolRun


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

    def run(self, host: Host, spec: E2ESpec, context: Context) -> ToolRun:
        if not spec.command:
            raise BadInput("no transfer command", "the command tool runs the one you give",
                           "give --command, e.g. 'xrdcp {src} {dst}' or 'curl -o {dst} {src}'")
        size = spec.bytes if spec.bytes is not None else source_size(spec.src)
        line = spec.command.format(src=shlex.quote(spec.src), dst=shlex.quote(spec.dst))
        # join the cgroup before entering the namespace: `ip netns exec` remounts /sys, so the
        # cgroup files are not visible inside it
        argv = context.argv(host.argv(["sh", "-c", line]))
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
                              f"exit status {proc.returncode}",
                              "run the command by hand to see why")
        return ToolRun({**rate_summary(size, wall), **self.parse(proc.stdout)},
                       proc.stdout + proc.stderr, sampler.samples, {"command_line": line})
