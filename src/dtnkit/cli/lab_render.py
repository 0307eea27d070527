"""The tables of ``dtnkit lab``: a path that came up, the list, a path's status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from dtnkit.cli.render import Col, print_fitted, whole
from dtnkit.units import (
    MISSING,
    format_bytes,
    format_count,
    format_ms,
    format_percent,
    format_rate,
    format_value,
)


def _rate_cap(bps: float | None) -> str:
    return format_rate(bps) if bps else "no rate cap"


def lab_up(con: Console, name: str, doc: dict[str, Any]) -> None:
    con.print(
        f"[bold]{escape(name)}[/] is up: RTT {format_ms(doc['rtt_ms'])}, "
        f"{_rate_cap(doc['rate_bps'])}, loss {format_percent(doc['loss'], fraction=True)},"
        f" queue {format_bytes(doc['queue_bytes'])}"
    )
    if doc.get("src_rate_bps"):
        con.print(f"sending hosts' interfaces capped at {format_rate(doc['src_rate_bps'])}")
    con.print(f"backend: [bold]{escape(doc['backend'])}[/] because {escape(doc['backend_reason'])}")
    _lab_hosts(con, doc)
    src, dst = doc["hosts"][0], doc["hosts"][-1]
    con.print("reach them with, e.g.:")
    whole(con, f"  dtnkit lab exec {name} {dst['name']} -- iperf3 -s -D")
    whole(con, f"  dtnkit lab exec {name} {src['name']} -- iperf3 -c {dst['address']} -t 10")
    con.print(f"  dtnkit tune apply --group buffers --netns {src['netns']}")


def _lab_hosts(con: Console, doc: dict[str, Any]) -> None:
    print_fitted(
        con,
        (
            Col("host", wrap=False),
            Col("address", wrap=False),
            Col("netns", wrap=False),
            Col("hostname", rank=1, wrap=False),
        ),
        [
            (escape(h["name"]), escape(h["address"]), escape(h["netns"]), escape(h["hostname"]))
            for h in doc["hosts"]
        ],
    )


def lab_list(con: Console, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        con.print("no lab paths")
        return
    print_fitted(
        con,
        (
            Col("name", wrap=False),
            Col("status", wrap=False),
            Col("path"),
            Col("hosts"),
            Col("backend", rank=1, wrap=False),
        ),
        [
            (
                escape(r["name"]),
                escape(r["status"]),
                f"RTT {format_ms(r['rtt_ms'])}, {_rate_cap(r['rate_bps'])}, loss "
                f"{format_percent(r['loss'], fraction=True)}",
                escape(" ".join(r["hosts"])),
                escape(r["backend"]),
            )
            for r in rows
        ],
    )


def _kernel_drops(kernel: Any) -> str:
    """A queue's drops in the kernel (queue full, or the message not delivered)."""
    if not isinstance(kernel, dict):
        return MISSING
    drops = [kernel.get(k) for k in ("queue_dropped", "user_dropped")]
    return format_count(sum(d for d in drops if isinstance(d, int)))


def lab_status(con: Console, doc: dict[str, Any]) -> None:
    """The path's figures first (configured and measured RTT), then the emulator's health and
    the bottleneck's counters as a table."""
    con.print(
        f"[bold]{escape(doc['name'])}[/] ({escape(doc['status'])}), backend "
        f"{escape(doc['backend'])}: RTT {format_ms(doc['rtt_ms'])}, "
        f"{_rate_cap(doc['rate_bps'])}, loss {format_percent(doc['loss'], fraction=True)}"
        f", queue {format_bytes(doc.get('queue_bytes'))}"
    )
    measured = doc.get("measured")
    got = (
        f"{format_ms(measured['avg_ms'])} (min {format_ms(measured['min_ms'])}, mdev "
        f"{format_ms(measured['mdev_ms'])})"
        if measured
        else MISSING
    )
    con.print(f"RTT measured {got}")
    emu = doc["emulator"]
    if emu["kind"] == "nfqueue":
        late = emu.get("lateness_ms") or {}
        con.print(
            f"delay stage: pid {format_value(emu.get('pid'))} "
            f"{'alive' if emu.get('alive') else '[red]DEAD[/]'}, CPU "
            f"{format_percent(emu.get('cpu_percent'))}, lateness p99 "
            f"{format_ms(late.get('p99'))}"
        )
        queues = {
            q: info for q, info in (emu.get("queues") or {}).items() if isinstance(info, dict)
        }
        if queues:  # queue 0 delays src -> dst, queue 1 dst -> src
            print_fitted(
                con,
                (
                    Col("queue", wrap=False, justify="right"),
                    Col("packets", wrap=False, justify="right"),
                    Col("held now", wrap=False, justify="right"),
                    Col("held max", wrap=False, justify="right"),
                    Col("lost", wrap=False, justify="right"),
                    Col("kernel drops", rank=1, wrap=False, justify="right"),
                    Col("bytes", rank=2, wrap=False, justify="right"),
                ),
                [
                    (
                        escape(str(q)),
                        format_count(i.get("packets")),
                        format_count(i.get("held_now")),
                        format_count(i.get("held_max")),
                        format_count(i.get("dropped_loss")),
                        _kernel_drops(i.get("kernel")),
                        format_bytes(i.get("bytes")),
                    )
                    for q, i in queues.items()
                ],
            )
    rows = []
    for side, qdiscs in doc["counters"].items():
        for q in qdiscs:
            rows.append(
                (
                    escape(side.replace("_", " ")),
                    escape(format_value(q.get("kind"))),
                    format_count(q.get("packets")),
                    format_bytes(q.get("bytes")),
                    format_count(q.get("drops")),
                    format_count(q.get("overlimits")),
                    format_bytes(q.get("backlog")),
                    escape(format_value(q.get("handle"))),
                )
            )
    if rows:
        print_fitted(
            con,
            (
                Col("direction", wrap=False),
                Col("qdisc", wrap=False),
                Col("packets", wrap=False, justify="right"),
                Col("bytes", wrap=False, justify="right"),
                Col("drops", wrap=False, justify="right"),
                Col("overlimits", rank=2, wrap=False, justify="right"),
                Col("backlog", rank=1, wrap=False, justify="right"),
                Col("handle", rank=3, wrap=False),
            ),
            rows,
        )
    _lab_hosts(con, doc)
