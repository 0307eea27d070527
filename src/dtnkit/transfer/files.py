"""Files on the receiving side: part files, commit by rename, directory fsync, the checksum
cache, free space and the part files in use.  Every name is opened under the served root with
:mod:`~dtnkit.transfer.fsroot` (no symlink followed, nothing outside the root reached).

A file arrives under a hidden part name next to its target (``.<name>.dtnkit-part-<tag>``,
:mod:`dtnkit.transfer.paths`), is fsynced and verified, and only then renamed over the target
(:func:`commit_part`); the directory is fsynced so the rename survives a crash. Errors are the
:class:`OSError` of the failing call: the caller says what it means for its protocol.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import errno
import os
import stat
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dtnkit.transfer import fsroot, paths

CACHE_ENTRIES = 10_000
MAX_NOTED = 10_000  # directories with part files remembered for the janitor, per root
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
            collections.OrderedDict()
        )
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
    # os.urandom(8).hex() is secrets.token_hex(8), without loading hmac and libcrypto
    return path.with_name(paths.part_name(path.name, tag or os.urandom(8).hex()))


def rel(root: Path, path: Path) -> tuple[str, ...]:
    """*path* (under the resolved *root*) as the names :mod:`~dtnkit.transfer.fsroot` takes."""
    return path.relative_to(root).parts


def create_part(part: Path, root: Path, *, readable: bool = False) -> int:
    """Create *part* (it must not exist, no symlink on the way) under *root* and return its
    descriptor, write-only by default; the part counts as in use (:data:`LIVE`) until
    :func:`release`."""
    mode = os.O_RDWR if readable else os.O_WRONLY
    with fsroot.Root(root) as fs:
        fd = fs.open(rel(root, part), mode | os.O_CREAT | os.O_EXCL, 0o666)
    LIVE.add(os.fstat(fd))
    LIVE.note_dir(root, rel(root, part.parent))
    return fd


class LiveParts:
    """The part files this process is writing, by device and inode, and the temporary names
    in use in a directory (a COPY pull's, whose files the client code creates): the janitor
    skips them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: collections.Counter[tuple[int, int]] = collections.Counter()
        self._names: collections.Counter[tuple[int, int, str]] = collections.Counter()
        self._dirs: dict[str, set[tuple[str, ...]]] = {}
        self._overflow: set[str] = set()

    def add_name(self, directory: os.stat_result, name: str) -> None:
        """Every file in *directory* whose name contains *name* is in use."""
        with self._lock:
            self._names[(directory.st_dev, directory.st_ino, name)] += 1

    def discard_name(self, directory: os.stat_result, name: str) -> None:
        with self._lock:
            key = (directory.st_dev, directory.st_ino, name)
            self._names[key] -= 1
            if self._names[key] <= 0:
                del self._names[key]

    def holds(self, st: os.stat_result, dirfd: int, name: str) -> bool:
        """True when the file *name* (its lstat *st*) in the directory *dirfd* is in use."""
        if st in self:
            return True
        with self._lock:
            if not self._names:
                return False
        d = os.fstat(dirfd)
        with self._lock:
            return any(
                dev == d.st_dev and ino == d.st_ino and live in name
                for dev, ino, live in self._names
            )

    def add(self, st: os.stat_result) -> None:
        with self._lock:
            self._items[(st.st_dev, st.st_ino)] += 1

    def discard(self, st: os.stat_result) -> None:
        with self._lock:
            key = (st.st_dev, st.st_ino)
            self._items[key] -= 1
            if self._items[key] <= 0:
                del self._items[key]

    def __contains__(self, st: os.stat_result) -> bool:
        with self._lock:
            return (st.st_dev, st.st_ino) in self._items

    def note_dir(self, root: Path, directory: tuple[str, ...]) -> None:
        """A part file was made in *directory* (names under *root*): the periodic sweep looks
        there (at most :data:`MAX_NOTED` directories per root; beyond, a full sweep)."""
        with self._lock:
            noted = self._dirs.setdefault(str(root), set())
            if len(noted) < MAX_NOTED:
                noted.add(directory)
            else:
                self._overflow.add(str(root))

    def take_dirs(self, root: Path) -> set[tuple[str, ...]] | None:
        """The directories noted under *root* since the last call; None: too many to list,
        sweep the whole tree."""
        with self._lock:
            noted = self._dirs.pop(str(root), set())
            if str(root) in self._overflow:
                self._overflow.discard(str(root))
                return None
            return noted


#: the part files in use in this process (PUT, upload sessions, COPY pulls)
LIVE = LiveParts()


def release(fd: int) -> None:
    """The part file open as *fd* is no longer in use (call before closing it)."""
    with contextlib.suppress(OSError):
        LIVE.discard(os.fstat(fd))


def remove_part(part: Path, root: Path) -> None:
    """Remove *part* under *root* if it is there (never through a symlink)."""
    with contextlib.suppress(OSError), fsroot.Root(root) as fs:
        fs.remove(rel(root, part))


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


def make_dirs(path: Path, mode: int = 0o777) -> int:
    """``mkdir -p`` *path* for a download's destination (``cp -p``); how many it made.

    What exists is used as the path names it (a symbolic link to a mount included, as
    mkdir -p follows it); what is missing is made one name at a time in its parent's
    descriptor (``mkdirat``) and entered with ``O_NOFOLLOW``, so a link planted meanwhile
    in place of a directory just made is refused (ELOOP), never followed elsewhere.  Another
    process making the same directory meanwhile is no error.  OSError of the failing call."""
    path = Path(os.path.abspath(path))
    base, names = path, []
    while not os.path.lexists(base) and base != base.parent:
        names.append(base.name)
        base = base.parent
    here = base
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for name in reversed(names):
                here = here / name
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, mode, dir_fd=fd)
                inner = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
                os.close(fd)
                fd = inner
        finally:
            os.close(fd)
    except OSError as exc:  # named by its whole path (an *at call names only the last name)
        raise OSError(exc.errno, exc.strerror, str(here)) from None
    return len(names)


_RENAME_NOREPLACE = 1  # linux/fs.h
_AT_FDCWD = -100
_UNSET = object()
#: the C library's renameat2 (None: it has none), looked up by the first rename_noreplace
_renameat2: Any = _UNSET


def rename_noreplace(
    src: Path | str,
    dst: Path | str,
    *,
    src_dir_fd: int | None = None,
    dst_dir_fd: int | None = None,
) -> None:
    """Rename *src* to *dst* only if *dst* does not exist, atomically: FileExistsError when
    it does (also when it appears at the last moment; a dangling symlink counts).

    ``renameat2(RENAME_NOREPLACE)``; where the filesystem or the C library lacks it, a hard
    link (which fails with EEXIST just as atomically) and the unlink of *src*."""
    global _renameat2
    if _renameat2 is _UNSET:
        _renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if _renameat2 is not None:
        rc = _renameat2(
            _AT_FDCWD if src_dir_fd is None else src_dir_fd,
            os.fsencode(src),
            _AT_FDCWD if dst_dir_fd is None else dst_dir_fd,
            os.fsencode(dst),
            _RENAME_NOREPLACE,
        )
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


def lstat_or_none(fs: fsroot.Root, names: fsroot.Rel) -> os.stat_result | None:
    try:
        return fs.lstat(names)
    except OSError:
        return None


def remove_checked(root: Path, path: Path, precondition: Callable[[os.stat_result], None]) -> bool:
    """Remove *path* under *root* (as :meth:`fsroot.Root.remove`) when *precondition*, which
    sees it as it is just before the removal (no commit of this process in between), does
    not raise; True when it was a directory."""
    with fsroot.Root(root) as fs, _COMMIT_LOCK:
        return fs.remove(rel(root, path), precondition)


def commit_part(
    cache: ChecksumCache,
    fd: int,
    part: Path,
    path: Path,
    digests: Mapping[str, bytes],
    root: Path,
    *,
    replace: bool = True,
    precondition: Precondition | None = None,
) -> bool:
    """Rename a verified, fsynced part file over *path* (keeping the mode a file there had),
    fsync the directory and remember the digests; True when a file was replaced.

    Both names are taken in the one directory descriptor of *path*'s parent, opened under
    *root* without following symlinks: if the directory was swapped since the part was
    created, the part is not found there and nothing is renamed.
    ``replace=False``: never over an existing file (FileExistsError, atomically, also
    against other processes).  *precondition* sees the target as it is just before the
    rename (no other commit of this process in between) and raises to refuse.
    OSError when the rename or the directory fsync fails."""
    if part.parent != path.parent:
        raise OSError(errno.EXDEV, "a part file is committed in its own directory", str(part))
    with fsroot.Root(root) as fs:
        dirfd = fs.open_dir(rel(root, path.parent))
    try:
        with _COMMIT_LOCK:
            try:
                old: os.stat_result | None = os.stat(path.name, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if precondition is not None:
                precondition(old)
            if old is not None and stat.S_ISREG(old.st_mode):
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            st = os.fstat(fd)
            if replace:
                fsroot.replace_at(dirfd, part.name, path.name)
            else:
                rename_noreplace(part.name, path.name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        os.fsync(dirfd)
    finally:
        os.close(dirfd)
    if digests:
        cache.store(path, file_key(st), digests)
    else:
        cache.forget(path)
    return old is not None


def free_space(directory: Path, root: Path | None = None) -> int | None:
    """Bytes an unprivileged writer may still use under *directory*, None when unknown.

    With *root*, *directory* is opened under it without following a symlink."""
    try:
        if root is None:
            vfs = os.statvfs(directory)
        else:
            with fsroot.Root(root) as fs:
                fd = fs.open_dir(rel(root, directory))
            try:
                vfs = os.fstatvfs(fd)
            finally:
                os.close(fd)
    except OSError:
        return None
    return vfs.f_bavail * vfs.f_frsize
