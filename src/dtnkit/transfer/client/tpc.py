"""HTTP third-party copy (HTTP-TPC), the requesting side: ``COPY`` with ``Source:`` (pull) or
``Destination:`` (push) sent to the active party (:func:`request_copy`), whose
performance-marker stream is parsed by :mod:`dtnkit.transfer.wire.markers` and whose final
line alone is trusted; :func:`third_party_copy` is ``dtnkit cp --tpc`` (the copy, the
clean-up of what a failed copy left, the destination's digest).
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dtnkit.errors import BadInput, DtnkitError, ExitStatus
from dtnkit.transfer.checksum import canonical
from dtnkit.transfer.client.errors import DestinationExists, TransferError
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.retry import fatal_transport
from dtnkit.transfer.client.session import (
    MAX_REDIRECTS,
    REDIRECTS,
    Session,
    Url,
    check_status,
    follow_redirect,
    is_url,
    make_parents,
    missing_parent,
    normalize,
    same_origin,
    status_of,
    want_name,
)
from dtnkit.transfer.wire import digests, markers
from dtnkit.transfer.wire.markers import Marker


class TpcError(TransferError):
    """A third-party copy failed (the final line said so, or the request was refused)."""


class MarkerStreamError(TpcError):
    """The performance-marker stream could not be parsed."""


@dataclass
class TpcResult:
    ok: bool
    final: str  # the final line as sent
    status: int
    markers: list[Marker] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def reason(self) -> str:
        return self.final.split(":", 1)[1].strip() if ":" in self.final else self.final

    @property
    def bytes(self) -> int | None:
        """Bytes the last marker reported (summed over stripes), or None without markers."""
        if not self.markers:
            return None
        last: dict[int, int] = {}
        for m in self.markers:
            if m.stripe_bytes is not None:
                last[m.stripe_index or 0] = m.stripe_bytes
        return sum(last.values()) if last else None


def parse_stream(
    lines: Iterable[str | bytes], on_marker: Callable[[Marker], None] | None = None
) -> tuple[str, list[Marker]]:
    """Parse a marker stream (:func:`dtnkit.transfer.wire.markers.parse_stream`) with its
    errors as this module's: :class:`MarkerStreamError`, or :class:`TpcError` when the
    stream ended without a final line."""
    try:
        return markers.parse_stream(lines, on_marker)
    except markers.MarkerSyntaxError as exc:
        raise MarkerStreamError(
            "performance-marker stream",
            str(exc),
            "the active server does not speak HTTP-TPC as expected",
        ) from None
    except markers.NoFinalLine as exc:
        raise TpcError(
            "third-party copy", str(exc), "check the destination and retry the copy"
        ) from None


def request_copy(
    active_url: str,
    *,
    source: str | None = None,
    destination: str | None = None,
    token: str | None = None,
    transfer_headers: Mapping[str, str] | None = None,
    streams: int = 1,
    timeout: float = 60.0,
    on_marker: Callable[[Marker], None] | None = None,
    checksum: str | None = None,
    ca_file: str | None = None,
    insecure: bool = False,
    require_checksum: bool | None = None,
    deadline: float | None = None,
    overwrite: bool = True,
    scitag: int | None = None,
    ca_dir: str | None = None,
    parents: bool = False,
) -> TpcResult:
    """Send COPY to the active party; follow its marker stream; trust only the final line.

    ``transfer_headers`` are sent as ``TransferHeader<Name>``.  ``overwrite=False`` sends
    ``Overwrite: F`` (RFC 4918; XRootD then opens the destination exclusively, 412 when it
    exists; dtnkit serve renames without replacing, and a push PUTs with
    ``If-None-Match: *``).  ``timeout`` bounds the wait between two lines of the stream,
    ``deadline`` (seconds) the whole request; the minimum rate does not apply (markers are a
    few bytes every few seconds).  ``require_checksum`` sends
    ``RequireChecksumVerification: true|false`` (not sent when None).  A 301/302/303/307/308
    answer is followed (COPY again, at most :data:`MAX_REDIRECTS` hops, never from https to
    http); the bearer token goes only to the origin it was given for, the TransferHeaders
    (meant for the passive party) to every hop.  Raises :class:`TpcError` when the server
    refuses the request, :class:`MarkerStreamError` on a malformed stream; a ``failure:``
    final line gives a result with ``ok`` False.  ``parents``: the destination's parent
    collections were made first (``cp -p``), so a pull's 409 is not told to use it.
    """
    if (source is None) == (destination is None):
        raise BadInput(
            "third-party copy",
            "needs exactly one of source and destination",
            "pass source= (pull) or destination= (push)",
        )
    first = url = Url.parse(active_url)
    headers = {"Credential": "none", "X-Number-Of-Streams": str(streams)}
    if not overwrite:
        headers["Overwrite"] = "F"
    if require_checksum is not None:
        headers["RequireChecksumVerification"] = "true" if require_checksum else "false"
    if source is not None:
        headers["Source"] = normalize(source)  # dav(s):// as http(s)://, for every peer
    if destination is not None:
        headers["Destination"] = normalize(destination)
    if checksum is not None:
        headers["Want-Digest"] = want_name(canonical(checksum))
    for name, value in (transfer_headers or {}).items():
        headers[f"TransferHeader{name}"] = value
    if scitag is not None:  # the active party's own flows, and forwarded to the passive one
        headers["SciTag"] = str(scitag)
        headers["TransferHeaderSciTag"] = str(scitag)
    start = time.monotonic()
    hops = 0
    # one clock for every hop: the deadline bounds the whole request
    run = CopyRun.of(
        CopyRequest(
            ca_file=ca_file,
            ca_dir=ca_dir,
            insecure=insecure,
            stall_timeout=timeout,
            low_speed_limit=0,
            deadline=deadline,
        )
    )
    while True:
        session = Session(url, run)
        session.token = token if same_origin(url, first) else None
        conn = session.connect()
        what = f"COPY {url}"
        try:
            conn.request("COPY", url.path, headers=session.headers(headers))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            fatal = fatal_transport(exc, what)
            if fatal is not None:
                raise TpcError(
                    fatal.what, fatal.why, fatal.next_step, status=fatal.status
                ) from None
            raise TpcError(
                what, f"{exc.__class__.__name__}: {exc}", "check that the active server is up"
            ) from None
        if resp.status not in REDIRECTS:
            break
        location = resp.getheader("Location")
        conn.close()
        hops += 1
        if hops > MAX_REDIRECTS:
            raise TpcError(
                f"COPY {first}",
                f"more than {MAX_REDIRECTS} redirects",
                "check the active server's redirect configuration",
            )
        url = follow_redirect(url, location, what)
    try:
        if resp.status not in (201, 202):
            body = resp.read(4096)
            side = resp.getheader(markers.REFUSED_REMOTE, "")
            if resp.status == 403 and side in ("Source", "Destination"):
                raise remote_refused(url, side, source if side == "Source" else destination)
            try:
                if source is not None:  # a pull: the COPY's target is the new file
                    missing_parent(resp.status, what, body, parents)
                check_status(resp.status, what, body, ok=(201, 202))
            except TransferError as exc:  # keeps its exit status: 401/403 are 22, not 20
                raise TpcError(exc.what, exc.why, exc.next_step, status=exc.status) from None

        def lines() -> Any:
            while True:
                try:
                    line = resp.readline(65536)
                except (OSError, http.client.HTTPException) as exc:
                    raise TpcError(
                        what,
                        f"the marker stream broke off ({exc})",
                        "check the destination and retry",
                    ) from None
                if not line:
                    return
                yield line

        final, seen = parse_stream(lines(), on_marker)
    finally:
        conn.close()
    return TpcResult(markers.is_success(final), final, resp.status, seen, time.monotonic() - start)


def remote_refused(active: Url, side: str, remote: str | None) -> TpcError:
    """The error for dtnkit serve's refusal to reach the COPY's other server (the
    :data:`~dtnkit.transfer.wire.markers.REFUSED_REMOTE` answer): not a token's scope, the
    active server's allow-list, which its admin sets."""
    host = Url.parse(remote).host if remote is not None and is_url(remote) else "HOST"
    where = f"[{active.host}]" if ":" in active.host else active.host
    return TpcError(
        f"COPY {active}",
        f"the active server may not reach the {side} host {host}: its address is "
        "not public and not in that server's --tpc-allow (HTTP 403)",
        f"the admin of {where}:{active.port} can allow it with `dtnkit serve "
        f"--tpc-allow {host}` (or a CIDR range holding its address); or copy "
        "without --tpc, relayed through this client",
        status=ExitStatus.REFUSED,
    )


@dataclass
class ThirdPartySummary:
    """What ``dtnkit cp --tpc`` reports."""

    mode: str  # pull or push
    source: str
    destination: str
    size: int  # the destination's size after the copy
    result: TpcResult
    checksum: str
    digest: bytes | None  # the destination's digest, as its server gives it

    def as_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "source": self.source,
            "destination": self.destination,
            "bytes": self.size,
            "seconds": round(self.result.seconds, 6),
            "checksum": self.checksum,
            "digest": digests.show(self.digest) if self.digest is not None else None,
            "markers": len(self.result.markers),
            "final": self.result.final,
        }


def source_size(
    mode: str,
    src: str,
    *,
    token: str | None,
    remote_token: str | None,
    ca_file: str | None,
    insecure: bool,
    ca_dir: str | None = None,
) -> int | None:
    """The size of a third-party copy's source, for a progress bar's total (the markers
    give only the bytes moved): a HEAD with the source's own token (the remote token for a
    pull, the client's for a push); None when the source does not say."""
    try:
        url = Url.parse(src)
        run = CopyRun.of(
            CopyRequest(
                token=remote_token if mode == "pull" else token,
                ca_file=ca_file,
                ca_dir=ca_dir,
                insecure=insecure,
                retries=0,
                stall_timeout=10.0,
            )
        )
        _session, _url, info = Session(url, run).resolve(url)
    except DtnkitError:
        return None
    return None if info.is_dir else info.size


def third_party_copy(
    mode: str,
    src: str,
    dst: str,
    *,
    token: str | None,
    remote_token: str | None,
    streams: int,
    checksum: str,
    timeout: float,
    ca_file: str | None,
    insecure: bool,
    on_marker: Callable[[Marker], None] | None = None,
    deadline: float | None = None,
    overwrite: bool = True,
    scitag: int | None = None,
    ca_dir: str | None = None,
    parents: bool = False,
) -> ThirdPartySummary:
    """Ask one server to copy from (``pull``: COPY to *dst*) or to (``push``: COPY to *src*)
    the other; the active side verifies.  A failed copy raises :class:`TpcError` after
    removing a destination the active server left behind, but only one that did not exist
    before the copy; a successful one reports the destination's size and digest.
    ``parents``: first MKCOL the destination's missing parent collections (``cp -p``)."""
    if not (is_url(src) and is_url(dst)):
        raise BadInput("--tpc", "needs two http(s) URLs", "pass SRC and DST as URLs")
    src, dst = normalize(src), normalize(dst)
    forward = {"Authorization": f"Bearer {remote_token}"} if remote_token else {}
    pull = mode == "pull"
    url = Url.parse(dst)
    run = CopyRun.of(
        CopyRequest(
            token=token if pull else remote_token,
            checksum=checksum,
            ca_file=ca_file,
            ca_dir=ca_dir,
            insecure=insecure,
            retries=1,
            scitag=scitag,
        )
    )
    dst_session = Session(url, run)
    before = status_of(dst_session, "HEAD", url)
    existed = before != 404
    if before == 200 and not overwrite:
        raise DestinationExists(str(url))  # also for an active side that ignores Overwrite
    if parents and before == 404:
        make_parents(dst_session, url)
    result = request_copy(
        dst if pull else src,
        source=src if pull else None,
        destination=None if pull else dst,
        token=token,
        transfer_headers=forward,
        streams=streams,
        timeout=timeout,
        checksum=checksum,
        ca_file=ca_file,
        insecure=insecure,
        on_marker=on_marker,
        deadline=deadline,
        overwrite=overwrite,
        scitag=scitag,
        ca_dir=ca_dir,
        parents=parents,
    )
    if not result.ok:
        # XRootD 5.5 answers 201 and leaves a 0-byte or partial destination after a failed
        # pull: remove it, but only if it was not there before the copy.
        # Nor a file that made an Overwrite: F copy fail: another writer's (dtnkit serve says
        # so: "exists and Overwrite: F" for a pull, "destination URL: exists" for a push).
        theirs = "Overwrite: F" in result.reason or result.reason.endswith(": exists")
        removed = not existed and not theirs and status_of(dst_session, "DELETE", url) in (200, 204)
        raise TpcError(
            f"third-party copy {src} -> {dst} ({mode})",
            result.reason
            + ("; removed the partial destination the active server left" if removed else ""),
            "check both servers' logs and the tokens",
        )
    # Report the destination's digest (the active side already compared it with the source).
    info = dst_session.head(url, want=checksum)
    return ThirdPartySummary(
        mode, src, dst, info.size, result, checksum, info.digests.get(checksum)
    )
