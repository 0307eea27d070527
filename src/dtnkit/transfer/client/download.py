"""One file from a server (the pairing :class:`~dtnkit.transfer.client.ends.HttpRangeSource`
-> :class:`~dtnkit.transfer.client.ends.FileSink` on the engine's streams).

The first request (:mod:`~dtnkit.transfer.client.first`) tells size, ETag and often the
source digest: one stream's ``GET`` of the whole file with ``Want-Digest``, or a ``HEAD`` on
the first stream's connection when several streams need the size to cut spans (a HEAD first
when a kept part file is resumed).  The source digest, when that answer did not carry it, is
a HEAD with ``Want-Digest`` (waited for in ``sequential`` mode, asked concurrently with the
transfer otherwise).  The streams (:func:`~dtnkit.transfer.client.engine.move`) write the
blocks with ``os.pwrite`` into ``.<name>.dtnkit-part`` next to the destination, which is
renamed only after verification.  A mismatch fetches again only the blocks whose source
``Content-Digest`` differs (:mod:`~dtnkit.transfer.client.refetch`); a transport failure
keeps the part file and a journal for a rerun.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from pathlib import Path

from dtnkit.errors import BadInput
from dtnkit.transfer import files, pipeline
from dtnkit.transfer.checksum import Buffer
from dtnkit.transfer.client.blocks import Background, read_back
from dtnkit.transfer.client.ends import FileSink, HttpRangeSource
from dtnkit.transfer.client.engine import move
from dtnkit.transfer.client.errors import ChecksumMismatch, DestinationExists, TransferError
from dtnkit.transfer.client.first import Opened, open_source
from dtnkit.transfer.client.journals import (
    fsync_dir,
    journal_path,
    load_journal,
    open_part,
    part_path,
    resume_blocks,
    save_journal,
)
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.refetch import bad_blocks
from dtnkit.transfer.client.request import CopyRun, FileResult
from dtnkit.transfer.client.retry import Budget
from dtnkit.transfer.client.session import RemoteInfo, Session, Url, source_digest
from dtnkit.transfer.client.verify import Level


def download(session: Session, url: Url, dst: Path, run: CopyRun) -> FileResult:
    """Download with verification: a mismatch fetches again only the blocks whose source
    ``Content-Digest`` differs (or the whole file when the server gives none), up to
    ``--retries`` times in all; transport failures keep the part file for a rerun."""
    retry = run.request.retry
    budget = retry.budget()
    result, retries = retry.again(
        lambda: download_once(session, url, dst, run, budget), budget=budget
    )
    result.retries += retries
    result.refetched_blocks = budget.refetched_blocks
    return result


def is_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(path.stat().st_mode)
    except OSError:
        return False


def download_to_device(session: Session, url: Url, dst: Path, run: CopyRun) -> FileResult:
    """Fetch into a character device, e.g. ``dtnkit cp URL /dev/null`` (the network path
    alone, as ``xrdcp URL /dev/null``): no part file, rename or resume; ``--verify block``
    still checks every byte received against the source's digest, in memory."""
    verify = run.request.verify_plan()
    name = verify.algorithm
    if not verify.device_ok:
        raise BadInput(
            f"destination {dst}",
            "is a device: it cannot be read back",
            "use --verify block or none with --verify-level inflight",
        )
    session, url, info = session.resolve(url)
    if info.is_dir:
        raise BadInput(f"{url}", "is a collection", "copy a file to a device")
    run.sized(info.size)
    source = Background(lambda: source_digest(session, url, name)) if verify.block else None
    blocks = pipeline.plan_blocks(info.size, run.request.block_size)

    def no_read_back(block: pipeline.Block) -> Buffer:
        raise OSError(
            f"block {block.index} would have to be read back from {dst} (the "
            "ordered hash fell behind); use fewer --streams or copy to a file"
        )

    verifier = (
        pipeline.make_verifier(name, blocks, no_read_back, run.request.max_buffered)
        if verify.block
        else None
    )
    fd = os.open(dst, os.O_WRONLY | os.O_CLOEXEC)
    try:
        retries = move(
            HttpRangeSource(session, url, info.etag, info.size),
            FileSink(fd),
            blocks,
            run,
            run.streams.plan(session),
            size=info.size,
            verifier=verifier,
        )
        got = verifier.digest() if verifier is not None else None
        expected = source.result() if source is not None else None
        if expected is not None and got != expected:
            raise ChecksumMismatch(
                f"checksum mismatch for {url}",
                f"{name} expected {verify.show(expected)} (source), got "
                f"{verify.show(got or b'')} from the network",
                "retry; if it persists, check the source and the path",
            )
        return FileResult(
            str(url), str(dst), info.size, expected, Level.INFLIGHT, retries, algorithm=name
        )
    finally:
        if verifier is not None:
            verifier.close()
        os.close(fd)
        if source is not None:
            with contextlib.suppress(BaseException):
                source.result()


def download_once(
    session: Session, url: Url, dst: Path, run: CopyRun, budget: Budget | None = None
) -> FileResult:
    """One run of :func:`download` (its bad-block rounds spend *budget*)."""
    request = run.request
    verify = request.verify_plan()
    origin = url  # what the user asked for: the resume journal is keyed by it
    if not request.overwrite and os.path.lexists(dst):
        # only the destination counts: a kept part file is resumed, never "overwritten"
        raise DestinationExists(str(dst))
    first: Opened | None = None
    if request.resume and os.path.lexists(journal_path(dst)):
        # a kept part file may need only some blocks: ask what the file is first
        session, url, info = session.resolve(url)
        plan = run.streams.plan(session)
    else:
        # one request: a GET whose answer tells the size (and often the digest), or a HEAD
        # on the first stream's own connection (first.py)
        name = verify.algorithm
        want = name if verify.sequential or verify.source_digest_in_background else None
        # several streams each receive a span, unless an ordered digest (md5, sha256) is
        # computed as blocks arrive: then a GET per block (engine.move)
        first = open_source(
            session, url, run, want, spans=not (verify.block and pipeline.ordered(name))
        )
        session, url, info, plan = first.session, first.url, first.info, first.plan
    try:
        if info.is_dir:
            raise BadInput(f"{url}", "is a collection", "pass -r to copy a directory")
        run.sized(info.size)
        part = PartDownload(session, url, info, plan, run, dst, origin)
        return part.complete(first, budget if budget is not None else Budget(0))
    finally:
        if first is not None:
            first.close()


class PartDownload:
    """A download into the part file next to its destination (``.NAME.dtnkit-part``): the
    source's digest asked beside the transfer, the blocks kept by an interrupted run, the
    blocks fetched by the engine, the verification, the bad-block rounds and the commit; a
    transport failure or an interruption keeps the part file and its journal for a rerun."""

    def __init__(
        self,
        session: Session,
        url: Url,
        info: RemoteInfo,
        plan: StreamPlan,
        run: CopyRun,
        dst: Path,
        origin: Url,
    ) -> None:
        self.session, self.url, self.info, self.plan, self.run = session, url, info, plan, run
        self.dst, self.origin = dst, origin
        self.verify = run.request.verify_plan()
        self.blocks = pipeline.plan_blocks(info.size, run.request.block_size)
        self.part = part_path(dst)
        self.source: Background | None = None
        self.expected: bytes | None = None
        self.verifier: pipeline.BlockVerifier | None = None
        self.done: set[int] = set()
        self.stale: set[int] = set()  # blocks re-fetched: the verifier's values are not theirs
        self.keep_part = False
        self._ask_digest()
        try:
            self.kept, self.kept_name, self.note = load_journal(
                dst, origin, info, run.request, len(self.blocks)
            )
            self.fd, refused = open_part(dst, resume=bool(self.kept))
        except BaseException:
            self._forget_digest()
            raise
        if refused is not None:
            self.kept, self.kept_name, self.note = {}, None, refused
        self.reader = HttpRangeSource(session, url, info.etag, info.size)
        self.sink = FileSink(self.fd)

    def _ask_digest(self) -> None:
        """The source's digest, when the copy needs it: answered with the GET, else asked
        first (sequential) or beside the transfer, on its own connection."""
        verify, name = self.verify, self.verify.algorithm
        session, url = self.session, self.url
        if verify.sequential or verify.source_digest_in_background:
            self.expected = self.info.digests.get(name)
        if self.expected is None and verify.sequential:
            self.expected = source_digest(session, url, name)
        elif self.expected is None and verify.source_digest_in_background:
            self.source = Background(lambda: source_digest(session, url, name))

    def _forget_digest(self) -> None:
        if self.source is not None:
            with contextlib.suppress(BaseException):
                self.source.result()

    def complete(self, first: Opened | None, budget: Budget) -> FileResult:
        """Fetch what the part file lacks (on *first*'s connections), verify, commit."""
        committed = False
        try:
            resumed, resumed_bytes = self._resume()
            retries = self.fetch(
                [b for b in self.blocks if b.index not in self.done],
                verifier=self.verifier,
                opened=first,
            )
            self.run.mark("moved")
            got, ondisk, level = self._checked()
            retries += self._refetch(got, ondisk, budget)
            commit(self.part, self.dst, self.run.request.overwrite)
            committed = True
            self.run.mark("committed")
            if self.verify.fsync:
                fsync_dir(self.dst.parent)
                self.run.mark("directory synced")
            return FileResult(
                str(self.url),
                str(self.dst),
                self.info.size,
                self.expected,
                level,
                retries,
                getattr(self.verifier, "read_back", 0),
                resumed_blocks=resumed,
                resumed_bytes=resumed_bytes,
                note=self.note,
                algorithm=self.verify.algorithm,
            )
        except KeyboardInterrupt:
            if self._save():
                self.keep_part = True
            raise
        finally:
            if self.verifier is not None:
                self.verifier.close()
            os.close(self.fd)
            if not committed and not self.keep_part:
                with contextlib.suppress(OSError):
                    os.unlink(self.part)
            if not self.keep_part:  # committed or discarded: an older run's journal is done
                with contextlib.suppress(OSError):
                    os.unlink(journal_path(self.dst))
            self._forget_digest()

    def _resume(self) -> tuple[int, int]:
        """The part file at the source's size, the verifier, and the blocks kept by an
        interrupted run checked again (the bytes on disk, never a recorded value): how many
        and their bytes."""
        fd, blocks, kept = self.fd, self.blocks, self.kept
        if os.fstat(fd).st_size != self.info.size:
            if kept:
                kept, self.note = {}, "started over: the part file is not the expected size"
            os.ftruncate(fd, self.info.size)
        if self.verify.block:
            self.verifier = pipeline.make_verifier(
                self.verify.algorithm,
                blocks,
                functools.partial(read_back, fd),
                self.run.request.max_buffered,
            )
        if kept:
            self.done = resume_blocks(fd, blocks, kept, self.kept_name, self.verifier)
            damaged = len(kept) - len(self.done)
            self.note = (
                f"resumed: {len(self.done)} of {len(blocks)} blocks kept from the interrupted run"
            )
            if damaged:
                self.note += f"; {damaged} kept block(s) did not match the journal, fetched again"
        resumed_bytes = sum(b.length for b in blocks if b.index in self.done)
        if self.done:
            # the bar counts what the file needs, kept blocks included, so it ends at 100 %
            self.run.progressed(resumed_bytes)
        return len(self.done), resumed_bytes

    def fetch(
        self,
        todo: list[pipeline.Block],
        *,
        verifier: pipeline.BlockVerifier | None = None,
        opened: Opened | None = None,
    ) -> int:
        """*todo* into the part file on the engine's streams (the first on *opened*'s
        connection); a transport failure keeps the part file and its journal for a rerun."""
        try:
            return move(
                self.reader,
                self.sink,
                todo,
                self.run,
                self.plan,
                size=self.info.size,
                verifier=verifier,
                done=self.done,
                first=opened.conn if opened is not None else None,
                opened=opened.response if opened is not None else None,
                spares=opened.spares if opened is not None else (),
            )
        except TransferError as exc:
            if type(exc) is TransferError and self._save():
                self.keep_part = True
                exc.next_step = (
                    f"rerun the same command to resume ({len(self.done)} of "
                    f"{len(self.blocks)} blocks are kept in {self.part}); check "
                    "that the server is up; --no-resume starts over"
                )
            raise

    def _save(self) -> bool:
        return save_journal(
            self.dst,
            self.origin,
            self.info,
            self.run.request,
            self.fd,
            self.done,
            self.verifier,
            self.stale,
        )

    def _checked(self) -> tuple[bytes | None, bytes | None, Level]:
        """The digest of what arrived (the verifier's, or the file's), the file's as read
        from the disk (``ondisk``), and the level achieved."""
        verify, fd, name, size = self.verify, self.fd, self.verify.algorithm, self.info.size
        got: bytes | None = None
        level = verify.level
        if verify.block and self.verifier is not None:
            got = self.verifier.digest()
            self.run.mark("digest")
        if verify.fsync:
            os.fsync(fd)
            self.run.mark("fsync")
        if verify.hash_file_after and not verify.ondisk:
            got = pipeline.checksum_fd(fd, name, size)
        ondisk: bytes | None = None
        if verify.reread_from_disk:
            pipeline.evict(fd)
            ondisk = pipeline.checksum_fd(fd, name, size)
            level = Level(pipeline.achieved_level(Level.ONDISK, self.part))
            if got is None:
                got = ondisk
        if not verify.checks:
            level = verify.unverified_level
        if self.source is not None:
            self.expected = self.source.result()
            self.run.mark("source digest")
        return got, ondisk, level

    def _refetch(self, got: bytes | None, ondisk: bytes | None, budget: Budget) -> int:
        """While the file's digest differs from the source's: fetch again the blocks whose
        source ``Content-Digest`` differs, spending *budget*; the retries."""
        verify, fd, name, size = self.verify, self.fd, self.verify.algorithm, self.info.size
        expected, url = self.expected, self.url
        retries = 0
        first_round = True
        while expected is not None:
            bad_value = next((v for v in (got, ondisk) if v is not None and v != expected), None)
            if bad_value is None:
                return retries
            why = (
                f"{name} expected {verify.show(expected)} (source), got "
                f"{verify.show(bad_value)}; {self.dst} was not written"
            )
            step = (
                "retry later; if it persists, check the source storage (its stored "
                "checksum and its disk), the network path and the destination disk"
            )
            if budget.left <= 0:
                raise ChecksumMismatch(f"checksum mismatch for {url}", why, step)
            # Which blocks differ?  Compare per-block digests with the source's Content-Digest;
            # the values computed as the bytes arrived serve when they are what was checked.
            values: list[int | None] | None = None
            probe = "crc32c"
            if isinstance(self.verifier, pipeline.BlockCombiner) and first_round and ondisk is None:
                values, probe = self.verifier.block_values(), self.verifier.name
            bad = bad_blocks(
                self.session, url, self.info, fd, self.blocks, probe, values, self.plan
            )
            if bad is None:
                raise ChecksumMismatch(
                    f"checksum mismatch for {url}",
                    why + "; the server "
                    "gives no per-block Content-Digest, so the whole file "
                    "is fetched again",
                    step,
                )
            if not bad:
                raise ChecksumMismatch(
                    f"checksum mismatch for {url}",
                    why + "; every block "
                    "matches the source's per-block digest: the source's "
                    "whole-file checksum disagrees with its content",
                    step,
                )
            budget.take()
            budget.refetched_blocks += len(bad)
            first_round = False
            for b in bad:
                self.done.discard(b.index)
                self.stale.add(b.index)
            try:
                retries += self.fetch(bad)
            except TransferError as exc:
                if self.keep_part:
                    exc.next_step = "rerun the same command to resume; --no-resume starts over"
                raise
            # the whole file once more, from disk for ondisk
            if verify.ondisk:
                pipeline.evict(fd)
                got = ondisk = pipeline.checksum_fd(fd, name, size)
            else:
                if verify.level is Level.DURABLE:
                    os.fsync(fd)
                got = pipeline.checksum_fd(fd, name, size)
        return retries


def commit(part: Path, dst: Path, overwrite: bool) -> None:
    """The verified part file becomes *dst*: replacing it (``-f``), or never over a file
    that appeared during the copy, whoever wrote it."""
    if overwrite:
        os.replace(part, dst)
        return
    try:
        files.rename_noreplace(part, dst)
    except FileExistsError:
        raise DestinationExists(str(dst)) from None
