"""The part-file janitor: removes what killed uploads and copies left behind.

Every kind of part file (``.<name>.dtnkit-part-<tag>`` of a PUT, of an upload session, of a
COPY pull, and the client's own ``.dtnkit-part`` file and journal inside a COPY pull's
temporary name) is removed once it is older (mtime) than the age limit (the server's
``upload_expiry``, ``--upload-expiry``, default 3600 s) and not in use by this process
(:data:`dtnkit.transfer.files.LIVE`), at server start and then every quarter of the limit
(at most every 10 minutes).  The tree is walked through directory descriptors without
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
from collections.abc import Iterator
from pathlib import Path

from dtnkit.transfer import files, fsroot, paths

MAX_DEPTH = 256  # directories deeper than this are not searched (one descriptor per level)


def sweep(root: Path, max_age: float, stop: threading.Event | None = None) -> int:
    """Remove the part files under *root* older than *max_age* seconds and not in use;
    the number removed."""
    cutoff = time.time() - max_age
    removed = 0
    with fsroot.Root(root) as fs:
        first = fs.open_dir(())
    stack: list[tuple[int, Iterator[str]]] = []
    try:
        stack.append((first, iter(os.listdir(first))))
    except OSError:
        os.close(first)
        return 0
    try:
        while stack:
            if stop is not None and stop.is_set():
                break
            dirfd, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(dirfd)
                stack.pop()
                continue
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if len(stack) < MAX_DEPTH:
                    with contextlib.suppress(OSError):
                        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                        | os.O_CLOEXEC, dir_fd=dirfd)
                        try:
                            stack.append((child, iter(os.listdir(child))))
                        except OSError:
                            os.close(child)
                continue
            if (stat.S_ISREG(st.st_mode) and paths.is_part_name(name)
                    and st.st_mtime < cutoff and not files.LIVE.holds(st, dirfd, name)):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dirfd)
                    removed += 1
    finally:
        for dirfd, _names in stack:
            os.close(dirfd)
    return removed


class Janitor:
    """A thread that runs :func:`sweep` at start and every ``max_age / 4`` (at most 600 s)."""

    def __init__(self, root: Path, max_age: float) -> None:
        self.root = root
        self.max_age = max_age
        self.removed = 0
        self.sweeps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dtnkit-part-janitor",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.removed += sweep(self.root, self.max_age, self._stop)
            self.sweeps += 1
            if self._stop.wait(max(0.05, min(self.max_age / 4, 600.0))):
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
