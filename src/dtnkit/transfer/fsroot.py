"""Every file operation of the server, relative to the served root's directory descriptor.

A path checked and then used again is a race: between :func:`dtnkit.transfer.paths.resolve`
and ``open(path)`` a local user can swap a directory for a symlink (``renameat2`` with
``RENAME_EXCHANGE``) and the open lands outside the root.  So nothing here follows a path
twice, and nothing follows a symlink at all:

* a relative path (a tuple of names, each already checked by :mod:`~dtnkit.transfer.paths`:
  no ``/``, no ``..``) is opened with ``openat2(2)`` and ``RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS`` against the root's descriptor, where the kernel has it (Linux 5.6;
  probed once); otherwise one name at a time with ``O_NOFOLLOW | O_DIRECTORY`` from the
  root's descriptor (:data:`FALLBACK` forces that walk, for tests);
* mkdir, unlink, rmdir, rename and stat act on one name relative to the descriptor of its
  parent directory (``mkdirat``, ``unlinkat``, ``renameat``, ``fstatat`` without following),
  so a swap can at worst make them act inside another directory of the tree, never outside;
* a symlink anywhere on the way is refused with ``ELOOP``, including links that stay
  inside the tree: the server serves no symlinks.

Errors are the :class:`OSError` of the failing call; the caller says what it means.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

Rel = Sequence[str]

SYS_OPENAT2 = 437  # the same number on every architecture (new syscalls share a table)
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

#: Root paths held open (descriptor, users) by :func:`pin`: a :class:`Root` of such a path
#: duplicates that descriptor instead of opening the path again, so a user who can rename
#: one of the root's parents cannot swap the root itself for a link once the server runs.
_pinned: dict[str, tuple[int, int]] = {}
_pin_lock = threading.Lock()


def pin(path: str | Path) -> None:
    """Open the directory *path* now and use that descriptor for every later :class:`Root`
    of it, until as many :func:`unpin` calls."""
    _openat2_parts()  # a server loads ctypes at its start, not at a request that finds no
    #                   descriptor left to read the module with (EMFILE)
    key = os.fspath(path)
    with _pin_lock:
        held = _pinned.get(key)
        if held is not None:
            _pinned[key] = (held[0], held[1] + 1)
            return
        _pinned[key] = (os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), 1)


def unpin(path: str | Path) -> None:
    key = os.fspath(path)
    with _pin_lock:
        held = _pinned.get(key)
        if held is None:
            return
        if held[1] > 1:
            _pinned[key] = (held[0], held[1] - 1)
            return
        del _pinned[key]
        os.close(held[0])  # under the lock: no Root is duplicating it now


#: Force the component-by-component walk even where ``openat2`` exists (tests).
FALLBACK = False
_probed: bool | None = None


@functools.cache
def _openat2_parts() -> tuple[Callable[..., int], type]:
    """libc's ``syscall`` and ``struct open_how``, made at the first ``openat2``."""

    class OpenHow(ctypes.Structure):
        _fields_ = [
            ("flags", ctypes.c_uint64),
            ("mode", ctypes.c_uint64),
            ("resolve", ctypes.c_uint64),
        ]

    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    return syscall, OpenHow


RETRIES = 64  # EAGAIN: a rename raced the lookup; retried this often, then refused


def _raw_openat2(dirfd: int, rel: bytes, flags: int, mode: int) -> int:
    syscall, open_how = _openat2_parts()
    how = open_how(flags, mode, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)
    tries = 0
    while True:
        fd = syscall(
            ctypes.c_long(SYS_OPENAT2),
            ctypes.c_int(dirfd),
            ctypes.c_char_p(rel),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        tries += 1
        if code == errno.EINTR or (code == errno.EAGAIN and tries < RETRIES):
            continue
        raise OSError(code, os.strerror(code), rel.decode(errors="surrogateescape"))


def has_openat2() -> bool:
    """True when this kernel has ``openat2`` with ``RESOLVE_BENEATH`` (probed once; a
    failure other than "not there" or "not allowed" is not remembered)."""
    global _probed
    if _probed is None:
        top = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.close(_raw_openat2(top, b".", _DIR_FLAGS, 0))
        except OSError as exc:
            if exc.errno in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):
                _probed = False
            return False
        finally:
            os.close(top)
        _probed = True
    return _probed


def uses_openat2() -> bool:
    return not FALLBACK and has_openat2()


def _check(rel: Rel) -> None:
    for name in rel:
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise OSError(errno.EINVAL, "not a plain name", name)


class Root:
    """The served directory, held open; every operation takes a path relative to it.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = os.fspath(path)
        with _pin_lock:
            pinned = _pinned.get(self.path)
            if pinned is not None:  # a copy of the descriptor opened at server start
                self.fd = os.dup(pinned[0])
                return
        self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Root:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- opening ---------------------------------------------------------------------

    def open(self, rel: Rel, flags: int, mode: int = 0o666) -> int:
        """``open`` of *rel* (``()`` is the root itself); ELOOP for a symlink on the way."""
        _check(rel)
        flags |= os.O_CLOEXEC | os.O_NOFOLLOW
        if uses_openat2():
            target = os.fsencode("/".join(rel)) if rel else b"."
            if not flags & os.O_CREAT:
                mode = 0
            return _raw_openat2(self.fd, target, flags, mode)
        if not rel:
            return os.open(".", flags & ~os.O_NOFOLLOW, mode, dir_fd=self.fd)
        parent = self.open_dir(rel[:-1])
        try:
            return os.open(rel[-1], flags, mode, dir_fd=parent)
        finally:
            os.close(parent)

    def open_dir(self, rel: Rel) -> int:
        """A descriptor of the directory *rel* (read-only: listable, fsyncable), for ``*at``
        calls."""
        _check(rel)
        if uses_openat2():
            return _raw_openat2(self.fd, os.fsencode("/".join(rel)) if rel else b".", _DIR_FLAGS, 0)
        fd = os.open(".", _DIR_FLAGS, dir_fd=self.fd)
        try:
            for name in rel:
                nxt = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    # --- one name in its parent ------------------------------------------------------

    def lstat(self, rel: Rel) -> os.stat_result:
        """``stat`` of *rel* itself (a symlink at the end is reported, not followed)."""
        if not rel:
            return os.fstat(self.fd)
        _check(rel[-1:])
        parent = self.open_dir(rel[:-1])
        try:
            return os.stat(rel[-1], dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)

    def mkdir(self, rel: Rel, mode: int = 0o777) -> None:
        _check(rel[-1:])
        parent = self.open_dir(rel[:-1])
        try:
            os.mkdir(rel[-1], mode, dir_fd=parent)
        finally:
            os.close(parent)

    def remove(
        self, rel: Rel, precondition: Callable[[os.stat_result], None] | None = None
    ) -> bool:
        """Remove the file, symlink or empty directory *rel*; True when it was a directory.
        *precondition* sees its ``lstat``, taken in the parent's descriptor just before the
        removal, and raises to refuse it."""
        if not rel:
            raise OSError(errno.EBUSY, "the root cannot be removed", ".")
        _check(rel[-1:])
        parent = self.open_dir(rel[:-1])
        try:
            st = os.stat(rel[-1], dir_fd=parent, follow_symlinks=False)
            if precondition is not None:
                precondition(st)
            is_dir = stat.S_ISDIR(st.st_mode)
            if is_dir:
                os.rmdir(rel[-1], dir_fd=parent)
            else:
                os.unlink(rel[-1], dir_fd=parent)
            return is_dir
        finally:
            os.close(parent)

    def listdir(self, rel: Rel) -> list[tuple[str, os.stat_result]]:
        """The members of directory *rel* with their ``lstat``, read through one descriptor."""
        fd = self.open(rel, os.O_RDONLY | os.O_DIRECTORY)
        try:
            names = os.listdir(fd)
            out = []
            for name in names:
                try:
                    out.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
                except OSError:
                    continue  # gone meanwhile
            return out
        finally:
            os.close(fd)

    def scandir(self, rel: Rel) -> Iterator[tuple[str, os.stat_result]]:
        """The members of directory *rel* with their ``lstat``, one at a time, in directory
        order (a listing of any size in bounded memory), read through one descriptor.
        OSError when the directory cannot be opened or read."""
        fd = self.open(rel, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(fd) as scan:
                for entry in scan:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # gone meanwhile
                    yield entry.name, st
        finally:
            os.close(fd)


def replace_at(dirfd: int, src: str, dst: str) -> None:
    """``renameat(dirfd, src, dirfd, dst)``: both names in the one directory *dirfd*."""
    _check((src, dst))
    os.rename(src, dst, src_dir_fd=dirfd, dst_dir_fd=dirfd)


def fd_path(fd: int) -> Path:
    """A path that names the open file or directory *fd* itself (``/proc/self/fd/N``).

    For code that only takes paths (the client's download and upload, used by COPY): the
    kernel resolves it to the open file, whatever has been renamed since.
    """
    return Path(f"/proc/self/fd/{fd}")
