"""What an interrupted copy keeps for a rerun.

Download: the part file ``.<name>.dtnkit-part`` next to the destination and its journal
``.<name>.dtnkit-part.json`` (the blocks written, their adler32/crc32c values, the source's
size, ETag and Last-Modified), written atomically when a run fails or is interrupted.

Upload: the upload-session id, in a journal under :func:`journal_dir` keyed by the source's
path, size and mtime, the destination URL, the checksum and the block size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path

from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.client.blocks import read_back
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.client.session import RemoteInfo, Url

PART_SUFFIX = ".dtnkit-part"


def part_path(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}{PART_SUFFIX}")


def open_part(dst: Path, *, resume: bool) -> tuple[int, str | None]:
    """The part file of *dst*, opened relative to the destination directory's descriptor and
    never through a symbolic link, and a note when a kept one could not be used.

    *resume*: open the existing part file, if it is a regular file owned by this user (a
    link, a FIFO or another user's file planted under its name is not written through: the
    copy starts over).  Otherwise, or then, whatever has the part file's name is removed (a
    link is removed itself, never its target) and a new file is made with ``O_EXCL``.
    """
    part = part_path(dst)
    dirfd = os.open(part.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        note = None
        if resume:
            try:
                fd = os.open(
                    part.name,
                    os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                    dir_fd=dirfd,
                )
            except OSError:  # gone, or a link (ELOOP): nothing of ours to resume
                note = "started over: the kept part file is not a regular file"
            else:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                    os.set_blocking(fd, True)
                    return fd, None
                os.close(fd)
                note = "started over: the kept part file is not a regular file of this user"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part.name, dir_fd=dirfd)
        fd = os.open(
            part.name,
            os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dirfd,
        )
        return fd, note
    finally:
        os.close(dirfd)


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- download journal


def journal_path(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}{PART_SUFFIX}.json")


JOURNAL_VERSION = 2  # 2: the source without its query (1 kept it)
_JOURNAL_KEYS = frozenset(
    {
        "version",
        "source",
        "size",
        "etag",
        "last_modified",
        "block_size",
        "checksum",
        "done",
        "values",
    }
)
_MAX_JOURNAL = 64 * 2**20


def journal_source(url: Url) -> str:
    """The source as a journal records it: the URL without its query, which may be a
    pre-signed secret; a query is kept only as its SHA-256, so another query is another
    source."""
    path, _sep, query = url.path.partition("?")
    text = str(url.with_path(path))
    if query:
        text += "?sha256=" + hashlib.sha256(query.encode()).hexdigest()
    return text


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _journal_problem(
    doc: object, url: Url, info: RemoteInfo, request: CopyRequest, nblocks: int
) -> str | None:
    """Why the journal *doc* cannot be used for this run (None: it can).  Strict: anything
    unexpected is a reason to start over, never something to trust."""
    if not isinstance(doc, dict) or set(doc) != _JOURNAL_KEYS:
        return "the resume journal is malformed"
    if doc["version"] != JOURNAL_VERSION:
        return "the resume journal has another version"
    if doc["source"] != journal_source(url):
        return "the resume journal is for another source URL"
    if not _is_int(doc["size"]) or doc["size"] != info.size:
        return "the source's size changed"
    if not isinstance(doc["etag"], (str, type(None))) or not isinstance(
        doc["last_modified"], (str, type(None))
    ):
        return "the resume journal is malformed"
    if doc["etag"] is None and doc["last_modified"] is None:
        return "the source has no ETag or Last-Modified to check it against"
    if doc["etag"] != info.etag or doc["last_modified"] != info.last_modified:
        return "the source changed (ETag or Last-Modified)"
    if not _is_int(doc["block_size"]) or doc["block_size"] != request.block_size:
        return "the block size differs"
    done, values, name = doc["done"], doc["values"], doc["checksum"]
    if (
        not isinstance(done, list)
        or not all(_is_int(i) and 0 <= i < nblocks for i in done)
        or len(set(done)) != len(done)
    ):
        return "the resume journal is malformed"
    if name is not None and name not in checksum.COMBINABLE:
        return "the resume journal is malformed"
    if not isinstance(values, dict) or (values and name is None):
        return "the resume journal is malformed"
    for key, value in values.items():
        if (
            not key.isdigit()
            or int(key) not in done
            or not _is_int(value)
            or not 0 <= value <= 0xFFFFFFFF
        ):
            return "the resume journal is malformed"
    return None


def load_journal(
    dst: Path, url: Url, info: RemoteInfo, request: CopyRequest, nblocks: int
) -> tuple[dict[int, int | None], str | None, str | None]:
    """Blocks kept from an interrupted run (index -> recorded value or None), the algorithm
    of the values, and a note for the summary.  A journal that cannot be used is removed; a
    usable one stays until the run ends (removed on success or discard, rewritten when the
    run fails again), so a rerun killed outright still leaves the next one something to
    resume: every kept block is checked again from the part file anyway."""
    journal, part = journal_path(dst), part_path(dst)
    if not os.path.lexists(journal):
        return {}, None, None
    usable = False
    try:
        if not request.resume:
            return {}, None, "started over (--no-resume); the kept part file was discarded"
        if not request.verify_plan().checks:
            # nothing would compare the kept bytes with the source: a damaged or tampered
            # part file (and its journal) would be committed as it is
            return (
                {},
                None,
                (
                    "started over: with --verify none the blocks kept by an "
                    "interrupted run cannot be checked"
                ),
            )
        if journal.is_symlink() or not journal.is_file():
            return {}, None, "started over: the resume journal is not a regular file"
        if journal.stat().st_size > _MAX_JOURNAL:
            return {}, None, "started over: the resume journal is too large"
        try:
            doc = json.loads(journal.read_bytes())
        except (OSError, ValueError) as exc:
            return {}, None, f"started over: the resume journal cannot be read ({exc})"
        problem = _journal_problem(doc, url, info, request, nblocks)
        if problem is None:
            try:
                st = os.stat(part, follow_symlinks=False)
            except OSError:
                problem = "the part file is missing"
            else:
                if not (os.path.isfile(part) and not part.is_symlink()) or st.st_size != info.size:
                    problem = "the part file is not the expected size"
        if problem is not None:
            return {}, None, f"started over: {problem}"
        values = {int(k): int(v) for k, v in doc["values"].items()}
        usable = True
        return {i: values.get(i) for i in doc["done"]}, doc["checksum"], None
    finally:
        if not usable:
            with contextlib.suppress(OSError):
                journal.unlink()


def save_journal(
    dst: Path,
    url: Url,
    info: RemoteInfo,
    request: CopyRequest,
    fd: int,
    done: set[int],
    verifier: pipeline.BlockVerifier | None,
    stale: set[int],
) -> bool:
    """Keep the part file for a rerun: fsync it, then write the journal atomically (temporary
    file, fsync, rename).  False when there is nothing worth keeping or it cannot be written."""
    if not done or (info.etag is None and info.last_modified is None):
        return False
    name: str | None = None
    values: dict[str, int] = {}
    if isinstance(verifier, pipeline.BlockCombiner):
        name = verifier.name
        for i, v in enumerate(verifier.block_values()):
            if v is not None and i in done and i not in stale:
                values[str(i)] = v
    doc = {
        "version": JOURNAL_VERSION,
        "source": journal_source(url),
        "size": info.size,
        "etag": info.etag,
        "last_modified": info.last_modified,
        "block_size": request.block_size,
        "checksum": name if values else None,
        "done": sorted(done),
        "values": values,
    }
    journal = journal_path(dst)
    tmp = journal.with_name(f"{journal.name}.{os.getpid()}.tmp")
    try:
        os.fsync(fd)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        # 0600: the journal names the source (and its ETag) for this user only
        out = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        with os.fdopen(out, "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, journal)
        fsync_dir(dst.parent)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def resume_blocks(
    fd: int,
    blocks: list[pipeline.Block],
    kept: dict[int, int | None],
    kept_name: str | None,
    verifier: pipeline.BlockVerifier | None,
) -> set[int]:
    """Blocks of the kept part file to use: each is read back from the part file and hashed
    (the verifier gets the bytes on disk, never a recorded value); a recorded per-block value
    that disagrees with the bytes on disk marks the block as damaged: it is fetched again."""
    good: set[int] = set()
    for b in blocks:
        if b.index not in kept:
            continue
        data = read_back(fd, b)
        if len(data) != b.length:
            continue
        recorded = kept[b.index]
        if (
            recorded is not None
            and kept_name is not None
            and checksum.block_value(kept_name, data) != recorded
        ):
            continue
        if verifier is not None:
            verifier.accept(b, data)
        good.add(b.index)
    return good


# --------------------------------------------------------------------------- upload journal


def journal_dir() -> Path:
    """Where upload journals go: ``$XDG_STATE_HOME/dtnkit/uploads`` (read at call time), else
    ``/var/lib/dtnkit/uploads`` for root, ``~/.local/state/dtnkit/uploads`` otherwise."""
    state = os.environ.get("XDG_STATE_HOME")
    if state:
        return Path(state) / "dtnkit" / "uploads"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/dtnkit/uploads")
    return Path.home() / ".local" / "state" / "dtnkit" / "uploads"


class UploadJournal:
    """The upload id of an unfinished upload, keyed by what makes a rerun identical."""

    def __init__(
        self, src: Path, st: os.stat_result, url: Url, request: CopyRequest, directory: Path
    ) -> None:
        key = "\0".join(
            [
                str(src.resolve()),
                str(st.st_size),
                str(st.st_mtime_ns),
                str(url),
                request.checksum,
                str(request.block_size),
            ]
        )
        self.path = directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
        self.record = {
            "source": str(src),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "url": journal_source(url),
            "checksum": request.checksum,
            "block_size": request.block_size,
        }

    def load(self) -> str | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        ident = data.get("id") if isinstance(data, dict) else None
        same = isinstance(data, dict) and all(data.get(k) == v for k, v in self.record.items())
        return ident if same and isinstance(ident, str) else None

    def save(self, ident: str) -> None:
        with contextlib.suppress(OSError):  # no journal: the upload works, it cannot resume
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.path.with_suffix(".tmp")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()  # a leftover, or a link planted under its name: never written through
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            with os.fdopen(fd, "w") as f:
                json.dump({**self.record, "id": ident}, f)
            os.replace(tmp, self.path)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
