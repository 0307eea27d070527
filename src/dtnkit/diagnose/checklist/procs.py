"""The processes the checklist looks for (``/proc/PID/cmdline``, with the network namespace
each runs in) and the configuration files it reads, through the Host."""

from __future__ import annotations

from dataclasses import dataclass

from dtnkit.diagnose import sitecfg
from dtnkit.errors import DtnkitError
from dtnkit.host.host import Host


@dataclass
class Proc:
    pid: str
    program: str
    args: list[str]
    #: the process's network namespace (``DEV:INODE``); None when it cannot be told
    netns_id: str | None = None

    @property
    def line(self) -> str:
        return " ".join([self.program, *self.args])[:160]


def processes(host: Host) -> list[Proc]:
    """Every process's program and arguments from ``/proc/PID/cmdline`` (the host's: a
    namespace shares the process table), with the network namespace it runs in."""
    out = []
    for pid in host.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            raw = host.read(f"/proc/{pid}/cmdline")
        except (DtnkitError, ValueError):
            continue  # not ours to read, or not UTF-8 (no marker or exporter is named so)
        argv = sitecfg.cmdline_argv(raw or "")
        if argv:
            prog, args = sitecfg.program(argv)
            out.append(Proc(pid, prog, args, host.process_netns_id(pid)))
    return out


def running_here(host: Host, procs: list[Proc]) -> list[Proc]:
    """The processes that run in the network namespace the checklist looks at: a server in
    another namespace (a lab's other end, a container) neither serves nor marks this one's
    traffic.  A process whose namespace cannot be told (a captured tree) is kept."""
    mine = host.netns_id()
    if mine is None:
        return procs
    return [p for p in procs if p.netns_id is None or p.netns_id == mine]


def watches_here(host: Host, p: Proc) -> bool:
    """Whether an exporter process reads this namespace's counters: ``dtnkit exporter
    --netns NS`` reads NS's wherever it runs; any other reads its own namespace's."""
    if is_dtnkit(p, "exporter") or is_dtnkit(p, "metrics"):
        ns = sitecfg.option_value(p.args, "--netns")
        if ns is not None:
            return host.netns_id() in (None, host.named_netns_id(ns))
    mine = host.netns_id()
    return mine is None or p.netns_id is None or p.netns_id == mine


def read_file(host: Host, path: str) -> str | None:
    try:
        return host.read(path)
    except DtnkitError:
        return None


def files_in(host: Host, directory: str, suffix: str = "") -> list[str]:
    return [
        f"{directory}/{n}"
        for n in host.listdir(directory)
        if n.endswith(suffix) and not n.startswith(".")
    ]


def is_dtnkit(p: Proc, command: str) -> bool:
    return p.program == "dtnkit" and command in p.args[:4]
