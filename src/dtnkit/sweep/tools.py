"""The runner's own tools (:class:`~dtnkit.sweep.model.Tool`): ``iperf3``, ``dtnkit-cp``
(downloads), ``dtnkit-cp-upload`` and ``command:NAME`` (a template).

- **iperf3**: one client per origin in the client's namespace, ``-R`` (the origin sends, as
  a download), the point's ``streams`` spread over the origins as ``-P``; each client is
  one transfer.
- **dtnkit-cp**: ``streams`` concurrent workers, worker k downloading from origin
  k mod origins its own file, each copy verified end to end (``--verify block``); with a
  duration every worker starts copies until the duration has passed (copies in flight
  finish: their end is the tail), with ``bytes`` the workers share the copies of
  ceil(bytes / file_size) files.
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
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dtnkit.sweep.grid import Point
from dtnkit.sweep.model import MAX_RAW_BYTES, Origin, PointEnv, ToolRun, Transfer
from dtnkit.sweep.procs import Procs

#: (tool name) -> the file sizes' source directory is the run's ``files`` directory
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
        start = self.now()
        if env is not None:  # the caller's own tokens never reach a lab server
            env = {**{k: v for k, v in os.environ.items()
                      if k not in ("DTNKIT_TOKEN", "BEARER_TOKEN")}, **env}
        proc = self.procs.start(argv, host=self.env.client, cwd=self.env.workdir, env=env)
        try:
            out, err = proc.communicate(timeout=max(0.0, self.env.deadline - time.monotonic()))
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            self.procs.stop(proc)
            out, err = proc.communicate()
            code = None
            with self.lock:
                self.timed_out = True
        finally:
            self.procs.forget(proc)
        end = self.now()
        with self.lock:
            self.raw.append(f"$ {shlex.join(argv)}\n{_tail(out, 4096)}{_tail(err, 4096)}")
        return code, out, err, start, end


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

    def run(self, env: PointEnv) -> ToolRun:
        point = env.point
        runs = _Runs(self.procs, env, time.monotonic())
        transfers: list[Transfer] = []
        total = self._copies(point)
        counter = {"next": 0}

        def take() -> int | None:
            with runs.lock:
                if runs.timed_out:
                    return None
                if total is not None:
                    if counter["next"] >= total:
                        return None
                elif counter["next"] >= point.streams and runs.now() >= (point.duration_s or 0):
                    return None
                counter["next"] += 1
                return counter["next"] - 1

        def worker(k: int) -> None:
            origin = env.origins[k % len(env.origins)]
            while (copy := take()) is not None:
                argv, path = self._argv(origin, k, copy, env)
                code, out, err, start, end = runs.run(
                    argv, {"DTNKIT_TOKEN": origin.token} if origin.token else {})
                doc = _cp_json(out)
                error = ""
                if code is None:
                    error = "stopped at the time limit"
                elif code != 0:
                    msg = doc.get("error")
                    error = (msg.get("what", "") + ": " + msg.get("why", "")
                             if isinstance(msg, dict) else "") or err.strip()[-300:] \
                        or f"exit status {code}"
                nbytes = int(doc.get("bytes") or doc.get("size") or 0) if not error else 0
                if not nbytes and not error:
                    nbytes = point.file_size
                verified = not error and str(doc.get("verify", "block")) != "none"
                with runs.lock:
                    transfers.append(Transfer(start, None if error else end, nbytes,
                                              verified, error))
                if not self.upload:
                    with contextlib.suppress(OSError):
                        path.unlink()
                if error:
                    return

        _in_threads(point.streams, worker)
        transfers.sort(key=lambda t: t.start_s)
        failed = ""
        bad = [t for t in transfers if t.error]
        if runs.timed_out:
            failed = DEADLINE_MESSAGE.format(limit=point.time_limit_s)
        elif bad:
            failed = f"{len(bad)} of {len(transfers)} copies failed: {bad[0].error}"
        return ToolRun(tuple(transfers), _tail("\n".join(runs.raw)), failed)


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
