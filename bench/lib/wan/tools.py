"""The columns of a WAN table: each a tool's command, run on the dst end host of a cell, as
data (``Column``), and how one run of it is timed (``measure``).

A column's argv is a template: ``{name}`` is filled from the cell's values (``CellLab.values``:
the servers' URLs and roots, the CA, the file, the output directory; ``{auto_streams}`` once a
``cp auto`` has run).  ``needs`` names the servers it talks to, so a cell starts only those.
Downloads run on dst from servers on src (the data crosses the path from src to dst); uploads
go back to src; TPC pulls are made by a server on dst from XRootD on src."""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dtnkit.lab.path import LabHost

#: servers a column may need (CellLab starts them)
SERVERS = (
    "xrootd-src",
    "xrootd-dst",
    "serve-src",
    "serve-dst",
    "serve-src-base",
    "serve-dst-base",
    "iperf3-src",
)
KINDS = ("wall", "tpc", "iperf3")
#: figures a run records beside its own time, named "COLUMN SUFFIX"
DERIVED = (" wall", " copy phase")
#: the hold check (:func:`hold_check`): streams enough to fill the path whatever the ends'
#: buffers (16 x Debian's 4 MiB send buffer is twice 50 ms x 5 Gbit/s), and how long it sends
#: (at least HOLD_MIN_S, and HOLD_RTTS round trips on a long path), so that its second half is
#: past slow start on any lab path (at 50 ms and 5 Gbit/s: within 0.5 s)
HOLD_STREAMS = 16
HOLD_MIN_S = 8
HOLD_RTTS = 40
#: runs of the check; the path's capacity is the best of them (one run reads up to 3 % low
#: now and then: TCP's own dips, other load)
HOLD_RUNS = 2

CP = (
    "{python}",
    "-m",
    "dtnkit",
    "cp",
    "--ca-file",
    "{ca}",
    "--checksum",
    "adler32",
    "--token",
    "rw-token",
)
BASE_ENV = ("env", "PYTHONPATH={base_src}")

TPC_SCRIPT = """
import sys, time
from dtnkit.transfer.client.tpc import request_copy
dst, src, token, streams, ca = sys.argv[1:6]
t0 = time.monotonic()
res = request_copy(dst, source=src, token=token or None, streams=int(streams), timeout=600,
                   checksum="adler32", ca_file=ca)
elapsed = time.monotonic() - t0
print("ELAPSED", elapsed, "OK" if res.ok else "FAIL", res.final)
"""


@dataclass(frozen=True)
class Column:
    """One measurement of a cell."""

    name: str
    argv: tuple[str, ...]
    needs: frozenset[str]
    #: wall: the command's wall time, as a user runs it (process start included);
    #: tpc: the COPY request timed inside; iperf3: its data phase (its wall time beside it)
    kind: str = "wall"
    #: the file it must leave (checked for the cell's size, removed after), "" for none
    dest: str = "{out}/{file}"
    #: figures it records beside its time: "copy phase" (cp's JSON seconds, curl's
    #: time_total: the copy inside the tool, without its start-up), "streams" (the streams a
    #: cp auto used, for "iperf3 auto")
    figures: tuple[str, ...] = ()


def cp(n: str, server: str, *, base: bool = False, default: bool = False) -> Column:
    """Verified ``dtnkit cp`` from XRootD or dtnkit serve on src, ``--format json`` (its copy
    phase and streams); *base*: the --base tree's."""
    src = "{xrootd_src}{file}" if server == "XRootD" else "{serve_src}{file}"
    need = "xrootd-src" if server == "XRootD" else "serve-src"
    streams = () if default else ("--streams", n)
    name = (
        f"cp default({n}) {server}"
        if default
        else f"cp {n} base {server}"
        if base
        else f"cp {n} {server}"
    )
    figures = ("copy phase",) if n == "1" else ("streams",) if n == "auto" and not base else ()
    argv = (*CP[:4], "--format", "json", *CP[4:], *streams, src, "{out}/{file}")
    return Column(name, (*BASE_ENV, *argv) if base else argv, frozenset({need}), figures=figures)


def upload(n: str, *, base: bool = False) -> Column:
    """``dtnkit cp`` of the file on dst into dtnkit serve on src (the --base tree's client
    into the --base tree's serve)."""
    if base:
        return Column(
            f"upload {n} base",
            (*BASE_ENV, *CP, "--streams", n, "{src_file}", "{serve_src_base}up.bin"),
            frozenset({"serve-src-base"}),
            dest="{serve_src_base_root}/up.bin",
        )
    return Column(
        f"upload {n}",
        (*CP, "--streams", n, "{src_file}", "{serve_src}up.bin"),
        frozenset({"serve-src"}),
        dest="{serve_src_root}/up.bin",
    )


def curl(server: str) -> Column:
    """Unverified curl, one stream."""
    src = "{xrootd_src}{file}" if server == "XRootD" else "{serve_src}{file}"
    return Column(
        f"curl {server}",
        (
            "curl",
            "-sS",
            "-f",
            "--cacert",
            "{ca}",
            "-H",
            "Authorization: Bearer ro-token",
            "-o",
            "{out}/{file}",
            "-w",
            "%{{time_total}}",
            src,
        ),
        frozenset({"xrootd-src" if server == "XRootD" else "serve-src"}),
        figures=("copy phase",),
    )


GFAL = Column(
    "gfal-copy -K adler32",
    (
        "env",
        "X509_CERT_DIR={x509}",
        "GFAL_PYTHONBIN={gfal_python}",
        "gfal-copy",
        "-f",
        "-K",
        "adler32",
        "{xrootd_src}{file}",
        "file://{out}/{file}",
    ),
    frozenset({"xrootd-src"}),
)
XRDCP_S8 = Column(
    "xrdcp -S 8",
    ("xrdcp", "-f", "-s", "-S", "8", "{xroot_src}/{file}", "{out}/{file}"),
    frozenset({"xrootd-src"}),
)
XRDCP_CKSUM = Column(
    "xrdcp --cksum adler32:source",
    ("xrdcp", "-f", "-s", "--cksum", "adler32:source", "{xroot_src}/{file}", "{out}/{file}"),
    frozenset({"xrootd-src"}),
)


def tpc(active: str, streams: str, *, base: bool = False) -> Column:
    """An HTTP-TPC pull from XRootD on src, made by *active* (dtnkit serve or XRootD) on dst,
    verified with adler32; the COPY request timed inside the namespace."""
    if active == "dtnkit":
        serve = "serve_dst_base" if base else "serve_dst"
        dst, token, dest = f"{{{serve}}}tpc.bin", "rw-token", f"{{{serve}_root}}/tpc.bin"
        needs = {serve.replace("_", "-")}
    else:
        dst, token, dest = "{xrootd_dst}tpc.bin", "", "{xrootd_dst_root}/tpc.bin"
        needs = {"xrootd-dst"}
    name = f"tpc {active}{' base' if base else ''} {streams}"
    return Column(
        name,
        ("{python}", "-c", TPC_SCRIPT, dst, "{xrootd_src}{file}", token, streams, "{ca}"),
        frozenset({"xrootd-src", *needs}),
        kind="tpc",
        dest=dest,
    )


def iperf3(p: str) -> Column:
    """``iperf3 -R -P p -n SIZE`` from dst against ``iperf3 -s`` on src (src sends, as in a
    download); ``auto``: with the streams the last ``cp auto`` used."""
    count = "{auto_streams}" if p == "auto" else p
    return Column(
        f"iperf3 {p}",
        (
            "iperf3",
            "-c",
            "{src_addr}",
            "-p",
            "{iperf3_port}",
            "-R",
            "-P",
            count,
            "-n",
            "{size}",
            "-i",
            "0.1",
            "--json",
        ),
        frozenset({"iperf3-src"}),
        kind="iperf3",
        dest="",
    )


def fill(template: str, values: Mapping[str, object]) -> str:
    try:
        return template.format_map(values)
    except KeyError as exc:
        if exc.args[0] == "auto_streams":
            raise RuntimeError("no `cp auto` has told how many streams it used yet") from None
        raise RuntimeError(f"no value for {{{exc.args[0]}}} in this cell") from None


@dataclass
class Outcome:
    seconds: float
    side: dict[str, float] = field(default_factory=dict)  # "NAME copy phase": s, ...
    streams: int | None = None  # what a cp auto used


def measure(col: Column, host: LabHost, values: Mapping[str, object], size: int) -> Outcome:
    """One run of *col* on *host*; RuntimeError when it fails or leaves the wrong size."""
    argv = [fill(a, values) for a in col.argv]
    dest = Path(fill(col.dest, values)) if col.dest else None
    try:
        t0 = time.monotonic()
        proc = host.run(argv, check=False, timeout=900)
        wall = time.monotonic() - t0
        if col.kind == "iperf3":
            return _iperf3(proc, wall, size, col.name)
        if col.kind == "tpc":
            m = re.search(r"ELAPSED (\S+) (OK|FAIL) ?(.*)", proc.stdout)
            if not m or m.group(2) != "OK":
                raise RuntimeError((m.group(3) if m else proc.stderr.strip()[-300:]) or "?")
            wall = float(m.group(1))
        elif proc.returncode != 0:
            raise RuntimeError(
                f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
            )
        got = dest.stat().st_size if dest is not None and dest.exists() else -1
        if dest is not None and got != size:
            raise RuntimeError(f"{dest.name} has {got} bytes, not {size}")
        out = Outcome(wall)
        if "-w" in argv and "copy phase" in col.figures:  # curl's own time_total
            out.side[f"{col.name} copy phase"] = float(proc.stdout.strip())
        elif "--format" in argv and proc.stdout.strip():
            doc = json.loads(proc.stdout)
            if "copy phase" in col.figures:
                out.side[f"{col.name} copy phase"] = float(doc["seconds"])
            if "streams" in col.figures:
                out.streams = int(doc["streams"])
        return out
    finally:
        if dest is not None:
            with contextlib.suppress(FileNotFoundError):
                dest.unlink()


def _iperf3(proc: Any, wall: float, size: int, name: str) -> Outcome:
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = {}
    if proc.returncode != 0 or "error" in doc or "end" not in doc:
        raise RuntimeError(
            f"exit {proc.returncode}: {doc.get('error') or (proc.stderr or proc.stdout)[-300:]}"
        )
    got = doc["end"].get("sum_received", {})
    if int(got.get("bytes", 0)) < size:
        raise RuntimeError(f"iperf3 received {got.get('bytes')} bytes")
    return Outcome(float(got["seconds"]), {f"{name} wall": wall})


def hold_seconds(rtt_ms: float | None) -> int:
    """How long the hold check sends on a path of *rtt_ms* (whole seconds, as iperf3 -t)."""
    return max(HOLD_MIN_S, math.ceil(HOLD_RTTS * (rtt_ms or 0) / 1000))


def second_half_bps(doc: Mapping[str, Any]) -> float:
    """A timed iperf3 run's rate (bit/s) over the second half of its data phase, slow start
    over; ValueError when its JSON holds no such intervals."""
    total = float(doc["end"]["sum_received"]["seconds"])
    later = [i["sum"] for i in doc.get("intervals", []) if float(i["sum"]["start"]) >= total / 2]
    seconds = sum(float(i["seconds"]) for i in later)
    moved = sum(float(i["bytes"]) for i in later)
    if seconds <= 0 or moved <= 0:
        raise ValueError("no data in the second half of the run")
    return moved * 8 / seconds


def hold_check(host: LabHost, values: Mapping[str, object], seconds: int) -> float:
    """What the path carries once slow start is over (bit/s): ``iperf3 -R -P 16 -t SECONDS``
    from dst against ``iperf3 -s`` on src, its second half (:func:`second_half_bps`).  A
    file-sized run cannot tell it: at 5 Gbit/s and 50 ms, 256 MiB is sent in 8 round trips,
    most of them in slow start (its second half read 77 % of the cap where this check reads
    99 %).  RuntimeError when iperf3 fails."""
    argv = [
        "iperf3",
        "-c",
        fill("{src_addr}", values),
        "-p",
        fill("{iperf3_port}", values),
        "-R",
        "-P",
        str(HOLD_STREAMS),
        "-t",
        str(seconds),
        "-i",
        "0.1",
        "--json",
    ]
    proc = host.run(argv, check=False, timeout=seconds + 120)
    try:
        doc = json.loads(proc.stdout)
        if proc.returncode == 0 and "error" not in doc:
            return second_half_bps(doc)
    except (ValueError, KeyError, TypeError):
        doc = {}
    raise RuntimeError(
        f"hold check: exit {proc.returncode}: "
        f"{doc.get('error') or (proc.stderr or proc.stdout)[-300:]}"
    )
