"""``copy(src, dst, options)``: what to move (a file, a tree, to or from a server or between
two), as one job per file, run one by one or ``parallel`` at a time."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dtnkit.errors import BadInput
from dtnkit.transfer.client.download import download, download_to_device, is_device
from dtnkit.transfer.client.options import FileResult, Options, Summary
from dtnkit.transfer.client.session import Session, Url, is_url, make_parents, mkcol

# Start-up (`dtnkit cp` of one file): uploads, relays, trees and --parallel load their
# modules when a copy needs them (concurrent.futures brings logging: ~10 ms).


def remote_walk(session: Session, url: Url, dst: Path) -> Iterator[tuple[Url, Path]]:
    """(remote file, local file) pairs of a tree, every name checked
    (:func:`~dtnkit.transfer.client.tree.walk`); makes the local directories, never through
    a symbolic link."""
    from dtnkit.transfer.client.tree import walk

    dst.mkdir(parents=True, exist_ok=True)
    for member in walk(session, url):
        target = dst.joinpath(*member.names)
        if member.is_dir:
            if target.is_symlink():
                raise BadInput(f"destination {target}", "is a symbolic link",
                               "remove it, or copy into another directory")
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


def relay_jobs(src: str, dst: str, options: Options) -> list[Callable[[], FileResult]]:
    """Remote to remote through this client (not third-party copy): GET ranges from the
    source, PUT them to the destination; separate tokens with ``src_token``/``dst_token``."""
    from dtnkit.transfer.client.relay import relay, relay_walk

    src_url, dst_url = Url.parse(src), Url.parse(dst)
    src_session, dst_session = Session(src_url, options), Session(dst_url, options)
    src_session.token = options.src_token or options.token
    dst_session.token = options.dst_token or options.token
    jobs: list[Callable[[], FileResult]] = []
    if options.recursive:
        top = dst_url.child(src_url.name) if dst.endswith("/") and src_url.name else dst_url
        if options.parents:
            make_parents(dst_session, top)
        for child, target in relay_walk(src_session, src_url, dst_session, top):
            jobs.append(functools.partial(relay, src_session, child, dst_session, target,
                                          options))
        return jobs
    if dst.endswith("/"):
        dst_url = dst_url.child(src_url.name)
    if options.parents:
        make_parents(dst_session, dst_url)
    jobs.append(functools.partial(relay, src_session, src_url, dst_session, dst_url,
                                  options))
    return jobs


def copy(src: str, dst: str, options: Options) -> Summary:
    """Copy *src* to *dst* (one of them a URL); returns the summary."""
    options.check()
    options.start()  # the deadline counts from here
    start = time.monotonic()
    summary = Summary([])
    jobs: list[Callable[[], FileResult]] = []
    if is_url(src) and is_url(dst):
        jobs = relay_jobs(src, dst, options)
    if not is_url(src) and not is_url(dst):
        raise BadInput("local to local", "is not what cp is for", "use cp(1)")
    if is_url(src) and is_url(dst):
        pass  # the relay jobs above
    elif is_url(src):
        url = Url.parse(src)
        session = Session(url, options)
        target = Path(dst)
        if options.recursive:
            base = target / url.name if target.is_dir() and url.name else target
            for child, path in remote_walk(session, url, base):
                jobs.append(functools.partial(download, session, child, path, options))
        elif is_device(target):
            jobs.append(functools.partial(download_to_device, session, url, target, options))
        else:
            if target.is_dir() or dst.endswith("/"):
                target = target / url.name
            if options.parents:
                from dtnkit.transfer.files import make_dirs

                try:
                    make_dirs(target.parent)
                except OSError as exc:
                    raise BadInput(f"destination {dst}", f"its directory cannot be made "
                                   f"({exc.filename}: {exc.strerror})",
                                   "check that path and its permissions (a file there, or "
                                   "a symbolic link made meanwhile, is refused)") from None
            elif not target.parent.is_dir():
                raise BadInput(f"destination {dst}", "its directory does not exist",
                               "rerun with -p/--parents to create it, or create it first")
            jobs.append(functools.partial(download, session, url, target, options))
    else:
        from dtnkit.transfer.client.upload import upload

        url = Url.parse(dst)
        session = Session(url, options)
        local = Path(src)
        if local.is_dir():
            if not options.recursive:
                raise BadInput(f"source {src}", "is a directory", "pass -r to copy it")
            top = url.child(local.name) if dst.endswith("/") else url
            if options.parents:
                make_parents(session, top)
            for file, remote in local_walk(session, local, top):
                jobs.append(functools.partial(upload, session, file, remote, options))
        else:
            if not local.is_file():
                raise BadInput(f"source {src}", "is not a file", "check the path")
            if dst.endswith("/"):
                url = url.child(local.name)
            if options.parents:
                make_parents(session, url)
            jobs.append(functools.partial(upload, session, local, url, options))
    if options.parallel == 1 or len(jobs) <= 1:
        for job in jobs:
            summary.files.append(job())
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(options.parallel, thread_name_prefix="dtnkit-file") as pool:
            futures = [pool.submit(job) for job in jobs]
            for fut in futures:
                summary.files.append(fut.result())
    summary.seconds = time.monotonic() - start
    return summary


def total_size(src: str) -> int | None:
    """Bytes to move for a progress bar, from a local source (a remote one tells its size
    with its first answer: :meth:`Options.sized`, no request of its own)."""
    try:
        if is_url(src):
            return None
        p = Path(src)
        if p.is_file():
            return p.stat().st_size
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())
    except OSError:
        return None
