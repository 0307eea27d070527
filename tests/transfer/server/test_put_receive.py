"""How ``dtnkit serve`` receives an upload's body over TLS (issue 11, WAN speed: uploads at
most 1.1x the download time).

Over TLS a socket receive gives at most one TLS record (16 KiB), and the server handed each
receive to the PUT's sink: a hash update and a ``write`` system call per 16 KiB (16,384 of each
for 256 MiB), in the one thread that also reads the socket.  On the 50 ms / 1 Gbit/s lab path
with tuned ends its receive queue held 30-38 MB unread while the client's socket had
nothing left to send (``ss -tn``: the server, not the path, set the pace), and it used
twice the CPU time of the same download.  Now the body is gathered into the whole 1 MiB
receive buffer before the sink sees it; the bytes, their order and the stall rules are the
same.  Real TLS server and client in this process, real sockets.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.xrootd import Pki
from tests.transfer.client import test_upload

from dtnkit.transfer import files
from dtnkit.transfer import tokens as tokmod
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle, adapter, start_server

MiB = 2**20
TOKEN = "putr-rw"
SIZE = 6 * MiB + 12345  # six whole receive buffers and a piece


state_dir = test_upload.state_dir  # the upload tests' journals' state directory


@pytest.fixture
def served(tmp_path: Path, pki: Pki) -> Iterator[tuple[ServerHandle, Path]]:
    root = tmp_path / "srv"
    root.mkdir()
    store = tokmod.parse(f"{TOKEN} read,write\n")
    with start_server(root, tokens=store, quiet=True, tls=(pki.cert, pki.key)) as h:
        yield h, root


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every write the server makes into a part file (a PUT's, a range's)."""
    seen: list[int] = []
    plain, at = files.write_all, files.pwrite_all

    def counted(fd: int, data: memoryview) -> None:
        seen.append(len(data))
        plain(fd, data)

    def counted_at(fd: int, data: memoryview, offset: int) -> None:
        seen.append(len(data))
        at(fd, data, offset)

    monkeypatch.setattr(files, "write_all", counted)
    monkeypatch.setattr(files, "pwrite_all", counted_at)
    return seen


def opts(pki: Pki, **kw: object) -> CopyRequest:
    base: dict[str, object] = {
        "token": TOKEN,
        "ca_file": str(pki.ca_file),
        "streams": 1,
        "checksum": "adler32",
        "retries": 1,
        "backoff": 0.01,
        "stall_timeout": 20.0,
    }
    base.update(kw)
    return CopyRequest(**base)  # type: ignore[arg-type]


def source(tmp_path: Path, seed: int) -> tuple[Path, bytes]:
    data = random.Random(seed).randbytes(SIZE)
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    return src, data


def whole_buffers(seen: list[int], size: int) -> None:
    """At most one write per 1 MiB receive buffer (and one for the bytes that came with the
    head), all of it but the ends full buffers."""
    assert sum(seen) == size
    per = adapter.RECV_BLOCK
    assert len(seen) <= size // per + 3, (len(seen), seen[:8])
    assert sum(1 for n in seen if n == per) >= size // per - 1


def test_a_put_over_tls_is_written_in_whole_receive_buffers(
    served: tuple[ServerHandle, Path], tmp_path: Path, pki: Pki, writes: list[int]
) -> None:
    """Before: 385 writes of at most 16 KiB (one TLS record each) for this 6 MiB body."""
    handle, root = served
    src, data = source(tmp_path, 1)
    summary = copy(str(src), f"https://127.0.0.1:{handle.port}/one.bin", opts(pki))
    assert (root / "one.bin").read_bytes() == data
    assert summary.files[0].upload_streams == 1 and summary.files[0].digest is not None
    whole_buffers(writes, SIZE)


def test_session_ranges_over_tls_are_written_in_whole_receive_buffers(
    served: tuple[ServerHandle, Path], tmp_path: Path, pki: Pki, writes: list[int]
) -> None:
    """The ranges of an upload session (2 MiB blocks, two streams) go through the same
    receive: whole buffers per range."""
    handle, root = served
    src, data = source(tmp_path, 2)
    summary = copy(
        str(src),
        f"https://127.0.0.1:{handle.port}/many.bin",
        opts(pki, streams=2, block_size=2 * MiB),
    )
    assert (root / "many.bin").read_bytes() == data
    assert summary.files[0].upload_streams == 2
    assert sum(writes) == SIZE
    # four ranges: each at most its two whole buffers and a piece that came with its head
    assert len(writes) <= 4 * 3, (len(writes), writes[:8])
