"""The members of a served directory, as GET (plain text) and PROPFIND (XML) list them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dtnkit.transfer import files, fsroot, paths
from dtnkit.transfer.server.errors import os_error
from dtnkit.transfer.wire import multistatus, ranges


@dataclass(frozen=True)
class ListedFile:
    name: str
    path: Path
    st: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)

    def wire(self, root: Path) -> multistatus.Entry:
        """This entry as a multistatus member, its href relative to *root*."""
        return multistatus.Entry(
            href=paths.relative_url(root, self.path),
            is_dir=self.is_dir,
            size=self.st.st_size,
            mtime=self.st.st_mtime,
            etag=ranges.etag(self.st),
        )


def entries(directory: Path, root: Path) -> list[ListedFile]:
    """Children worth listing, sorted by name (see :func:`iter_entries`)."""
    return sorted(iter_entries(directory, root), key=lambda e: e.name)


def iter_entries(directory: Path, root: Path) -> Iterator[ListedFile]:
    """Children worth listing, in directory order, one at a time (a listing of any size in
    bounded memory): no upload temporaries, no symlinks (the server follows none).

    Read through one descriptor of *directory*, opened under *root* without following a
    symlink, so a directory swapped for a link meanwhile lists nothing outside the root.
    HttpError when the directory cannot be opened or read (after a streamed answer's head:
    the adapter then cuts the connection)."""
    try:
        with fsroot.Root(root) as fs:
            scan = fs.scandir(files.rel(root, directory))
            first = next(scan, None)  # opens the directory now: its errors come before any output
    except OSError as exc:
        raise os_error(exc, directory, root) from None
    return _members(first, scan, directory, root)


def _members(
    item: tuple[str, os.stat_result] | None,
    scan: Iterator[tuple[str, os.stat_result]],
    directory: Path,
    root: Path,
) -> Iterator[ListedFile]:
    while item is not None:
        name, st = item
        if not (paths.is_part_name(name) or stat.S_ISLNK(st.st_mode)):
            yield ListedFile(name, directory / name, st)
        try:
            item = next(scan, None)
        except OSError as exc:
            raise os_error(exc, directory, root) from None
