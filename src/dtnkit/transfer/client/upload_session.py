"""The client side of the resumable upload sessions of ``dtnkit serve``: start, status,
commit, abort (headers and ranges in :mod:`dtnkit.transfer.wire.upload`, the server side in
:mod:`dtnkit.transfer.server.sessions`).

A server that does not answer the session start with 201 and an id (XRootD, plain WebDAV, a
``dtnkit serve --no-upload-sessions``) gets one PUT stream instead: :class:`UseSinglePut`.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
import weakref

from dtnkit.errors import DtnkitError
from dtnkit.transfer.checksum import COMBINABLE
from dtnkit.transfer.client.errors import (
    ChecksumMismatch,
    DestinationExists,
    Retryable,
    SessionLost,
    UseSinglePut,
    reason,
)
from dtnkit.transfer.client.session import REDIRECTS, Session, Url, check_status, status_of
from dtnkit.transfer.wire.digests import parse_digest
from dtnkit.transfer.wire.upload import (
    CHECKSUM_HEADER,
    HEADER,
    ID_HEADER,
    LENGTH_HEADER,
    RANGES_HEADER,
    parse_ranges,
)

#: answers to the session start that mean "no sessions here": fall back to one PUT
UNSUPPORTED = frozenset({400, 404, 405, 409, 411, 413, 415, 501})
#: "no session for you now" (dtnkit serve: too many open for this token, or not enough
#: space reserved for them): one PUT for this file, no retry; the next file asks again
REFUSED = frozenset({503, 507})


_unsupported: weakref.WeakSet[Session] = weakref.WeakSet()  # sessions refused by server
_unsupported_lock = threading.Lock()


def refused(session: Session) -> bool:
    """Whether *session*'s server has refused upload sessions before (one PUT goes)."""
    with _unsupported_lock:
        return session in _unsupported


def start(
    session: Session,
    url: Url,
    size: int,
    algorithm: str | None,
    *,
    create_only: bool = False,
    conn: http.client.HTTPConnection | None = None,
) -> str:
    """Open an upload session; UseSinglePut when the server has none.  *create_only*: the
    session may not replace a file (``If-None-Match: *``, asked again at the commit).
    *conn*: a keep-alive connection to ask on (else a new one)."""
    with _unsupported_lock:
        if session in _unsupported:
            raise UseSinglePut("the server has no upload sessions")
    extra = {HEADER: "start", LENGTH_HEADER: str(size)}
    if algorithm in COMBINABLE:
        extra[CHECKSUM_HEADER] = algorithm
    if create_only:
        extra["If-None-Match"] = "*"
    raw = [0]

    def call() -> tuple[int, http.client.HTTPMessage, bytes]:
        st, hdrs, data = session.request("POST", url, extra, conn=conn)
        raw[0] = st
        # 501, 503 and 507 are answers here, not failures to retry
        return (405 if st == 501 or st in REFUSED else st), hdrs, data

    status, headers, body = session.with_retries(f"POST {url} (start upload)", call)
    status = raw[0]
    ident = headers.get(ID_HEADER)
    if status == 201 and ident:
        return ident
    if status == 412 and create_only:
        raise DestinationExists(str(url))
    if status in REFUSED:
        raise UseSinglePut(
            f"the server refused a new upload session with HTTP {status} ({reason(body)})"
        )
    # a redirect too: a door (dCache) sends PUTs to a pool, which the single PUT follows
    if status in UNSUPPORTED or status in REDIRECTS or (200 <= status < 300 and not ident):
        with _unsupported_lock:
            _unsupported.add(session)
        raise UseSinglePut(f"the server answered the session start with HTTP {status}")
    check_status(status, f"POST {url} (start upload)", body, ok=(201,))
    raise AssertionError("unreachable")


def status(
    session: Session, url: Url, ident: str, conn: http.client.HTTPConnection | None = None
) -> list[tuple[int, int]] | None:
    """The received ranges of a session, or None when the server does not know it."""
    st, headers, body = session.with_retries(
        f"POST {url} (upload status)",
        lambda: session.request("POST", url, {HEADER: "status", ID_HEADER: ident}, conn=conn),
    )
    if st in (404, 410):
        return None
    check_status(st, f"POST {url} (upload status)", body, ok=(200,))
    return parse_ranges(headers.get(RANGES_HEADER))


def abort(session: Session, url: Url, ident: str) -> None:
    with contextlib.suppress(DtnkitError, Retryable):
        session.request("DELETE", url, {ID_HEADER: ident})


def already_there(session: Session, url: Url, digest: str) -> bool:
    """Whether *url* now has the whole-file *digest* (``name=value``) the commit carried."""
    try:
        want = parse_digest(digest)
        name = next(iter(want))
        info = session.head(url, want=name)
    except (ValueError, StopIteration, DtnkitError):
        return False
    return info.digests.get(name) == want[name]


def commit(
    session: Session,
    url: Url,
    ident: str,
    digest: str | None,
    *,
    create_only: bool = False,
    conn: http.client.HTTPConnection | None = None,
) -> None:
    """Ask the server to verify and rename; ChecksumMismatch on 412 (DestinationExists when
    *create_only* and the target is there), SessionLost on 404.  *conn*: a keep-alive
    connection to ask on (else a new one)."""
    extra = {HEADER: "commit", ID_HEADER: ident}
    if create_only:
        extra["If-None-Match"] = "*"
    if digest is not None:
        extra["Digest"] = digest
    sent = [0]

    def call() -> tuple[int, http.client.HTTPMessage, bytes]:
        sent[0] += 1
        return session.request("POST", url, extra, conn=conn)

    st, _headers, body = session.with_retries(f"POST {url} (commit upload)", call)
    if (
        st in (404, 410)
        and sent[0] > 1
        and digest is not None
        and already_there(session, url, digest)
    ):
        return  # an earlier attempt committed it and only the answer was lost
    if st == 412 and create_only and status_of(session, "HEAD", url) == 200:
        raise DestinationExists(str(url))
    if st == 412:
        raise ChecksumMismatch(
            f"checksum mismatch for {url}",
            f"the server refused the commit: {reason(body)}",
            "retry; if it persists, check the source storage and the path",
        )
    if st in (404, 410):
        raise SessionLost(f"commit of {url}: HTTP {st} {reason(body)}")
    check_status(st, f"POST {url} (commit upload)", body, ok=(200, 201, 204))
