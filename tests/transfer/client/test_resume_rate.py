"""After a resume, `dtnkit cp` reports the rate of the bytes this run moved, and the bytes kept
from the interrupted run apart (``resumed_bytes``), in JSON and in the human summary."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.support.polling import until

from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import TransferError
from dtnkit.transfer.client.journals import journal_path, part_path
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.units import format_bytes

BLOCK = 64 * 1024
SIZE = 48 * BLOCK


def _interrupted(root: Path, dst: Path) -> ServerHandle:
    """A download of ``root/dst.name`` cut half-way by stopping its server (the copy keeps
    its part file and journal); a new server on the same port and root."""
    handle = start_server(root, host="127.0.0.1", port=0, anonymous_read=True, quiet=True)
    lock, seen = threading.Lock(), [0]

    def hook(n: int) -> None:
        with lock:
            seen[0] += n
            if seen[0] >= SIZE // 2 > seen[0] - n:
                handle.stop()
                raise TransferError(f"GET {dst.name}", "the server stopped")

    with pytest.raises(TransferError):
        copy(
            handle.url + dst.name,
            str(dst),
            CopyRequest(block_size=BLOCK, streams=2, retries=1, backoff=0.01),
            progress=hook,
        )
    assert part_path(dst).exists() and journal_path(dst).exists()
    return start_server(root, host="127.0.0.1", port=handle.port, anonymous_read=True, quiet=True)


def _resume(
    handle: ServerHandle, dst: Path, *fmt: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    """The rerun as a person types it; the bytes the server sent for it."""
    kept = len(json.loads(journal_path(dst).read_text())["done"])
    before = handle.counters["sendfile_bytes"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "cp",
            handle.url + dst.name,
            str(dst),
            "--block-size",
            "64KiB",
            "--streams",
            "2",
            *fmt,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode == 0:
        # the server's worker counts a response's bytes when it is done with it, which may be
        # a moment after the client has what it asked for and has exited
        until(
            "the server's count of the resume's bytes",
            lambda: handle.counters["sendfile_bytes"] - before >= SIZE - kept * BLOCK,
            30,
        )
    return proc, handle.counters["sendfile_bytes"] - before


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, bytes]:
    root = tmp_path / "srv"
    root.mkdir()
    data = random.Random(5).randbytes(SIZE)
    (root / "r.bin").write_bytes(data)
    return root, data


def test_resumed_rate_counts_only_the_bytes_this_run_moved(
    source: tuple[Path, bytes], tmp_path: Path
) -> None:
    root, data = source
    dst = tmp_path / "r.bin"
    handle = _interrupted(root, dst)
    kept_blocks = len(json.loads(journal_path(dst).read_text())["done"])
    try:
        proc, moved = _resume(handle, dst, "--format", "json")
    finally:
        handle.stop()
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert dst.read_bytes() == data
    assert 0 < doc["resumed_blocks"] == kept_blocks
    assert doc["resumed_bytes"] == kept_blocks * BLOCK == SIZE - moved
    assert doc["bytes"] == SIZE
    # rate_bps is rounded to 0.1 bit/s and seconds to 1 us: that is the whole tolerance
    expected = moved * 8 / doc["seconds"]
    assert abs(doc["rate_bps"] - expected) <= 0.05 + expected * 2e-6 / doc["seconds"]
    assert doc["rate_bps"] < SIZE * 8 / doc["seconds"] * 0.9  # not the whole file's bytes


def test_resumed_summary_shows_the_kept_bytes_apart(
    source: tuple[Path, bytes], tmp_path: Path
) -> None:
    root, data = source
    dst = tmp_path / "r.bin"
    handle = _interrupted(root, dst)
    try:
        proc, moved = _resume(handle, dst)
    finally:
        handle.stop()
    assert proc.returncode == 0, proc.stderr
    assert dst.read_bytes() == data
    line = proc.stderr.strip().splitlines()[-1]
    assert 0 < moved < SIZE
    assert line.startswith(
        f"copied 1 file, {format_bytes(SIZE)}: {format_bytes(moved)} moved in "
    ), line
    assert f"), {format_bytes(SIZE - moved)} kept from the interrupted run; " in line, line
