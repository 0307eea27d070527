"""The tables of the ``dtnkit tune`` commands other than the audit: plans and their outcome,
snapshots, differences and profiles."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from dtnkit.cli.render import Col, fits, print_fitted, whole
from dtnkit.cli.tune.audit_table import finding_key
from dtnkit.tune.apply import Outcome, Step, allowed
from dtnkit.tune.audit import Audit, Finding
from dtnkit.tune.profile import Profile
from dtnkit.tune.snapshot import Difference, Snapshot
from dtnkit.units import (
    MISSING,
    counted,
    format_bytes,
    format_count,
    format_value,
)


def plan(
    con: Console,
    steps: Sequence[Step],
    skipped: Sequence[Finding],
    *,
    dry_run: bool,
    undecided: Sequence[dict[str, Any]] = (),
    decide: str | None = None,
    next_cmd: str | None = None,
    allow_unsafe: Sequence[str] = (),
) -> None:
    """The steps (unsafe ones marked), what is left out without --mtu/--tuned, what cannot be
    decided (and why, with the command that decides it), then the command that applies the
    plan."""
    if not steps:
        con.print("nothing to change" + (" that dtnkit can decide" if undecided else ""))
    else:
        rows = []
        for i, s in enumerate(steps, 1):
            t = s.tunable
            setting = (
                t.key[len("sysctl/") :]
                if t.key.startswith("sysctl/")
                else (f"{t.device}: {t.label}" if t.device else t.label)
            )
            rows.append(
                (
                    str(i),
                    escape(setting),
                    escape(t.show(s.before)),
                    escape(t.show(s.after)) + (" [red](unsafe)[/]" if s.unsafe else ""),
                    s.group,
                )
            )
        print_fitted(
            con,
            (
                Col("#", wrap=False, justify="right"),
                Col("setting"),
                Col("now"),
                Col("to"),
                Col("group", rank=1),
            ),
            rows,
            title="plan" + (" (dry run: nothing is written)" if dry_run else ""),
        )
    for s in steps:
        if s.unsafe:
            verdict = (
                "written: --allow-unsafe names it"
                if allowed(s.tunable.key, allow_unsafe)
                else f"refused without --allow-unsafe {s.tunable.key}"
            )
            con.print(
                f"[red]unsafe:[/] {escape(s.tunable.key)} = "
                f"{escape(s.tunable.show(s.after))}: {escape(s.unsafe)} ({verdict})"
            )
    for f in skipped:
        flag = "--mtu" if f.key.startswith("link/") else "--tuned"
        con.print(
            f"[dim]not applied without {flag}:[/] {escape(finding_key(f))} "
            f"({escape(f.current_text)} -> {escape(f.recommended_text)})"
        )
    undecided_lines(con, undecided, decide)
    if next_cmd:
        con.print(f"next: `{escape(next_cmd)}` applies this plan")


def _undecided_key(u: dict[str, Any]) -> str:
    key = str(u["key"])
    if key.startswith("sysctl/"):
        return key[len("sysctl/") :]
    return f"{u['device']}: {u['label']}" if u.get("device") else str(u["label"])


def undecided_lines(con: Console, undecided: Sequence[dict[str, Any]], decide: str | None) -> None:
    """The items no plan holds because dtnkit cannot decide them, grouped by why."""
    if not undecided:
        return
    by_why: dict[str, list[str]] = {}
    for u in undecided:
        by_why.setdefault(str(u["why"]), []).append(_undecided_key(u))
    con.print(f"[magenta]not decided ({len(undecided)} items, in no plan):[/]")
    for why, keys in by_why.items():
        con.print(f"  {escape(', '.join(keys))}: {escape(why)}")
    if decide:
        con.print(
            f"to decide them: `{escape(decide)}` (SPEED: the link's speed, e.g. 25gbit)"
            if "SPEED" in decide
            else f"to decide them: `{escape(decide)}`"
        )


def restore_plan(
    con: Console,
    steps: Sequence[Step],
    skipped: Sequence[str],
    missing: Sequence[str] = (),
    *,
    allow_unsafe: Sequence[str] = (),
) -> None:
    plan(con, steps, [], dry_run=True, allow_unsafe=allow_unsafe)
    for line in skipped:
        con.print(f"[dim]left alone:[/] {escape(line)}")
    for line in missing:
        con.print(f"[red]not restored:[/] {escape(line)}")


def nothing_to_do(
    con: Console,
    audit: Audit,
    skipped: Sequence[Finding],
    *,
    undecided: Sequence[dict[str, Any]] = (),
    decide: str | None = None,
) -> None:
    plan(con, [], skipped, dry_run=False, undecided=undecided, decide=decide)
    if not undecided:
        con.print("the selected groups already comply; no baseline was needed")
        return
    con.print("nothing dtnkit can decide differs; no baseline was needed")


def step_done(con: Console, step: Step) -> None:
    con.print(f"[green]✓[/] {escape(step.describe())}")


def outcome(
    con: Console,
    out: Outcome,
    what: str,
    undo: str = "",
    *,
    undecided: Sequence[dict[str, Any]] = (),
    decide: str | None = None,
) -> None:
    """``undo`` is the restore command for this run's baseline, with the options in force;
    ``undecided``: what apply could not decide, listed after a successful run."""
    undo = undo or f"dtnkit tune restore {out.baseline or ''}".rstrip()
    for line in out.skipped:
        con.print(f"[dim]left alone:[/] {escape(line)}")
    if out.half_tuned:
        con.print(
            f"[yellow]the last apply here did not finish[/]: this run began on a "
            f"half-tuned host (kept as snapshot {out.half_tuned}); the baseline to "
            "restore stays the one taken before that apply's first write"
        )
    if out.baseline:
        whole(con, f"baseline snapshot: [bold]{out.baseline}[/] (undo with `{escape(undo)}`)")
    for line in out.not_restored:
        whole(con, f"[red]not restored:[/] {escape(line)}")
    if out.ok and out.not_restored:
        con.print(
            f"[yellow]{what} incomplete[/]: {counted(len(out.done), 'setting')} changed "
            f"and verified; {counted(len(out.not_restored), 'setting')} not restored "
            "(above)"
        )
        for path in out.persisted:
            whole(con, f"persisted: {escape(str(path))}")
        return
    if out.ok:
        con.print(
            f"[green]{what} done[/]: {counted(len(out.done), 'setting')} changed and verified"
        )
        for path in out.persisted:
            whole(con, f"persisted: {escape(str(path))}")
        undecided_lines(con, undecided, decide)
        return
    assert out.error is not None
    # an error and the commands around it are never wrapped (copied, searched for)
    whole(con, f"[red]✗ {what} failed[/]: {escape(out.error.render())}")
    if out.failed is not None:
        whole(con, f"  at: {escape(out.failed.describe())}")
    if out.rollback_errors:
        con.print("[red]rollback could not restore everything:[/]")
        for line in out.rollback_errors:
            whole(con, f"  {escape(line)}")
        whole(con, f"next: `{escape(undo)}` once the cause is fixed")
    else:
        con.print(
            f"rolled back: {counted(len(out.done) + (1 if out.failed else 0), 'setting')}; "
            "the host is as it was before this run"
        )


def snapshot_list(con: Console, rows: Sequence[dict[str, Any]], where: Path) -> None:
    if not rows:
        whole(con, f"no snapshots in {escape(str(where))}")
        return
    # the id is never cut (it is what the other commands take); it holds the creation time
    cols = (
        Col("id", wrap=False),
        Col("kind"),
        Col("settings", rank=1, justify="right"),
        Col("label", rank=2),
        Col("scope", wrap=False),
        Col("created", rank=4),
    )
    print_fitted(
        con,
        cols,
        [
            (
                escape(r["id"]),
                r["kind"]
                + (" (last baseline)" if r["last_baseline"] else "")
                + _incomplete(r.get("incomplete")),
                format_count(r["values"]),
                escape(r["label"]),
                escape(r.get("scope") or MISSING),
                escape(r["created"] or MISSING),
            )
            for r in rows
        ],
    )


def _incomplete(note: str | None) -> str:
    if not note:
        return ""
    return " (half-tuned)" if note.startswith("half-tuned") else " (apply did not finish)"


def snapshot(con: Console, snap: Snapshot) -> None:
    whole(
        con,
        f"[bold]{snap.id}[/] ({snap.kind}) {escape(snap.label)}, {snap.created}, "
        f"host {escape(format_value(snap.host.get('hostname')))}"
        + (f", netns {snap.host['netns']}" if snap.host.get("netns") else ""),
    )
    print_fitted(
        con,
        (Col("key"), Col("value")),
        [(escape(key), escape(_value(value))) for key, value in snap.values.items()],
    )
    for path, content in snap.files.items():
        whole(
            con,
            f"file {escape(path)}: {'absent' if content is None else format_bytes(len(content))}",
        )


def _value(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return format_value(value)


def differences(con: Console, a: str, b: str, diffs: Sequence[Difference]) -> None:
    if not diffs:
        con.print(f"no differences between {escape(a)} and {escape(b)}")
        return
    rows = [(escape(d.key), escape(_value(d.a)), escape(_value(d.b))) for d in diffs]
    cols = (Col("key"), Col(a), Col(b))
    if not fits(con, cols, rows):  # long names (snapshot IDs): say them once, above
        con.print(f"a: {escape(a)}", no_wrap=True, overflow="ignore", crop=False)
        con.print(f"b: {escape(b)}", no_wrap=True, overflow="ignore", crop=False)
        cols = (Col("key"), Col("a"), Col("b"))
    print_fitted(con, cols, rows)
    con.print(counted(len(diffs), "difference"))


def profile(con: Console, prof: Profile) -> None:
    con.print(f"[bold]{prof.name}[/]: {escape(prof.description)}")
    whole(con, f"[dim]files:[/] {escape(', '.join(prof.files))}")
    con.print("[dim]params:[/] " + ", ".join(f"{k}={v:g}" for k, v in prof.params.items()))
    rows = []
    for key, s in prof.items.items():
        if s.rule:
            value = f"rule {s.rule}"
        elif s.tiers:
            value = ", ".join(f"{t}G: {v}" for t, v in s.tiers.items())
        else:
            value = str(s.value)
        rows.append((escape(key), escape(value), s.group, s.mode, s.apply, escape(s.source)))
    print_fitted(
        con,
        (
            Col("key"),
            Col("value"),
            Col("group", rank=1),
            Col("mode", rank=2),
            Col("apply", rank=3),
            Col("source", rank=4),
        ),
        rows,
    )


def saved(con: Console, snap: Snapshot, path: Path) -> None:
    """``tune save``: the snapshot's ID (whole, to be copied), its size and where it is."""
    whole(
        con, f"saved snapshot [bold]{snap.id}[/] ({counted(len(snap.values), 'setting')}) in {path}"
    )
