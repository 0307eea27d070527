"""The files of a captured host tree (``--tree DIR``), opened relative to its root without
following any link.

dtnkit runs as root, and a tree is a directory someone else may have made: a link in it
(``etc -> /etc``, ``sys/class/net/eth0/mtu -> /root/.ssh/authorized_keys``) would make an
apply, a restore or ``--persist`` read or write outside the tree.  So every path under a tree
is opened one name at a time from the root's directory descriptor, each with ``O_NOFOLLOW``
(``openat``), and a link anywhere on the way is refused with :class:`TreeLink` (exit 9),
including links that stay inside the tree: a captured tree holds plain files and
directories (tests/fixtures/hosts/README.md).  ``..`` is refused the same way.

The walk, not ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)``: both refuse the same
paths, the walk works on every kernel, and it needs no ctypes (a tree is a few hundred small
files, a few thousand system calls).  A write goes to a new file beside the old one, renamed
over it, so it never writes through an existing inode (a hard link out of the tree is left
as it was).  :func:`check` walks the whole tree once when a Host is made from it, so a tree
with a link is refused before anything is read or written; the per-path walk keeps that true
when a link appears later.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from dtnkit.errors import BadInput

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
#: the most entries :func:`check` looks at (a captured tree holds a few hundred)
MAX_ENTRIES = 200_000


class TreeLink(BadInput):
    """A captured tree that holds a link (or a path that climbs out of it with ``..``)."""


def _refuse(root: Path, rel: str, target: str | None) -> TreeLink:
    points = f" (-> {target})" if target is not None else ""
    return TreeLink(
        f"captured tree {root} holds a symbolic link: {rel}{points}",
        "dtnkit follows no link inside a tree (it runs as root: a link could make it read or "
        "write outside the tree)",
        "replace the link with a copy of what it points to, or capture the tree again",
    )


class Tree:
    """A captured tree rooted at ``root``; paths are ``/proc/...``-style, relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def parts(self, path: str) -> list[str]:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise TreeLink(
                f"path {path!r} climbs out of captured tree {self.root}",
                "dtnkit reads and writes a tree only below its root",
                "check the interface and file names the input gives",
            )
        return parts

    @contextmanager
    def _dir(self, parts: list[str], *, create: bool = False) -> Iterator[int]:
        """The descriptor of directory ``parts`` (made when ``create``), every name opened
        without following a link."""
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, name in enumerate(parts):
                try:
                    nxt = os.open(name, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with suppress(FileExistsError):
                        os.mkdir(name, 0o755, dir_fd=fd)
                    nxt = self._open_checked(fd, parts[: i + 1], _DIR)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                        self._raise_if_link(fd, parts[: i + 1])
                    raise
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def _open_checked(self, dir_fd: int, parts: list[str], flags: int, mode: int = 0o644) -> int:
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                self._raise_if_link(dir_fd, parts)
            raise

    def _raise_if_link(self, dir_fd: int, parts: list[str]) -> None:
        try:
            st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            try:
                target: str | None = os.readlink(parts[-1], dir_fd=dir_fd)
            except OSError:
                target = None
            raise _refuse(self.root, "/".join(parts), target)

    # ---- what Host asks -----------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        """The file's bytes; FileNotFoundError / NotADirectoryError when it is not there."""
        parts = self.parts(path)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(self.root))
        with self._dir(parts[:-1]) as parent:
            fd = self._open_checked(parent, parts, os.O_RDONLY)
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def lstat(self, path: str) -> os.stat_result | None:
        """``lstat`` of ``path`` (None when it is not there); a link is refused."""
        parts = self.parts(path)
        try:
            if not parts:
                return os.stat(self.root)
            with self._dir(parts[:-1]) as parent:
                st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    self._raise_if_link(parent, parts)
                return st
        except (FileNotFoundError, NotADirectoryError):
            return None

    def exists(self, path: str) -> bool:
        return self.lstat(path) is not None

    def is_file(self, path: str) -> bool:
        st = self.lstat(path)
        return st is not None and stat.S_ISREG(st.st_mode)

    def writable(self, path: str) -> bool:
        parts = self.parts(path)
        if not parts or self.lstat(path) is None:
            return False
        with self._dir(parts[:-1]) as parent:
            return os.access(parts[-1], os.W_OK, dir_fd=parent, follow_symlinks=False)

    def listdir(self, path: str) -> list[str]:
        """The names in directory ``path`` (sorted; [] when it is not there)."""
        try:
            with self._dir(self.parts(path)) as fd:
                return sorted(os.listdir(fd))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def write_bytes(self, path: str, data: bytes, *, make_parents: bool = True) -> None:
        """Replace ``path`` with ``data``: a new file in the same directory, renamed over the
        old one (never written through an existing inode); parents made when asked."""
        parts = self.parts(path)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(self.root))
        with self._dir(parts[:-1], create=make_parents) as parent:
            self._raise_if_link(parent, parts)
            tmp = f".{parts[-1]}.dtnkit-{os.getpid()}"
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=parent,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.close(fd)
                fd = -1
                os.rename(tmp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise

    def unlink(self, path: str) -> None:
        """Remove the file ``path`` if it is there (a link there is removed, not followed)."""
        parts = self.parts(path)
        try:
            with self._dir(parts[:-1]) as parent:
                os.unlink(parts[-1], dir_fd=parent)
        except (FileNotFoundError, NotADirectoryError):
            return


def check(root: Path) -> None:
    """Refuse a tree holding a symbolic link anywhere (see the module's note), before it is
    used; walks at most :data:`MAX_ENTRIES` entries."""
    seen = 0
    stack = [Path()]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(root / rel))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                return
            if entry.is_symlink():
                try:
                    target: str | None = os.readlink(entry.path)
                except OSError:
                    target = None
                raise _refuse(root, str(rel / entry.name), target)
            if entry.is_dir(follow_symlinks=False):
                stack.append(rel / entry.name)
