"""The end-to-end tool ``dtnkit-cp`` (the default mover): ``dtnkit cp SRC DST --json``, timed.

It runs the CLI as a subprocess (``python -m dtnkit cp``), inside the probing host's
namespace and the wrapper's cgroup like any other mover, so measuring never imports the
transfer code and the figure is what a user running ``dtnkit cp`` gets.  The rate is bytes /
wall time, process start included, as for any mover; ``dtnkit cp``'s own figures are kept
beside it with a ``mover_`` prefix.

A load (:class:`~dtnkit.measure.probes.load.LoadSpec`, a sweep point): ``streams``
concurrent workers, worker k copying from origin k mod origins its own file, each copy
verified end to end (``--verify block``); with ``upload`` each worker uploads a local file to
its own name instead.  With a duration the load moves data for that long, as iperf3's
``-t``: the duration starts when data first flows (the receiving link's bytes grow: the
copies' start-up, TLS and first request are set-up, ``ToolRun.measure_from_s``), every
worker starts copies until it ends, and the copies still running then are cut (stopped by
PID) and counted with the bytes their destination held (a cut copy has no end and no
error).  With ``bytes`` the workers share the copies of ceil(bytes / file_size) files, each
run to its end.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shlex
import stat
import sys
import time
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.measure.probes.e2e import KIND as E2E_KIND
from dtnkit.measure.probes.e2e import E2ESpec, rate_summary
from dtnkit.measure.probes.load import LoadSpec, Origin
from dtnkit.measure.procs import Procs
from dtnkit.measure.tool import ToolContext, ToolRun, Transfer
from dtnkit.measure.tools.timed import run_timed
from dtnkit.measure.tools.workers import DEADLINE_MESSAGE, DataClock, Runs, in_threads

SOURCE = "dtnkit cp --json"
#: the URL schemes dtnkit cp moves to or from (dav/davs are read as http/https)
CP_SCHEMES = ("http", "https", "dav", "davs")
XROOTD_SCHEMES = ("root", "roots", "xroot", "xroots")


def scheme(text: str) -> str:
    head, sep, _rest = text.partition("://")
    return head.lower() if sep and head.isascii() and head.isalpha() else ""


def check_ends(src: str, dst: str) -> None:
    """BadInput unless one end is a URL dtnkit cp speaks: it moves between a URL and a
    file (or two URLs), and other transfers are the command tool's (``--command``)."""
    schemes = {scheme(src), scheme(dst)}
    if schemes & set(CP_SCHEMES):
        return
    if schemes & set(XROOTD_SCHEMES):
        raise BadInput(
            "dtnkit cp does not speak root://",
            "the default mover, dtnkit cp, moves over HTTP(S)",
            "use the server's HTTP door (davs://host:1094/path), or "
            "--command 'xrdcp -f {src} {dst}'",
        )
    raise BadInput(
        f"no URL in {src!r} -> {dst!r}",
        "the default mover, dtnkit cp, moves to or from an http(s):// or "
        "dav(s):// URL, and both ends are local paths",
        "give a URL as SRC or DST (e.g. http://dtn:8080/f), or "
        "--command 'cp {src} {dst}' for another mover",
    )


def parse_cp_json(text: str) -> dict[str, Any]:
    """``dtnkit cp --json``'s summary line: ``mover_bytes``, ``mover_seconds``,
    ``mover_rate_bps``, ``mover_files`` (what dtnkit cp itself counted and timed)."""
    lines = [line for line in text.splitlines() if line.strip().startswith("{")]
    if not lines:
        raise ParseError(f"{SOURCE}: no JSON summary line")
    try:
        doc = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise ParseError(f"{SOURCE}: bad JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("bytes"), int):
        raise ParseError(f"{SOURCE}: no 'bytes' in the summary")
    out: dict[str, Any] = {"mover_bytes": doc["bytes"]}
    for key in ("seconds", "rate_bps", "files"):
        value = doc.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[f"mover_{key}"] = value
    return out


FAILED = "the transfer with dtnkit cp failed"
#: the options of dtnkit cp that the e2e probe (and diagnose/experiment --e2e) pass on (and
#: --help, which every command has)
PASSED_ON = frozenset({"--ca-file", "--insecure", "--token-file", "--help"})


def cp_failure(proc: process.CompletedProcess[str], by_hand: str) -> DtnkitError:
    """The error of a ``dtnkit cp --json`` that failed: its own what, why and next step (the
    ``{"error": ...}`` document it prints on stdout), one next step, not two.  A next step
    naming a dtnkit cp option the probe does not pass on (:data:`PASSED_ON`) says how to
    give it: as a ``--command``."""
    err: Any = None
    text = proc.stdout
    for start in reversed([m.start() for m in re.finditer(r"(?m)^\{", text)]):
        with contextlib.suppress(ValueError):
            doc = json.JSONDecoder().raw_decode(text, start)[0]
            err = doc.get("error") if isinstance(doc, dict) else None
            break
    if not isinstance(err, dict) or not isinstance(err.get("what"), str):
        return DtnkitError(
            FAILED,
            (proc.stderr or proc.stdout).strip()[-400:] or f"exit status {proc.returncode}",
            f"run `{by_hand}` by hand to see why",
        )
    why = str(err.get("why") or "")
    said = f"{err['what']}: {why}" if why else str(err["what"])
    step = str(err.get("next") or "")
    options = set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", step))
    if not step:
        step = f"run `{by_hand}` by hand to see why"
    elif options - PASSED_ON:
        step += (
            " (dtnkit cp's option: measure with it as --command 'dtnkit cp -f OPTIONS {src} {dst}')"
        )
    return DtnkitError(FAILED, said, step)


class DtnkitCp:
    name = "dtnkit-cp"
    kind = E2E_KIND
    about = "dtnkit cp SRC DST (the default mover), timed"
    package = "dtnkit"

    def can_run(self) -> tuple[bool, list[str]]:
        return True, []  # this Python runs dtnkit: it is installed where the probe runs

    def parse(self, text: str) -> dict[str, Any]:
        return parse_cp_json(text)

    def run(self, host: Host, spec: E2ESpec | LoadSpec, context: ToolContext) -> ToolRun:
        if isinstance(spec, LoadSpec):
            return run_copies(host, spec, context)
        check_ends(spec.src, spec.dst)
        # -f: a probe repeats into the same destination (as `xrdcp -f` in a --command)
        mover = [
            sys.executable,
            "-m",
            "dtnkit",
            "cp",
            spec.src,
            spec.dst,
            "-f",
            "--json",
            *spec.cp_options(),
        ]
        argv = context.argv(host.argv(mover))
        by_hand = shlex.join(["dtnkit", "cp", spec.src, spec.dst, *spec.cp_options()])
        done = run_timed(
            host,
            argv,
            spec,
            failed=FAILED,
            next_step=f"run `{by_hand}` by hand to see why",
            progress=context.progress,
            failure=lambda proc: cp_failure(proc, by_hand),
        )
        try:
            figures = parse_cp_json(done.proc.stdout)
        except ParseError as exc:
            raise DtnkitError(
                "dtnkit cp printed no summary", str(exc), f"run `{by_hand} --format json` by hand"
            ) from None
        size = spec.bytes if spec.bytes is not None else int(figures["mover_bytes"])
        return ToolRun(
            {**rate_summary(size, done.wall), **figures},
            done.proc.stdout + done.proc.stderr,
            done.samples,
            {"command_line": shlex.join(mover)},
        )


def dtnkit_argv() -> list[str]:
    """This dtnkit, as a command (the same interpreter and package)."""
    return [sys.executable, "-m", "dtnkit"]


#: the name pattern of a copy's part file beside ``NAME`` while it is written: dtnkit cp's
#: (``.NAME.dtnkit-part``) and dtnkit serve's for an upload (``.NAME.dtnkit-part-HEX``);
#: measure never imports the transfer code, tests/measure check the two agree
PART_FILES = ".{name}.dtnkit-part*"


def last_json(out: str) -> dict[str, Any]:
    """The last JSON object ``dtnkit cp --format json`` printed (its summary, or its
    ``{"error": ...}``); {} when there is none."""
    for line in reversed(out.strip().splitlines()):
        with contextlib.suppress(json.JSONDecodeError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                return doc
    with contextlib.suppress(json.JSONDecodeError):
        doc = json.loads(out)
        if isinstance(doc, dict):
            return doc
    return {}


class Copies:
    """A load of ``dtnkit cp`` downloads (or uploads): ``streams`` workers (see the
    module's text)."""

    @staticmethod
    def wanted(spec: LoadSpec) -> int | None:
        """Copies to make in all (bytes mode), None: as many as fit in the duration."""
        if spec.bytes is None:
            return None
        return max(spec.streams, math.ceil(spec.bytes / spec.file_size))

    @staticmethod
    def argv(
        origin: Origin, k: int, copy: int, spec: LoadSpec, workdir: Path
    ) -> tuple[list[str], Path]:
        name = (
            origin.files[(k // len(spec.origins)) % len(origin.files)] if origin.files else f"w{k}"
        )
        base = [*dtnkit_argv(), "cp", "--format", "json", "--streams", "1", "-f", "--retries", "0"]
        if origin.ca_file is not None:
            base += ["--ca-file", str(origin.ca_file)]
        if spec.upload:
            if spec.source is None:
                raise BadInput(
                    "no file to upload",
                    "a load of uploads reads a local file",
                    "give the load its source",
                )
            local = spec.source
            return [*base, str(local), f"{origin.url_base}/up-w{k}.bin"], local
        dest = workdir / f"w{k}-{copy}"
        return [*base, f"{origin.url_base}/{name.lstrip('/')}", str(dest)], dest

    @staticmethod
    def held(spec: LoadSpec, origin: Origin, k: int, dest: Path, size: int) -> int | None:
        """Bytes the destination of worker k's copy in flight holds (None: not known): a
        download's part file, an upload's part file on a dtnkit serve origin, counted in
        the blocks the filesystem allocated (the part file is made whole-sized and sparse)."""
        if spec.upload:
            if origin.kind != "dtnkit" or origin.root is None:
                return None
            files = list(origin.root.glob(PART_FILES.format(name=f"up-w{k}.bin")))
        else:
            files = list(dest.parent.glob(PART_FILES.format(name=dest.name)))
        total = 0
        for f in files:
            with contextlib.suppress(OSError):
                st = f.lstat()
                if stat.S_ISREG(st.st_mode):
                    total += st.st_blocks * 512
        return min(total, size)

    def run(self, host: Host, spec: LoadSpec, context: ToolContext) -> ToolRun:
        """Run the load to its end or its deadline (see the module's text)."""
        deadline = (
            context.deadline
            if context.deadline is not None
            else time.monotonic() + spec.time_limit_s
        )
        if context.workdir is None:
            raise BadInput(
                "no directory for the copies",
                "a load of copies writes its downloads in a directory of its own",
                "give the run a workdir",
            )
        workdir = context.workdir
        procs = context.procs or Procs()
        runs = Runs(procs, host, workdir, deadline, time.monotonic())
        transfers: list[Transfer] = []
        total = self.wanted(spec)
        counter = {"next": 0}
        cut_ends: list[float] = []  # when each copy cut at the duration had exited
        clock = DataClock(
            runs, None if total is not None else spec.duration_s, context.received_bytes
        )

        def take() -> int | None:
            with runs.lock:
                if runs.timed_out:
                    return None
                if total is not None:
                    if counter["next"] >= total:
                        return None
                elif counter["next"] >= spec.streams and clock.over():
                    return None
                counter["next"] += 1
                return counter["next"] - 1

        def worker(k: int) -> None:
            origin = spec.origins[k % len(spec.origins)]
            while (copy := take()) is not None:
                argv, path = self.argv(origin, k, copy, spec, workdir)
                held = [0]

                def cut(origin: Origin = origin, path: Path = path, held: list[int] = held) -> bool:
                    if not clock.over():
                        return False
                    held[0] = self.held(spec, origin, k, path, spec.file_size) or 0
                    return True

                code, out, err, start, end, was_cut = runs.run_until(
                    argv,
                    {"DTNKIT_TOKEN": origin.token} if origin.token else {},
                    cut if clock.duration is not None else None,
                )
                doc = last_json(out)
                error = ""
                if was_cut:
                    pass  # cut at the duration: no error, no end
                elif code is None:
                    error = "stopped at the time limit"
                elif code != 0:
                    msg = doc.get("error")
                    error = (
                        (
                            msg.get("what", "") + ": " + msg.get("why", "")
                            if isinstance(msg, dict)
                            else ""
                        )
                        or err.strip()[-300:]
                        or f"exit status {code}"
                    )
                if was_cut:
                    nbytes = held[0]
                    with runs.lock:
                        cut_ends.append(end)
                else:
                    nbytes = int(doc.get("bytes") or doc.get("size") or 0) if not error else 0
                    if not nbytes and not error:
                        nbytes = spec.file_size
                    if not error:  # data flowed by the time this copy's own clock started
                        seconds = doc.get("seconds")
                        clock.seen(
                            max(start, end - seconds)
                            if isinstance(seconds, int | float) and not isinstance(seconds, bool)
                            else end
                        )
                verified = not error and not was_cut and str(doc.get("verify", "block")) != "none"
                with runs.lock:
                    transfers.append(
                        Transfer(start, None if error or was_cut else end, nbytes, verified, error)
                    )
                if not spec.upload and not was_cut:  # a cut copy's part file goes with the
                    with contextlib.suppress(OSError):  # point's directory, after the point
                        path.unlink()
                if error or was_cut:
                    return

        try:
            with clock.watching():
                in_threads(spec.streams, worker)
        finally:
            if context.procs is None:
                procs.stop_all()
        transfers.sort(key=lambda t: t.start_s)
        failed = ""
        bad = [t for t in transfers if t.error]
        if runs.timed_out:
            failed = DEADLINE_MESSAGE.format(limit=spec.time_limit_s)
        elif bad:
            failed = f"{len(bad)} of {len(transfers)} copies failed: {bad[0].error}"
        summary: dict[str, Any] = {}
        if clock.duration is not None:
            summary["cut_copies"] = len(cut_ends)
            summary["data_from"] = clock.how  # link, first copy or tool start
            over = clock.end()
            if cut_ends and over is not None:  # from the end of the duration to the last exit
                summary["stop_s"] = round(max(cut_ends) - over, 6)
        return ToolRun(
            summary,
            runs.output(),
            transfers=tuple(transfers),
            failed=failed,
            measure_from_s=clock.data_from if not failed else None,
            measure_until_s=clock.end() if not failed else None,
        )


def run_copies(host: Host, spec: LoadSpec, context: ToolContext) -> ToolRun:
    """A load of ``dtnkit cp`` copies (see the module's text)."""
    return Copies().run(host, spec, context)
