"""Copies on loopback: this tree's ``dtnkit serve`` in a child process, XRootD 5.5.3 over plain
HTTP and root:// on the same files, and ``dtnkit cp`` timed in-process (the copy alone, without
the interpreter's start-up) through ``dtnkit.transfer.client.copy.copy``."""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import stat
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

from bench.lib.core import Bench
from bench.lib.procs import listening_url, make_file, wait_port
from bench.lib.trees import Tree
from dtnkit.transfer import checksum as cks
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url
from dtnkit.transfer.client.verify import Level, Verify

MiB = 2**20
GiB = 2**30
MODES = ("none", "sequential", "file", "block")


def mb_s(size: int, seconds: float) -> str:
    return f"{size / seconds / 1e6:.0f}"


@contextlib.contextmanager
def dtnkit_server(
    b: Bench, root: Path, *flags: str, tree: Tree | None = None, state: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``dtnkit serve`` of *root* on 127.0.0.1 (a kernel-chosen port, anonymous read) in a
    child process of *tree* (default this one); yields its URL (ending in /) and process."""
    tree = tree or b.this
    proc = subprocess.Popen(
        tree.dtnkit(
            "serve",
            "--root",
            str(root),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--anonymous-read",
            "--quiet",
            *flags,
        ),
        stdout=subprocess.PIPE,
        text=True,
        env=tree.env(state),
    )
    b.tracked.add(proc)
    try:
        assert proc.stdout is not None
        yield listening_url(proc.stdout.readline()), proc
    finally:
        b.tracked.stop(proc)


@contextlib.contextmanager
def xrootd_server(b: Bench, root: Path, work: Path) -> Iterator[tuple[str, str]]:
    """XRootD 5.5.3 exporting *root*, plain HTTP (XrdHttp) and root://, server-side adler32.

    Yields ``(http_url, root_url)``, both ending in "/".  XRootD refuses to run as root, so it
    drops to ``nobody`` (``-R``); *root* must be readable by it.  (tests.support.xrootd's
    harness is TLS-only and serves its own data directory; this serves a tmpfs file as is.)
    """
    admin = work / "xrootd-admin"
    admin.mkdir(parents=True, exist_ok=True)
    nobody = pwd.getpwnam("nobody")
    os.chown(admin, nobody.pw_uid, nobody.pw_gid)
    xport, hport = free_port(), free_port()
    cfg = work / "xrootd.cfg"
    cfg.write_text(
        f"all.export /\noss.localroot {root}\nall.adminpath {admin}\n"
        f"all.pidpath {admin}\nxrd.port {xport}\nxrootd.chksum adler32\n"
        f"xrd.protocol XrdHttp:{hport} libXrdHttp.so\nhttp.listingdeny no\n"
    )
    proc = subprocess.Popen(
        [
            "xrootd",
            "-R",
            "nobody",
            "-c",
            str(cfg),
            "-l",
            str(admin / "xrootd.log"),
            "-n",
            "dtnkit-bench",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    b.tracked.add(proc)
    try:
        wait_port(hport, proc)
        wait_port(xport, proc)
        yield f"http://127.0.0.1:{hport}/", f"root://127.0.0.1:{xport}//"
    finally:
        b.tracked.stop(proc)


def warm_digests(url: str, algos: Sequence[str]) -> None:
    """Ask the server for each digest once, so its cache holds them before timing."""
    u = Url.parse(url)
    session = Session(u, CopyRun.of(CopyRequest(retries=0)))
    for algo in algos:
        session.head(u, want=cks.canonical(algo))


def evict(path: Path) -> None:
    """Write the file back and drop its cached pages, so the next read comes from disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_fraction(path: Path) -> float | None:
    """Share of the file's pages in the page cache (``fincore``), None if unknown."""
    try:
        r = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return int(r.stdout.split()[0]) / max(1, path.stat().st_size)
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def cp(
    url: str, dst: Path, *, streams: int, algo: str, mode: str, block: int, level: str = "inflight"
) -> float:
    """One in-process ``copy`` download; seconds; the destination is deleted after."""
    opts = CopyRequest(
        streams=streams,
        block_size=block,
        checksum=algo,
        verify=Verify(mode),
        level=Level(level),
        retries=0,
    )
    start = time.perf_counter()
    copy(url, str(dst), opts)
    elapsed = time.perf_counter() - start
    if not stat.S_ISCHR(dst.stat().st_mode):
        dst.unlink()
    return elapsed


def checksum_only(path: Path, algo: str, repeat: int, evicted: bool = False) -> float:
    """Best of *repeat* hashes of the whole file (after dropping its pages when *evicted*)."""

    def once() -> float:
        if evicted:
            evict(path)
        start = time.perf_counter()
        cks.file_checksum(path, algo)
        return time.perf_counter() - start

    return min(once() for _ in range(repeat))


def best(
    b: Bench,
    runs: dict[str, Callable[[], float]],
    *,
    label: str,
    rounds: int | None = None,
    before: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Best of the rounds for each named run, the runs interleaved round by round (load from
    other processes only adds time: the best is the least disturbed figure); *before* runs
    untimed before every run."""

    def wrap(run: Callable[[], float]) -> Callable[[], float]:
        def timed() -> float:
            if before is not None:
                before()
            return run()

        return timed

    got = b.rounds_of({k: wrap(v) for k, v in runs.items()}, label=label, rounds=rounds)
    return {k: min(got.get(k)) for k in runs}


@dataclass
class Loopback:
    """A served file on loopback: the work directory, the server's root, the file, its URL."""

    work: Path
    root: Path
    out: Path
    src: Path
    url: str  # the server's base URL

    @property
    def file_url(self) -> str:
        return self.url + self.src.name


@contextlib.contextmanager
def served_file(
    b: Bench, size: int, algos: Sequence[str], where: str = "/dev/shm"
) -> Iterator[Loopback]:
    """A *size*-byte random file under this tree's ``dtnkit serve`` (in --dir, tmpfs by
    default), its digests cached for *algos*, and an output directory beside it."""
    work = b.workdir(where=where, mode=0o755)
    root, out = work / "src", work / "dst"
    root.mkdir()
    out.mkdir()
    src = root / f"f{size // MiB}"
    make_file(src, size)
    with dtnkit_server(b, root) as (url, _proc):
        warm_digests(url + src.name, algos)
        yield Loopback(work, root, out, src, url)


def ints(text: str) -> list[int]:
    try:
        got = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: whole numbers, comma-separated") from None
    if not got or min(got) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one, each at least 1")
    return got


def checksums(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    try:
        return [cks.canonical(n) for n in names]
    except ValueError as exc:  # the registry says which names exist
        raise argparse.ArgumentTypeError(str(exc)) from None


def options(p: argparse.ArgumentParser, *, size: int = 1024, streams: str = "1,4") -> None:
    """The options of the loopback copy cases."""
    p.add_argument("--size", type=int, default=size, help=f"MiB, the file (default {size})")
    p.add_argument("--dir", default="/dev/shm", help="where the files live (default tmpfs)")
    p.add_argument("--block-size", type=int, default=8, help="MiB (default 8)")
    p.add_argument(
        "--streams", type=ints, default=ints(streams), help=f"comma-separated (default {streams})"
    )
