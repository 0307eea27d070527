"""The engine raises a write error of the destination whatever way a stream's connection
ended: here a server that closes the connection after each answer (``Connection: close``),
so the stream's connection cannot be reused and its work ends without another request,
and the destination's last write fails (a full disk).  Nothing else would notice: with
``--verify none`` the part file would be committed short of its last chunk."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest
from tests.support.hostile_server import Reply, Request, hostile, ranged

from dtnkit.transfer import pipeline
from dtnkit.transfer.client.ends import FileSink, HttpRangeSource
from dtnkit.transfer.client.engine import move
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url

BLOCK = 64 * 1024
DATA = random.Random(7).randbytes(3 * BLOCK + 5)


class FullAtTheEnd(FileSink):
    """A destination whose write of the file's last bytes fails with ENOSPC."""

    def write(self, data: memoryview, offset: int) -> None:
        if offset + len(data) >= len(DATA):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().write(data, offset)


def closing(req: Request) -> Reply:
    reply = ranged(DATA)(req)
    reply.close = True
    return reply


@pytest.mark.parametrize("streams", [1, 2])
def test_the_last_write_failing_is_raised_after_a_closed_connection(
    tmp_path: Path, streams: int
) -> None:
    run = CopyRun.of(
        CopyRequest(
            block_size=BLOCK,
            retries=0,
            verify="none",  # type: ignore[arg-type]
            stall_timeout=10.0,
        )
    )
    blocks = pipeline.plan_blocks(len(DATA), BLOCK)
    fd = os.open(tmp_path / "part", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with hostile(closing) as srv:
            url = Url.parse(srv.url("/f"))
            session = Session(url, run)
            with pytest.raises(OSError) as info:
                move(
                    HttpRangeSource(session, url, '"e1"', len(DATA)),
                    FullAtTheEnd(fd),
                    blocks,
                    run,
                    StreamPlan(streams, streams),
                    size=len(DATA),
                )
        assert info.value.errno == errno.ENOSPC
        assert [r.method for r in srv.requests] == ["GET"] * streams  # a span each, once
    finally:
        os.close(fd)
