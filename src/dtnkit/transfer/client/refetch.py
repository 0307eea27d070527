"""Which blocks of a downloaded file differ from the source's, after a whole-file checksum
mismatch: the source's ``Content-Digest`` (RFC 9530) of each block's range, asked with a
``HEAD`` per block on the engine's streams, against the digest of the same block here (the
values computed as the bytes arrived, or the part file read back).  The download fetches
again only those."""

from __future__ import annotations

import http.client
import threading
from typing import NoReturn

from dtnkit.transfer import checksum, pipeline
from dtnkit.transfer.client.blocks import read_back
from dtnkit.transfer.client.engine import BlockQueue, Stream, StreamEngine
from dtnkit.transfer.client.errors import Abort, Retryable, TransferError
from dtnkit.transfer.client.policy import StreamPlan
from dtnkit.transfer.client.session import RemoteInfo, Session, Url, check_status
from dtnkit.transfer.wire.digests import parse_repr_digest


class DigestProbe:
    """A stream's lane asking a ``HEAD`` with ``Want-Content-Digest`` per block; stops every
    stream when the server gives no per-block digests (no ranges, or no digests)."""

    depth = 1

    def __init__(
        self, session: Session, url: Url, info: RemoteInfo, name: str, stop: threading.Event
    ) -> None:
        self.session, self.url, self.info, self.name, self.stop = session, url, info, name, stop
        self.want = f"{checksum.REGISTRY[name].rfc9530}=10"
        self.found: dict[int, bytes] = {}
        self.unsupported = threading.Event()

    def _none(self) -> NoReturn:
        self.unsupported.set()  # no ranges (or the source changed) or no digests
        self.stop.set()
        raise Abort()

    def counted(self) -> int:
        return 0

    def send(self, conn: http.client.HTTPConnection, b: pipeline.Block, _state: None) -> None:
        info, url = self.info, self.url
        hdrs = {"Range": f"bytes={b.offset}-{b.end}", "Want-Content-Digest": self.want}
        if info.etag:
            hdrs["If-Range"] = info.etag
        what = f"HEAD {url} (block {b.index} digest)"
        conn.request("HEAD", url.path, headers=self.session.headers(hdrs))
        r = conn.getresponse()
        body = r.read()
        if r.status >= 500:
            raise Retryable(f"{what}: HTTP {r.status}")
        if r.status == 200 or (r.status == 206 and not r.getheader("Content-Digest")):
            self._none()
        check_status(r.status, what, body, ok=(206,))
        crange = r.getheader("Content-Range")
        if crange != f"bytes {b.offset}-{b.end}/{info.size}":
            raise TransferError(
                what,
                f"Content-Range {crange!r} is not the block asked "
                f"for (bytes {b.offset}-{b.end}/{info.size})",
                "check the server",
            )
        try:
            values = parse_repr_digest(r.getheader("Content-Digest") or "")
        except ValueError as exc:
            raise TransferError(
                f"Content-Digest from {url} (block {b.index})",
                f"cannot be parsed ({exc})",
                "check the server; rerun with --verify file to fetch the whole file again instead",
            ) from None
        if self.name not in values:
            self._none()
        self.found[b.index] = values[self.name]

    def give_up(self, b: pipeline.Block, attempts: int, exc: BaseException) -> TransferError:
        return TransferError(
            f"HEAD {self.url} (block {b.index} digest)",
            f"failed after {attempts} attempts ({exc})",
            "check that the server is up and reachable",
        )

    def prepare(self, b: pipeline.Block) -> None:
        return None

    def answer(self, conn: http.client.HTTPConnection, b: pipeline.Block, _state: None) -> None:
        return None

    def finish(self, b: pipeline.Block, _state: None) -> None:
        return None

    def reusable(self, conn: http.client.HTTPConnection) -> bool:
        return conn.sock is not None

    def queued(self) -> int:
        return 0

    def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


def block_digests(
    session: Session,
    url: Url,
    info: RemoteInfo,
    blocks: list[pipeline.Block],
    name: str,
    plan: StreamPlan,
) -> dict[int, bytes] | None:
    """The source's ``Content-Digest`` of each block's range, asked on up to ``plan.most``
    keep-alive connections; None when the server gives none."""
    stop = threading.Event()
    probe = DigestProbe(session, url, info, name, stop)

    def lane(_stream: Stream) -> DigestProbe:
        return probe

    engine = StreamEngine(
        session,
        BlockQueue(blocks),
        lane,
        retry=session.run.request.retry,
        give_up=probe.give_up,
        name="dtnkit-block-digest",
        stop=stop,
    )
    engine.start(min(plan.most, len(blocks)))
    engine.wait()
    return None if probe.unsupported.is_set() else probe.found


def bad_blocks(
    session: Session,
    url: Url,
    info: RemoteInfo,
    fd: int,
    blocks: list[pipeline.Block],
    name: str,
    values: list[int | None] | None,
    plan: StreamPlan,
) -> list[pipeline.Block] | None:
    """Blocks of the part file whose *name* digest differs from the source's for the same
    range; local digests come from *values* (per-block values computed as the bytes arrived)
    when given, else from the part file.  None when the server gives no per-block digests."""
    remote = block_digests(session, url, info, blocks, name, plan)
    if remote is None:
        return None
    bad: list[pipeline.Block] = []
    for b in blocks:
        value = values[b.index] if values is not None else None
        if value is not None:
            local = checksum.to_bytes(name, value)
        else:
            h = checksum.new(name)
            h.update(read_back(fd, b))
            local = h.digest()
        if local != remote[b.index]:
            bad.append(b)
    return bad
