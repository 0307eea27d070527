"""``copy(src, dst, request)``: what to move (a file, a tree, to or from a server or between
two), as one job per file, run one by one or ``parallel`` at a time: each direction's
pairing is :mod:`.download`, :mod:`.upload` or :mod:`.relay`."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from dtnkit.errors import BadInput
from dtnkit.transfer.client.download import download, download_to_device, is_device
from dtnkit.transfer.client.policy import StreamPolicy
from dtnkit.transfer.client.request import CopyRequest, CopyRun, FileResult, Summary
from dtnkit.transfer.client.session import Session, Url, is_url, make_parents, mkcol
from dtnkit.transfer.files import make_dirs

if TYPE_CHECKING:
    from dtnkit.transfer.client.timeline import Timeline

FileJob = Callable[[], FileResult]


def copy(
    src: str,
    dst: str,
    request: CopyRequest,
    *,
    streams: StreamPolicy | None = None,
    progress: Callable[[int], None] | None = None,
    on_size: Callable[[int], None] | None = None,
    timeline: Timeline | None = None,
) -> Summary:
    """Copy *src* to *dst* (one of them a URL) as *request* asks, its streams *streams*'
    (default: ``--streams N`` of the request); *progress* is told the bytes moved, *on_size*
    a remote source's size once known, *timeline* the copy's steps and connections.
    Returns the summary."""
    run = CopyRun.of(
        request, streams=streams, progress=progress, on_size=on_size, timeline=timeline
    )
    start = time.monotonic()
    summary = Summary(run)
    if is_url(src) and is_url(dst):
        jobs = relay_jobs(src, dst, run)
    elif is_url(src):
        jobs = download_jobs(src, dst, run)
    elif is_url(dst):
        jobs = upload_jobs(src, dst, run)
    else:
        raise BadInput("local to local", "is not what cp is for", "use cp(1)")
    if request.parallel == 1 or len(jobs) <= 1:
        for job in jobs:
            summary.files.append(job())
    else:
        with ThreadPoolExecutor(request.parallel, thread_name_prefix="dtnkit-file") as pool:
            futures = [pool.submit(job) for job in jobs]
            for fut in futures:
                summary.files.append(fut.result())
    summary.seconds = time.monotonic() - start
    return summary


def download_jobs(src: str, dst: str, run: CopyRun) -> list[FileJob]:
    """From a server: a file into a local path or a character device, or a tree."""
    request = run.request
    url = Url.parse(src)
    session = Session(url, run)
    target = Path(dst)
    if request.recursive:
        base = target / url.name if target.is_dir() and url.name else target
        return [
            functools.partial(download, session, child, path, run)
            for child, path in remote_walk(session, url, base)
        ]
    if is_device(target):
        return [functools.partial(download_to_device, session, url, target, run)]
    if target.is_dir() or dst.endswith("/"):
        target = target / url.name
    if request.parents:
        try:
            make_dirs(target.parent)
        except OSError as exc:
            raise BadInput(
                f"destination {dst}",
                f"its directory cannot be made ({exc.filename}: {exc.strerror})",
                "check that path and its permissions (a file there, or "
                "a symbolic link made meanwhile, is refused)",
            ) from None
    elif not target.parent.is_dir():
        raise BadInput(
            f"destination {dst}",
            "its directory does not exist",
            "rerun with -p/--parents to create it, or create it first",
        )
    return [functools.partial(download, session, url, target, run)]


def upload_jobs(src: str, dst: str, run: CopyRun) -> list[FileJob]:
    """To a server: a local file, or a tree (its collections made on the way)."""
    from dtnkit.transfer.client.upload import upload  # each direction loads its own module

    request = run.request
    url = Url.parse(dst)
    session = Session(url, run)
    local = Path(src)
    if local.is_dir():
        if not request.recursive:
            raise BadInput(f"source {src}", "is a directory", "pass -r to copy it")
        top = url.child(local.name) if dst.endswith("/") else url
        if request.parents:
            make_parents(session, top)
        return [
            functools.partial(upload, session, file, remote, run)
            for file, remote in local_walk(session, local, top)
        ]
    if not local.is_file():
        raise BadInput(f"source {src}", "is not a file", "check the path")
    if dst.endswith("/"):
        url = url.child(local.name)
    if request.parents:
        make_parents(session, url)
    return [functools.partial(upload, session, local, url, run)]


def relay_jobs(src: str, dst: str, run: CopyRun) -> list[FileJob]:
    """Remote to remote through this client (not third-party copy): GET ranges from the
    source, PUT them to the destination; separate tokens with ``src_token``/``dst_token``."""
    from dtnkit.transfer.client.relay import relay, relay_walk

    request = run.request
    src_url, dst_url = Url.parse(src), Url.parse(dst)
    src_session, dst_session = Session(src_url, run), Session(dst_url, run)
    src_session.token = request.src_token or request.token
    dst_session.token = request.dst_token or request.token
    if request.recursive:
        top = dst_url.child(src_url.name) if dst.endswith("/") and src_url.name else dst_url
        if request.parents:
            make_parents(dst_session, top)
        return [
            functools.partial(relay, src_session, child, dst_session, target, run)
            for child, target in relay_walk(src_session, src_url, dst_session, top)
        ]
    if dst.endswith("/"):
        dst_url = dst_url.child(src_url.name)
    if request.parents:
        make_parents(dst_session, dst_url)
    return [functools.partial(relay, src_session, src_url, dst_session, dst_url, run)]


def remote_walk(session: Session, url: Url, dst: Path) -> Iterator[tuple[Url, Path]]:
    """(remote file, local file) pairs of a tree, every name checked
    (:func:`~dtnkit.transfer.client.tree.walk`); makes the local directories, never through
    a symbolic link."""
    from dtnkit.transfer.client.tree import walk  # only a tree's copy lists one

    dst.mkdir(parents=True, exist_ok=True)
    for member in walk(session, url):
        target = dst.joinpath(*member.names)
        if member.is_dir:
            if target.is_symlink():
                raise BadInput(
                    f"destination {target}",
                    "is a symbolic link",
                    "remove it, or copy into another directory",
                )
            target.mkdir(exist_ok=True)
        else:
            yield member.url, target


def local_walk(session: Session, src: Path, url: Url) -> Iterator[tuple[Path, Url]]:
    mkcol(session, url)
    for entry in sorted(src.iterdir()):
        if entry.is_symlink():
            continue
        if entry.is_dir():
            yield from local_walk(session, entry, url.child(entry.name))
        elif entry.is_file():
            yield entry, url.child(entry.name)


def total_size(src: str) -> int | None:
    """Bytes to move for a progress bar, from a local source (a remote one tells its size
    with its first answer: :meth:`CopyRun.sized`, no request of its own)."""
    try:
        if is_url(src):
            return None
        p = Path(src)
        if p.is_file():
            return p.stat().st_size
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())
    except OSError:
        return None
