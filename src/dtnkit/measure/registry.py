"""One registry: probe kinds -> the tools that measure them; tool names -> tools.

The CLI's ``--tool``, ``--probe`` and ``--kind`` choices, the experiment's probe dispatch and
the sweep's tools all read it, so a tool registered here is a choice everywhere without
another edit.  :func:`run_probe` is the one way a probe runs: check the spec, ask the tool
whether it can run (and say why not), run it beside the sampler, and keep its raw output with
its figures.  :func:`run_load` is the one way a load runs (a sweep point: many transfers
from servers the caller started, the caller sampling): the same tools, the same check.

The third-party copies (``dtnkit-tpc``, ``gfal-tpc``) measure kind ``tpc``, which has no
probe of its own: they run in sweeps, where the origin and the destination servers are.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from dtnkit.errors import BadInput, ToolMissing
from dtnkit.host.host import Host
from dtnkit.measure.probes import disk, e2e, net
from dtnkit.measure.probes.load import LoadSpec
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.sampler import summarize
from dtnkit.measure.tool import ProbeSpec, Tool, ToolContext, ToolRun
from dtnkit.measure.tools.command import Command
from dtnkit.measure.tools.dtnkit_cp import DtnkitCp
from dtnkit.measure.tools.fio import Fio
from dtnkit.measure.tools.iperf3 import Iperf3
from dtnkit.measure.tools.tpc import DtnkitTpc, GfalTpc


@dataclass(frozen=True)
class Probe:
    kind: str
    title: str  # "the network probe cannot run"
    summary_keys: tuple[str, ...]  # every tool of this kind gives these
    default_tool: str


PROBES: dict[str, Probe] = {
    net.KIND: Probe(net.KIND, net.TITLE, net.SUMMARY_KEYS, "iperf3"),
    disk.KIND: Probe(disk.KIND, disk.TITLE, disk.SUMMARY_KEYS, "fio"),
    e2e.KIND: Probe(e2e.KIND, e2e.TITLE, e2e.SUMMARY_KEYS, "dtnkit-cp"),
}

TOOLS: dict[str, Tool] = {
    t.name: t for t in (Iperf3(), Fio(), DtnkitCp(), Command(), DtnkitTpc(), GfalTpc())
}


def probe_kinds() -> list[str]:
    return list(PROBES)


def measured_kinds() -> list[str]:
    """Every kind a stored measurement can have: the probes' and every tool's (a sweep's
    third-party copies are ``tpc``), in registration order."""
    return list(dict.fromkeys([*PROBES, *(t.kind for t in TOOLS.values())]))


def tool_names(kind: str | None = None) -> list[str]:
    """Every tool's name, or those measuring ``kind``, in registration order."""
    return [name for name, t in TOOLS.items() if kind is None or t.kind == kind]


def named(name: str) -> Tool:
    """The tool ``name``, whatever it measures; BadInput naming every tool when none is."""
    found = TOOLS.get(name)
    if found is None:
        raise BadInput(f"no tool {name!r}", f"tools: {', '.join(TOOLS)}", "pick one of them")
    return found


def get_tool(name: str, kind: str) -> Tool:
    tool = TOOLS.get(name)
    if tool is None or tool.kind != kind:
        raise BadInput(
            f"no {kind} tool {name!r}",
            f"tools: {', '.join(tool_names(kind))}",
            "pick one with --tool",
        )
    return tool


def run_probe(
    host: Host, spec: ProbeSpec, *, tool: str | None = None, context: ToolContext | None = None
) -> ProbeResult:
    """Run one probe of ``spec.kind`` with ``tool`` (default: the kind's default tool)."""
    probe = PROBES[spec.kind]
    chosen = get_tool(tool or probe.default_tool, probe.kind)
    spec.validate()
    ok, reasons = chosen.can_run()
    if not ok:
        raise ToolMissing(
            f"the {probe.title} probe cannot run",
            "; ".join(reasons),
            f"install {chosen.package} and run again",
        )
    started = time.time()
    got = chosen.run(host, spec, context or ToolContext())
    summary = {**got.summary, **{f"sampler_{k}": v for k, v in summarize(got.samples).items()}}
    doc = asdict(spec)  # type: ignore[call-overload]
    return ProbeResult(
        kind=probe.kind,
        spec={**doc, **got.resolved, "tool": chosen.name},
        summary=summary,
        samples=got.samples,
        raw=got.raw,
        netns=host.netns,
        started=started,
        duration_s=time.time() - started,
    )


def run_load(host: Host, spec: LoadSpec, *, tool: str, context: ToolContext) -> ToolRun:
    """Run one load (a sweep point) with ``tool`` on ``host`` (the receiving side): asked
    whether it can run first (ToolMissing with its reasons when not), then run to its end or
    ``context.deadline``.  A transfer that fails is the run's ``failed``, not an error."""
    chosen = named(tool)
    ok, reasons = chosen.can_run()
    if not ok:
        raise ToolMissing(
            f"{chosen.name} cannot run",
            "; ".join(reasons),
            f"install {chosen.package} and run again",
        )
    return chosen.run(host, spec, context)
