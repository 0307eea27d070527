"""A CPU quota per origin: a control group of the sweep's own, its quota in cores, its CPU
accounting, and its removal.

What the kernel offers is detected from the mount table (:func:`detect`), in this order:

* ``cgroup-v1``: the v1 ``cpu`` hierarchy (``cpu.cfs_period_us`` = 100000,
  ``cpu.cfs_quota_us`` = cores x period) with the ``cpuacct`` hierarchy for accounting
  (``cpuacct.usage``, ns).  The two may be mounted together (``cpu,cpuacct``) or apart (as on
  the CI machine): a process is then moved into a cgroup of the same name in each.
* ``cgroup-v2``: a cgroup2 mount whose ``cgroup.controllers`` offers ``cpu``: ``cpu.max`` =
  ``QUOTA PERIOD`` and ``cpu.stat`` ``usage_usec``.  The ``cpu`` controller must already be
  enabled in the root's ``cgroup.subtree_control`` (this module never changes a cgroup it did
  not create; it says how to enable it).
* ``cpuset``: the v1 ``cpuset`` hierarchy, for whole cores only (``cpuset.cpus`` = the first
  N CPUs), accounted by ``cpuacct`` when it is mounted.

When none is there, :func:`detect` raises :class:`CgroupUnavailable` naming what it looked
for and what it found.

Every cgroup made here is named ``dtnkit-NAME`` (``NAME`` starts with the sweep's own prefix)
directly under the hierarchy's root; nothing else is written.  A process enters a quota from
its birth through :meth:`CpuQuota.wrap` (a ``sh`` that writes its own PID into each
``cgroup.procs`` and then execs the command: every thread and child it makes is inside), or
later by PID through :meth:`CpuQuota.add`.  :meth:`CpuQuota.close` (also the ``with`` block's
end) stops processes still inside by PID (SIGTERM, then SIGKILL), keeps the last usage
(:attr:`CpuQuota.final_usage_s`) and removes the cgroups.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from dtnkit.errors import BadInput, DtnkitError, NeedsRoot
from dtnkit.host import cgexec, process

#: the CFS period the quota is a share of (the kernel's default, 100 ms)
PERIOD_US = 100_000
#: the kernel's smallest quota (1 ms per period)
MIN_QUOTA_US = 1_000
#: the most cores a quota may ask for
MAX_CORES = 1024.0
#: every cgroup made here is named PREFIX + the caller's name
PREFIX = "dtnkit-"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
MOUNTS = Path("/proc/self/mounts")

KIND_V1 = "cgroup-v1"
KIND_V2 = "cgroup-v2"
KIND_CPUSET = "cpuset"


class CgroupUnavailable(DtnkitError):
    """No way to give a process a CPU quota here (or the one chosen failed)."""


@dataclasses.dataclass(frozen=True)
class CpuController:
    """What :func:`detect` found: the kind and the hierarchies' roots."""

    kind: str  # KIND_V1, KIND_V2 or KIND_CPUSET
    quota_root: Path  # where the quota is set (v1 cpu, cgroup2 or v1 cpuset mount)
    acct_root: Path | None  # where usage is read: v1 cpuacct (may equal quota_root); v2: same
    cpus: int  # CPUs this machine has (a cpuset quota is at most this many)

    def roots(self) -> tuple[Path, ...]:
        """Every hierarchy a process is moved into (one or two)."""
        if self.acct_root is None or self.acct_root == self.quota_root:
            return (self.quota_root,)
        return (self.quota_root, self.acct_root)

    def describe(self) -> str:
        acct = (
            "none"
            if self.acct_root is None
            else "cpu.stat usage_usec"
            if self.kind == KIND_V2
            else f"cpuacct at {self.acct_root}"
        )
        return f"{self.kind} (quota at {self.quota_root}, accounting: {acct})"


def _mounts(text: str | None) -> list[tuple[Path, str, set[str]]]:
    if text is None:
        try:
            text = MOUNTS.read_text()
        except OSError:
            text = ""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            out.append((Path(fields[1]), fields[2], set(fields[3].split(","))))
    return out


def detect(mounts: str | None = None) -> CpuController:
    """What this kernel offers for a CPU quota (see the module's text); ``mounts``: the text
    of a mount table to read instead of ``/proc/self/mounts`` (tests).

    Raises :class:`CgroupUnavailable` when none is usable."""
    table = _mounts(mounts)
    cpus = os.cpu_count() or 1
    v1 = {
        name: point
        for point, fstype, opts in table
        if fstype == "cgroup"
        for name in ("cpu", "cpuacct", "cpuset")
        if name in opts
    }
    seen: list[str] = []
    if "cpu" in v1 and (v1["cpu"] / "cpu.cfs_quota_us").exists():
        return CpuController(KIND_V1, v1["cpu"], v1.get("cpuacct"), cpus)
    if "cpu" in v1:
        seen.append(f"{v1['cpu']} has no cpu.cfs_quota_us (kernel without CFS bandwidth)")
    else:
        seen.append("no cgroup v1 cpu hierarchy")
    for point, fstype, _opts in table:
        if fstype != "cgroup2":
            continue
        try:
            controllers = (point / "cgroup.controllers").read_text().split()
            enabled = (point / "cgroup.subtree_control").read_text().split()
        except OSError as exc:
            seen.append(f"cannot read {point}/cgroup.controllers ({exc.strerror})")
            continue
        if "cpu" in controllers and "cpu" in enabled:
            return CpuController(KIND_V2, point, point, cpus)
        if "cpu" in controllers:
            seen.append(
                f"the cgroup2 mount {point} has the cpu controller but it is not "
                f"enabled for children (echo +cpu > {point}/cgroup.subtree_control)"
            )
        else:
            seen.append(
                f"the cgroup2 mount {point} offers no cpu controller "
                f"(controllers: {' '.join(controllers) or 'none'})"
            )
    if not any(fstype == "cgroup2" for _p, fstype, _o in table):
        seen.append("no cgroup2 mount")
    if "cpuset" in v1:
        return CpuController(KIND_CPUSET, v1["cpuset"], v1.get("cpuacct"), cpus)
    seen.append("no cgroup v1 cpuset hierarchy")
    raise CgroupUnavailable(
        "no CPU quota controller",
        "; ".join(seen),
        "mount the cgroup v1 cpu and cpuacct hierarchies, or enable the "
        "cpu controller in cgroup2, or run the sweep without cores",
    )


def check_cores(cores: float, controller: CpuController | None = None) -> float:
    """A quota in cores: a number above 0 (and a whole number of CPUs up to the machine's
    for a cpuset); BadInput otherwise."""
    if (
        isinstance(cores, bool)
        or not isinstance(cores, int | float)
        or not math.isfinite(cores)
        or not 0 < cores <= MAX_CORES
        or cores * PERIOD_US < MIN_QUOTA_US
    ):
        raise BadInput(
            f"CPU quota {cores!r} cores is not usable",
            f"a number of cores from {MIN_QUOTA_US / PERIOD_US:g} to {MAX_CORES:g}",
            "e.g. cores = [0.5, 1, 2]",
        )
    if (
        controller is not None
        and controller.kind == KIND_CPUSET
        and (cores != int(cores) or cores > controller.cpus)
    ):
        raise BadInput(
            f"CPU quota {cores:g} cores cannot be a cpuset",
            f"this kernel offers only a cpuset: whole CPUs, 1 to {controller.cpus}",
            "use whole cores, or mount the cgroup v1 cpu hierarchy",
        )
    return float(cores)


def check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise BadInput(
            f"bad cgroup name {name!r}",
            "1-63 lower-case letters, digits and '-', starting with a letter",
            "e.g. o19a-origin0",
        )


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text + "\n")
    except OSError as exc:
        raise CgroupUnavailable(
            f"cannot write {text!r} to {path}",
            exc.strerror or str(exc),
            "check that this kernel supports the CPU quota",
        ) from None


def procs(cgroup: Path) -> list[int]:
    """The PIDs in a cgroup (empty when it is gone)."""
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def stop_pids(pids: Sequence[int], *, grace_s: float = 3.0) -> None:
    """SIGTERM each PID, SIGKILL what is left after ``grace_s``, reap our own children."""
    process.stop_pids(pids, grace_s)


def _rmdir(cgroup: Path, *, timeout_s: float = 5.0) -> None:
    """Stop what is still inside (by PID), then remove the directory (retried while the
    kernel lets the last tasks leave)."""
    if not cgroup.exists():
        return
    for _ in range(3):
        pids = procs(cgroup)
        if not pids:
            break
        stop_pids(pids, grace_s=1.0)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise CgroupUnavailable(
                    f"cannot remove the cgroup {cgroup}",
                    f"{exc.strerror}; still inside: {procs(cgroup)}",
                    f"stop those processes, then rmdir {cgroup}",
                ) from None
        time.sleep(0.02)  # a killed task leaves its cgroup a moment after it exits


class CpuQuota:
    """One cgroup (in each hierarchy the controller needs) with a CPU quota in cores.

    ``cores`` None: no limit, accounting only.  Created on construction; use as a context
    manager or call :meth:`close`."""

    def __init__(
        self, name: str, cores: float | None, *, controller: CpuController | None = None
    ) -> None:
        check_name(name)
        if os.geteuid() != 0:
            raise NeedsRoot("a CPU quota needs root", "it creates a cgroup", "run as root")
        self.controller = controller or detect()
        self.cores = None if cores is None else check_cores(cores, self.controller)
        self.name = PREFIX + name
        self.final_usage_s: float | None = None
        self.paths = tuple(root / self.name for root in self.controller.roots())
        for path in self.paths:
            if path.exists():
                raise BadInput(
                    f"the cgroup {path} already exists",
                    "another run (or a killed one) uses this name",
                    f"if `cat {path}/cgroup.procs` lists nothing, `rmdir {path}`",
                )
        made: list[Path] = []
        try:
            for path in self.paths:
                try:
                    path.mkdir()
                except OSError as exc:
                    raise CgroupUnavailable(
                        f"cannot create the cgroup {path}",
                        exc.strerror or str(exc),
                        "check that the hierarchy is mounted read-write",
                    ) from None
                made.append(path)
            self._set_quota()
        except BaseException:
            for path in reversed(made):
                with contextlib.suppress(CgroupUnavailable):
                    _rmdir(path)
            raise

    # ---- the quota ------------------------------------------------------------------------
    def _set_quota(self) -> None:
        kind, path = self.controller.kind, self.paths[0]
        if kind == KIND_V1:
            _write(path / "cpu.cfs_period_us", str(PERIOD_US))
            quota = -1 if self.cores is None else round(self.cores * PERIOD_US)
            _write(path / "cpu.cfs_quota_us", str(quota))
        elif kind == KIND_V2:
            quota_text = "max" if self.cores is None else str(round(self.cores * PERIOD_US))
            _write(path / "cpu.max", f"{quota_text} {PERIOD_US}")
        else:  # a cpuset needs its memory nodes and CPUs before a task may enter
            root = self.controller.quota_root
            n = self.controller.cpus if self.cores is None else int(self.cores)
            cpus = _cpu_list(root / "cpuset.cpus")[:n]
            _write(path / "cpuset.mems", (root / "cpuset.mems").read_text().strip())
            _write(path / "cpuset.cpus", ",".join(str(c) for c in cpus))

    @property
    def path(self) -> str:
        """The quota's cgroup (what :class:`~dtnkit.measure.probes.load.Origin` records)."""
        return str(self.paths[0])

    def procs_files(self) -> list[str]:
        return [str(p / "cgroup.procs") for p in self.paths]

    # ---- processes ------------------------------------------------------------------------
    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` started inside the quota from birth (:mod:`dtnkit.host.cgexec` writes its
        own PID into each ``cgroup.procs``, then execs ``argv``: same PID; every thread and
        child inside)."""
        return cgexec.command(self.procs_files(), argv)

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) in; children it makes later follow it
        (children it already has stay where they are)."""
        for f in self.procs_files():
            _write(Path(f), str(pid))

    def pids(self) -> list[int]:
        """The processes inside now."""
        return procs(self.paths[0])

    # ---- accounting -----------------------------------------------------------------------
    def usage_s(self) -> float:
        """CPU time used by every process that ran inside, in seconds (user + system);
        after :meth:`close`, the last value read."""
        if self.final_usage_s is not None:
            return self.final_usage_s
        return usage_of(self.path, self.controller)

    def throttled(self) -> dict[str, float]:
        """How often the quota held the processes back: ``periods``, ``throttled`` (periods)
        and ``throttled_s``; empty for a cpuset."""
        if self.controller.kind == KIND_CPUSET:
            return {}
        try:
            fields = dict(
                line.split(" ", 1)
                for line in (self.paths[0] / "cpu.stat").read_text().splitlines()
                if " " in line
            )
        except OSError:
            return {}
        ns = (
            int(fields.get("throttled_time", 0))
            if "throttled_time" in fields
            else int(fields.get("throttled_usec", 0)) * 1000
        )
        return {
            "periods": float(fields.get("nr_periods", 0)),
            "throttled": float(fields.get("nr_throttled", 0)),
            "throttled_s": ns / 1e9,
        }

    # ---- the end --------------------------------------------------------------------------
    def close(self) -> None:
        """Stop processes still inside (by PID), keep the last usage, remove the cgroups.
        Safe to call twice."""
        if self.final_usage_s is None:
            try:
                pids = self.pids()
                if pids:
                    stop_pids(pids)
                self.final_usage_s = self.usage_s()
            except CgroupUnavailable:
                self.final_usage_s = float("nan")
        errors = []
        for path in reversed(self.paths):
            try:
                _rmdir(path)
            except CgroupUnavailable as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> CpuQuota:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CpuQuota({self.path!r}, cores={self.cores})"


def _cpu_list(path: Path) -> list[int]:
    """``0-3,6`` -> [0, 1, 2, 3, 6]."""
    out: list[int] = []
    for part in path.read_text().strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out += range(int(lo), int(hi) + 1)
        elif part:
            out.append(int(part))
    return out


@contextlib.contextmanager
def cpu_quota(
    name: str, cores: float | None, *, controller: CpuController | None = None
) -> Iterator[CpuQuota]:
    """:class:`CpuQuota` for a ``with`` block: removed however the block ends."""
    quota = CpuQuota(name, cores, controller=controller)
    try:
        yield quota
    finally:
        quota.close()


def leftovers(prefix: str, controller: CpuController | None = None) -> list[Path]:
    """This prefix's cgroups (``dtnkit-PREFIX*``) in every hierarchy the controller uses."""
    check_name(prefix)
    ctl = controller or detect()
    return sorted(p for root in ctl.roots() for p in root.glob(f"{PREFIX}{prefix}*") if p.is_dir())


def remove_leftovers(prefix: str, controller: CpuController | None = None) -> list[str]:
    """Remove what a killed sweep left: each ``dtnkit-PREFIX*`` cgroup, after stopping the
    processes inside it by PID.  Returns the paths removed."""
    removed = []
    for path in leftovers(prefix, controller):
        _rmdir(path)
        removed.append(str(path))
    return removed


def usage_of(cgroup: str, controller: CpuController | None = None) -> float:
    """CPU seconds used in the cgroup at path ``cgroup`` (``Origin.cgroup``: the quota's
    cgroup; its accounting may live in another hierarchy of the same name).  Raises
    :class:`CgroupUnavailable` when it cannot be read (e.g. removed)."""
    ctl = controller or detect()
    name = Path(cgroup).name
    if not name.startswith(PREFIX) or ctl.acct_root is None:
        raise CgroupUnavailable(
            f"no CPU accounting for {cgroup}",
            "not a cgroup of dtnkit's, or no accounting hierarchy",
            "pass the Origin's cgroup",
        )
    path = ctl.acct_root / name
    try:
        if ctl.kind == KIND_V2:
            for line in (path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            raise CgroupUnavailable(
                f"no usage_usec in {path}/cpu.stat", "kernel too old", "use cgroup v1 cpuacct"
            )
        return int((path / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError) as exc:
        raise CgroupUnavailable(
            f"cannot read the CPU usage of {path}", str(exc), "is the cgroup still there?"
        ) from None
