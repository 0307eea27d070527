"""The end-to-end tool ``dtnkit-cp`` (the default mover): ``dtnkit cp SRC DST --json``, timed.

It runs the CLI as a subprocess (``python -m dtnkit cp``), inside the probing host's
namespace and the wrapper's cgroup like any other mover, so measuring never imports the
transfer code and the figure is what a user running ``dtnkit cp`` gets.  The rate is bytes /
wall time, process start included, as for any mover; ``dtnkit cp``'s own figures are kept
beside it with a ``mover_`` prefix.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import sys
from typing import Any

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.measure.probes.e2e import KIND as E2E_KIND
from dtnkit.measure.probes.e2e import E2ESpec, rate_summary
from dtnkit.measure.tool import Context, ToolRun
from dtnkit.measure.tools.timed import run_timed

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
        raise BadInput("dtnkit cp does not speak root://",
                       "the default mover, dtnkit cp, moves over HTTP(S)",
                       "use the server's HTTP door (davs://host:1094/path), or "
                       "--command 'xrdcp -f {src} {dst}'")
    raise BadInput(f"no URL in {src!r} -> {dst!r}",
                   "the default mover, dtnkit cp, moves to or from an http(s):// or "
                   "dav(s):// URL, and both ends are local paths",
                   "give a URL as SRC or DST (e.g. http://dtn:8080/f), or "
                   "--command 'cp {src} {dst}' for another mover")


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
        return DtnkitError(FAILED, (proc.stderr or proc.stdout).strip()[-400:] or
                           f"exit status {proc.returncode}",
                           f"run `{by_hand}` by hand to see why")
    why = str(err.get("why") or "")
    said = f"{err['what']}: {why}" if why else str(err["what"])
    step = str(err.get("next") or "")
    options = set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", step))
    if not step:
        step = f"run `{by_hand}` by hand to see why"
    elif options - PASSED_ON:
        step += (" (dtnkit cp's option: measure with it as --command 'dtnkit cp -f OPTIONS "
                 "{src} {dst}')")
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

    def run(self, host: Host, spec: E2ESpec, context: Context) -> ToolRun:
        check_ends(spec.src, spec.dst)
        # -f: a probe repeats into the same destination (as `xrdcp -f` in a --command)
        mover = [sys.executable, "-m", "dtnkit", "cp", spec.src, spec.dst, "-f", "--json",
                 *spec.cp_options()]
        argv = context.argv(host.argv(mover))
        by_hand = shlex.join(["dtnkit", "cp", spec.src, spec.dst, *spec.cp_options()])
        done = run_timed(host, argv, spec, failed=FAILED,
                         next_step=f"run `{by_hand}` by hand to see why",
                         progress=context.progress,
                         failure=lambda proc: cp_failure(proc, by_hand))
        try:
            figures = parse_cp_json(done.proc.stdout)
        except ParseError as exc:
            raise DtnkitError("dtnkit cp printed no summary", str(exc),
                              f"run `{by_hand} --format json` by hand") from None
        size = spec.bytes if spec.bytes is not None else int(figures["mover_bytes"])
        return ToolRun({**rate_summary(size, done.wall), **figures},
                       done.proc.stdout + done.proc.stderr, done.samples,
                       {"command_line": shlex.join(mover)})
