"""The storage tool fio: fio command lines, fio's JSON, one write-then-read probe.

The probe writes one file ``dtnkit-probe.dat`` sequentially in the given directory, reads it
back sequentially, and removes it.  Given a block device instead, it writes the device (its
data is destroyed; fio itself refuses a mounted device) and then reads it.

Direct I/O (the default) measures the disk.  Buffered I/O (``direct=False``) adds
``--end_fsync=1`` to the write, so its rate includes flushing the page cache, and fio's default
``invalidate=1`` drops the file's cached pages before the read; without those, both rates
would be memory copies.

Several jobs split the size: each job handles ``size / jobs`` bytes at its own offset
(``--offset_increment``), so the file is written and read once in total.

fio quirks handled here: notes such as "note: both iodepth >= 1 and synchronous I/O engine are
selected" are printed on stdout *before* the JSON; an I/O error still exits 1 with a full JSON
report whose job has ``"error": <errno>``; a bad option prints nothing on stdout; fio creates
missing parent directories of ``--filename`` itself (so the probe checks the directory first).
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput, DtnkitError, ToolMissing
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.measure.probes.disk import KIND as DISK_KIND
from dtnkit.measure.probes.disk import DiskSpec
from dtnkit.measure.sampler import Sampler
from dtnkit.measure.tool import ToolContext, ToolRun, Wrap
from dtnkit.progress import SILENT, Interval, Progress

PROBE_FILE = "dtnkit-probe.dat"
RW_MODES = ("write", "read")
LIBAIO_IODEPTH = 8
STATUS_INTERVAL_S = 1
MIN_INTERVAL_S = 0.25  # a shorter interval after the first has no rate worth showing
MEMORY_FS = ("tmpfs", "ramfs")  # fio's report period while progress is shown
_SOURCE = "fio --output-format=json"


def can_run() -> tuple[bool, list[str]]:
    """Whether the storage probe can run here, and the reasons when it cannot."""
    if shutil.which("fio") is None:
        return False, ["fio is not installed (apt-get install fio)"]
    return True, []


@functools.lru_cache(maxsize=1)
def ioengine() -> str:
    """``libaio`` when this fio has it built in, else ``psync``."""
    fio = shutil.which("fio")
    if fio is None:
        return "psync"
    try:
        proc = process.run([fio, "--enghelp"], timeout=20)
    except (OSError, process.TimeoutExpired):
        return "psync"
    engines = {line.strip() for line in proc.stdout.splitlines()}
    return "libaio" if "libaio" in engines else "psync"


def fio_argv(
    target: str,
    *,
    rw: str,
    size_bytes: int,
    block_size: str = "1M",
    direct: bool = True,
    jobs: int = 1,
    runtime_s: int | None = None,
    name: str = "dtnkit",
    iodepth: int = LIBAIO_IODEPTH,
) -> list[str]:
    """One sequential fio job (``rw`` is ``write`` or ``read``) on a file or block device.

    ``size_bytes`` is the total over all jobs; ``runtime_s`` stops a job early (the job still
    ends sooner when its share of the size is done).  ``iodepth`` applies to libaio only.
    """
    if rw not in RW_MODES:
        raise BadInput(
            f"unknown fio mode {rw!r}",
            f"modes: {', '.join(RW_MODES)}",
            "use rw='write' or rw='read'",
        )
    if not 1 <= jobs <= 64:
        raise BadInput(f"{jobs} fio jobs is out of range", "allowed: 1 to 64", "e.g. jobs=4")
    if size_bytes < jobs * 4096:
        raise BadInput(
            f"fio size {size_bytes} bytes is too small",
            f"each of the {jobs} jobs needs at least 4 KiB",
            "give a larger size",
        )
    if runtime_s is not None and runtime_s < 1:
        raise BadInput(
            f"fio runtime {runtime_s} s is out of range", "at least 1 s", "e.g. runtime_s=5"
        )
    engine = ioengine()
    per_job = size_bytes // jobs
    argv = [
        "fio",
        f"--name={name}",
        f"--filename={target}",
        f"--rw={rw}",
        f"--bs={block_size}",
        f"--size={per_job}",
        f"--direct={int(direct)}",
        f"--ioengine={engine}",
    ]
    if engine == "libaio":
        argv.append(f"--iodepth={max(1, iodepth)}")
    if jobs > 1:
        argv += [f"--numjobs={jobs}", f"--offset_increment={per_job}"]
    if rw == "write" and not direct:
        argv.append("--end_fsync=1")
    if runtime_s is not None:
        argv.append(f"--runtime={runtime_s}")
    argv += ["--group_reporting", "--output-format=json"]
    return argv


def reports(text: str) -> list[dict[str, Any]]:
    """Every complete JSON report (an object with ``jobs``) in fio's stdout, in order:
    one, or with ``--status-interval`` one per interval and the final one last."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            doc, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            doc, end = None, start + 1
        if isinstance(doc, dict) and "jobs" in doc:
            found.append(doc)
        else:
            end = start + 1
        start = text.find("{", end)
    return found


def _find_report(text: str) -> dict[str, Any]:
    """The JSON report in fio's stdout, skipping the notes fio may print before it."""
    if not isinstance(text, str):
        raise ParseError(f"{_SOURCE}: expected text (str), got {type(text).__name__}")
    if not text.strip():
        raise ParseError(f"{_SOURCE}: empty input")
    found = reports(text)
    if found:
        return found[-1]  # with --status-interval, fio's last report is the final one
    first = text.strip().splitlines()[0][:120]
    raise ParseError(f"{_SOURCE}: no JSON report with 'jobs' found (starts with {first!r})")


def _num(obj: Any, key: str, where: str) -> float:
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{_SOURCE}: {where}: missing or non-numeric {key!r}")
    return float(value)


def _lat_ms(side: dict[str, Any], where: str) -> float:
    """Mean total latency in ms: ``lat_ns`` (fio >= 3.0) or ``lat`` in microseconds (2.x)."""
    if isinstance(side.get("lat_ns"), dict):
        return _num(side["lat_ns"], "mean", f"{where}.lat_ns") / 1e6
    if isinstance(side.get("lat"), dict):
        return _num(side["lat"], "mean", f"{where}.lat") / 1e3
    raise ParseError(f"{_SOURCE}: {where}: no 'lat_ns' latency")


def parse_fio_json(text: str) -> dict[str, Any]:
    """Summary of fio's JSON output: rates in bit/s (``read_bps``, ``write_bps``: fio's
    ``bw_bytes`` x 8, as every ``_bps`` in dtnkit), latencies in ms, runtime in s.

    Jobs are summed (rates, IOPS) or weighted by their I/O count (latency), so the result is
    the same with or without ``--group_reporting``.  ``error`` is the largest job error (an
    errno; 0 when every job succeeded).  Raises :class:`ParseError` on anything else.
    """
    doc = _find_report(text)
    jobs = doc["jobs"]
    if not isinstance(jobs, list) or not jobs:
        raise ParseError(f"{_SOURCE}: 'jobs' is not a non-empty list")
    out: dict[str, Any] = {}
    runtime_ms = 0.0
    error = 0
    for i, job in enumerate(jobs):
        where = f"jobs[{i}]"
        if not isinstance(job, dict):
            raise ParseError(f"{_SOURCE}: {where} is not an object")
        error = max(error, int(_num(job, "error", where)))
        runtime_ms = max(runtime_ms, _num(job, "job_runtime", where))
    n_jobs = len(jobs)
    if n_jobs == 1:  # with --group_reporting one entry stands for all the clones
        options = jobs[0].get("job options")
        numjobs = str(options.get("numjobs", "1")) if isinstance(options, dict) else "1"
        n_jobs = int(numjobs) if numjobs.isdigit() and int(numjobs) > 0 else 1
    for side in ("read", "write"):
        bps = iops = ios = lat_weighted = 0.0
        for i, job in enumerate(jobs):
            where = f"jobs[{i}].{side}"
            data = job.get(side)
            if not isinstance(data, dict):
                raise ParseError(f"{_SOURCE}: {where} is missing")
            bps += _num(data, "bw_bytes", where)
            iops += _num(data, "iops", where)
            n = _num(data, "total_ios", where)
            if n:
                ios += n
                lat_weighted += _lat_ms(data, where) * n
        out[f"{side}_bps"] = bps * 8
        out[f"{side}_iops"] = iops
        out[f"{side}_lat_ms_mean"] = lat_weighted / ios if ios else 0.0
    out["runtime_s"] = runtime_ms / 1000
    out["jobs"] = n_jobs
    out["error"] = error
    return out


def _check_target(path: str) -> tuple[str, bool]:
    """(fio target, is a block device); BadInput for anything the probe cannot use."""
    if not path:
        raise BadInput("no path for the storage probe", "", "give a directory to probe")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInput(
            f"{path} does not exist",
            "the storage probe needs an existing directory (or a block device)",
            "create it or give another path",
        ) from None
    except OSError as exc:
        raise BadInput(
            f"cannot look at {path}", exc.strerror or str(exc), "give a directory you can write"
        ) from None
    if stat.S_ISBLK(st.st_mode):
        if not os.access(path, os.R_OK | os.W_OK):
            raise BadInput(
                f"block device {path} is not writable",
                "the probe writes the device",
                "run as root, or give a directory",
            )
        return path, True
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(
            f"{path} is not a directory",
            "the storage probe writes a file "
            f"{PROBE_FILE} in a directory (or a whole block device)",
            "give the directory to probe",
        )
    target = str(Path(path) / PROBE_FILE)
    try:  # os.access is no use for root on a read-only file system: try for real
        with open(target, "wb"):
            pass
    except OSError as exc:
        raise BadInput(
            f"cannot write in {path}", exc.strerror or str(exc), "give a directory you can write"
        ) from None
    return target, False


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _mount_type(path: str) -> str:
    """The file system type of the mount holding ``path`` (from /proc/self/mounts)."""
    best, kind = "", ""
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mounts", encoding="utf-8") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        return ""
    return kind


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def room(path: str) -> tuple[int, str]:
    """The largest probe file directory ``path`` takes, and what limits it: 90 % of the file
    system's free space (the probe leaves a tenth of it free), and for a file system in
    memory (tmpfs, ramfs) also 90 % of the RAM available."""
    st = os.statvfs(path)
    limit, why = (
        int(st.f_bavail * st.f_frsize * 0.9),
        f"{_gib(st.f_bavail * st.f_frsize)} "
        f"is free in {path} and the probe leaves a tenth of it free",
    )
    if _mount_type(path) in MEMORY_FS:
        avail = _mem_available()
        if avail is not None and avail * 0.9 < limit:
            limit, why = (
                int(avail * 0.9),
                f"{path} is in memory ({_mount_type(path)}) and "
                f"{_gib(avail)} of RAM is available; the probe leaves a tenth of it",
            )
    return limit, why


def check_room(path: str, size_bytes: int) -> None:
    """BadInput, before fio runs, when a probe file of ``size_bytes`` does not fit
    (:func:`room`); the size is otherwise free, so 4 GiB works wherever it fits."""
    limit, why = room(path)
    if size_bytes > limit:
        raise BadInput(
            f"--size {_gib(size_bytes)} does not fit in {path}",
            why,
            f"give --size {max(limit, 0) // 2**20}MiB or less, or another --path",
        )


def _fio_message(proc: process.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (proc.stderr or "").splitlines() if line.strip()]
    fio_lines = [line for line in lines if line.startswith("fio:")]
    text = "; ".join(dict.fromkeys(fio_lines or lines))  # fio repeats some messages
    return text[-500:] or f"exit status {proc.returncode}"


def _stream(
    argv: list[str], timeout_s: float, on_report: Callable[[dict[str, Any]], None]
) -> process.CompletedProcess[str]:
    """Run fio (with ``--status-interval``) and call ``on_report`` with each report as it
    comes; the whole output once it exits, as ``process.run`` gives it."""
    out, err = bytearray(), bytearray()
    # leaving the block early (the deadline, Ctrl-C, an error in on_report) kills fio at
    # once, as process.run does past its timeout; it is reaped either way
    with process.start(argv, stdout=process.PIPE, stderr=process.PIPE, grace_s=0) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        deadline = time.monotonic() + timeout_s
        seen = 0
        while streams:
            left = deadline - time.monotonic()
            if left <= 0:
                raise process.TimeoutExpired(argv, timeout_s)
            for fd in select.select(list(streams), [], [], left)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    del streams[fd]
                elif streams[fd] is out:
                    out += chunk
                    got = reports(out.decode(errors="replace"))
                    for doc in got[seen:]:
                        on_report(doc)
                    seen = len(got)
                else:
                    err += chunk
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    return process.CompletedProcess(
        argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )


def _status(rw: str, size_bytes: int, progress: Progress) -> Callable[[dict[str, Any]], None]:
    """An ``on_report`` that turns fio's cumulative reports into intervals of ``rw``."""
    last = [0.0, 0]  # end of the interval before (s), bytes done then

    def on_report(doc: dict[str, Any]) -> None:
        jobs = [j for j in doc.get("jobs") or [] if isinstance(j, dict)]
        done = sum(int((j.get(rw) or {}).get("io_bytes") or 0) for j in jobs)
        end = max((float(j.get("job_runtime") or 0) for j in jobs), default=0.0) / 1000
        start, before = last
        if end <= start or (start > 0 and end - start < MIN_INTERVAL_S):
            return  # no time passed, or fio's final report just after its last status
        last[:] = [end, done]
        progress.interval(
            Interval(
                start,
                end,
                max(0, done - int(before)),
                phase=rw,
                done_bytes=done,
                total_bytes=size_bytes,
            )
        )

    return on_report


def _run_fio(
    argv: list[str],
    rw: str,
    timeout_s: float,
    on_report: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[dict[str, Any], str]:
    try:
        if on_report is None:
            proc = process.run(argv, timeout=timeout_s)
        else:
            proc = _stream(argv, timeout_s, on_report)
    except process.TimeoutExpired:
        raise DtnkitError(
            f"fio {rw} did not finish",
            f"still running after {timeout_s:g} s",
            "give a smaller size or a longer timeout",
        ) from None
    except FileNotFoundError as exc:
        raise ToolMissing("fio could not be started", str(exc), "apt-get install fio") from None
    try:
        summary = parse_fio_json(proc.stdout)
    except ParseError as exc:
        raise DtnkitError(
            f"fio {rw} failed",
            _fio_message(proc) if proc.returncode else str(exc),
            "run the fio command by hand to see more: " + " ".join(argv),
        ) from None
    if proc.returncode != 0 or summary["error"]:
        why = _fio_message(proc)
        if summary["error"]:
            why = f"{why} (errno {summary['error']}: {os.strerror(summary['error'])})"
        raise DtnkitError(f"fio {rw} failed", why, "check the path and its free space")
    return summary, proc.stdout


def run_disk_probe(
    path: str,
    *,
    size_bytes: int = 256 * 2**20,
    direct: bool = True,
    jobs: int = 1,
    wrap: Wrap | None = None,
    timeout_s: float = 600,
    progress: Progress = SILENT,
) -> dict[str, Any]:
    """Sequential write, then sequential read, of ``size_bytes`` in directory ``path``.

    ``wrap`` turns each fio argv into the one actually run (for example
    :meth:`dtnkit.lab.disk.SlowDisk.wrap`, to run fio inside a throttling cgroup).  With a
    ``progress`` other than the silent one, fio reports every second (``--status-interval``)
    and each report becomes an interval.
    """
    ok, reasons = can_run()
    if not ok:
        raise ToolMissing(
            "the storage probe cannot run", "; ".join(reasons), "install fio and run again"
        )
    if size_bytes < 2**20:
        raise BadInput(
            f"probe size {size_bytes} bytes is too small", "at least 1 MiB", "e.g. 256 MiB"
        )
    fio_argv("/dev/null", rw="write", size_bytes=size_bytes, jobs=jobs)  # validates jobs
    target, is_device = _check_target(path)
    raw: dict[str, str] = {}
    results: dict[str, dict[str, Any]] = {}
    try:
        if not is_device:
            check_room(path, size_bytes)
        for rw in RW_MODES:
            argv = fio_argv(target, rw=rw, size_bytes=size_bytes, direct=direct, jobs=jobs)
            on_report = None
            if progress is not SILENT:
                argv.insert(-2, f"--status-interval={STATUS_INTERVAL_S}")
                on_report = _status(rw, size_bytes, progress)
            results[rw], raw[rw] = _run_fio(wrap(argv) if wrap else argv, rw, timeout_s, on_report)
    finally:
        if not is_device:
            Path(target).unlink(missing_ok=True)
    return {
        "write_bps": results["write"]["write_bps"],
        "read_bps": results["read"]["read_bps"],
        "write_lat_ms_mean": results["write"]["write_lat_ms_mean"],
        "read_lat_ms_mean": results["read"]["read_lat_ms_mean"],
        "size_bytes": size_bytes,
        "direct": direct,
        "jobs": jobs,
        "raw": raw,
    }


class Fio:
    """fio, sequential write then read (:func:`run_disk_probe`), beside the sampler."""

    name = "fio"
    kind = DISK_KIND
    about = "sequential write, then read, with fio"
    package = "fio"

    def can_run(self) -> tuple[bool, list[str]]:
        return can_run()

    def parse(self, text: str) -> dict[str, Any]:
        return parse_fio_json(text)

    def run(self, host: Host, spec: DiskSpec, context: ToolContext) -> ToolRun:
        with Sampler(host, interval_s=spec.interval_s) as sampler:
            got = run_disk_probe(
                spec.path,
                size_bytes=spec.size_bytes,
                direct=spec.direct,
                jobs=spec.jobs,
                wrap=context.wrap,
                progress=context.progress,
            )
        raw = got.pop("raw", {})
        summary = {**got, "throughput_bps": float(got["read_bps"])}  # reading feeds a transfer
        return ToolRun(summary, str(raw), sampler.samples)
