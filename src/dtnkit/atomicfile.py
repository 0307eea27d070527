"""A file replaced whole: written under a new name beside it, then renamed over it, so a
reader sees the old file or the new one, never half of one (snapshots and the apply lock's
pointers, the streams table, the SciTags registry's copy, cp's metrics textfile)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

#: new names tried before giving up (each is 48 random bits: a clash means someone plays)
_TRIES = 100


def replace_file(path: Path, data: bytes | str, *, mode: int = 0o644, durable: bool = True) -> None:
    """Put *data* (str: UTF-8) at *path*.  The new file is ``.NAME.RANDOM`` in the same
    directory, created with ``O_EXCL | O_NOFOLLOW`` (nothing another user placed there is
    written through), fsynced when *durable*, given *mode* whatever the umask, then renamed
    over *path* (a symlink at *path* is replaced, not followed).  OSError when it cannot be
    done; the new file is gone then."""
    raw = data.encode() if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TRIES):
        tmp = path.parent / f".{path.name}.{os.urandom(6).hex()}"
        try:
            fd = os.open(tmp, flags, 0o600)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no unused temporary name", str(path.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
