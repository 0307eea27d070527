"""Files on the receiving side: part files, commit by rename, directory fsync, the checksum
cache and free space.

A file arrives under a hidden part name next to its target (``.<name>.dtnkit-part-<tag>``,
:mod:`dtnkit.transfer.paths`), is fsynced and verified, and only then renamed over the target
(:func:`commit_part`); the directory is fsynced so the rename survives a crash. Errors are the
:class:`OSError` of the failing call: the caller says what it means for its protocol.
"""

from __future__ import annotations

import collections
import ctypes
import errno
import os
import secrets
import stat
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from dtnkit.transfer import paths

CACHE_ENTRIES = 10_000
FileKey = tuple[int, int, int, int]  # size, mtime_ns, inode, device


def file_key(st: os.stat_result) -> FileKey:
    """What identifies one version of a file: size, mtime_ns, inode, device."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


class ChecksumCache:
    """Digests per file, valid while (path, size, mtime_ns, inode, device) stay the same."""

    def __init__(self, max_entries: int = CACHE_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._max = max_entries
        self._items: collections.OrderedDict[str, tuple[FileKey, dict[str, bytes]]] = (
            collections.OrderedDict())
        self.hits = 0
        self.misses = 0

    def lookup(self, path: Path, key: FileKey) -> dict[str, bytes]:
        with self._lock:
            item = self._items.get(str(path))
            if item is None or item[0] != key:
                return {}
            self._items.move_to_end(str(path))
            return dict(item[1])

    def store(self, path: Path, key: FileKey, digests: Mapping[str, bytes]) -> None:
        with self._lock:
            item = self._items.get(str(path))
            merged = dict(item[1]) if item is not None and item[0] == key else {}
            merged.update(digests)
            self._items[str(path)] = (key, merged)
            self._items.move_to_end(str(path))
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    def forget(self, path: Path) -> None:
        with self._lock:
            self._items.pop(str(path), None)


def part_for(path: Path, tag: str | None = None) -> Path:
    """The hidden part file of *path* (a random tag unless one is given)."""
    return path.with_name(paths.part_name(path.name, tag or secrets.token_hex(8)))


def create_part(part: Path, *, readable: bool = False) -> int:
    """Create *part* (it must not exist) and return its descriptor, write-only by default."""
    mode = os.O_RDWR if readable else os.O_WRONLY
    return os.open(part, mode | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)


def write_all(fd: int, view: memoryview) -> None:
    """Write all of *view* at the file position."""
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    """Write all of *view* at *offset*."""
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def fsync_dir(directory: Path) -> None:
    """fsync a directory, so a rename or unlink in it is durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_NOREPLACE = 1  # linux/fs.h
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def rename_noreplace(src: Path | str, dst: Path | str, *, src_dir_fd: int | None = None,
                     dst_dir_fd: int | None = None) -> None:
    """Rename *src* to *dst* only if *dst* does not exist, atomically: FileExistsError when
    it does (also when it appears at the last moment; a dangling symlink counts).

    ``renameat2(RENAME_NOREPLACE)``; where the filesystem or the C library lacks it, a hard
    link (which fails with EEXIST just as atomically) and the unlink of *src*."""
    if _renameat2 is not None:
        rc = _renameat2(_AT_FDCWD if src_dir_fd is None else src_dir_fd, os.fsencode(src),
                        _AT_FDCWD if dst_dir_fd is None else dst_dir_fd, os.fsencode(dst),
                        _RENAME_NOREPLACE)
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), str(dst))
    os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
    os.unlink(src, dir_fd=src_dir_fd)


#: Held from a commit's look at its target to its rename, so that a conditional commit
#: (If-Match) compares the entity tag of the very file it replaces.
_COMMIT_LOCK = threading.Lock()

#: Raises when a commit must not happen, given the target's stat (None: no target).
Precondition = Callable[[os.stat_result | None], None]


def commit_part(cache: ChecksumCache, fd: int, part: Path, path: Path,
                digests: Mapping[str, bytes], *, replace: bool = True,
                precondition: Precondition | None = None) -> bool:
    """Rename a verified, fsynced part file over *path* (keeping the mode a file there had),
    fsync the directory and remember the digests; True when a file was replaced.

    ``replace=False``: never over an existing file (FileExistsError, atomically, also
    against other processes).  *precondition* sees the target as it is just before the
    rename (no other commit of this process in between) and raises to refuse.
    OSError when the rename or the directory fsync fails."""
    with _COMMIT_LOCK:
        existed = os.path.lexists(path)
        old = stat_or_none(path) if existed else None
        if precondition is not None:
            precondition(old)
        if old is not None and stat.S_ISREG(old.st_mode):
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
        st = os.fstat(fd)
        if replace:
            os.replace(part, path)
        else:
            rename_noreplace(part, path)
    fsync_dir(path.parent)
    if digests:
        cache.store(path, file_key(st), digests)
    else:
        cache.forget(path)
    return existed


def free_space(directory: Path) -> int | None:
    """Bytes an unprivileged writer may still use under *directory*, None when unknown."""
    try:
        vfs = os.statvfs(directory)
    except OSError:
        return None
    return vfs.f_bavail * vfs.f_frsize
