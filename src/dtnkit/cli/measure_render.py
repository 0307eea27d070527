"""The tables of ``dtnkit probe``, ``results``, ``diagnose`` and ``experiment``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from dtnkit.cli.render import Col, fitted, print_fitted, whole
from dtnkit.measure.result import ProbeResult
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


def _s(summary: dict[str, Any], key: str) -> Any:
    value = summary.get(key)
    return None if isinstance(value, bool) else value


def _grid(con: Console, pairs: Sequence[tuple[str, str]]) -> None:
    """``what  figures`` lines, indented; long figures wrap inside their column."""
    table, _ = fitted(
        con,
        (Col("what", wrap=False), Col("figures")),
        [(f"  {what}", text) for what, text in pairs],
    )
    table.show_header = False
    con.print(table)


def probe_summary(con: Console, result: ProbeResult, *, record: bool = False) -> None:
    """A probe's key figures first, a few lines; the full record is `results show ID`
    (``record``: this is it, with when, where and what measured, as `results show` draws
    it)."""
    s, spec = result.summary, result.spec
    head = f"[bold]{result.kind} probe[/] {format_value(result.id)}"
    if result.sweep is not None:  # a sweep point's measurement
        head = (
            f"[bold]{result.kind} measurement[/] {format_value(result.id)} (sweep "
            f"{escape(result.sweep['run'])}, point {escape(result.sweep['point_id'])})"
        )
    if not result.ok:
        whole(con, f"{head}: [red]failed[/]: {escape(result.error or MISSING)}")
    pairs: list[tuple[str, str]] = []
    if result.sweep is not None:
        if result.ok:  # a failed point's head line is its error, above
            con.print(f"{head}: [bold]{format_rate(_s(s, 'throughput_bps'))}[/]")
        pairs += _sweep_point(spec, s)
    elif result.kind == "net":
        peer = escape(format_value(spec.get("peer")))
        address = spec.get("peer_address")
        con.print(
            f"{head}: [bold]{format_rate(_s(s, 'throughput_bps'))}[/] to {peer}"
            + (f" ({escape(str(address))})" if address and address != spec.get("peer") else "")
        )
        pairs += [
            (
                "streams",
                f"{format_count(_s(s, 'streams'))} for "
                f"{format_duration(_s(s, 'duration_s'))}, congestion control "
                f"{escape(format_value(s.get('cc')))}"
                + (", reverse (the peer sends)" if spec.get("reverse") else ""),
            ),
            (
                "retransmits",
                f"{format_count(_s(s, 'retransmits'))} "
                f"({format_percent(_s(s, 'sampler_retrans_share'), fraction=True)}"
                " of segments)",
            ),
            (
                "RTT",
                f"{format_ms(_s(s, 'rtt_ms_mean'))} mean, {format_ms(_s(s, 'rtt_ms_min'))} min",
            ),
            (
                "window",
                f"congestion window max {format_bytes(_s(s, 'snd_cwnd_bytes_max'))}; "
                "limited by the receive window "
                f"{format_percent(_s(s, 'sampler_rwnd_limited_pct_max'))}, by the send "
                f"buffer {format_percent(_s(s, 'sampler_sndbuf_limited_pct_max'))} of "
                "the time",
            ),
            (
                "CPU",
                f"{format_percent(_s(s, 'cpu_local_pct'))} here, "
                f"{format_percent(_s(s, 'cpu_remote_pct'))} at the peer; busiest core "
                f"{format_percent(_s(s, 'sampler_cpu_busy_pct_max'))} (softirq "
                f"{format_percent(_s(s, 'sampler_softirq_pct_max'))})",
            ),
        ]
        if s.get("sampler_nic_tx_dev"):
            pairs.append(
                (
                    "NIC",
                    f"{escape(str(s['sampler_nic_tx_dev']))} sends "
                    f"{format_rate(_s(s, 'sampler_nic_tx_bps_mean'))} mean; "
                    f"{format_count(_s(s, 'sampler_nic_rx_drops_total'))} "
                    "dropped on receive",
                )
            )
    elif result.kind == "disk":
        con.print(
            f"{head}: read [bold]{format_rate(_s(s, 'read_bps'))}[/], write "
            f"[bold]{format_rate(_s(s, 'write_bps'))}[/] in "
            f"{escape(format_value(spec.get('path')))}"
        )
        direct = s.get("direct", spec.get("direct"))
        pairs += [
            (
                "file",
                f"{format_bytes(_s(s, 'size_bytes') or _s(spec, 'size_bytes'))}, "
                f"{'direct' if direct else 'buffered'} I/O, "
                + _counted(_s(s, "jobs") or _s(spec, "jobs"), "job"),
            ),
            (
                "latency",
                f"{format_ms(_s(s, 'read_lat_ms_mean'))} read, "
                f"{format_ms(_s(s, 'write_lat_ms_mean'))} write (mean)",
            ),
            (
                "CPU",
                f"busiest core {format_percent(_s(s, 'sampler_cpu_busy_pct_max'))}, "
                f"iowait {format_percent(_s(s, 'sampler_iowait_pct_mean'))} mean",
            ),
        ]
    else:
        con.print(
            f"{head}: [bold]{format_rate(_s(s, 'throughput_bps'))}[/], "
            f"{format_bytes(_s(s, 'bytes'))} in {format_duration(_s(s, 'seconds'))}"
        )
        pairs += [
            (
                "copy",
                f"{escape(format_value(spec.get('src')))} -> "
                f"{escape(format_value(spec.get('dst')))} with "
                f"{escape(format_value(spec.get('tool')))}",
            ),
            (
                "CPU",
                f"busiest core {format_percent(_s(s, 'sampler_cpu_busy_pct_max'))}, "
                f"iowait {format_percent(_s(s, 'sampler_iowait_pct_mean'))} mean",
            ),
            ("retransmits", format_count(_s(s, "sampler_retrans_segs_total"))),
        ]
    if record:
        where = (
            f"host {escape(result.host or MISSING)}"
            + (f", netns {escape(result.netns)}" if result.netns else "")
            + (
                f" (pushed by {escape(result.origin_host)})"
                if result.origin_host not in (None, result.host)
                else ""
            )
        )
        pairs += [
            (
                "started",
                f"{format_time(result.started)}, took {format_duration(result.duration_s)}",
            ),
            ("on", where),
            ("tool", escape(format_value(spec.get("tool")))),
            ("label", escape(result.label or MISSING)),
            ("tuning", escape(result.tuning_id or MISSING)),
            ("experiment", escape(result.experiment_id or MISSING)),
        ]
    # a probe's summary counts its samples; a sweep point keeps them (entries without a time
    # carry only a series' tail)
    samples = (
        _s(s, "sampler_samples")
        if result.sweep is None
        else sum(1 for x in result.samples if x.get("t_s") is not None)
    )
    if record:
        pairs.append(
            (
                "samples",
                f"{format_count(samples)}; every figure and the tool's own output: --format json",
            )
        )
    else:
        pairs.append(
            (
                "samples",
                f"{format_count(samples)}; the full record: "
                f"`dtnkit results show {format_value(result.id)}`",
            )
        )
    _grid(con, pairs)


def _sweep_point(spec: dict[str, Any], s: dict[str, Any]) -> list[tuple[str, str]]:
    """A sweep point's own lines: the grid's coordinates (its path, its load) and the figures
    a sweep keeps (tool time, CPU per origin, retransmits, whether the emulator bound)."""
    path = (
        f"{format_ms(_s(spec, 'rtt_ms'))} RTT, capped at {format_rate(_s(spec, 'rate_bps'))}, "
        f"loss {format_percent(_s(spec, 'loss'), fraction=True)}, "
        f"MTU {format_count(_s(spec, 'mtu'))}"
    )
    cores = spec.get("cores")
    load = (
        f"{escape(format_value(spec.get('tool')))}, "
        f"{_counted(spec.get('origins'), 'origin')} "
        f"({escape(format_value(spec.get('server')))}), "
        f"{_counted(spec.get('streams'), 'stream')}, "
        + (
            f"{cores:g} core{'' if cores == 1 else 's'} each"
            if isinstance(cores, int | float)
            else "no core cap"
        )
        + f", {format_duration(_s(spec, 'duration_s'))}"
    )
    cpu = s.get("cpu_seconds")
    cpu_text = (
        ", ".join(f"{format_duration(c)} (origin {i})" for i, c in enumerate(cpu))
        if isinstance(cpu, list) and cpu
        else MISSING
    )
    retrans = format_count(_s(s, "retransmits"))
    if s.get("retransmits_note"):
        retrans += f" ({escape(str(s['retransmits_note']))})"
    pairs = [
        ("path", path),
        ("load", load),
        ("tool time", format_duration(_s(s, "tool_s"))),
        ("CPU", cpu_text),
        ("retransmits", retrans),
    ]
    if s.get("emulator_bound"):
        why = escape(str(s.get("emulator_why") or "the lab's stage"))
        pairs.append(("emulator", f"[yellow]bound[/]: {why}; read this point as the lab's"))
    return pairs


def _counted(n: object, noun: str) -> str:
    """``1 job``, ``4 streams``; ``- streams`` when not known."""
    if isinstance(n, int) and not isinstance(n, bool):
        return counted(n, noun)
    return f"{format_count(n)} {noun}s"


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
    cols = [
        Col("id", wrap=False, justify="right"),
        Col("kind", wrap=False),
        Col("rate", wrap=False, justify="right"),
        Col("label", rank=1),
        Col("netns", rank=2),
        Col("tuning", rank=3, wrap=False),
    ]
    cells = [
        [
            format_value(r.id),
            r.kind,
            _rate_of(r.summary),
            escape(_label(r)),
            escape(r.netns or MISSING),
            r.tuning_id or MISSING,
        ]
        for r in rows
    ]
    if any(r.origin_host not in (None, here) for r in rows):
        cols[3] = Col("label", rank=1, least=16)
        cols.insert(3, Col("host", rank=1, wrap=False))
        for r, row in zip(rows, cells, strict=True):
            row.insert(3, escape(r.origin_host or r.host or MISSING))
    print_fitted(con, cols, cells)


def _label(r: ProbeResult) -> str:
    """A result's label; a sweep point's measurement: its run and point ID (``RUN/ID``)."""
    if r.sweep is not None:
        return f"{r.sweep['run']}/{r.sweep['point_id']}"
    return r.label or MISSING


def experiments_list(con: Console, exps: Sequence[dict[str, Any]]) -> None:
    if not exps:
        con.print("no experiments")
        return
    print_fitted(
        con,
        (Col("id", wrap=False), Col("probe", wrap=False), Col("groups")),
        [
            (
                escape(e["id"]),
                escape(str(e["spec"]["probe"])),
                escape(", ".join(f"{g['group']} {g['verdict']}" for g in e["groups"])),
            )
            for e in exps
        ],
    )


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
    print_fitted(
        con,
        (
            Col("layer", wrap=False),
            Col("result", wrap=False),
            Col("found", least=50),
            Col("checked", rank=1),
        ),
        [
            (
                escape(c["layer"]),
                BINDS[c["binds"]],
                escape(c["found"] or MISSING),
                escape(c["checked"]),
            )
            for c in doc["checks"]
        ],
    )


def experiment_record(con: Console, doc: dict[str, Any]) -> None:
    """`results show exp-...`: the experiment's summary, then when it ran and what it
    probed."""
    helped = doc.get("helped") or []
    shown = {
        "next": [f"dtnkit tune apply --from-experiment {doc.get('id')}"] if helped else [],
        "helped": helped,
        "groups": doc.get("groups") or [],
        **doc,
    }
    experiment_summary(con, shown)
    given = doc.get("spec")
    spec: dict[str, Any] = given if isinstance(given, dict) else {}
    con.print(
        f"started {format_time(doc.get('started_epoch'))}, finished "
        f"{format_time(doc.get('finished_epoch'))}; probe "
        f"{escape(format_value(spec.get('probe')))} x "
        f"{escape(format_value(spec.get('repeat')))} on "
        f"{escape(', '.join(map(str, spec.get('hosts') or [])) or MISSING)}"
    )


def experiment_summary(con: Console, report: dict[str, Any]) -> None:
    """What helped first, each group's ratio against its baseline, then the next command."""
    con.print(
        f"[bold]experiment {escape(report['id'])}[/]: helped: "
        f"{escape(', '.join(report['helped']) or 'none')}"
    )
    rows = []
    for g in report["groups"]:
        base = g.get("baseline_bps") or []
        applied = g.get("applied_bps") or []
        mean_b = sum(base) / len(base) if base else None
        mean_a = sum(applied) / len(applied) if applied else None
        ratio = g.get("ratio")
        margin = g.get("margin")
        rows.append(
            (
                escape(g["group"]),
                escape(g["verdict"]),
                MISSING if ratio is None else f"x{ratio:.2f}",
                MISSING if margin is None else f"+-{format_percent(margin, fraction=True)}",
                format_rate(mean_b),
                format_rate(mean_a),
            )
        )
    print_fitted(
        con,
        (
            Col("group", wrap=False),
            Col("verdict", wrap=False),
            Col("ratio", wrap=False, justify="right"),
            Col("noise", rank=3, wrap=False, justify="right"),
            Col("baseline", rank=1, wrap=False, justify="right"),
            Col("applied", rank=2, wrap=False, justify="right"),
        ),
        rows,
    )
    unmeasured = [g for g in report["groups"] if g.get("noise_measured") is False]
    if unmeasured:
        floor = format_percent(unmeasured[0].get("margin"), fraction=True)
        con.print(
            "noise not measured: one baseline run per group (--repeat 1), so each verdict "
            f"was judged against +-{floor} alone; --repeat 3 measures it"
        )
    if not report["next"]:
        con.print("nothing to apply: keep the hosts as they are")
    for cmd in report["next"]:
        con.print(f"apply what helped: {escape(cmd)}")
