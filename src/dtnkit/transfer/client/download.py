"""One file from a server (the pairing :class:`~dtnkit.transfer.client.ends.HttpRangeSource`
-> :class:`~dtnkit.transfer.client.ends.FileSink`).

The first request (:mod:`~dtnkit.transfer.client.first`) tells size, ETag and often the
source digest: one stream's ``GET`` of the whole file with ``Want-Digest``, or a ``HEAD`` on
the first stream's connection when several streams need the size to cut spans (a HEAD first
when a kept part file is resumed).  The source digest, when that answer did not carry it, is
a HEAD with ``Want-Digest`` (waited for in ``sequential`` mode, asked concurrently with the
transfer otherwise).  N streams, each a keep-alive connection fetching disjoint ``Range``
spans and writing them with ``os.pwrite`` into
``.<name>.dtnkit-part`` next to the destination, which is renamed only after verification.
A mismatch fetches again only the blocks whose source ``Content-Digest`` differs; a transport
failure keeps the part file and a journal for a rerun.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import os
import stat
import threading
from pathlib import Path

from dtnkit.errors import BadInput
from dtnkit.records import mutable_record
from dtnkit.transfer import checksum as cks
from dtnkit.transfer import files
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client.ends import FileSink, HttpRangeSource
from dtnkit.transfer.client.errors import (
    Abort,
    ChecksumMismatch,
    DestinationExists,
    Retryable,
    TransferError,
)
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
from dtnkit.transfer.client.options import FileResult, Options
from dtnkit.transfer.client.receive import fetch_blocks
from dtnkit.transfer.client.session import RemoteInfo, Session, Url, check_status, source_digest
from dtnkit.transfer.client.streams import Background, read_back, run_streams
from dtnkit.transfer.client.verify import Level
from dtnkit.transfer.wire import digests as dg


@mutable_record
class Attempts:
    """Mismatch attempts of one download, shared by bad-block rounds and whole-file fetches."""

    left: int  # mismatch retries still allowed
    used: int = 1  # attempts made (the first fetch is attempt 1)
    retries: int = 0
    refetched_blocks: int = 0


def download(session: Session, url: Url, dst: Path, options: Options) -> FileResult:
    """Download with verification: a mismatch fetches again only the blocks whose source
    ``Content-Digest`` differs (or the whole file when the server gives none), up to
    ``options.retries`` times in all; transport failures keep the part file for a rerun."""
    state = Attempts(options.retries)
    while True:
        try:
            result = download_once(session, url, dst, options, state)
        except ChecksumMismatch as exc:
            if state.left <= 0:
                exc.why += f" (after {state.used} attempts)"
                raise
            state.left -= 1
            state.used += 1
            state.retries += 1
            continue
        result.retries += state.retries
        result.refetched_blocks = state.refetched_blocks
        return result


def is_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(path.stat().st_mode)
    except OSError:
        return False


def download_to_device(session: Session, url: Url, dst: Path, options: Options) -> FileResult:
    """Fetch into a character device, e.g. ``dtnkit cp URL /dev/null`` (the network path
    alone, as ``xrdcp URL /dev/null``): no part file, rename or resume; ``--verify block``
    still checks every byte received against the source's digest, in memory."""
    plan = options.plan()
    name = plan.algorithm
    if not plan.device_ok:
        raise BadInput(f"destination {dst}", "is a device: it cannot be read back",
                       "use --verify block or none with --verify-level inflight")
    session, url, info = session.resolve(url)
    if info.is_dir:
        raise BadInput(f"{url}", "is a collection", "copy a file to a device")
    options.sized(info.size)
    source = (Background(lambda: source_digest(session, url, name))
              if plan.block else None)
    blocks = pl.plan_blocks(info.size, options.block_size)

    def no_read_back(block: pl.Block) -> pl.Buffer:
        raise OSError(f"block {block.index} would have to be read back from {dst} (the "
                      "ordered hash fell behind); use fewer --streams or copy to a file")

    verifier = (pl.make_verifier(name, blocks, no_read_back, options.max_buffered)
                if plan.block else None)
    fd = os.open(dst, os.O_WRONLY | os.O_CLOEXEC)
    try:
        retries = fetch_blocks(HttpRangeSource(session, url, info.etag, options, info.size),
                               FileSink(fd), blocks, options, size=info.size, verifier=verifier)
        got = verifier.digest() if verifier is not None else None
        expected = source.result() if source is not None else None
        if expected is not None and got != expected:
            raise ChecksumMismatch(f"checksum mismatch for {url}",
                                   f"{name} expected {plan.show(expected)} (source), got "
                                   f"{plan.show(got or b'')} from the network",
                                   "retry; if it persists, check the source and the path")
        return FileResult(str(url), str(dst), info.size, expected, Level.INFLIGHT, retries,
                          algorithm=name)
    finally:
        if verifier is not None:
            verifier.close()
        os.close(fd)
        if source is not None:
            with contextlib.suppress(BaseException):
                source.result()


def block_digests(session: Session, url: Url, info: RemoteInfo, blocks: list[pl.Block],
                  name: str, options: Options) -> dict[int, bytes] | None:
    """The source's ``Content-Digest`` (RFC 9530) of each block's range, asked with ``HEAD``
    on up to ``streams`` keep-alive connections; None when the server gives none."""
    out: dict[int, bytes] = {}
    stop = threading.Event()
    unsupported = threading.Event()
    want = f"{cks.REGISTRY[name].rfc9530}=10"

    def probe(conn: http.client.HTTPConnection, b: pl.Block, _state: None) -> None:
        hdrs = {"Range": f"bytes={b.offset}-{b.end}", "Want-Content-Digest": want}
        if info.etag:
            hdrs["If-Range"] = info.etag
        what = f"HEAD {url} (block {b.index} digest)"
        conn.request("HEAD", url.path, headers=session.headers(hdrs))
        r = conn.getresponse()
        body = r.read()
        if r.status >= 500:
            raise Retryable(f"{what}: HTTP {r.status}")
        if r.status == 200 or (r.status == 206 and not r.getheader("Content-Digest")):
            unsupported.set()  # no ranges (or the source changed) or no digests
            stop.set()
            raise Abort()
        check_status(r.status, what, body, ok=(206,))
        crange = r.getheader("Content-Range")
        if crange != f"bytes {b.offset}-{b.end}/{info.size}":
            raise TransferError(what, f"Content-Range {crange!r} is not the block asked "
                                f"for (bytes {b.offset}-{b.end}/{info.size})", "check the server")
        try:
            values = dg.parse_repr_digest(r.getheader("Content-Digest") or "")
        except ValueError as exc:
            raise TransferError(f"Content-Digest from {url} (block {b.index})",
                                f"cannot be parsed ({exc})",
                                "check the server; rerun with --verify file to fetch the "
                                "whole file again instead") from None
        if name not in values:
            unsupported.set()
            stop.set()
            raise Abort()
        out[b.index] = values[name]

    def give_up(b: pl.Block, attempts: int, exc: BaseException) -> TransferError:
        return TransferError(f"HEAD {url} (block {b.index} digest)",
                             f"failed after {attempts} attempts ({exc})",
                             "check that the server is up and reachable")

    run_streams(session, blocks, options, work=probe, prepare=lambda _b: None,
                finish=lambda _b, _s: None, give_up=give_up, stop=stop,
                name="dtnkit-block-digest")
    return None if unsupported.is_set() else out


def bad_blocks(session: Session, url: Url, info: RemoteInfo, fd: int,
               blocks: list[pl.Block], name: str, values: list[int | None] | None,
               options: Options) -> list[pl.Block] | None:
    """Blocks of the part file whose *name* digest differs from the source's for the same
    range; local digests come from *values* (per-block values computed as the bytes arrived)
    when given, else from the part file.  None when the server gives no per-block digests."""
    remote = block_digests(session, url, info, blocks, name, options)
    if remote is None:
        return None
    bad: list[pl.Block] = []
    for b in blocks:
        value = values[b.index] if values is not None else None
        if value is not None:
            local = cks.to_bytes(name, value)
        else:
            h = cks.new(name)
            h.update(read_back(fd, b))
            local = h.digest()
        if local != remote[b.index]:
            bad.append(b)
    return bad


def download_once(session: Session, url: Url, dst: Path, options: Options,
                  state: Attempts | None = None) -> FileResult:
    state = state if state is not None else Attempts(0)
    plan = options.plan()
    name = plan.algorithm
    origin = url  # what the user asked for: the resume journal is keyed by it
    if not options.overwrite and os.path.lexists(dst):
        # only the destination counts: a kept part file is resumed, never "overwritten"
        raise DestinationExists(str(dst))
    first: Opened | None = None
    if options.resume and os.path.lexists(journal_path(dst)):
        # a kept part file may need only some blocks: ask what the file is first
        session, url, info = session.resolve(url)
    else:
        # one request: a GET whose answer tells the size (and often the digest), or a HEAD
        # on the first stream's own connection (first.py)
        want = name if plan.sequential or plan.source_digest_in_background else None
        # several streams each receive a span, unless an ordered digest (md5, sha256) is
        # computed as blocks arrive: then a GET per block (receive.fetch_blocks)
        first = open_source(session, url, options, want,
                            spans=not (plan.block and pl.ordered(name)))
        session, url, info = first.session, first.url, first.info
    source: Background | None = None
    expected: bytes | None = None
    try:
        if info.is_dir:
            raise BadInput(f"{url}", "is a collection", "pass -r to copy a directory")
        options.sized(info.size)
        if plan.sequential or plan.source_digest_in_background:
            expected = info.digests.get(name)  # answered with the GET
        if expected is None and plan.sequential:
            expected = source_digest(session, url, name)
        elif expected is None and plan.source_digest_in_background:
            # beside the transfer, on its own connection
            source = Background(lambda: source_digest(session, url, name))
    except BaseException:
        if first is not None:
            first.close()
        raise
    blocks = pl.plan_blocks(info.size, options.block_size)
    part = part_path(dst)
    try:
        kept, kept_name, note = load_journal(dst, origin, info, options, len(blocks))
        fd, refused = open_part(dst, resume=bool(kept))
        if refused is not None:
            kept, kept_name, note = {}, None, refused
    except BaseException:
        if first is not None:
            first.close()
        raise
    committed = keep_part = False
    source_end, sink = HttpRangeSource(session, url, info.etag, options, info.size), FileSink(fd)
    verifier: pl.BlockVerifier | None = None
    done: set[int] = set()
    stale: set[int] = set()  # blocks re-fetched: the verifier's values are not theirs
    try:
        if os.fstat(fd).st_size != info.size:
            if kept:
                kept, note = {}, "started over: the part file is not the expected size"
            os.ftruncate(fd, info.size)
        if plan.block:
            verifier = pl.make_verifier(name, blocks, functools.partial(read_back, fd),
                                        options.max_buffered)
        if kept:
            done = resume_blocks(fd, blocks, kept, kept_name, verifier)
            damaged = len(kept) - len(done)
            note = f"resumed: {len(done)} of {len(blocks)} blocks kept from the interrupted run"
            if damaged:
                note += f"; {damaged} kept block(s) did not match the journal, fetched again"
        resumed = len(done)
        resumed_bytes = sum(b.length for b in blocks if b.index in done)
        if done and options.progress is not None:
            # the bar counts what the file needs, kept blocks included, so it ends at 100 %
            options.progress(sum(b.length for b in blocks if b.index in done))
        todo = [b for b in blocks if b.index not in done]
        try:
            retries = fetch_blocks(source_end, sink, todo, options, size=info.size,
                                  verifier=verifier, done=done, first=first)
        except TransferError as exc:
            if type(exc) is TransferError and save_journal(dst, origin, info, options, fd, done,
                                                           verifier, stale):
                keep_part = True
                exc.next_step = (f"rerun the same command to resume ({len(done)} of "
                                 f"{len(blocks)} blocks are kept in {part}); check that the "
                                 "server is up; --no-resume starts over")
            raise
        got: bytes | None = None
        level = plan.level
        if plan.block and verifier is not None:
            got = verifier.digest()
        if plan.fsync:
            os.fsync(fd)
        if plan.hash_file_after and not plan.ondisk:
            got = pl.checksum_fd(fd, name, info.size)
        ondisk: bytes | None = None
        if plan.reread_from_disk:
            pl.evict(fd)
            ondisk = pl.checksum_fd(fd, name, info.size)
            level = Level(pl.achieved_level(Level.ONDISK, part))
            if got is None:
                got = ondisk
        if not plan.checks:
            level = plan.unverified_level
        if source is not None:
            expected = source.result()
        first_round = True
        while expected is not None:
            bad_value = next((v for v in (got, ondisk) if v is not None and v != expected), None)
            if bad_value is None:
                break
            why = (f"{name} expected {plan.show(expected)} (source), got "
                   f"{plan.show(bad_value)}; {dst} was not written")
            step = ("retry later; if it persists, check the source storage (its stored "
                    "checksum and its disk), the network path and the destination disk")
            if state.left <= 0:
                raise ChecksumMismatch(f"checksum mismatch for {url}", why, step)
            # Which blocks differ?  Compare per-block digests with the source's Content-Digest;
            # the values computed as the bytes arrived serve when they are what was checked.
            values: list[int | None] | None = None
            probe = "crc32c"
            if isinstance(verifier, pl.BlockCombiner) and first_round and ondisk is None:
                values, probe = verifier.block_values(), verifier.name
            bad = bad_blocks(session, url, info, fd, blocks, probe, values, options)
            if bad is None:
                raise ChecksumMismatch(f"checksum mismatch for {url}", why + "; the server "
                                       "gives no per-block Content-Digest, so the whole file "
                                       "is fetched again", step)
            if not bad:
                raise ChecksumMismatch(f"checksum mismatch for {url}", why + "; every block "
                                       "matches the source's per-block digest: the source's "
                                       "whole-file checksum disagrees with its content", step)
            state.left -= 1
            state.used += 1
            state.retries += 1
            state.refetched_blocks += len(bad)
            first_round = False
            for b in bad:
                done.discard(b.index)
                stale.add(b.index)
            try:
                retries += fetch_blocks(source_end, sink, bad, options, size=info.size,
                                       done=done)
            except TransferError as exc:
                if type(exc) is TransferError and save_journal(
                        dst, origin, info, options, fd, done, verifier, stale):
                    keep_part = True
                    exc.next_step = "rerun the same command to resume; --no-resume starts over"
                raise
            # the whole file once more, from disk for ondisk
            if plan.ondisk:
                pl.evict(fd)
                got = ondisk = pl.checksum_fd(fd, name, info.size)
            else:
                if plan.level is Level.DURABLE:
                    os.fsync(fd)
                got = pl.checksum_fd(fd, name, info.size)
        if options.overwrite:
            os.replace(part, dst)
        else:
            try:  # never over a file that appeared during the copy, whoever wrote it
                files.rename_noreplace(part, dst)
            except FileExistsError:
                raise DestinationExists(str(dst)) from None
        committed = True
        if plan.fsync:
            fsync_dir(dst.parent)
        return FileResult(str(url), str(dst), info.size, expected, level, retries,
                          getattr(verifier, "read_back", 0), resumed_blocks=resumed,
                          resumed_bytes=resumed_bytes, note=note,
                          algorithm=name)
    except KeyboardInterrupt:
        if save_journal(dst, origin, info, options, fd, done, verifier, stale):
            keep_part = True
        raise
    finally:
        if first is not None:
            first.close()
        if verifier is not None:
            verifier.close()
        os.close(fd)
        if not committed and not keep_part:
            with contextlib.suppress(OSError):
                os.unlink(part)
        if not keep_part:  # committed or discarded: an older run's journal is done with
            with contextlib.suppress(OSError):
                os.unlink(journal_path(dst))
        if source is not None:
            with contextlib.suppress(BaseException):
                source.result()
