"""How do dtnkit cp and HTTP-TPC do on WAN lab paths against curl, gfal-copy, xrdcp and XRootD?

For each cell (``--paths`` x ``--ends`` x ``--sizes``: a `dtnkit lab` path, its ends untuned or
tuned with ``dtnkit tune apply --netns``, restored after) it builds the lab, the servers the
columns need (bench/lib/wan/lab.py) and runs the columns (bench/lib/wan/tools.py) on dst:
verified ``dtnkit cp`` (``--streams auto``, one stream) from XRootD and from dtnkit serve,
unverified curl, ``gfal-copy -K adler32``, ``xrdcp -S 8`` and ``--cksum adler32:source``,
uploads into dtnkit serve, HTTP-TPC pulls from XRootD on src made by dtnkit serve and by XRootD
on dst, and the path's floor: ``iperf3 -R -P 1``, ``-P 8`` and ``-P`` what ``cp auto`` used.
Times are wall times as a user runs the commands (process start included), except TPC (the
COPY request) and iperf3 (its data phase).  Before its rounds each cell's hold check (``iperf3
-R -P 16 -t 8`` or longer, its second half, past slow start; the better of two runs) tells
whether the path carries its rate cap.  Every round runs every column once, interleaved
(--order); ``--aa`` columns run twice per round, and their A/A rounds give the noise band
beside every ratio.  The tables give medians, each target's ratio with met / not met (cp
--streams auto against the floor: the best iperf3 data phase plus 3 round trips; one stream
against curl; upload against download; TPC active dtnkit against XRootD), and the run ends
with one table, a row per cell: the floor and each tool's median as seconds and x the floor.
``--timeline DIR`` runs each dtnkit download once more with ``cp --timeline`` and draws where
its time went (bench/lib/wan/timeline.py).  With ``--base REF`` the --base tree's cp and
uploads run next to this tree's.  Everything carries ``--prefix``; on Ctrl-C, SIGTERM or an
error it stops its servers, restores the tuning and removes its lab paths, and a run removes
what a killed run of the same prefix left.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from bench.lib import Bench, Case
from bench.lib.procs import make_file
from bench.lib.stats import Samples
from bench.lib.wan import timeline, tools
from bench.lib.wan.cells import Cell, MiB, cells, parse_ends, parse_paths, parse_sizes
from bench.lib.wan.lab import CellLab, clean_leftovers, startup
from bench.lib.wan.report import (
    FLOOR,
    Target,
    cell_report,
    practical_floor,
    recorded_by,
    summary,
)
from bench.lib.wan.tools import Column

TOOLS = ("curl", "xrdcp", "gfal-copy", "iptables", "iperf3", "xrootd")
DEFAULT_PATHS = "50ms/1gbit,10ms/2gbit,50ms/5gbit@9000"


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--paths",
        type=parse_paths,
        default=parse_paths(DEFAULT_PATHS),
        help=f"comma-separated RTT/RATE[@MTU] lab paths (default {DEFAULT_PATHS}: "
        "the last one, jumbo frames, where one untuned stream cannot fill the "
        "path; each cell says whether its path held its rate)",
    )
    p.add_argument(
        "--ends",
        type=parse_ends,
        default=["untuned", "tuned"],
        help="untuned, tuned or both (default both)",
    )
    p.add_argument(
        "--sizes", type=parse_sizes, default=[256 * MiB], help="MiB, comma-separated (default 256)"
    )
    p.add_argument(
        "--only",
        type=starts,
        default=[],
        help="comma-separated starts of column names to run (e.g. upload: the "
        "uploads and the downloads they are judged against, and the iperf3 "
        "floor runs, as for every time target; iperf3: those alone)",
    )
    p.add_argument(
        "--aa",
        type=starts,
        default=["curl XRootD"],
        help="starts of column names that run twice per round: their A/A rounds "
        "give the noise band beside the ratios (default 'curl XRootD'; "
        "'' for none)",
    )
    p.add_argument(
        "--timeline",
        type=Path,
        default=None,
        metavar="DIR",
        help="after each cell's rounds, run each dtnkit download column once more "
        "with `cp --timeline`: its JSON and a PNG of every connection's bytes "
        "over time into DIR, and a table of where each copy's time went",
    )
    p.add_argument(
        "--hold",
        type=seconds_or_zero,
        default=None,
        metavar="SECONDS",
        help="how long each of the hold check's runs sends (default 8, or 40 round trips "
        "on a longer path; 0: no hold check)",
    )
    p.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="one more argument for every `dtnkit serve` (repeatable)",
    )


def starts(text: str) -> list[str]:
    return [o.strip() for o in text.split(",") if o.strip()]


def seconds_or_zero(text: str) -> int:
    """--hold: whole seconds, 0 or more (argparse type: one clear error)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: give whole seconds, e.g. 8 (0: none)")
    return int(text)


def quick(args: argparse.Namespace) -> None:
    args.paths, args.ends, args.sizes = args.paths[:1], ["untuned"], [64 * MiB]
    if args.hold is None:
        args.hold = 4  # long enough past slow start at 50 ms (2 s read 84-90 %)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """This case's options as the runner parses them (for tests)."""
    from bench.lib.core import parse

    return parse("wan", CASE, __doc__ or "", argv)


# --------------------------------------------------------------------------- what is measured


def cp_streams_flavours() -> tuple[str, str | None]:
    """How this dtnkit picks streams: ('auto' or '8', the default when it is neither 1 nor
    auto, else None)."""
    helptext = subprocess.run(
        [sys.executable, "-m", "dtnkit", "cp", "--help"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    flat = " ".join(helptext.split())
    m = re.search(r"--streams[^\[]*\[default: ([^;\]]+)", flat)
    default = m.group(1).strip() if m else "1"
    # click checks a given option's value before it misses the arguments
    probe = subprocess.run(
        [sys.executable, "-m", "dtnkit", "cp", "--streams", "auto"],
        capture_output=True,
        text=True,
        check=False,
    )
    many = "8" if "--streams" in probe.stderr else "auto"
    return many, (None if default in ("1", "auto", many) else default)


def targets(many: str, default: str | None, base: str | None = None) -> list[Target]:
    """The goals of the question (*base*: the --base ref, for its rows)."""
    auto = f"cp {many} XRootD"
    rows = [
        Target(auto, FLOOR, 1.05, "verified cp from XRootD vs the path's floor"),
        Target(
            f"cp {many} dtnkit", FLOOR, 1.05, "verified cp from dtnkit serve vs the path's floor"
        ),
        Target("cp 1 XRootD", "curl XRootD", 1.05, "one verified stream vs unverified curl"),
        Target("cp 1 dtnkit", "curl dtnkit", 1.05, "one verified stream vs unverified curl"),
        Target(f"upload {many}", f"cp {many} dtnkit", 1.05, "upload vs download, dtnkit serve"),
        Target("upload 1", "cp 1 dtnkit", 1.05, "upload vs download, one stream"),
        Target("tpc dtnkit 1", "tpc XRootD 1", 1.0, "TPC pull, active dtnkit vs XRootD"),
        Target("tpc dtnkit 8", "tpc XRootD 8", 1.0, "TPC pull, active dtnkit vs XRootD"),
        Target(auto, "gfal-copy -K adler32", None, "verified cp vs gfal-copy, from XRootD"),
        Target(
            f"cp {many} dtnkit",
            "gfal-copy -K adler32",
            None,
            "verified cp from dtnkit serve vs gfal-copy from XRootD",
        ),
        Target(auto, "xrdcp -S 8", None, "verified cp vs xrdcp -S 8 (root://)"),
        Target(
            f"cp {many} dtnkit", "xrdcp -S 8", None, "verified cp from dtnkit serve vs xrdcp -S 8"
        ),
        Target(auto, "xrdcp --cksum adler32:source", None, "verified cp vs verified xrdcp"),
        Target(
            f"cp {many} dtnkit",
            "xrdcp --cksum adler32:source",
            None,
            "verified cp from dtnkit serve vs verified xrdcp",
        ),
        Target(
            "cp 1 XRootD copy phase",
            "curl XRootD",
            None,
            "one stream's copy phase (cp's JSON seconds) vs curl's wall time",
        ),
        Target(
            "cp 1 dtnkit copy phase",
            "curl dtnkit",
            None,
            "one stream's copy phase (cp's JSON seconds) vs curl's wall time",
        ),
        Target(
            "cp 1 XRootD copy phase",
            "curl XRootD copy phase",
            None,
            "inside the tools: cp's JSON seconds vs curl's time_total",
        ),
        Target(
            "cp 1 dtnkit copy phase",
            "curl dtnkit copy phase",
            None,
            "inside the tools: cp's JSON seconds vs curl's time_total",
        ),
    ]
    if default is not None:
        rows.append(
            Target(
                f"cp default({default}) XRootD",
                "gfal-copy -K adler32",
                None,
                "cp with its default streams",
            )
        )
    if base:
        for server in ("XRootD", "dtnkit"):
            rows += [
                Target(
                    f"cp {many} {server}",
                    f"cp {many} base {server}",
                    None,
                    f"this tree vs --base {base}",
                ),
                Target(
                    f"cp {many} base {server}",
                    "gfal-copy -K adler32",
                    None,
                    f"--base {base} vs gfal-copy",
                ),
                Target(f"cp {many} {server}", f"cp 1 {server}", None, "auto vs one stream"),
                Target(
                    f"cp 1 {server}",
                    f"cp 1 base {server}",
                    None,
                    f"one stream: this tree vs --base {base}",
                ),
                Target(
                    f"cp 1 base {server}",
                    f"curl {server}",
                    None,
                    f"one stream, --base {base}, vs unverified curl",
                ),
                Target(
                    f"cp 1 {server} copy phase",
                    f"cp 1 base {server} copy phase",
                    None,
                    f"inside the tool, one stream: this tree vs --base {base}",
                ),
            ]
        for n in (many, "1"):
            rows += [
                Target(
                    f"upload {n} base",
                    f"cp {n} dtnkit",
                    None,
                    f"--base {base} (client and serve) upload vs download",
                ),
                Target(
                    f"upload {n}",
                    f"upload {n} base",
                    None,
                    f"this tree vs --base {base} (client and serve)",
                ),
            ]
        rows += [
            Target(
                f"tpc dtnkit {n}",
                f"tpc dtnkit base {n}",
                None,
                f"TPC pull, active dtnkit: this tree vs --base {base}",
            )
            for n in ("1", "8")
        ]
    return rows


def catalogue(many: str, default: str | None, base: bool = False) -> dict[str, Column]:
    """Every column this question may run, by name."""
    cols = [
        tools.iperf3("8"),
        tools.iperf3("1"),
        tools.cp(many, "XRootD"),
        tools.GFAL,
        tools.XRDCP_S8,
        tools.XRDCP_CKSUM,
        tools.cp(many, "dtnkit"),
        tools.upload(many),
        tools.cp("1", "XRootD"),
        tools.curl("XRootD"),
        tools.cp("1", "dtnkit"),
        tools.curl("dtnkit"),
        tools.upload("1"),
        *(tools.tpc(a, n) for n in ("1", "8") for a in ("dtnkit", "XRootD")),
    ]
    if many == "auto":
        cols.append(tools.iperf3("auto"))
    if default is not None:
        cols.append(tools.cp(default, "XRootD", default=True))
    if base:
        cols += [tools.cp(n, s, base=True) for n in (many, "1") for s in ("XRootD", "dtnkit")]
        cols += [tools.upload(n, base=True) for n in (many, "1")]
        cols += [tools.tpc("dtnkit", n, base=True) for n in ("1", "8")]
    return {c.name: c for c in cols}


def order(many: str, default: str | None, base: bool = False) -> list[str]:
    """Every column of a round, each target pair next to each other."""
    names = [
        "iperf3 8",
        f"cp {many} XRootD",
        "gfal-copy -K adler32",
        "xrdcp -S 8",
        "xrdcp --cksum adler32:source",
        f"cp {many} dtnkit",
        f"upload {many}",
        "iperf3 1",
        "cp 1 XRootD",
        "curl XRootD",
        "cp 1 dtnkit",
        "curl dtnkit",
        "upload 1",
        "tpc dtnkit 1",
        "tpc XRootD 1",
        "tpc dtnkit 8",
        "tpc XRootD 8",
    ]
    if many == "auto":  # as many streams as the last `cp auto` used, next to it
        names.insert(names.index("cp auto XRootD") + 1, "iperf3 auto")
    if default is not None:
        names.append(f"cp default({default}) XRootD")
    if base:  # each next to its pair
        for server in ("XRootD", "dtnkit"):
            names.insert(names.index(f"cp {many} {server}") + 1, f"cp {many} base {server}")
            names.insert(names.index(f"cp 1 {server}") + 1, f"cp 1 base {server}")
        for n in (many, "1"):
            names.insert(names.index(f"upload {n}") + 1, f"upload {n} base")
        for n in ("1", "8"):
            names.insert(names.index(f"tpc dtnkit {n}") + 1, f"tpc dtnkit base {n}")
    return names


def only(names: list[str], starts: list[str], goals: list[Target]) -> list[str]:
    """The columns whose names start with one of *starts* (all when none given), with the
    baselines of the targets they are measured in, in the order of *names*; the iperf3 runs
    too whenever a time target is measured (the path's floor under every target)."""
    if not starts:
        return names
    keep = {n for n in names if any(n.startswith(s) for s in starts)}
    measured = [g for g in goals if recorded_by(g.measured) in keep]
    keep |= {recorded_by(g.baseline) for g in measured}
    if any(g.limit is not None for g in measured):
        keep |= {n for n in names if n.startswith("iperf3 ")}
    picked = [n for n in names if n in keep and n != "iperf3 auto"]
    autos = [i for i, n in enumerate(picked) if n.startswith("cp auto ")]
    if "iperf3 auto" in keep and autos:  # after the first cp auto: it tells the count
        picked.insert(autos[0] + 1, "iperf3 auto")
    return picked


# --------------------------------------------------------------------------- the run


def run(b: Bench) -> None:
    a = b.args
    clean_leftovers(b.prefix)
    many, default = cp_streams_flavours()
    base = b.base.ref if b.base is not None else None
    goals = targets(many, default, base)
    columns = catalogue(many, default, base is not None)
    names = only(order(many, default, base is not None), a.only, goals)
    twins = [n for n in names if any(n.startswith(s) for s in a.aa)]
    # iperf3 on src for every cell: its hold check says whether the path carries its cap
    needs = {"iperf3-src"}.union(*(columns[n].needs for n in names))
    work = b.workdir("wan", mode=0o711)  # XRootD's user walks through it to its own
    (work / "pid").write_text(str(os.getpid()))
    b.note(
        f"dtnkit cp streams: {many}{f', default {default}' if default else ''}; columns "
        f"run twice for the A/A noise: {', '.join(twins) or 'none'}."
    )
    b.result.doc["cells"] = []
    rows: list[tuple[Cell, dict[str, float]]] = []
    n = 0
    for size in a.sizes:
        src_file = work / f"f{size // MiB}m.bin"
        make_file(src_file, size)
        for cell in cells(a.paths, a.ends, [size]):
            with CellLab(
                cell,
                f"{b.prefix}{n}",
                work,
                src_file,
                needs,
                b.tracked,
                base=b.base,
                serve_args=a.serve_arg,
            ) as lab:
                if n == 0:  # once per run, above the tables
                    b.note(startup(lab.dst))
                hold_s = a.hold if a.hold is not None else tools.hold_seconds(lab.rtt_ms())
                hold: tuple[float, int] | None = None
                try:
                    if hold_s > 0:
                        runs = [
                            tools.hold_check(lab.dst, lab.values, hold_s)
                            for _ in range(tools.HOLD_RUNS)
                        ]
                        hold = (max(runs), hold_s)
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                    b.out(f"- {cell.label}: the hold check failed: {exc}")
                used: dict[str, list[int]] = {}
                auto: list[int] = []

                def measure(
                    col: Column,
                    lab: CellLab = lab,
                    auto: list[int] = auto,
                    used: dict[str, list[int]] = used,
                ) -> tuple[float, dict[str, float]]:
                    if auto:
                        lab.values["auto_streams"] = auto[-1]
                    got = tools.measure(col, lab.dst, lab.values, lab.cell.size)
                    if got.streams is not None:
                        auto.append(got.streams)
                    if col.name == "iperf3 auto":
                        used.setdefault(col.name, []).append(auto[-1])
                    return got.seconds, got.side

                watch = b.watch()
                samples = b.rounds_of(
                    {name: functools.partial(measure, columns[name]) for name in names},
                    twins=twins,
                    label=cell.label,
                    keep_going=True,
                    errors=(RuntimeError, OSError, ValueError, subprocess.TimeoutExpired),
                    samples=Samples(),
                )
                assert lab.path is not None
                medians = cell_report(
                    b,
                    cell,
                    lab.path.state.backend,
                    lab.rtt_ms(),
                    samples,
                    names,
                    goals,
                    used,
                    hold,
                )
                rows.append((cell, medians))
                if a.timeline is not None:
                    timelines(b, lab, columns, names, samples, used, a.timeline)
                b.result.doc["cells"].append(
                    {
                        **cell.as_json(),
                        "lab": lab.name,
                        "held_bps": hold[0] if hold else None,
                        "hold_s": hold_s,
                    }
                )
                b.load_line(watch, "This cell")
            n += 1
        src_file.unlink()
    b.heading("All cells")
    summary(b, rows)


#: the columns a --timeline run draws (those of them this run measures)
TIMELINED = ("cp auto XRootD", "cp auto dtnkit", "cp 1 XRootD", "cp 1 dtnkit")


def timelines(
    b: Bench,
    lab: CellLab,
    columns: dict[str, Column],
    names: list[str],
    samples: Samples,
    used: dict[str, list[int]],
    where: Path,
) -> None:
    """One more run of each download column of TIMELINED with ``cp --timeline``: its JSON
    and PNG into *where*, and a table of where its time went against the cell's floor."""
    where.mkdir(parents=True, exist_ok=True)
    cell = lab.cell
    rtt = lab.rtt_ms()
    floor = practical_floor(samples.lists(), rtt, used)
    tag = (
        f"{cell.rtt_ms:g}ms-{cell.rate_bps / 1e9:g}g-{cell.mtu}-"
        f"{'tuned' if cell.tuned else 'untuned'}-{cell.size // MiB}m"
    )
    rows = []
    for name in (n for n in TIMELINED if n in names):
        col = columns[name]
        stem = f"{tag}-{name.replace(' ', '-')}"
        json_file = where / f"{stem}.json"
        argv = (*col.argv[:-2], "--timeline", str(json_file), *col.argv[-2:])
        try:
            got = tools.measure(
                Column(col.name, argv, col.needs, col.kind, col.dest, col.figures),
                lab.dst,
                lab.values,
                cell.size,
            )
            doc = json.loads(json_file.read_text())
            ph = timeline.phases(doc, cell.size)
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
            b.out(f"- {name} --timeline failed: {str(exc)[:200]}")
            continue
        marks = [("floor", floor.seconds)] if floor is not None else []
        timeline.draw(
            doc,
            where / f"{stem}.png",
            f"{cell.label}: {name} ({got.seconds:.2f} s wall)",
            floor=marks,
        )
        start = got.seconds - ph.total_s
        rows.append(
            [
                name,
                f"{got.seconds:.2f}",
                f"{start:.2f}",
                f"{ph.before_s:.3f}",
                f"{ph.setup_s:.3f}",
                f"{ph.data_s:.2f}",
                f"{ph.after_s:.3f}",
                str(ph.streams),
                " ".join(f"{x:.2f}" for x in ph.late_s[:4]) or "-",
                f"{got.seconds / floor.seconds:.2f}" if floor is not None else "-",
            ]
        )
    if rows:
        b.table(
            [
                "copy",
                "wall s",
                "start s",
                "before s",
                "set-up s",
                "data s",
                "after s",
                "conns",
                "late starts s",
                "x floor",
            ],
            rows,
            title=f"Where a copy's time goes ({where}/{tag}-*.png)",
        )
        if floor is not None:
            b.note(
                f"_start: process start to the copy's start (wall - the timeline's span); "
                f"before: to its first connect; set-up: to the first 64 KiB on any "
                f"connection; data: first to last byte (TCP_INFO); after: last byte to "
                f"exit; late starts: when the other connections' data began after the "
                f"first's.  Floor {floor.seconds:.2f} s: iperf3 -P {floor.streams} data "
                f"phase {floor.data_s:.2f} s + 3 RTT._"
            )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=2,
    base="optional",
    needs_root=True,
    tools=TOOLS,
    quick_help="first path, untuned, 64 MiB, one round, a 4 s hold check",
)
