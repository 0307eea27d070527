"""A copy's timeline (``dtnkit cp --timeline FILE``): where its time went, and its drawing.

:func:`phases` cuts a copy into what it did before its first connection, the set-up of that
connection up to the first bytes of the file, the data (first to last byte, as the kernel
counted them on every connection) and what came after the last byte (digest, commit,
closing); :func:`draw` plots each connection's bytes over time with the copy's steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Bytes on a connection that count as the file's first (headers and TLS records are less).
FIRST_BYTES = 64 * 1024


@dataclass(frozen=True)
class Phases:
    """Seconds of one copy, from its start (t = 0, after Python's start-up)."""

    startup_s: float | None  # process start to the copy's start (clock-tick resolution)
    before_s: float  # the copy's start to its first connection's connect
    setup_s: float  # connect to the first FIRST_BYTES on any connection
    data_s: float  # first to last byte received
    after_s: float  # last byte to the end (digest, fsync, commit, close)
    streams: int  # connections that carried data
    late_s: list[float]  # when the other data connections began, after the first

    @property
    def total_s(self) -> float:
        return self.before_s + self.setup_s + self.data_s + self.after_s


def _events(doc: Mapping[str, Any], what: str) -> list[Mapping[str, Any]]:
    return [e for e in doc.get("events", []) if e.get("what") == what]


def _rows(conn: Mapping[str, Any]) -> list[list[float]]:
    return [list(r) for r in conn.get("rows", [])]


def total_received(doc: Mapping[str, Any]) -> list[tuple[float, int]]:
    """(t, bytes received on all connections so far), at every sample of any connection."""
    samples = sorted(
        (float(r[0]), i, int(r[1]))
        for i, c in enumerate(doc.get("connections", []))
        for r in _rows(c)
    )
    latest: dict[int, int] = {}
    total = 0
    out: list[tuple[float, int]] = []
    for t, i, got in samples:
        total += got - latest.get(i, 0)
        latest[i] = got
        if out and out[-1][0] == t:
            out[-1] = (t, total)
        else:
            out.append((t, total))
    return out


def phases(doc: Mapping[str, Any], size: int) -> Phases:
    """The copy's phases (ValueError when the timeline holds no connection that received
    *size* bytes in all)."""
    connects = _events(doc, "connect")
    ends = _events(doc, "end")
    if not connects or not ends:
        raise ValueError("the timeline has no connection or no end")
    start = float(connects[0]["t"])
    end = float(ends[-1]["t"])
    firsts = []
    for c in doc.get("connections", []):
        at = next((float(r[0]) for r in _rows(c) if int(r[1]) >= FIRST_BYTES), None)
        if at is not None:
            firsts.append(at)
    totals = total_received(doc)
    if not firsts or not totals or totals[-1][1] < size:
        raise ValueError(
            f"the connections received {totals[-1][1] if totals else 0} bytes, "
            f"not the file's {size}"
        )
    final = totals[-1][1]
    last = next(t for t, b in totals if b >= final)
    first = min(firsts)
    process = doc.get("process_start_s")
    return Phases(
        None if process is None else -float(process),
        start,
        first - start,
        last - first,
        end - last,
        len(firsts),
        sorted(f - first for f in firsts)[1:],
    )


def draw(
    doc: Mapping[str, Any], png: Path, title: str, *, floor: Sequence[tuple[str, float]] = ()
) -> None:
    """Each connection's bytes received over time (MiB), their sum, the copy's steps as
    marks, and *floor* (label, seconds) as vertical lines, into *png*."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=100)
    for c in doc.get("connections", []):
        rows = _rows(c)
        if not rows:
            continue
        ax.step(
            [r[0] for r in rows],
            [r[1] / 2**20 for r in rows],
            where="post",
            label=f"connection {c['index']}",
            linewidth=1,
        )
    totals = total_received(doc)
    if totals:
        ax.step(
            [t for t, _ in totals],
            [b / 2**20 for _, b in totals],
            where="post",
            color="black",
            linewidth=2,
            label="all",
        )
    top = max((b for _, b in totals), default=0) / 2**20 or 1
    shown = (
        "streams decided",
        "GET answered",
        "HEAD answered",
        "stream starts",
        "moved",
        "digest",
        "source digest",
        "committed",
        "end",
    )
    for e in doc.get("events", []):
        if e.get("what") not in shown:
            continue
        ax.axvline(float(e["t"]), color="grey", linestyle=":", linewidth=0.8)
        label = str(e["what"]) + (f" {e['stream']}" if "stream" in e else "")
        ax.text(
            float(e["t"]), top * 0.02, label, rotation=90, fontsize=7, va="bottom", color="dimgrey"
        )
    for label, seconds in floor:
        ax.axvline(seconds, color="red", linewidth=1, linestyle="--")
        ax.text(seconds, top * 0.98, label, rotation=90, fontsize=8, va="top", color="red")
    ax.set_xlabel("seconds from the copy's start (after Python's start-up)")
    ax.set_ylabel("MiB received (TCP_INFO bytes_received)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
