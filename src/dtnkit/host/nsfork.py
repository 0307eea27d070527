"""A child of this process that serves from inside a named network namespace.

``ip netns exec NS python ...`` costs two program starts (ip, then a fresh Python) on every
namespace audit.  :func:`fork_in_netns` forks the already-running dtnkit process instead; the
child does what ``ip netns exec`` does before it runs its command:

1. ``setns(CLONE_NEWNET)`` on ``/run/netns/NS``;
2. ``unshare(CLONE_NEWNS)`` and makes ``/`` a recursive slave (so nothing it mounts
   reaches the parent's mount table);
3. detaches ``/sys`` and mounts a fresh sysfs there (read-only when ``/sys`` was), so
   ``/sys/class/net`` lists the namespace's devices;
4. bind-mounts each file of ``/etc/netns/NS`` over its namesake in ``/etc`` (the lab's
   ``hosts`` and ``resolv.conf``);

then it calls the given program (a function of :mod:`dtnkit.host.nsserve`, with its stdin and
stdout) and exits with ``os._exit`` (no atexit handler, no flush of the parent's buffers).  It
keeps only its two pipe ends and /dev/null as stderr (every other descriptor the parent had
is closed first), dies with its parent (``PR_SET_PDEATHSIG``), and ends when its program
returns.

The child tells the parent its set-up worked with one byte (``READY``) before its program
runs; anything else (a refused step, a kernel without ``setns``) means the caller falls back
to ``ip netns exec``.

Why a fork of our own and not pyroute2's ``NetNS``/``setns``: ``import pyroute2`` costs
150-240 ms (its package imports every protocol it speaks), more than a whole namespace audit
(about 110 ms, docs/architecture.md), and the steps above are the few system calls
``ip netns exec`` makes; Python 3.11 has no ``os.setns`` (3.12 does), so they go through
libc with ctypes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import select
import sys
from collections.abc import Callable
from typing import BinaryIO

#: what a child runs once it is in its namespace: a function of its stdin and stdout
Program = Callable[[BinaryIO, BinaryIO], None]

READY = b"\x01"
FAILED = b"\x00"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY = 1
_MS_REC = 0x4000
_MS_SLAVE = 1 << 19
_MS_BIND = 0x1000
_MNT_DETACH = 2
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9

NETNS_RUN_DIR = "/run/netns"
NETNS_ETC_DIR = "/etc/netns"


class ForkedChild:
    """The parent's end: ``stdin``/``stdout`` pipes, ``wait`` and ``kill`` (as Popen has)."""

    def __init__(self, pid: int, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.pid = pid
        self.stdin: BinaryIO | None = stdin
        self.stdout: BinaryIO | None = stdout
        self.returncode: int | None = None

    def ready(self) -> bool:
        """Whether the child's set-up worked (reads its first byte: call once)."""
        try:
            return self.stdout is not None and self.stdout.read(1) == READY
        except (OSError, ValueError):
            return False

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the child ends; None when ``timeout`` passes first."""
        if self.returncode is not None:
            return self.returncode
        if timeout is not None:
            try:
                pidfd = os.pidfd_open(self.pid)
            except OSError:  # already reaped, or no pidfd: wait below
                pidfd = -1
            if pidfd >= 0:
                try:
                    if not select.select([pidfd], [], [], timeout)[0]:
                        return None
                finally:
                    os.close(pidfd)
        try:
            status = os.waitpid(self.pid, 0)[1]
            self.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            self.returncode = -1
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, _SIGKILL)

    def close(self, timeout: float = 5.0) -> None:
        """Close its stdin (its loop ends), wait for it; kill it if it does not end."""
        for pipe in (self.stdin, self.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.stdin = self.stdout = None
        if self.wait(timeout) is None:
            self.kill()
            self.wait()


def usable(netns: str) -> bool:
    """Whether a forked child can stand in for ``ip netns exec NETNS`` here."""
    return (
        sys.platform == "linux"
        and os.geteuid() == 0
        and "/" not in netns
        and netns not in ("", ".", "..")  # a name, not a path
        and os.path.exists(f"{NETNS_RUN_DIR}/{netns}")
    )


def fork_in_netns(netns: str, program: Program) -> ForkedChild | None:
    """A forked child running ``program`` inside ``netns`` (see the module docstring), or
    None when it cannot be forked (the caller falls back to ``ip netns exec``)."""
    return _fork(program, netns)


def fork_new_netns(program: Program) -> ForkedChild | None:
    """A forked child running ``program`` inside a new, unnamed network namespace
    (``unshare(CLONE_NEWNET)``: as ``unshare --net``, without its program starts), which
    waits for its input (see :func:`run_in_new_netns`): forked early, its set-up overlaps
    with the caller's work.  Unused, it ends when its stdin closes (its parent's end, at the
    latest its exit).  The namespace vanishes with the child."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return None
    return _fork(program, None)


def run_in_new_netns(program: Program, data: bytes, child: ForkedChild | None = None) -> str | None:
    """What ``program`` writes, given ``data`` on its stdin, in a forked child inside a new
    network namespace (``child``, from :func:`fork_new_netns` with the same program, when
    given); None when the child could not be forked, could not unshare or failed (the caller
    then runs ``unshare``)."""
    if child is None:
        child = fork_new_netns(program)
        if child is None:
            return None
    try:
        assert child.stdin is not None
        child.stdin.write(data)
        child.stdin.close()
    except (OSError, ValueError, AssertionError):
        child.close()
        return None
    try:
        ok = child.ready()
        out = child.stdout.read() if ok and child.stdout is not None else b""
    except (OSError, ValueError):
        ok = False
    finally:
        child.close()
    if not ok or child.returncode != 0:
        return None
    return out.decode(errors="replace")


def _threaded() -> bool:
    """Whether another Python thread runs here (an exporter's server, a read-ahead pool): a
    fork then copies locks other threads may hold (the import lock, a logging handler's), and
    the child could hang on one, so the callers fall back to starting a new process."""
    threading = sys.modules.get("threading")  # not imported: no Python thread was started
    return threading is not None and threading.active_count() > 1


def _fork(program: Program, netns: str | None) -> ForkedChild | None:
    if _threaded():
        return None
    parent = os.getpid()
    (in_r, in_w), (out_r, out_w) = os.pipe(), os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)
        return None
    if pid == 0:  # pragma: no cover (the child: measured by the tests through its replies)
        _child(netns, program, parent, in_r, out_w)  # never returns
    os.close(in_r)
    os.close(out_w)
    return ForkedChild(pid, os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"))


def _child(netns: str | None, program: Program, parent: int, in_r: int, out_w: int) -> None:
    # pragma: no cover (runs in the forked child only)
    status = 1
    try:
        gc.freeze()  # the parent's objects are never collected here (their fds are closed)
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
        _enter(netns, parent)
        os.write(1, READY)
        # new file objects on fds 0 and 1 (the parent's sys.stdin/stdout are kept, never
        # flushed: os._exit below)
        with open(0, "rb", closefd=False) as stdin, open(1, "wb", closefd=False) as stdout:
            program(stdin, stdout)
        status = 0
    except BaseException:
        with contextlib.suppress(OSError):
            os.write(1, FAILED)
    finally:
        os._exit(status)


def _enter(netns: str | None, parent: int) -> None:
    """setns, a mount namespace of its own with / a slave, a fresh sysfs: as ip netns exec;
    with no ``netns``: a new network namespace (unshare), as ``unshare --net``."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    check(libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0), "prctl")
    if os.getppid() != parent:  # the parent ended before prctl took hold
        raise OSError("parent gone")
    if netns is None:
        check(libc.unshare(_CLONE_NEWNET), "unshare")
        return
    fd = os.open(f"{NETNS_RUN_DIR}/{netns}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        check(libc.setns(fd, _CLONE_NEWNET), "setns")
    finally:
        os.close(fd)
    check(libc.unshare(_CLONE_NEWNS), "unshare")
    check(libc.mount(b"none", b"/", None, _MS_REC | _MS_SLAVE, None), "mount / rslave")
    flags = 0
    if libc.umount2(b"/sys", _MNT_DETACH) != 0:  # no sysfs there: keep /sys's own flags
        with contextlib.suppress(OSError):
            if os.statvfs("/sys").f_flag & os.ST_RDONLY:
                flags = _MS_RDONLY
    check(libc.mount(netns.encode(), b"/sys", b"sysfs", flags, None), "mount sysfs")
    etc = f"{NETNS_ETC_DIR}/{netns}"
    if os.path.isdir(etc):  # each file there over /etc's own (a failed bind: as ip, not fatal)
        for name in sorted(os.listdir(etc)):
            libc.mount(f"{etc}/{name}".encode(), f"/etc/{name}".encode(), b"none", _MS_BIND, None)
