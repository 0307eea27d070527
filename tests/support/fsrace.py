"""A local attacker for the server's file operations: a process that swaps a directory of the
served tree with a symlink to a directory outside it (``renameat2(RENAME_EXCHANGE)``) as fast
as it can, and an Exchange that calls the real handlers without sockets (so a test makes
thousands of tries in a few seconds; the HTTP tests make fewer, over real sockets).
"""

from __future__ import annotations

import io
import mmap
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

from dtnkit.errors import BadInput
from dtnkit.transfer import files, tokens
from dtnkit.transfer.server import access
from dtnkit.transfer.server.config import Counters, ServerConfig
from dtnkit.transfer.server.errors import HttpError
from dtnkit.transfer.server.exchange import FileLike, HeaderList, Services, Sink
from dtnkit.transfer.server.registry import SessionRegistry

INSIDE = b"INSIDE-MARKER-" * 64
OUTSIDE = b"OUTSIDE-SECRET-" * 64
OUTSIDE_ONLY = "outside-only-name"
TOKEN = "fsrace-rw"

# The attacker: swap A and B (a directory and a symlink) until the stop file appears; the
# number of swaps so far is kept in the 8 bytes of COUNT.  syscall 316 is renameat2 on x86_64.
_SWAPPER = r"""
import ctypes, mmap, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b, stop = (p.encode() for p in sys.argv[1:4])
with open(sys.argv[4], "r+b") as f:
    shared = mmap.mmap(f.fileno(), 8)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
sc = libc.syscall
n = 0
sys.stdout.write("go\n"); sys.stdout.flush()
while True:
    for _ in range(64):
        if sc(316, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0:
            n += 1
    shared[:8] = struct.pack("q", n)
    if os.path.exists(stop):
        break
print(n)
"""


@dataclass
class Layout:
    """``base/root`` is served; ``root/d`` is a directory and ``root/l`` a symlink to
    ``base/outside``; the swapper exchanges the two names."""

    base: Path
    root: Path
    outside: Path
    inside_fd: int  # the real directory d, whatever name it has at the moment
    outside_fd: int

    @classmethod
    def make(cls, base: Path) -> Layout:
        root, outside = base / "root", base / "outside"
        (root / "d").mkdir(parents=True)
        outside.mkdir()
        (root / "l").symlink_to(outside)
        (root / "d" / "file").write_bytes(INSIDE)
        (outside / "file").write_bytes(OUTSIDE)
        (outside / OUTSIDE_ONLY).write_bytes(OUTSIDE)
        return cls(
            base,
            root,
            outside,
            os.open(root / "d", os.O_RDONLY | os.O_DIRECTORY),
            os.open(outside, os.O_RDONLY | os.O_DIRECTORY),
        )

    def close(self) -> None:
        os.close(self.inside_fd)
        os.close(self.outside_fd)

    def outside_names(self) -> set[str]:
        return set(os.listdir(self.outside_fd))

    def inside_names(self) -> set[str]:
        return set(os.listdir(self.inside_fd))

    def settle(self) -> None:
        """Put the real directory back under the name d."""
        if (self.root / "d").is_symlink():
            os.rename(self.root / "d", self.root / "tmp-link")
            os.rename(self.root / "l", self.root / "d")
            os.rename(self.root / "tmp-link", self.root / "l")
        assert not (self.root / "d").is_symlink() and (self.root / "l").is_symlink()


class Swapper:
    """The swapping process; :meth:`swaps` is how many exchanges it has made so far."""

    def __init__(self, counter: Path) -> None:
        self._file = open(counter, "rb")  # noqa: SIM115 (closed in close)
        self._map = mmap.mmap(self._file.fileno(), 8, prot=mmap.PROT_READ)
        self.final: int | None = None

    def swaps(self) -> int:
        if self.final is not None:
            return self.final
        return int(struct.unpack("q", self._map[:8])[0])

    def close(self) -> None:
        self._map.close()
        self._file.close()


@contextmanager
def swapping(layout: Layout) -> Iterator[Swapper]:
    """Run the swapper during the block."""
    tag = time.monotonic_ns()
    stop, counter = layout.base / f"stop-{tag}", layout.base / f"count-{tag}"
    counter.write_bytes(bytes(8))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _SWAPPER,
            str(layout.root / "d"),
            str(layout.root / "l"),
            str(stop),
            str(counter),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "go\n"
    swapper = Swapper(counter)
    try:
        yield swapper
    finally:
        stop.touch()
        out, _ = proc.communicate(timeout=30)
        stop.unlink()
        swapper.close()
        counter.unlink()
        swapper.final = int(out.strip())
        layout.settle()


@dataclass
class Reply:
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def services(root: Path, registry: SessionRegistry | None = None) -> Services:
    config = ServerConfig(
        root=root.resolve(),
        tokens=tokens.parse(f"{TOKEN} read,write\n"),
        anonymous_read=False,
        quiet=True,
        log=io.StringIO(),
    )
    return Services(config, files.ChecksumCache(), Counters(), registry)


class DirectExchange:
    """The handlers' Exchange without a socket: the real path resolution, no authorization
    (the token is not what is tested), the body from bytes, the answer recorded."""

    def __init__(
        self, svc: Services, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> None:
        self.method = method
        self.target = target
        self.headers = Message()
        self.headers["Authorization"] = f"Bearer {TOKEN}"
        for name, value in headers.items():
            self.headers[name] = value
        if body:
            self.headers["Content-Length"] = str(len(body))
        self.services = svc
        self.body = body
        self.reply = Reply()
        self.log_target = target
        self.local_port = 1

    def local_names(self) -> list[str]:
        return ["localhost"]

    def resolve(self) -> Path:
        try:
            return access.resolve(self.services.config.root, self.target)
        except BadInput as exc:  # what the adapter answers with 400
            raise HttpError(400, self.target, str(exc)) from None

    def authorize(self, need: str | None = None) -> None:
        return None

    def content_length(self) -> int | None:
        return len(self.body) if self.body else None

    def body_pending(self) -> bool:
        return bool(self.body)

    def is_chunked(self) -> bool:
        return False

    def discard_body(self) -> None:
        self.body = b""

    def read_small_body(self, limit: int) -> bytes:
        body, self.body = self.body, b""
        return body

    def read_body(self, sink: Sink) -> int:
        body, self.body = self.body, b""
        if body:
            sink(memoryview(body))
        return len(body)

    def send_head(self, status: int, headers: HeaderList = ()) -> None:
        self.reply.status = status
        self.reply.headers = list(headers)

    def send_empty(self, status: int, headers: HeaderList = ()) -> None:
        self.send_head(status, headers)

    def send_bytes(
        self, status: int, headers: HeaderList, body: bytes, *, head: bool = False
    ) -> None:
        self.send_head(status, headers)
        if not head:
            self.reply.body = body

    def send_file(self, f: FileLike, start: int, count: int) -> int:
        self.reply.body = os.pread(f.fileno(), count, start)
        return len(self.reply.body)

    def start_chunked(self, status: int, headers: HeaderList = ()) -> None:
        self.send_head(status, headers)
        self.reply.body = b""

    def write_chunk(self, data: bytes) -> None:
        self.reply.body += data

    def end_chunked(self) -> None:
        pass

    def count_bytes(self, n: int) -> None:
        return None

    def close_after(self) -> None:
        return None

    def client_gone(self) -> bool:
        return False


def run(
    svc: Services,
    method: str,
    target: str,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> Reply:
    """One request through the real handler; an HttpError becomes its status."""
    from dtnkit.transfer.server import routes

    ex = DirectExchange(svc, method, target, headers or {}, body)
    try:
        routes.BY_METHOD[method].handler(ex)  # type: ignore[arg-type]
    except HttpError as exc:
        ex.reply.status = exc.status
    return ex.reply
