"""An emulated slow disk: a loop device throttled by a cgroup, for storage-bound tests and demos.

::

    with slow_disk(64 * 2**20, read_bps=20_000_000, write_bps=10_000_000, workdir=tmp) as d:
        process.run(d.wrap(["fio", "--filename=" + d.device, ...]))

The device is ``/dev/loopN`` on a sparse file ``dk-slowdisk-<id>.img`` in ``workdir`` (attached
with ``--direct-io=on`` when the backing file system allows it, so the unthrottled device runs
at the speed of the disk below, not of the page cache).  The limits live in a cgroup
``dk-slowdisk-<id>`` at the top of the hierarchy:

* ``cgroup-v2-io``: ``io.max`` = ``MAJ:MIN rbps=R wbps=W``, used when the cgroup2 mount offers
  the ``io`` controller (it is enabled in the root's ``cgroup.subtree_control`` if it is not
  yet, and disabled again at teardown when this disk enabled it and no other ``dk-slowdisk``
  cgroup is left);
* ``cgroup-v1-blkio``: ``blkio.throttle.read_bps_device`` / ``write_bps_device`` =
  ``MAJ:MIN BPS``, otherwise (a v1 blkio hierarchy is mounted).

Only processes inside the cgroup are throttled: :meth:`SlowDisk.wrap` gives the argv that
moves itself into the cgroup and then execs the command (:mod:`dtnkit.host.cgexec`).

What the v1 throttle catches (kernel 6.18, measured): direct I/O, both ways; buffered reads
that miss the page cache; buffered writes to the raw device (the kernel flushes the device's
page cache when the writer closes it, in the writer's context; note that fio's reported rate
stops before that close, so fio shows page-cache speed while the close takes the throttled
time).  What escapes it: buffered writes into a *file system* on the device, flushed later by
the kernel's writeback threads (v1 does not charge writeback to the writer's cgroup), and
reads served from the page cache.  Use direct I/O to see the limits.

Teardown (always, also when the block raises): processes still in the cgroup get SIGTERM, then
SIGKILL; the cgroup is removed, the loop device detached and the backing file deleted.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dtnkit.errors import BadInput, DtnkitError, NeedsRoot, ToolMissing
from dtnkit.host import cgexec, process

PREFIX = "dk-slowdisk-"
KIND_V1 = "cgroup-v1-blkio"
KIND_V2 = "cgroup-v2-io"
MOUNTS = Path("/proc/self/mounts")
LOOP_CONTROL = Path("/dev/loop-control")


@dataclass
class SlowDisk:
    """A throttled loop device.  Run commands through :meth:`wrap` to be throttled."""

    device: str
    cgroup: str
    kind: str
    backing_file: str = ""
    size_bytes: int = 0
    read_bps: int | None = None
    write_bps: int | None = None

    @property
    def procs_file(self) -> str:
        return str(Path(self.cgroup) / "cgroup.procs")

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the throttling cgroup (:mod:`dtnkit.host.cgexec` moves itself in,
        then execs it)."""
        return cgexec.command([self.procs_file], argv)


def _mounts() -> list[tuple[str, str, list[str]]]:
    """(mount point, fs type, options) of every mount, from /proc/self/mounts."""
    out = []
    try:
        text = MOUNTS.read_text()
    except OSError:
        return []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            point = fields[1].replace("\\040", " ")
            out.append((point, fields[2], fields[3].split(",")))
    return out


def _v2_root() -> tuple[Path | None, str]:
    """The cgroup2 mount when its ``io`` controller can be used; else (None, reason)."""
    for point, fstype, _opts in _mounts():
        if fstype != "cgroup2":
            continue
        root = Path(point)
        try:
            controllers = (root / "cgroup.controllers").read_text().split()
        except OSError as exc:
            return None, f"cannot read {root}/cgroup.controllers ({exc.strerror})"
        if "io" in controllers:
            return root, ""
        return None, (
            f"the cgroup2 mount {root} offers no io controller "
            f"(controllers: {' '.join(controllers) or 'none'})"
        )
    return None, "no cgroup2 mount"


def _v1_root() -> tuple[Path | None, str]:
    """The cgroup v1 blkio hierarchy with throttle files; else (None, reason)."""
    for point, fstype, opts in _mounts():
        if fstype == "cgroup" and "blkio" in opts:
            root = Path(point)
            if (root / "blkio.throttle.read_bps_device").exists():
                return root, ""
            return None, f"{root} has no blkio.throttle files (kernel without throttling)"
    return None, "no cgroup v1 blkio hierarchy mounted"


def _detect() -> tuple[str, Path]:
    """The cgroup kind to throttle with and its hierarchy's root; DtnkitError when none."""
    v2, why_v2 = _v2_root()
    if v2 is not None:
        return KIND_V2, v2
    v1, why_v1 = _v1_root()
    if v1 is not None:
        return KIND_V1, v1
    raise DtnkitError(
        "no block I/O throttling controller",
        f"{why_v2}; {why_v1}",
        "mount a cgroup v1 blkio hierarchy or enable the io controller in cgroup2",
    )


def _preflight() -> tuple[str, Path]:
    if os.geteuid() != 0:
        raise NeedsRoot(
            "an emulated slow disk needs root",
            "it attaches a loop device and writes cgroup limits",
            "run as root",
        )
    if shutil.which("losetup") is None:
        raise ToolMissing(
            "losetup is not installed", "it attaches the loop device", "apt-get install mount"
        )
    if not LOOP_CONTROL.exists():
        raise DtnkitError(
            "no loop device support",
            f"{LOOP_CONTROL} does not exist",
            "use a kernel with loop devices (CONFIG_BLK_DEV_LOOP), or modprobe loop",
        )
    return _detect()


def throttling_available() -> str | None:
    """None when :func:`slow_disk` can work here, else the reason it cannot."""
    try:
        _preflight()
    except DtnkitError as exc:
        return f"{exc.what}: {exc.why}" if exc.why else exc.what
    return None


def _run(argv: Sequence[str]) -> process.CompletedProcess[str]:
    return process.run(argv, timeout=60)


def _attach(backing: Path) -> str:
    """``losetup --find --show``, with direct I/O on the backing file when it is allowed."""
    proc = _run(["losetup", "--find", "--show", "--direct-io=on", str(backing)])
    if proc.returncode != 0:
        proc = _run(["losetup", "--find", "--show", str(backing)])
    device = proc.stdout.strip()
    if proc.returncode != 0 or not device.startswith("/dev/"):
        raise DtnkitError(
            "no loop device could be attached",
            (proc.stderr or "").strip()[-300:] or f"losetup exited {proc.returncode}",
            "check `losetup -a` for free devices and that /dev/loop* exist",
        )
    return device


def _detach(device: str, backing: Path) -> str | None:
    """Detach the loop device, checking it is still ours; an error message or None."""
    proc = _run(["losetup", "--noheadings", "--output", "BACK-FILE", device])
    if proc.returncode != 0 or Path(proc.stdout.strip()).name != backing.name:
        return None  # already gone (or reused by someone else: not ours to detach)
    proc = _run(["losetup", "-d", device])
    if proc.returncode != 0:
        return f"losetup -d {device}: {proc.stderr.strip()}"
    return None


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text + "\n")
    except OSError as exc:
        raise DtnkitError(
            f"cannot write {text!r} to {path}",
            exc.strerror or str(exc),
            "check that the kernel supports this throttle",
        ) from None


def _procs(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _empty_cgroup(cgroup: Path) -> None:
    """Stop every process still in the cgroup: SIGTERM, then SIGKILL after a second (again
    for what they started meanwhile), waiting 5 s at most for the killed.  They are the
    children of whoever ran them through :meth:`SlowDisk.wrap`: reaped by them, not here."""
    grace_s = 1.0
    for _ in range(3):
        pids = _procs(cgroup)
        if not pids or process.stop_pids(pids, grace_s, reap=False, reap_s=5.0):
            return  # empty, or one is unkillable (D state): rmdir will report it
        grace_s = 0.0


def _remove_cgroup(cgroup: Path) -> str | None:
    if not cgroup.exists():
        return None
    _empty_cgroup(cgroup)
    for _ in range(50):  # a killed task may need a moment to leave
        try:
            cgroup.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            last = exc
            time.sleep(0.1)
    return f"rmdir {cgroup}: {last.strerror}"


def _enable_v2_io(root: Path) -> bool:
    """Make sure children of the cgroup2 root get io.max; True when this call enabled it."""
    control = root / "cgroup.subtree_control"
    if "io" in control.read_text().split():
        return False
    _write(control, "+io")
    return True


def _disable_v2_io(root: Path) -> str | None:
    if any(p.name.startswith(PREFIX) for p in root.iterdir() if p.is_dir()):
        return None  # another slow disk still throttles through it
    try:
        (root / "cgroup.subtree_control").write_text("-io\n")
    except OSError as exc:
        return f"cannot disable io in {root}/cgroup.subtree_control: {exc.strerror}"
    return None


def _check_args(
    size_bytes: int, read_bps: int | None, write_bps: int | None, workdir: Path
) -> None:
    if not isinstance(size_bytes, int) or size_bytes < 2**20 or size_bytes % 4096:
        raise BadInput(
            f"slow disk size {size_bytes!r} is not usable",
            "at least 1 MiB, a multiple of 4 KiB",
            "e.g. 64 MiB",
        )
    for name, value in (("read_bps", read_bps), ("write_bps", write_bps)):
        if value is not None and (not isinstance(value, int) or value < 4096):
            raise BadInput(
                f"{name} {value!r} is not usable",
                "a rate in bytes/s of at least 4096, or None for no limit",
                f"e.g. {name}=10_000_000",
            )
    if not workdir.is_dir():
        raise BadInput(
            f"{workdir} is not a directory",
            "the backing file goes there",
            "create it or give another workdir",
        )


@contextlib.contextmanager
def slow_disk(
    size_bytes: int, *, read_bps: int | None, write_bps: int | None, workdir: Path
) -> Iterator[SlowDisk]:
    """A loop device of ``size_bytes`` whose reads/writes are limited to ``*_bps`` bytes/s.

    ``None`` leaves that direction unlimited.  Everything is removed when the block ends.
    """
    workdir = Path(workdir)
    _check_args(size_bytes, read_bps, write_bps, workdir)
    kind, root = _preflight()
    token = secrets.token_hex(4)
    backing = workdir.resolve() / f"{PREFIX}{token}.img"
    cgroup = root / f"{PREFIX}{token}"
    device: str | None = None
    enabled_io = False
    body_error: BaseException | None = None
    try:
        with open(backing, "xb") as f:
            f.truncate(size_bytes)  # sparse
        device = _attach(backing)
        rdev = os.stat(device).st_rdev
        majmin = f"{os.major(rdev)}:{os.minor(rdev)}"
        if kind == KIND_V2:
            enabled_io = _enable_v2_io(root)
        cgroup.mkdir()
        if kind == KIND_V2:
            rbps = "max" if read_bps is None else str(read_bps)
            wbps = "max" if write_bps is None else str(write_bps)
            _write(cgroup / "io.max", f"{majmin} rbps={rbps} wbps={wbps}")
        else:
            if read_bps is not None:
                _write(cgroup / "blkio.throttle.read_bps_device", f"{majmin} {read_bps}")
            if write_bps is not None:
                _write(cgroup / "blkio.throttle.write_bps_device", f"{majmin} {write_bps}")
        yield SlowDisk(
            device=device,
            cgroup=str(cgroup),
            kind=kind,
            backing_file=str(backing),
            size_bytes=size_bytes,
            read_bps=read_bps,
            write_bps=write_bps,
        )
    except BaseException as exc:
        body_error = exc
        raise
    finally:
        problems = [_remove_cgroup(cgroup)]
        if enabled_io:
            problems.append(_disable_v2_io(root))
        if device is not None:
            problems.append(_detach(device, backing))
        try:
            backing.unlink(missing_ok=True)
        except OSError as exc:
            problems.append(f"rm {backing}: {exc.strerror}")
        left = [p for p in problems if p]
        if left:
            error = DtnkitError(
                "the slow disk was not fully removed",
                "; ".join(left),
                f"remove what is left by hand (cgroup {cgroup}, `losetup -d {device}`, {backing})",
            )
            if body_error is None:
                raise error
            body_error.add_note(error.render())  # keep the block's own error in front
