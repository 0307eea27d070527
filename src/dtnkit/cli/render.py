"""Tables and messages for people (rich).  JSON output never passes through here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from dtnkit.environment import Environment
    from dtnkit.tune.apply import Outcome, Step
    from dtnkit.tune.audit import Audit, Finding
    from dtnkit.tune.profile import Profile
    from dtnkit.tune.snapshot import Difference, Snapshot

STATUS_STYLE = {"ok": "green", "differs": "bold yellow", "unsupported": "dim",
                "unknown": "magenta", "host-scope": "cyan"}


def console(env: Environment) -> Console:
    return Console(file=env.stdout, width=max(env.terminal_width, 120), highlight=False,
                   soft_wrap=False)


def audit_table(con: Console, audit: Audit) -> None:
    ctx = audit.ctx
    con.print(f"[bold]dtnkit tune audit[/]: {escape(audit.host_label)}, profile "
              f"[bold]{audit.profile.name}[/], longest RTT {ctx.rtt_ms:g} ms")
    for note in ctx.env.notes:
        con.print(f"[cyan]note:[/] {escape(note)}")
    for d in ctx.decisions:
        con.print(f"[dim]decided:[/] {d.what} = {d.value if d.value is not None else 'unknown'}"
                  f" because {escape(d.why)}")
    devs = ", ".join(f"{d}" + (f" ({escape(via)})" if via else "") for d, via in ctx.devices)
    con.print(f"[dim]interfaces:[/] {devs or 'none'}")
    table = Table(show_lines=False, header_style="bold")
    for col in ("group", "key", "scope", "current", "recommended", "status", "why"):
        table.add_column(col, overflow="fold")
    for f in audit.findings:
        table.add_row(f.group, escape(_key(f)), f.scope, escape(f.current_text),
                      escape(f.recommended_text),
                      f"[{STATUS_STYLE[f.status]}]{f.status}[/]", escape(f.why))
    con.print(table)
    counts = ", ".join(f"{n} {s}" for s, n in audit.counts.items() if n)
    verdict = "[green]compliant[/]" if audit.compliant else "[yellow]not compliant[/]"
    con.print(f"{verdict}: {counts}")
    for item in audit.undecided:
        con.print(f"[magenta]unknown:[/] {len(item['keys'])} items: {escape(item['hint'])}")
    if any(f.status == "differs" for f in audit.findings):
        con.print("[dim]next: `dtnkit tune apply --dry-run` shows what apply would change[/]")


def _key(f: Finding) -> str:
    if f.key.startswith("sysctl/"):
        return f.key[len("sysctl/"):]
    return f"{f.device}: {f.label}" if f.device else f.label


def plan(con: Console, steps: Sequence[Step], skipped: Sequence[Finding], *,
         dry_run: bool) -> None:
    if not steps:
        con.print("nothing to change")
    else:
        table = Table(title="plan" + (" (dry run: nothing is written)" if dry_run else ""),
                      header_style="bold")
        for col in ("#", "group", "setting", "now", "to"):
            table.add_column(col, overflow="fold")
        for i, s in enumerate(steps, 1):
            t = s.tunable
            setting = t.key[len("sysctl/"):] if t.key.startswith("sysctl/") else (
                f"{t.device}: {t.label}" if t.device else t.label)
            table.add_row(str(i), s.group, escape(setting), escape(t.show(s.before)),
                          escape(t.show(s.after)))
        con.print(table)
    for f in skipped:
        flag = "--mtu" if f.key.startswith("link/") else "--tuned"
        con.print(f"[dim]not applied without {flag}:[/] {escape(_key(f))} "
                  f"({escape(f.current_text)} -> {escape(f.recommended_text)})")


def restore_plan(con: Console, steps: Sequence[Step], skipped: Sequence[str]) -> None:
    plan(con, steps, [], dry_run=True)
    for line in skipped:
        con.print(f"[dim]left alone:[/] {escape(line)}")


def nothing_to_do(con: Console, audit: Audit, skipped: Sequence[Finding]) -> None:
    plan(con, [], skipped, dry_run=False)
    if not audit.undecided:
        con.print("the selected groups already comply; no baseline was needed")
        return
    con.print("nothing dtnkit can judge differs; no baseline was needed")
    for item in audit.undecided:
        con.print(f"[magenta]unknown:[/] {len(item['keys'])} items: {escape(item['hint'])}")


def step_done(con: Console, step: Step) -> None:
    con.print(f"[green]✓[/] {escape(step.describe())}")


def outcome(con: Console, out: Outcome, what: str, undo: str = "") -> None:
    """``undo`` is the restore command for this run's baseline, with the options in force."""
    undo = undo or f"dtnkit tune restore {out.baseline or ''}".rstrip()
    for line in out.skipped:
        con.print(f"[dim]left alone:[/] {escape(line)}")
    if out.baseline:
        con.print(f"baseline snapshot: [bold]{out.baseline}[/] "
                  f"(undo with `{escape(undo)}`)")
    if out.ok:
        con.print(f"[green]{what} done[/]: {len(out.done)} settings changed and verified")
        for path in out.persisted:
            con.print(f"persisted: {path}")
        return
    assert out.error is not None
    con.print(f"[red]✗ {what} failed[/]: {escape(out.error.render())}")
    if out.failed is not None:
        con.print(f"  at: {escape(out.failed.describe())}")
    if out.rollback_errors:
        con.print("[red]rollback could not restore everything:[/]")
        for line in out.rollback_errors:
            con.print(f"  {escape(line)}")
        con.print(f"next: `{escape(undo)}` once the cause is fixed")
    else:
        con.print(f"rolled back: {len(out.done) + (1 if out.failed else 0)} settings; "
                  "the host is as it was before this run")


def snapshot_list(con: Console, rows: Sequence[dict[str, Any]], where: Path) -> None:
    if not rows:
        con.print(f"no snapshots in {where}")
        return
    table = Table(header_style="bold")
    for col in ("id", "kind", "label", "created", "netns", "settings"):
        table.add_column(col)
    for r in rows:
        mark = " (last baseline)" if r["last_baseline"] else ""
        table.add_row(r["id"], r["kind"] + mark, escape(r["label"]), r["created"],
                      r["netns"] or "-", str(r["values"]))
    con.print(table)


def snapshot(con: Console, snap: Snapshot) -> None:
    con.print(f"[bold]{snap.id}[/] ({snap.kind}) {escape(snap.label)}, {snap.created}, "
              f"host {escape(str(snap.host.get('hostname')))}"
              + (f", netns {snap.host['netns']}" if snap.host.get("netns") else ""))
    table = Table(header_style="bold")
    table.add_column("key")
    table.add_column("value", overflow="fold")
    for key, value in snap.values.items():
        table.add_row(escape(key), escape(_value(value)))
    con.print(table)
    for path, content in snap.files.items():
        con.print(f"file {path}: {'absent' if content is None else f'{len(content)} bytes'}")


def _value(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    if value is None:
        return "-"
    return str(value)


def differences(con: Console, a: str, b: str, diffs: Sequence[Difference]) -> None:
    if not diffs:
        con.print(f"no differences between {escape(a)} and {escape(b)}")
        return
    table = Table(header_style="bold")
    table.add_column("key")
    table.add_column(escape(a), overflow="fold")
    table.add_column(escape(b), overflow="fold")
    for d in diffs:
        table.add_row(escape(d.key), escape(_value(d.a)), escape(_value(d.b)))
    con.print(table)
    con.print(f"{len(diffs)} differences")


def profile(con: Console, prof: Profile) -> None:
    con.print(f"[bold]{prof.name}[/]: {escape(prof.description)}")
    con.print(f"[dim]files:[/] {', '.join(prof.files)}")
    con.print("[dim]params:[/] " + ", ".join(f"{k}={v:g}" for k, v in prof.params.items()))
    table = Table(header_style="bold")
    for col in ("group", "key", "value", "mode", "apply", "source"):
        table.add_column(col, overflow="fold")
    for key, s in prof.items.items():
        if s.rule:
            value = f"rule {s.rule}"
        elif s.tiers:
            value = ", ".join(f"{t}G: {v}" for t, v in s.tiers.items())
        else:
            value = str(s.value)
        table.add_row(s.group, escape(key), escape(value), s.mode, s.apply, escape(s.source))
    con.print(table)
