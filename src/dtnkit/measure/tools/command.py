"""The end-to-end tool ``command``: a transfer command the user gives, timed.

``{src}`` and ``{dst}`` in the template are replaced by the (shell-quoted) arguments; the
command runs under ``sh -c`` on the probing host (inside its namespace), e.g. ``xrdcp {src}
{dst}``, ``curl -o {dst} {src}`` or a pipe.  The bytes moved are ``--bytes`` or the size of
the source.
"""

from __future__ import annotations

import shlex
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.host.host import Host
from dtnkit.measure.probes.e2e import KIND as E2E_KIND
from dtnkit.measure.probes.e2e import E2ESpec, rate_summary, source_size
from dtnkit.measure.tool import Context, ToolRun
from dtnkit.measure.tools.timed import run_timed


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
        given = spec.cp_options()
        if given:
            raise BadInput(f"{given[0]} with --command", "is passed to the default mover, "
                           "dtnkit cp, only: a command gets what its own line says",
                           "put the option in the command, or leave out --command")
        size = spec.bytes if spec.bytes is not None else source_size(spec.src)
        line = spec.command.format(src=shlex.quote(spec.src), dst=shlex.quote(spec.dst))
        # join the cgroup before entering the namespace: `ip netns exec` remounts /sys, so the
        # cgroup files are not visible inside it
        argv = context.argv(host.argv(["sh", "-c", line]))
        done = run_timed(host, argv, spec, failed="the transfer command failed",
                         next_step="run the command by hand to see why",
                         progress=context.progress)
        return ToolRun({**rate_summary(size, done.wall), **self.parse(done.proc.stdout)},
                       done.proc.stdout + done.proc.stderr, done.samples,
                       {"command_line": line})
