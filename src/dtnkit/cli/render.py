"""Tables and messages for people (rich).  JSON output never passes through here.

Tables take the terminal's width: :func:`fitted` hides the columns that matter least until the
rest fits without cutting a word (a value too long for the terminal stays whole: IDs can be
copied), wraps long text inside its cell, and says what it hid; ``--wide`` shows every column
unwrapped.  Every value is formatted by :mod:`dtnkit.units` (``format_*``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dtnkit.units import (
    MISSING,
    counted,
    format_bytes,
    format_count,
    format_duration,
    format_ms,
    format_percent,
    format_rate,
    format_time,
    format_value,
)

if TYPE_CHECKING:
    from dtnkit.environment import Environment
    from dtnkit.measure.result import ProbeResult
    from dtnkit.tune.apply import Outcome, Step
    from dtnkit.tune.audit import Audit, Finding
    from dtnkit.tune.profile import Profile
    from dtnkit.tune.snapshot import Difference, Snapshot

STATUS_STYLE = {"ok": "green", "differs": "bold yellow", "unsupported": "dim",
                "unknown": "magenta", "host-scope": "cyan"}

#: the width of a --wide console: lines as long as their content
WIDE = 100_000
#: blanks between two columns
GAP = 2


def console(env: Environment, *, wide: bool = False) -> Console:
    """Output for people at the terminal's width (``wide``: unwrapped)."""
    if wide:
        return Console(file=env.stdout, width=WIDE, highlight=False, soft_wrap=True)
    return Console(file=env.stdout, width=max(env.terminal_width, 20), highlight=False,
                   soft_wrap=False)


def whole(con: Console, text: str) -> None:
    """A line that holds a path, an ID or a command to copy: printed whole, never wrapped
    (at the terminal's edge the terminal folds it), so it is copied and found whole."""
    con.print(text, soft_wrap=True)


def is_wide(con: Console) -> bool:
    return con.width >= WIDE


@dataclass(frozen=True)
class Col:
    """A column of a :func:`fitted` table."""

    header: str
    #: 0: always shown; when the terminal is narrow the highest rank is hidden first
    rank: int = 0
    #: False: a cell is never wrapped (IDs, keys: they stay whole to be copied)
    wrap: bool = True
    justify: Literal["left", "right"] = "left"
    #: the narrowest this column may be (other columns are hidden first)
    least: int = 0


def _plain(cell: str) -> list[str]:
    return Text.from_markup(cell).plain.splitlines() or [""]


def _widths(col: Col, cells: Sequence[str]) -> tuple[int, int]:
    """(narrowest without cutting a word, natural) width of a column."""
    lines = [line for cell in [escape(col.header), *cells] for line in _plain(cell)]
    longest = max(cell_len(line) for line in lines)
    if not col.wrap:
        return longest, longest
    words = [cell_len(w) for line in lines for w in line.split()] or [0]
    least = min(max(max(words), col.least), longest)
    return least, longest


def _need(measured: Sequence[tuple[int, int]], idx: Sequence[int]) -> int:
    return sum(measured[i][0] for i in idx) + GAP * (len(idx) - 1)


def fits(con: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> bool:
    """Whether the columns that are always shown (rank 0) fit ``con`` without cutting a word."""
    measured = [_widths(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    return is_wide(con) or _need(measured, [i for i, c in enumerate(cols)
                                            if c.rank == 0]) <= con.width


def fitted(con: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]],
           title: str | None = None) -> tuple[Table, list[str]]:
    """A table of ``rows`` (rich markup) that fits ``con``: the table and the headers of the
    columns hidden to make it fit."""
    measured = [_widths(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    shown = list(range(len(cols)))
    room = con.width

    def need(idx: list[int]) -> int:
        return _need(measured, idx)

    if not is_wide(con):
        while need(shown) > room:
            rank, victim = max((cols[i].rank, i) for i in shown)
            if rank == 0:
                break  # nothing more may go; print_fitted prints records instead
            shown.remove(victim)
    widths = {i: measured[i][0] for i in shown}
    spare = room - need(shown)
    needy = [i for i in shown if widths[i] < measured[i][1]]
    while spare > 0 and needy:  # fair shares of the spare room, up to each natural width
        share = max(spare // len(needy), 1)
        for i in sorted(needy, key=lambda i: measured[i][1] - widths[i]):
            give = min(share, measured[i][1] - widths[i], spare)
            widths[i] += give
            spare -= give
        needy = [i for i in needy if widths[i] < measured[i][1]]
    table = Table(box=None, pad_edge=False, padding=(0, GAP // 2), header_style="bold",
                  title=title, title_justify="left", title_style="bold")
    for i in shown:
        c = cols[i]
        table.add_column(escape(c.header), width=widths[i], no_wrap=not c.wrap,
                         overflow="fold", justify=c.justify)
    for r in rows:
        table.add_row(*(r[i] for i in shown))
    return table, [cols[i].header for i in range(len(cols)) if i not in shown]


def print_fitted(con: Console, cols: Sequence[Col], rows: Sequence[Sequence[str]],
                 title: str | None = None) -> list[str]:
    """Print a :func:`fitted` table and say what it hid; returns the hidden headers.  When
    even the columns that are always shown do not fit, each row is printed as a record (its
    first cell, then ``header: value`` lines), so no word is cut."""
    if not fits(con, cols, rows):
        if title:
            con.print(f"[bold]{escape(title)}[/]")
        for r in rows:  # the first cell whole, even past the edge: IDs are never cut
            con.print(f"[bold]{r[0]}[/]", no_wrap=True, overflow="ignore", crop=False)
            for c, cell in zip(cols[1:], r[1:], strict=True):
                if Text.from_markup(cell).plain.strip():
                    con.print(f"  {escape(c.header)}: {cell}")
        return []
    table, hidden = fitted(con, cols, rows, title)
    con.print(table)
    if hidden:
        con.print(f"[dim]({', '.join(hidden)} hidden to fit {con.width} columns: "
                  "--wide shows them)[/]")
    return hidden


def audit_table(con: Console, audit: Audit, next_cmd: str = "") -> None:
    """``next_cmd``: the plan command with the scope and judging flags of this run."""
    ctx = audit.ctx
    con.print(f"[bold]dtnkit tune audit[/]: {escape(audit.host_label)}, profile "
              f"[bold]{audit.profile.name}[/], longest RTT {format_ms(ctx.rtt_ms)}")
    for note in ctx.env.notes:
        con.print(f"[cyan]note:[/] {escape(note)}")
    for d in ctx.decisions:
        con.print(f"[dim]decided:[/] {d.what} = {escape(_decided(d.what, d.value))}"
                  f" because {escape(d.why)}")
    devs = ", ".join(f"{d}" + (f" ({escape(via)})" if via else "") for d, via in ctx.devices)
    con.print(f"[dim]interfaces:[/] {devs or 'none'}")
    cols: tuple[Col, ...] = (
        Col("key"), Col("status", wrap=False), Col("current"), Col("recommended"),
        Col("why", rank=1, least=30), Col("group", rank=2), Col("scope", rank=3))
    rows: list[tuple[str, ...]] = [
        (escape(_key(f)), f"[{STATUS_STYLE[f.status]}]{f.status}[/]",
         escape(f.current_text or MISSING),
         escape(f.recommended_text or MISSING) + (" (unsafe)" if f.unsafe else ""),
         escape(f.why), f.group, f.scope) for f in audit.findings]
    if not fits(con, cols, rows):  # narrow: one column "current -> recommended"
        cols = (cols[0], cols[1], Col("current -> recommended", least=24), *cols[4:])
        rows = [(r[0], r[1], r[2] if f.status == "ok" or r[2] == r[3] else
                 f"{r[2]} -> {r[3]}", *r[4:]) for r, f in zip(rows, audit.findings, strict=True)]
    if "why" in print_fitted(con, cols, rows):
        for f in audit.findings:  # the reasons to act on, under the table
            if (f.status in ("differs", "unknown") or f.unsafe) and f.why:
                con.print(f"[dim]why[/] {escape(_key(f))}: {escape(f.why)}")
    counts = ", ".join(f"{n} {s}" for s, n in audit.counts.items() if n)
    verdict = "[green]compliant[/]" if audit.compliant else "[yellow]not compliant[/]"
    con.print(f"{verdict}: {counts}")
    for item in audit.undecided:
        con.print(f"[magenta]unknown:[/] {counted(len(item['keys']), 'item')}: "
                  f"{escape(item['hint'])}")
    if any(f.status == "differs" for f in audit.findings):
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


def _key(f: Finding) -> str:
    if f.key.startswith("sysctl/"):
        return f.key[len("sysctl/"):]
    return f"{f.device}: {f.label}" if f.device else f.label


def plan(con: Console, steps: Sequence[Step], skipped: Sequence[Finding], *,
         dry_run: bool, undecided: Sequence[dict[str, Any]] = (), decide: str | None = None,
         next_cmd: str | None = None, allow_unsafe: Sequence[str] = ()) -> None:
    """The steps (unsafe ones marked), what is left out without --mtu/--tuned, what cannot be
    decided (and why, with the command that decides it), then the command that applies the
    plan."""
    if not steps:
        con.print("nothing to change" + (" that dtnkit can decide" if undecided else ""))
    else:
        rows = []
        for i, s in enumerate(steps, 1):
            t = s.tunable
            setting = t.key[len("sysctl/"):] if t.key.startswith("sysctl/") else (
                f"{t.device}: {t.label}" if t.device else t.label)
            rows.append((str(i), escape(setting), escape(t.show(s.before)),
                         escape(t.show(s.after)) + (" [red](unsafe)[/]" if s.unsafe else ""),
                         s.group))
        print_fitted(con, (Col("#", wrap=False, justify="right"), Col("setting"), Col("now"),
                           Col("to"), Col("group", rank=1)), rows,
                     title="plan" + (" (dry run: nothing is written)" if dry_run else ""))
    from dtnkit.tune.apply import allowed

    for s in steps:
        if s.unsafe:
            verdict = ("written: --allow-unsafe names it" if allowed(s.tunable.key, allow_unsafe)
                       else f"refused without --allow-unsafe {s.tunable.key}")
            con.print(f"[red]unsafe:[/] {escape(s.tunable.key)} = "
                      f"{escape(s.tunable.show(s.after))}: {escape(s.unsafe)} ({verdict})")
    for f in skipped:
        flag = "--mtu" if f.key.startswith("link/") else "--tuned"
        con.print(f"[dim]not applied without {flag}:[/] {escape(_key(f))} "
                  f"({escape(f.current_text)} -> {escape(f.recommended_text)})")
    undecided_lines(con, undecided, decide)
    if next_cmd:
        con.print(f"next: `{escape(next_cmd)}` applies this plan")


def _undecided_key(u: dict[str, Any]) -> str:
    key = str(u["key"])
    if key.startswith("sysctl/"):
        return key[len("sysctl/"):]
    return f"{u['device']}: {u['label']}" if u.get("device") else str(u["label"])


def undecided_lines(con: Console, undecided: Sequence[dict[str, Any]],
                    decide: str | None) -> None:
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
        con.print(f"to decide them: `{escape(decide)}` (SPEED: the link's speed, e.g. "
                  "25gbit)" if "SPEED" in decide else f"to decide them: `{escape(decide)}`")


def restore_plan(con: Console, steps: Sequence[Step], skipped: Sequence[str],
                 missing: Sequence[str] = (), *, allow_unsafe: Sequence[str] = ()) -> None:
    plan(con, steps, [], dry_run=True, allow_unsafe=allow_unsafe)
    for line in skipped:
        con.print(f"[dim]left alone:[/] {escape(line)}")
    for line in missing:
        con.print(f"[red]not restored:[/] {escape(line)}")


def nothing_to_do(con: Console, audit: Audit, skipped: Sequence[Finding], *,
                  undecided: Sequence[dict[str, Any]] = (), decide: str | None = None) -> None:
    plan(con, [], skipped, dry_run=False, undecided=undecided, decide=decide)
    if not undecided:
        con.print("the selected groups already comply; no baseline was needed")
        return
    con.print("nothing dtnkit can decide differs; no baseline was needed")


def step_done(con: Console, step: Step) -> None:
    con.print(f"[green]✓[/] {escape(step.describe())}")


def outcome(con: Console, out: Outcome, what: str, undo: str = "", *,
            undecided: Sequence[dict[str, Any]] = (), decide: str | None = None) -> None:
    """``undo`` is the restore command for this run's baseline, with the options in force;
    ``undecided``: what apply could not decide, listed after a successful run."""
    undo = undo or f"dtnkit tune restore {out.baseline or ''}".rstrip()
    for line in out.skipped:
        con.print(f"[dim]left alone:[/] {escape(line)}")
    if out.half_tuned:
        con.print(f"[yellow]the last apply here did not finish[/]: this run began on a "
                  f"half-tuned host (kept as snapshot {out.half_tuned}); the baseline to "
                  "restore stays the one taken before that apply's first write")
    if out.baseline:
        whole(con, f"baseline snapshot: [bold]{out.baseline}[/] (undo with `{escape(undo)}`)")
    for line in out.not_restored:
        whole(con, f"[red]not restored:[/] {escape(line)}")
    if out.ok and out.not_restored:
        con.print(f"[yellow]{what} incomplete[/]: {counted(len(out.done), 'setting')} changed "
                  f"and verified; {counted(len(out.not_restored), 'setting')} not restored "
                  "(above)")
        for path in out.persisted:
            whole(con, f"persisted: {escape(str(path))}")
        return
    if out.ok:
        con.print(f"[green]{what} done[/]: {counted(len(out.done), 'setting')} changed and "
                  "verified")
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
        con.print(f"rolled back: {counted(len(out.done) + (1 if out.failed else 0), 'setting')}; "
                  "the host is as it was before this run")


def snapshot_list(con: Console, rows: Sequence[dict[str, Any]], where: Path) -> None:
    if not rows:
        whole(con, f"no snapshots in {escape(str(where))}")
        return
    # the id is never cut (it is what the other commands take); it holds the creation time
    cols = (Col("id", wrap=False), Col("kind"), Col("settings", rank=1, justify="right"),
            Col("label", rank=2), Col("scope", wrap=False), Col("created", rank=4))
    print_fitted(con, cols, [
        (escape(r["id"]), r["kind"] + (" (last baseline)" if r["last_baseline"] else "")
         + _incomplete(r.get("incomplete")),
         format_count(r["values"]), escape(r["label"]), escape(r.get("scope") or MISSING),
         escape(r["created"] or MISSING)) for r in rows])


def _incomplete(note: str | None) -> str:
    if not note:
        return ""
    return " (half-tuned)" if note.startswith("half-tuned") else " (apply did not finish)"


def snapshot(con: Console, snap: Snapshot) -> None:
    whole(con, f"[bold]{snap.id}[/] ({snap.kind}) {escape(snap.label)}, {snap.created}, "
               f"host {escape(format_value(snap.host.get('hostname')))}"
               + (f", netns {snap.host['netns']}" if snap.host.get("netns") else ""))
    print_fitted(con, (Col("key"), Col("value")),
                 [(escape(key), escape(_value(value))) for key, value in snap.values.items()])
    for path, content in snap.files.items():
        whole(con, f"file {escape(path)}: "
                   f"{'absent' if content is None else format_bytes(len(content))}")


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
    print_fitted(con, (Col("key"), Col("value"), Col("group", rank=1), Col("mode", rank=2),
                       Col("apply", rank=3), Col("source", rank=4)), rows)


# ---- probes, results, diagnose, experiment ---------------------------------------------------

def _s(summary: dict[str, Any], key: str) -> Any:
    value = summary.get(key)
    return None if isinstance(value, bool) else value


def _grid(con: Console, pairs: Sequence[tuple[str, str]]) -> None:
    """``what  figures`` lines, indented; long figures wrap inside their column."""
    table, _ = fitted(con, (Col("what", wrap=False), Col("figures")),
                      [(f"  {what}", text) for what, text in pairs])
    table.show_header = False
    con.print(table)


def probe_summary(con: Console, result: ProbeResult, *, record: bool = False) -> None:
    """A probe's key figures first, a few lines; the full record is `results show ID`
    (``record``: this is it, with when, where and what measured, as `results show` draws
    it)."""
    s, spec = result.summary, result.spec
    head = f"[bold]{result.kind} probe[/] {format_value(result.id)}"
    if not result.ok:
        whole(con, f"{head}: [red]failed[/]: {escape(result.error or MISSING)}")
    pairs: list[tuple[str, str]] = []
    if result.kind == "net":
        peer = escape(format_value(spec.get("peer")))
        address = spec.get("peer_address")
        con.print(f"{head}: [bold]{format_rate(_s(s, 'throughput_bps'))}[/] to {peer}"
                  + (f" ({escape(str(address))})" if address and address != spec.get("peer")
                     else ""))
        pairs += [
            ("streams", f"{format_count(_s(s, 'streams'))} for "
                        f"{format_duration(_s(s, 'duration_s'))}, congestion control "
                        f"{escape(format_value(s.get('cc')))}"
                        + (", reverse (the peer sends)" if spec.get("reverse") else "")),
            ("retransmits", f"{format_count(_s(s, 'retransmits'))} "
                            f"({format_percent(_s(s, 'sampler_retrans_share'), fraction=True)}"
                            " of segments)"),
            ("RTT", f"{format_ms(_s(s, 'rtt_ms_mean'))} mean, {format_ms(_s(s, 'rtt_ms_min'))} "
                    "min"),
            ("window", f"congestion window max {format_bytes(_s(s, 'snd_cwnd_bytes_max'))}; "
                       "limited by the receive window "
                       f"{format_percent(_s(s, 'sampler_rwnd_limited_pct_max'))}, by the send "
                       f"buffer {format_percent(_s(s, 'sampler_sndbuf_limited_pct_max'))} of "
                       "the time"),
            ("CPU", f"{format_percent(_s(s, 'cpu_local_pct'))} here, "
                    f"{format_percent(_s(s, 'cpu_remote_pct'))} at the peer; busiest core "
                    f"{format_percent(_s(s, 'sampler_cpu_busy_pct_max'))} (softirq "
                    f"{format_percent(_s(s, 'sampler_softirq_pct_max'))})"),
        ]
        if s.get("sampler_nic_tx_dev"):
            pairs.append(("NIC", f"{escape(str(s['sampler_nic_tx_dev']))} sends "
                                 f"{format_rate(_s(s, 'sampler_nic_tx_bps_mean'))} mean; "
                                 f"{format_count(_s(s, 'sampler_nic_rx_drops_total'))} "
                                 "dropped on receive"))
    elif result.kind == "disk":
        con.print(f"{head}: read [bold]{format_rate(_s(s, 'read_bps'))}[/], write "
                  f"[bold]{format_rate(_s(s, 'write_bps'))}[/] in "
                  f"{escape(format_value(spec.get('path')))}")
        direct = s.get("direct", spec.get("direct"))
        pairs += [
            ("file", f"{format_bytes(_s(s, 'size_bytes') or _s(spec, 'size_bytes'))}, "
                     f"{'direct' if direct else 'buffered'} I/O, "
                     + _jobs(_s(s, 'jobs') or _s(spec, 'jobs'))),
            ("latency", f"{format_ms(_s(s, 'read_lat_ms_mean'))} read, "
                        f"{format_ms(_s(s, 'write_lat_ms_mean'))} write (mean)"),
            ("CPU", f"busiest core {format_percent(_s(s, 'sampler_cpu_busy_pct_max'))}, "
                    f"iowait {format_percent(_s(s, 'sampler_iowait_pct_mean'))} mean"),
        ]
    else:
        con.print(f"{head}: [bold]{format_rate(_s(s, 'throughput_bps'))}[/], "
                  f"{format_bytes(_s(s, 'bytes'))} in {format_duration(_s(s, 'seconds'))}")
        pairs += [
            ("copy", f"{escape(format_value(spec.get('src')))} -> "
                     f"{escape(format_value(spec.get('dst')))} with "
                     f"{escape(format_value(spec.get('tool')))}"),
            ("CPU", f"busiest core {format_percent(_s(s, 'sampler_cpu_busy_pct_max'))}, "
                    f"iowait {format_percent(_s(s, 'sampler_iowait_pct_mean'))} mean"),
            ("retransmits", format_count(_s(s, "sampler_retrans_segs_total"))),
        ]
    if record:
        where = f"host {escape(result.host)}" + (
            f", netns {escape(result.netns)}" if result.netns else "") + (
            f" (pushed by {escape(result.origin_host)})"
            if result.origin_host not in (None, result.host) else "")
        pairs += [("started", f"{format_time(result.started)}, took "
                              f"{format_duration(result.duration_s)}"),
                  ("on", where), ("tool", escape(format_value(spec.get("tool")))),
                  ("label", escape(result.label or MISSING)),
                  ("tuning", escape(result.tuning_id or MISSING)),
                  ("experiment", escape(result.experiment_id or MISSING))]
        pairs.append(("samples", f"{format_count(_s(s, 'sampler_samples'))}; every figure and "
                                 "the tool's own output: --format json"))
    else:
        pairs.append(("samples", f"{format_count(_s(s, 'sampler_samples'))}; the full record: "
                                 f"`dtnkit results show {format_value(result.id)}`"))
    _grid(con, pairs)


def _jobs(n: object) -> str:
    """``1 job``, ``4 jobs``; ``- jobs`` when not known."""
    return counted(n, "job") if isinstance(n, int) and not isinstance(n, bool) else (
        f"{format_count(n)} jobs")


def _rate_of(summary: dict[str, Any]) -> str:
    return format_rate(_s(summary, "throughput_bps"))


def results_list(con: Console, rows: Sequence[ProbeResult], here: str = "") -> None:
    """The results, newest first; a column ``host`` (where each row came from: the host that
    pushed it, else the one that measured it) only when a row was pushed from a host other
    than ``here`` (this host's name), hidden after tuning, netns and label when narrow (and
    with it, tuning and netns are hidden before the label is narrower than 16)."""
    if not rows:
        con.print("no results")
        return
    cols = [Col("id", wrap=False, justify="right"), Col("kind", wrap=False),
            Col("rate", wrap=False, justify="right"), Col("label", rank=1),
            Col("netns", rank=2), Col("tuning", rank=3, wrap=False)]
    cells = [[format_value(r.id), r.kind, _rate_of(r.summary), escape(r.label or MISSING),
              escape(r.netns or MISSING), r.tuning_id or MISSING] for r in rows]
    if any(r.origin_host not in (None, here) for r in rows):
        cols[3] = Col("label", rank=1, least=16)
        cols.insert(3, Col("host", rank=1, wrap=False))
        for r, row in zip(rows, cells, strict=True):
            row.insert(3, escape(r.origin_host or r.host or MISSING))
    print_fitted(con, cols, cells)


def experiments_list(con: Console, exps: Sequence[dict[str, Any]]) -> None:
    if not exps:
        con.print("no experiments")
        return
    print_fitted(con, (Col("id", wrap=False), Col("probe", wrap=False), Col("groups")),
                 [(escape(e["id"]), escape(str(e["spec"]["probe"])),
                   escape(", ".join(f"{g['group']} {g['verdict']}" for g in e["groups"])))
                  for e in exps])


BINDS = {True: "[red]binds[/]", False: "[green]ok[/]", None: "[dim]-[/]"}


def diagnosis(con: Console, doc: dict[str, Any]) -> None:
    """The verdict and the next step first, then what was measured, then each layer."""
    v = doc["verdict"]
    con.print(f"[bold]verdict: {escape(v['layer'])}[/]: {escape(v['summary'])}")
    if v.get("next"):
        con.print(f"next: {escape(v['next'])}")
    figures = []
    for kind, what in (("net", "network"), ("disk", "storage"), ("e2e", "end to end")):
        r = doc["results"].get(kind)
        if r is not None:
            figures.append(f"{what} {_rate_of(r['summary'])} (result {format_value(r['id'])})")
    if figures:
        con.print(f"measured: {', '.join(figures)}")
    print_fitted(con, (Col("layer", wrap=False), Col("result", wrap=False),
                       Col("found", least=50), Col("checked", rank=1)),
                 [(escape(c["layer"]), BINDS[c["binds"]], escape(c["found"] or MISSING),
                   escape(c["checked"])) for c in doc["checks"]])


def experiment_record(con: Console, doc: dict[str, Any]) -> None:
    """`results show exp-...`: the experiment's summary, then when it ran and what it
    probed."""
    helped = doc.get("helped") or []
    shown = {"next": [f"dtnkit tune apply --from-experiment {doc.get('id')}"] if helped
             else [], "helped": helped, "groups": doc.get("groups") or [], **doc}
    experiment_summary(con, shown)
    given = doc.get("spec")
    spec: dict[str, Any] = given if isinstance(given, dict) else {}
    con.print(f"started {format_time(doc.get('started_epoch'))}, finished "
              f"{format_time(doc.get('finished_epoch'))}; probe "
              f"{escape(format_value(spec.get('probe')))} x "
              f"{escape(format_value(spec.get('repeat')))} on "
              f"{escape(', '.join(map(str, spec.get('hosts') or [])) or MISSING)}")


def experiment_summary(con: Console, report: dict[str, Any]) -> None:
    """What helped first, each group's ratio against its baseline, then the next command."""
    con.print(f"[bold]experiment {escape(report['id'])}[/]: helped: "
              f"{escape(', '.join(report['helped']) or 'none')}")
    rows = []
    for g in report["groups"]:
        base = g.get("baseline_bps") or []
        applied = g.get("applied_bps") or []
        mean_b = sum(base) / len(base) if base else None
        mean_a = sum(applied) / len(applied) if applied else None
        ratio = g.get("ratio")
        margin = g.get("margin")
        rows.append((escape(g["group"]), escape(g["verdict"]),
                     MISSING if ratio is None else f"x{ratio:.2f}",
                     MISSING if margin is None else f"+-{format_percent(margin, fraction=True)}",
                     format_rate(mean_b), format_rate(mean_a)))
    print_fitted(con, (Col("group", wrap=False), Col("verdict", wrap=False),
                       Col("ratio", wrap=False, justify="right"),
                       Col("noise", rank=3, wrap=False, justify="right"),
                       Col("baseline", rank=1, wrap=False, justify="right"),
                       Col("applied", rank=2, wrap=False, justify="right")), rows)
    if not report["next"]:
        con.print("nothing to apply: keep the hosts as they are")
    for cmd in report["next"]:
        con.print(f"apply what helped: {escape(cmd)}")


# ---- lab -------------------------------------------------------------------------------------

def _rate_cap(bps: float | None) -> str:
    return format_rate(bps) if bps else "no rate cap"


def lab_up(con: Console, name: str, doc: dict[str, Any]) -> None:
    con.print(f"[bold]{escape(name)}[/] is up: RTT {format_ms(doc['rtt_ms'])}, "
              f"{_rate_cap(doc['rate_bps'])}, loss {format_percent(doc['loss'], fraction=True)},"
              f" queue {format_bytes(doc['queue_bytes'])}")
    if doc.get("src_rate_bps"):
        con.print(f"sending hosts' interfaces capped at {format_rate(doc['src_rate_bps'])}")
    con.print(f"backend: [bold]{escape(doc['backend'])}[/] because "
              f"{escape(doc['backend_reason'])}")
    _lab_hosts(con, doc)
    src, dst = doc["hosts"][0], doc["hosts"][-1]
    con.print("reach them with, e.g.:")
    whole(con, f"  dtnkit lab exec {name} {dst['name']} -- iperf3 -s -D")
    whole(con, f"  dtnkit lab exec {name} {src['name']} -- iperf3 -c {dst['address']} -t 10")
    con.print(f"  dtnkit tune apply --group buffers --netns {src['netns']}")


def _lab_hosts(con: Console, doc: dict[str, Any]) -> None:
    print_fitted(con, (Col("host", wrap=False), Col("address", wrap=False),
                       Col("netns", wrap=False), Col("hostname", rank=1, wrap=False)),
                 [(escape(h["name"]), escape(h["address"]), escape(h["netns"]),
                   escape(h["hostname"])) for h in doc["hosts"]])


def lab_list(con: Console, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        con.print("no lab paths")
        return
    print_fitted(con, (Col("name", wrap=False), Col("status", wrap=False), Col("path"),
                       Col("hosts"), Col("backend", rank=1, wrap=False)),
                 [(escape(r["name"]), escape(r["status"]),
                   f"RTT {format_ms(r['rtt_ms'])}, {_rate_cap(r['rate_bps'])}, loss "
                   f"{format_percent(r['loss'], fraction=True)}",
                   escape(" ".join(r["hosts"])), escape(r["backend"])) for r in rows])


def _kernel_drops(kernel: Any) -> str:
    """A queue's drops in the kernel (queue full, or the message not delivered)."""
    if not isinstance(kernel, dict):
        return MISSING
    drops = [kernel.get(k) for k in ("queue_dropped", "user_dropped")]
    return format_count(sum(d for d in drops if isinstance(d, int)))


def lab_status(con: Console, doc: dict[str, Any]) -> None:
    """The path's figures first (configured and measured RTT), then the emulator's health and
    the bottleneck's counters as a table."""
    con.print(f"[bold]{escape(doc['name'])}[/] ({escape(doc['status'])}), backend "
              f"{escape(doc['backend'])}: RTT {format_ms(doc['rtt_ms'])}, "
              f"{_rate_cap(doc['rate_bps'])}, loss {format_percent(doc['loss'], fraction=True)}"
              f", queue {format_bytes(doc.get('queue_bytes'))}")
    measured = doc.get("measured")
    got = (f"{format_ms(measured['avg_ms'])} (min {format_ms(measured['min_ms'])}, mdev "
           f"{format_ms(measured['mdev_ms'])})" if measured else MISSING)
    con.print(f"RTT measured {got}")
    emu = doc["emulator"]
    if emu["kind"] == "nfqueue":
        late = emu.get("lateness_ms") or {}
        con.print(f"delay stage: pid {format_value(emu.get('pid'))} "
                  f"{'alive' if emu.get('alive') else '[red]DEAD[/]'}, CPU "
                  f"{format_percent(emu.get('cpu_percent'))}, lateness p99 "
                  f"{format_ms(late.get('p99'))}")
        queues = {q: info for q, info in (emu.get("queues") or {}).items()
                  if isinstance(info, dict)}
        if queues:  # queue 0 delays src -> dst, queue 1 dst -> src
            print_fitted(con, (Col("queue", wrap=False, justify="right"),
                               Col("packets", wrap=False, justify="right"),
                               Col("held now", wrap=False, justify="right"),
                               Col("held max", wrap=False, justify="right"),
                               Col("lost", wrap=False, justify="right"),
                               Col("kernel drops", rank=1, wrap=False, justify="right"),
                               Col("bytes", rank=2, wrap=False, justify="right")),
                         [(escape(str(q)), format_count(i.get("packets")),
                           format_count(i.get("held_now")), format_count(i.get("held_max")),
                           format_count(i.get("dropped_loss")), _kernel_drops(i.get("kernel")),
                           format_bytes(i.get("bytes"))) for q, i in queues.items()])
    rows = []
    for side, qdiscs in doc["counters"].items():
        for q in qdiscs:
            rows.append((escape(side.replace("_", " ")), escape(format_value(q.get("kind"))),
                         format_count(q.get("packets")), format_bytes(q.get("bytes")),
                         format_count(q.get("drops")), format_count(q.get("overlimits")),
                         format_bytes(q.get("backlog")), escape(format_value(q.get("handle")))))
    if rows:
        print_fitted(con, (Col("direction", wrap=False), Col("qdisc", wrap=False),
                           Col("packets", wrap=False, justify="right"),
                           Col("bytes", wrap=False, justify="right"),
                           Col("drops", wrap=False, justify="right"),
                           Col("overlimits", rank=2, wrap=False, justify="right"),
                           Col("backlog", rank=1, wrap=False, justify="right"),
                           Col("handle", rank=3, wrap=False)), rows)
    _lab_hosts(con, doc)
