"""``dtnkit cp`` on a terminal (issue 11): the progress bar's total comes with the source's
first answer (CopyRun.sized), not from a HEAD of its own.  Before, a terminal cost a HEAD
on a connection of its own before the copy began: a TCP (and TLS) handshake and a round
trip more, 150 ms on a 50 ms path.  A real pty, a real ``dtnkit serve`` over loopback."""

from __future__ import annotations

import os
import pty
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.served import holding

from dtnkit.transfer import tokens
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.server import ServerHandle

SIZE = 3 * 2**20 + 12345
TOKEN = "ptot-rw"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerHandle]:
    with holding(
        tmp_path / "srv",
        {"f": random.Random(23).randbytes(SIZE)},
        tokens=tokens.parse(f"{TOKEN} read,write\n"),
    ) as handle:
        yield handle


def on_a_terminal(*argv: str) -> tuple[int, str]:
    """Run ``dtnkit`` with its stderr on a pty; its exit status and what the pty showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dtnkit", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            got = os.read(master, 65536)
        except OSError:  # EIO: the process closed the pty's last descriptor
            break
        if not got:
            break
        shown += got
    os.close(master)
    return proc.wait(timeout=60), shown.decode(errors="replace")


def test_a_terminal_costs_no_request_of_its_own(served: ServerHandle, tmp_path: Path) -> None:
    before = served.counters["requests"]
    code, shown = on_a_terminal(
        "cp", served.url + "f", str(tmp_path / "got"), "-f", "--streams", "1"
    )
    assert code == 0, shown
    assert (tmp_path / "got").stat().st_size == SIZE
    assert served.counters["requests"] - before == 1, shown  # the GET (before: HEAD, GET)
    assert "/3.0 MiB" in shown, shown  # the bar knew the total (rich's DownloadColumn)


@pytest.mark.parametrize("to", ["file", "device", "remote"])
def test_every_copy_from_a_remote_source_tells_its_size(
    served: ServerHandle, tmp_path: Path, to: str
) -> None:
    sizes: list[int] = []
    dst = {"file": str(tmp_path / "got"), "device": os.devnull, "remote": served.url + "copy"}[to]
    copy(served.url + "f", dst, CopyRequest(token=TOKEN), on_size=sizes.append)
    assert sizes == [SIZE]
