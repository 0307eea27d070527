"""The request/reply interface every handler is written against.

A handler is a function ``(Exchange) -> None``: it reads the method, target and headers,
resolves and authorizes, reads the body into a sink, and answers with one of the ``send``
calls, or raises :class:`~dtnkit.transfer.server.errors.HttpError`. Only the adapter
(:mod:`dtnkit.transfer.server.adapter`) implements it, and only it knows sockets, TLS,
threads, keep-alive and the access log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Protocol

from dtnkit.transfer.files import ChecksumCache
from dtnkit.transfer.server.config import Counters, ServerConfig
from dtnkit.transfer.server.limits import HashGate
from dtnkit.transfer.server.registry import SessionRegistry

#: Request headers, looked up case-insensitively (what http.server parses them into).
Headers = Message
HeaderList = Iterable[tuple[str, str]]
Sink = Callable[[memoryview], None]


class FileLike(Protocol):
    """An open regular file a body is sent from."""

    def fileno(self) -> int: ...


@dataclass
class Services:
    """What the handlers of one server share."""

    config: ServerConfig
    cache: ChecksumCache
    counters: Counters
    uploads: SessionRegistry | None  # None: upload sessions are disabled
    hashing: HashGate = field(init=False)  # per-token hashing slots, range-digest cache
    listing: HashGate = field(init=False)  # per-token slots for directory listings

    def __post_init__(self) -> None:
        self.hashing = HashGate(self.config.limits)
        self.listing = HashGate(
            self.config.limits, self.config.limits.listing_slots, "directory listings being read"
        )


class Exchange(Protocol):
    """One request and its answer."""

    @property
    def method(self) -> str: ...

    @property
    def headers(self) -> Headers: ...

    @property
    def services(self) -> Services: ...

    #: The request's SciTags tag: its valid ``SciTag`` header, else the server's default.
    scitag: int | None

    @property
    def log_target(self) -> str:
        """The request path without its query (which may carry a token), printable."""

    def local_names(self) -> list[str]:
        """The server's name and this connection's local address."""

    @property
    def local_port(self) -> int: ...

    # --- the request ---------------------------------------------------------------------

    def resolve(self) -> Path:
        """The file under the root the target names (HttpError 403 for a part file)."""

    def authorize(self, need: str | None = None) -> None:
        """Check the bearer token for scope *need* (default: the method's route scope)."""

    def content_length(self) -> int | None:
        """``Content-Length`` as a number, None when absent; HttpError 400 when malformed."""

    def body_pending(self) -> bool:
        """True while a request body may still be unread on the connection."""

    def is_chunked(self) -> bool:
        """True when the body comes with ``Transfer-Encoding: chunked``."""

    def discard_body(self) -> None:
        """Read and drop a small unexpected body so the connection stays usable."""

    def read_small_body(self, limit: int) -> bytes:
        """The whole body; HttpError 413 when it is longer than *limit*."""

    def read_body(self, sink: Sink) -> int:
        """Feed the body to *sink* in pieces; return its size (411 without a length)."""

    # --- the answer ----------------------------------------------------------------------

    def send_head(self, status: int, headers: HeaderList = ()) -> None:
        """Status and headers as given, no body (e.g. 304)."""

    def send_empty(self, status: int, headers: HeaderList = ()) -> None:
        """Status, headers and ``Content-Length: 0``."""

    def send_bytes(
        self, status: int, headers: HeaderList, body: bytes, *, head: bool = False
    ) -> None:
        """Status, headers, ``Content-Length`` and the body (not on *head*)."""

    def send_file(self, f: FileLike, start: int, count: int) -> int:
        """After :meth:`send_head`: *count* bytes of *f* from *start*; returns bytes sent."""

    def start_chunked(self, status: int, headers: HeaderList = ()) -> None:
        """Status and headers of a ``Transfer-Encoding: chunked`` answer."""

    def write_chunk(self, data: bytes) -> None:
        """One chunk, flushed (OSError when the client is gone)."""

    def end_chunked(self) -> None:
        """The last chunk."""

    def client_gone(self) -> bool:
        """True when the client closed its side of the connection."""

    def count_bytes(self, n: int) -> None:
        """Add *n* to the bytes the access log reports for this request."""

    def close_after(self) -> None:
        """Close the connection after this answer."""
