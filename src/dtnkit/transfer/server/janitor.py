"""The part-file janitor: removes what killed uploads and copies left behind.

Every kind of part file (``.<name>.dtnkit-part-<tag>`` of a PUT, of an upload session, of a
COPY pull, and the client's own ``.dtnkit-part`` file and journal inside a COPY pull's
temporary name) is removed once it is older (mtime) than the age limit (the server's
``upload_expiry``, ``--upload-expiry``, default 3600 s) and not in use by this process
(:data:`dtnkit.transfer.files.LIVE`): in the whole tree at server start, then every quarter
of the limit (at most every 10 minutes) in the directories where part files were made or
stayed.  The tree is walked through directory descriptors without
following symlinks (:mod:`~dtnkit.transfer.fsroot`), so a swapped directory cannot make it
remove anything outside the root.  Users cannot remove part files (their names are
refused with 403); the janitor is the only way they go.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from dtnkit.transfer import files, fsroot, paths

MAX_DEPTH = 256  # directories deeper than this are not searched (one descriptor per level)


def sweep(
    root: Path,
    max_age: float,
    stop: threading.Event | None = None,
    only: Iterable[tuple[str, ...]] | None = None,
) -> int:
    """Remove the part files under *root* older than *max_age* seconds and not in use; the
    number removed.  *only*: look in these directories (names under *root*) alone, not in
    their subdirectories.  A directory where a part file stays (in use, or young) is noted
    for the next sweep."""
    cutoff = time.time() - max_age
    if only is not None:
        removed = 0
        for names in only:
            try:
                with fsroot.Root(root) as fs:
                    dirfd = fs.open_dir(names)
            except OSError:
                continue
            try:
                removed += _sweep_dir(root, names, dirfd, cutoff, None, stop)
            finally:
                os.close(dirfd)
        return removed
    with fsroot.Root(root) as fs:
        first = fs.open_dir(())
    try:
        return _sweep_dir(root, (), first, cutoff, 0, stop)
    finally:
        os.close(first)


def _sweep_dir(
    root: Path,
    names: tuple[str, ...],
    dirfd: int,
    cutoff: float,
    depth: int | None,
    stop: threading.Event | None,
) -> int:
    """One directory (and, unless *depth* is None, those under it, to :data:`MAX_DEPTH`)."""
    removed = 0
    kept = False
    try:
        members = os.listdir(dirfd)
    except OSError:
        return 0
    for name in members:
        if stop is not None and stop.is_set():
            break
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if depth is None or depth >= MAX_DEPTH:
                continue
            try:
                child = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd
                )
            except OSError:
                continue
            try:
                removed += _sweep_dir(root, (*names, name), child, cutoff, depth + 1, stop)
            finally:
                os.close(child)
            continue
        if not (stat.S_ISREG(st.st_mode) and paths.is_part_name(name)):
            continue
        if st.st_mtime >= cutoff or files.LIVE.holds(st, dirfd, name):
            kept = True
            continue
        try:
            os.unlink(name, dir_fd=dirfd)
            removed += 1
        except OSError:
            kept = True
    if kept:
        files.LIVE.note_dir(root, names)
    return removed


class Janitor:
    """Holds the served root open for the server's lifetime (:func:`fsroot.pin`), and runs
    a thread that runs :func:`sweep` over the whole tree at start, then every
    ``max_age / 4`` (at most 600 s) over the directories where part files were made or
    stayed since (a full walk of a large tree every few minutes would cost more than it
    finds: a running server removes its own part files when a request ends)."""

    def __init__(self, root: Path, max_age: float) -> None:
        self.root = root
        fsroot.pin(root)  # the server's requests work from this descriptor from now on
        self.max_age = max_age
        self.removed = 0
        self.sweeps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dtnkit-part-janitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        only: set[tuple[str, ...]] | None = None  # the first sweep: the whole tree
        while True:
            with contextlib.suppress(OSError):
                self.removed += sweep(self.root, self.max_age, self._stop, only)
            self.sweeps += 1
            only = files.LIVE.take_dirs(self.root)
            if self._stop.wait(max(0.05, min(self.max_age / 4, 600.0))):
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        fsroot.unpin(self.root)
