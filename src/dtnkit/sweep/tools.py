"""The runner's own tools (:class:`~dtnkit.sweep.model.Tool`): ``iperf3``, ``dtnkit-cp``
(downloads), ``dtnkit-cp-upload`` and ``command:NAME`` (a template).

- **iperf3**: one client per origin in the client's namespace, ``-R`` (the origin sends, as
  a download), the point's ``streams`` spread over the origins as ``-P``; each client is
  one transfer.
- **dtnkit-cp**: ``streams`` concurrent workers, worker k downloading from origin
  k mod origins its own file, each copy verified end to end (``--verify block``).  With a
  duration the point moves data for that long, as iperf3's ``-t``: the duration starts when
  data first flows (the receiving link's bytes grow: the copies' start-up, TLS and first
  request are set-up, ``ToolRun.measure_from_s``), every worker starts copies until it ends,
  and the copies still running then are cut (stopped by PID) and counted with the bytes
  their destination held (a cut copy has no end and no error).  With ``bytes`` the workers
  share the copies of ceil(bytes / file_size) files, each run to its end.
- **dtnkit-cp-upload**: the same, uploading a local file to each worker's own name.
- **command:NAME**: ``streams`` concurrent runs of the template in the client's namespace,
  without a shell (the template is split into words first, then each word is filled in).

Every tool stops what it started at ``env.deadline`` and says so in ``ToolRun.failed``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dtnkit.sweep.grid import Point
from dtnkit.sweep.model import MAX_RAW_BYTES, Origin, PointEnv, ToolRun, Transfer
from dtnkit.sweep.procs import Procs
from dtnkit.transfer.client.journals import part_path
from dtnkit.transfer.paths import PART_MARK

#: how often a copy that may be cut at the duration is looked at (and data's start watched)
CUT_POLL_S = 0.05
#: bytes the receiving link must take before data counts as flowing: more than the TLS
#: handshakes and HTTP heads of a point's first requests
DATA_FLOWS_BYTES = 64 * 1024
DEADLINE_MESSAGE = "the point's time limit ({limit:g} s) passed: its processes were stopped"


def dtnkit_argv() -> list[str]:
    """This dtnkit, as a command (the same interpreter and package)."""
    return [sys.executable, "-m", "dtnkit"]


def _tail(text: str, limit: int = MAX_RAW_BYTES) -> str:
    data = text.encode("utf-8", "replace")
    return data[-limit:].decode("utf-8", "replace") if len(data) > limit else text


def split_streams(streams: int, origins: int) -> list[int]:
    """``streams`` spread over ``origins`` as evenly as can be (the first get one more)."""
    return [streams // origins + (1 if i < streams % origins else 0) for i in range(origins)]


class _Runs:
    """Processes of one point's tool: run, wait within the deadline, collect output."""

    def __init__(self, procs: Procs, env: PointEnv, t0: float) -> None:
        self.procs, self.env, self.t0 = procs, env, t0
        self.raw: list[str] = []
        self.timed_out = False
        self.lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None
            ) -> tuple[int | None, str, str, float, float]:
        """(exit status or None when stopped at the deadline, stdout, stderr, start, end).
        ``env``: variables added to this process's environment (a token: never in argv,
        where ``ps`` and the stored raw output would show it)."""
        code, out, err, start, end, _cut = self.run_until(argv, env)
        return code, out, err, start, end

    def run_until(self, argv: Sequence[str], env: dict[str, str] | None = None,
                  cut: Callable[[], bool] | None = None
                  ) -> tuple[int | None, str, str, float, float, bool]:
        """:meth:`run`, and the process is stopped as soon as ``cut()`` (asked every
        :data:`CUT_POLL_S`) says so: then the status is None and the last item True."""
        start = self.now()
        if env is not None:  # the caller's own tokens never reach a lab server
            env = {**{k: v for k, v in os.environ.items()
                      if k not in ("DTNKIT_TOKEN", "BEARER_TOKEN")}, **env}
        proc = self.procs.start(argv, host=self.env.client, cwd=self.env.workdir, env=env)
        was_cut = False
        try:
            while True:
                left = max(0.0, self.env.deadline - time.monotonic())
                try:
                    out, err = proc.communicate(
                        timeout=left if cut is None else min(left, CUT_POLL_S))
                    code: int | None = proc.returncode
                    break
                except subprocess.TimeoutExpired:  # communicate keeps what it read so far
                    late = time.monotonic() >= self.env.deadline
                    if not late and (cut is None or not cut()):
                        continue
                    self.procs.stop(proc)
                    out, err = proc.communicate()
                    code = None
                    if late:
                        with self.lock:
                            self.timed_out = True
                    else:
                        was_cut = True
                    break
        finally:
            self.procs.forget(proc)
        end = self.now()
        with self.lock:
            self.raw.append(f"$ {shlex.join(argv)}\n{_tail(out, 4096)}{_tail(err, 4096)}"
                            + ("(cut at the duration)\n" if was_cut else ""))
        return code, out, err, start, end, was_cut


def _in_threads(n: int, fn: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def body(k: int) -> None:
        try:
            fn(k)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


#: tries of an iperf3 client its server refuses at once (the server re-listens between tests)
REFUSED_TRIES = 5


@dataclass
class Iperf3Tool:
    procs: Procs
    name: str = "iperf3"

    def servers(self, point: Point) -> tuple[str | None, str | None]:
        return "iperf3", None

    def run(self, env: PointEnv) -> ToolRun:
        point = env.point
        shares = split_streams(point.streams, len(env.origins))
        runs = _Runs(self.procs, env, time.monotonic())
        results: dict[int, tuple[int | None, str, str, float, float]] = {}

        def one(k: int) -> None:
            origin, n = env.origins[k], shares[k]
            argv = ["iperf3", "-c", origin.host.address, "-p", str(origin.port), "-R", "-J",
                    "-P", str(n), "--connect-timeout", "5000"]
            if point.bytes is not None:
                argv += ["-n", str(max(1, point.bytes * n // point.streams))]
            else:
                argv += ["-t", f"{point.duration_s:g}"]
            for attempt in range(REFUSED_TRIES):
                res = runs.run(argv)
                _code, out, _err, start, end = res
                # `iperf3 -s` closes and reopens its listening socket between tests: a
                # refusal straight after the previous point is that window, not an error
                # (iperf3 3.12 -J exits 0 even then: its JSON says "Connection refused")
                if ("Connection refused" not in out or end - start > 1.0
                        or time.monotonic() > env.deadline or attempt == REFUSED_TRIES - 1):
                    break
                time.sleep(0.05 * (attempt + 1))  # bounded: at most 0.5 s over all tries
            results[k] = res

        _in_threads(sum(1 for s in shares if s), one)
        transfers: list[Transfer] = []
        retrans: int | None = 0
        failed = ""
        data_from: list[float] = []
        for k in sorted(results):
            code, out, err, start, end = results[k]
            nbytes, error, r = 0, "", None
            try:
                doc = json.loads(out)
                end_doc = doc.get("end", {})
                nbytes = int(end_doc.get("sum_received", {}).get("bytes", 0))
                # the test ran its last `seconds` before the client's exit (and the results
                # exchange): everything before that was connecting its streams
                seconds = float(end_doc.get("sum_received", {}).get("seconds", 0) or 0)
                if 0 < seconds <= end - start:
                    data_from.append(end - seconds)
                r = end_doc.get("sum_sent", {}).get("retransmits")
                error = str(doc.get("error", ""))
            except (json.JSONDecodeError, TypeError, ValueError, AttributeError):
                error = (err or out).strip()[-300:] or f"exit status {code}"
            if code != 0 and not error:
                error = f"exit status {code}"
            if code is None:
                error = "stopped at the time limit"
            retrans = retrans + int(r) if retrans is not None and r is not None else None
            transfers.append(Transfer(start, end if not error else None, nbytes, False, error))
            if error and not failed:
                failed = f"iperf3 to origin {k}: {error}"
        if runs.timed_out:
            failed = DEADLINE_MESSAGE.format(limit=point.time_limit_s)
        return ToolRun(tuple(transfers), _tail("\n".join(runs.raw)), failed, retrans,
                       measure_from_s=max(data_from) if data_from and not failed else None)


def _cp_json(out: str) -> dict[str, Any]:
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


@dataclass
class CpTool:
    """``dtnkit cp`` downloads (``upload=False``) or uploads, ``streams`` workers."""

    procs: Procs
    source_file: Callable[[int], Path]  # a local file of the given size (uploads)
    upload: bool = False
    name: str = "dtnkit-cp"

    def servers(self, point: Point) -> tuple[str | None, str | None]:
        return point.server, None

    def _copies(self, point: Point) -> int | None:
        """Copies to make in all (bytes mode), None: as many as fit in the duration."""
        if point.bytes is None:
            return None
        return max(point.streams, math.ceil(point.bytes / point.file_size))

    def _argv(self, origin: Origin, k: int, copy: int, env: PointEnv) -> tuple[list[str], Path]:
        name = origin.files[(k // len(env.origins)) % len(origin.files)] if origin.files \
            else f"w{k}"
        base = [*dtnkit_argv(), "cp", "--format", "json", "--streams", "1", "-f",
                "--retries", "0"]
        if origin.ca_file is not None:
            base += ["--ca-file", str(origin.ca_file)]
        if self.upload:
            local = self.source_file(env.point.file_size)
            return [*base, str(local), f"{origin.url_base}/up-w{k}.bin"], local
        dest = env.workdir / f"w{k}-{copy}"
        return [*base, f"{origin.url_base}/{name.lstrip('/')}", str(dest)], dest

    def _held(self, origin: Origin, k: int, dest: Path, size: int) -> int | None:
        """Bytes the destination of worker k's copy in flight holds (None: not known): a
        download's part file, an upload's part file on a dtnkit serve origin, counted in
        the blocks the filesystem allocated (the part file is made whole-sized and sparse)."""
        if self.upload:
            if origin.kind != "dtnkit" or origin.root is None:
                return None
            files = list(origin.root.glob(f".up-w{k}.bin{PART_MARK}*"))
        else:
            files = [part_path(dest)]
        total = 0
        for f in files:
            with contextlib.suppress(OSError):
                st = f.lstat()
                if stat.S_ISREG(st.st_mode):
                    total += st.st_blocks * 512
        return min(total, size)

    def run(self, env: PointEnv) -> ToolRun:
        point = env.point
        runs = _Runs(self.procs, env, time.monotonic())
        transfers: list[Transfer] = []
        total = self._copies(point)
        counter = {"next": 0}
        cut_ends: list[float] = []  # when each copy cut at the duration had exited
        clock = _DataClock(runs, None if total is not None else point.duration_s,
                           env.received_bytes)

        def take() -> int | None:
            with runs.lock:
                if runs.timed_out:
                    return None
                if total is not None:
                    if counter["next"] >= total:
                        return None
                elif counter["next"] >= point.streams and clock.over():
                    return None
                counter["next"] += 1
                return counter["next"] - 1

        def worker(k: int) -> None:
            origin = env.origins[k % len(env.origins)]
            while (copy := take()) is not None:
                argv, path = self._argv(origin, k, copy, env)
                held = [0]

                def cut(origin: Origin = origin, path: Path = path, held: list[int] = held
                        ) -> bool:
                    if not clock.over():
                        return False
                    held[0] = self._held(origin, k, path, point.file_size) or 0
                    return True

                code, out, err, start, end, was_cut = runs.run_until(
                    argv, {"DTNKIT_TOKEN": origin.token} if origin.token else {},
                    cut if clock.duration is not None else None)
                doc = _cp_json(out)
                error = ""
                if was_cut:
                    pass  # cut at the duration: no error, no end
                elif code is None:
                    error = "stopped at the time limit"
                elif code != 0:
                    msg = doc.get("error")
                    error = (msg.get("what", "") + ": " + msg.get("why", "")
                             if isinstance(msg, dict) else "") or err.strip()[-300:] \
                        or f"exit status {code}"
                if was_cut:
                    nbytes = held[0]
                    with runs.lock:
                        cut_ends.append(end)
                else:
                    nbytes = int(doc.get("bytes") or doc.get("size") or 0) if not error else 0
                    if not nbytes and not error:
                        nbytes = point.file_size
                    if not error:  # data flowed by the time this copy's own clock started
                        seconds = doc.get("seconds")
                        clock.seen(max(start, end - seconds) if isinstance(seconds, int | float)
                                   and not isinstance(seconds, bool) else end)
                verified = not error and not was_cut and str(doc.get("verify", "block")) != "none"
                with runs.lock:
                    transfers.append(Transfer(start, None if error or was_cut else end, nbytes,
                                              verified, error))
                if not self.upload and not was_cut:  # a cut copy's part file goes with the
                    with contextlib.suppress(OSError):  # point's directory, after the point
                        path.unlink()
                if error or was_cut:
                    return

        with clock.watching():
            _in_threads(point.streams, worker)
        transfers.sort(key=lambda t: t.start_s)
        failed = ""
        bad = [t for t in transfers if t.error]
        if runs.timed_out:
            failed = DEADLINE_MESSAGE.format(limit=point.time_limit_s)
        elif bad:
            failed = f"{len(bad)} of {len(transfers)} copies failed: {bad[0].error}"
        extra: dict[str, object] = {}
        if clock.duration is not None:
            extra["cut_copies"] = len(cut_ends)
            extra["data_from"] = clock.how  # link, first copy or tool start
            over = clock.end()
            if cut_ends and over is not None:  # from the end of the duration to the last exit
                extra["stop_s"] = round(max(cut_ends) - over, 6)
        return ToolRun(tuple(transfers), _tail("\n".join(runs.raw)), failed,
                       measure_from_s=clock.data_from if not failed else None,
                       measure_until_s=clock.end() if not failed else None, extra=extra)


class _DataClock:
    """When a point's data started to flow, and so when its duration is over.

    The start is the first moment the receiving link has taken :data:`DATA_FLOWS_BYTES`
    more than at the tool's start (watched every :data:`CUT_POLL_S` by one thread), or the
    start of a completed copy's own transfer, whichever comes first.  Without the link's
    counter (``received`` None, or unreadable) the duration counts from the tool's start.
    ``duration`` None: nothing is cut (``bytes`` points run every copy to its end)."""

    def __init__(self, runs: _Runs, duration: float | None,
                 received: Callable[[], int | None] | None) -> None:
        self.runs, self.duration, self.received = runs, duration, received
        self.data_from: float | None = None
        self.how = "link" if received is not None else "tool start"
        self._done = threading.Event()

    def seen(self, t: float) -> None:
        """A copy completed: its data flowed from ``t`` on (the watch can stop)."""
        with self.runs.lock:
            if self.data_from is None or t < self.data_from:
                self.data_from, self.how = t, "first copy"
        self._done.set()

    def end(self) -> float | None:
        """When the duration is over, from the tool's start (None: not known yet, or no
        duration)."""
        if self.duration is None:
            return None
        if self.data_from is not None:
            return self.data_from + self.duration
        return None if self.received is not None else self.duration

    def over(self) -> bool:
        """The duration has passed since data started to flow (never without a duration)."""
        end = self.end()
        return end is not None and self.runs.now() >= end

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        if self.duration is None or self.received is None:
            yield
            return
        base = self._read()
        thread = threading.Thread(target=self._watch, args=(base,), daemon=True,
                                  name="dtnkit-sweep-data-clock")
        thread.start()
        try:
            yield
        finally:
            self._done.set()
            thread.join()

    def _read(self) -> int | None:
        try:
            return self.received() if self.received is not None else None
        except (OSError, KeyError, ValueError):
            return None

    def _watch(self, base: int | None) -> None:
        while not self._done.wait(CUT_POLL_S):
            now, got = self.runs.now(), self._read()
            if got is None or base is None:
                with self.runs.lock:  # the counter cannot be read: count from the start
                    self.received, self.how = None, "tool start"
                return
            if got - base >= DATA_FLOWS_BYTES:
                with self.runs.lock:
                    if self.data_from is None or now < self.data_from:
                        self.data_from = now
                    self.how = "link"
                return


@dataclass
class CommandTool:
    """``command:NAME``: ``streams`` concurrent runs of the template."""

    procs: Procs
    name: str = "command"

    def servers(self, point: Point) -> tuple[str | None, str | None]:
        return point.server, None

    @staticmethod
    def fields(env: PointEnv, k: int) -> dict[str, str]:
        point = env.point
        origin = env.origins[k % len(env.origins)]
        name = origin.files[(k // len(env.origins)) % len(origin.files)] if origin.files \
            else ""
        url = f"{origin.url_base}/{name}" if origin.url_base else ""
        return {"src": url, "url": url, "dst": str(env.workdir / f"out{k}"),
                "host": origin.host.address, "port": str(origin.port),
                "origin": str(origin.index), "streams": str(point.streams),
                "file_size": str(point.file_size),
                "duration": f"{point.duration_s:g}" if point.duration_s is not None else "",
                "bytes": str(point.bytes) if point.bytes is not None else "",
                "rtt_ms": f"{point.rtt_ms:g}",
                "rate_bps": str(point.rate_bps) if point.rate_bps is not None else "",
                "workdir": str(env.workdir)}

    def run(self, env: PointEnv) -> ToolRun:
        template = env.point.command or ""
        words = shlex.split(template)
        runs = _Runs(self.procs, env, time.monotonic())
        transfers: list[Transfer | None] = [None] * env.point.streams

        def one(k: int) -> None:
            values = self.fields(env, k)
            argv = [w.format(**values) for w in words]
            code, _, err, start, end = runs.run(argv)
            error = "" if code == 0 else ("stopped at the time limit" if code is None else
                                          f"exit status {code}: {err.strip()[-200:]}".rstrip(": "))
            size = 0
            with contextlib.suppress(OSError):
                size = os.stat(values["dst"]).st_size
            transfers[k] = Transfer(start, None if error else end, size, False, error)

        _in_threads(env.point.streams, one)
        done = tuple(t for t in transfers if t is not None)
        bad = [t for t in done if t.error]
        failed = DEADLINE_MESSAGE.format(limit=env.point.time_limit_s) if runs.timed_out else (
            f"{len(bad)} of {len(done)} runs failed: {bad[0].error}" if bad else "")
        return ToolRun(done, _tail("\n".join(runs.raw)), failed)
