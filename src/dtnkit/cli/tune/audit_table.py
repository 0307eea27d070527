"""The table of ``dtnkit tune audit``: each item's status against the profile, what was
decided and why."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from dtnkit.cli.render import Col, fits, print_fitted
from dtnkit.tune.audit import Audit, Finding
from dtnkit.tune.status import NOT_COMPLIANT, AuditStatus
from dtnkit.units import MISSING, counted, format_bytes, format_ms, format_rate, format_value

STATUS_STYLE = {
    AuditStatus.OK: "green",
    AuditStatus.DIFFERS: "bold yellow",
    AuditStatus.UNSUPPORTED: "dim",
    AuditStatus.UNKNOWN: "magenta",
    AuditStatus.HOST_SCOPE: "cyan",
}


def audit_table(con: Console, audit: Audit, next_cmd: str = "") -> None:
    """``next_cmd``: the plan command with the scope and judging flags of this run."""
    ctx = audit.ctx
    con.print(
        f"[bold]dtnkit tune audit[/]: {escape(audit.host_label)}, profile "
        f"[bold]{audit.profile.name}[/], longest RTT {format_ms(ctx.rtt_ms)}"
    )
    for note in ctx.env.notes:
        con.print(f"[cyan]note:[/] {escape(note)}")
    for d in ctx.decisions:
        con.print(
            f"[dim]decided:[/] {d.what} = {escape(_decided(d.what, d.value))}"
            f" because {escape(d.why)}"
        )
    devs = ", ".join(f"{d}" + (f" ({escape(via)})" if via else "") for d, via in ctx.devices)
    con.print(f"[dim]interfaces:[/] {devs or 'none'}")
    cols: tuple[Col, ...] = (
        Col("key"),
        Col("status", wrap=False),
        Col("current"),
        Col("recommended"),
        Col("why", rank=1, least=30),
        Col("group", rank=2),
        Col("scope", rank=3),
    )
    rows: list[tuple[str, ...]] = [
        (
            escape(finding_key(f)),
            f"[{STATUS_STYLE[f.status]}]{f.status}[/]",
            escape(f.current_text or MISSING),
            escape(f.recommended_text or MISSING) + (" (unsafe)" if f.unsafe else ""),
            escape(f.why),
            f.group,
            f.scope,
        )
        for f in audit.findings
    ]
    if not fits(con, cols, rows):  # narrow: one column "current -> recommended"
        cols = (cols[0], cols[1], Col("current -> recommended", least=24), *cols[4:])
        rows = [
            (
                r[0],
                r[1],
                r[2] if f.status == AuditStatus.OK or r[2] == r[3] else f"{r[2]} -> {r[3]}",
                *r[4:],
            )
            for r, f in zip(rows, audit.findings, strict=True)
        ]
    if "why" in print_fitted(con, cols, rows):
        for f in audit.findings:  # the reasons to act on, under the table
            if (f.status in NOT_COMPLIANT or f.unsafe) and f.why:
                con.print(f"[dim]why[/] {escape(finding_key(f))}: {escape(f.why)}")
    counts = ", ".join(f"{n} {s}" for s, n in audit.counts.items() if n)
    verdict = "[green]compliant[/]" if audit.compliant else "[yellow]not compliant[/]"
    con.print(f"{verdict}: {counts}")
    for item in audit.undecided:
        con.print(
            f"[magenta]unknown:[/] {counted(len(item['keys']), 'item')}: {escape(item['hint'])}"
        )
    if any(f.status == AuditStatus.DIFFERS for f in audit.findings):
        cmd = next_cmd or "dtnkit tune apply --dry-run"
        con.print(f"[dim]next: `{escape(cmd)}` shows what apply would change[/]")


def _decided(what: str, value: Any) -> str:
    """A decision's value with its unit (speeds are Mbit/s, RAM bytes)."""
    if value is None:
        return "unknown"
    if what in ("speed", "buffer speed") and isinstance(value, int | float):
        return format_rate(value * 1e6)
    if what == "RAM" and isinstance(value, int | float):
        return format_bytes(value)
    return format_value(value)


def finding_key(f: Finding) -> str:
    if f.key.startswith("sysctl/"):
        return f.key[len("sysctl/") :]
    return f"{f.device}: {f.label}" if f.device else f.label
