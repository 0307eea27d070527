"""What a running server is configured with and what it counts."""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from dtnkit.errors import BadInput
from dtnkit.transfer.server.flows import Marking
from dtnkit.transfer.server.limits import Limits
from dtnkit.transfer.server.tpc_allow import AllowList
from dtnkit.transfer.tokens import TokenStore

DEFAULT_EXPIRY = 3600.0  # seconds an idle upload session lives
DEFAULT_MARKER_INTERVAL = 5.0  # seconds between HTTP-TPC performance markers

TlsSpec = ssl.SSLContext | tuple[str | Path, str | Path]


@dataclass(frozen=True)
class ServerConfig:
    root: Path  # resolved
    tokens: TokenStore | None
    anonymous_read: bool
    quiet: bool
    log: TextIO
    marker_interval: float = DEFAULT_MARKER_INTERVAL
    upload_sessions: bool = True  # multi-stream partial uploads (POST Dtnkit-Upload)
    upload_expiry: float = DEFAULT_EXPIRY  # seconds an idle upload session lives
    ca_file: str | None = None  # PEM CAs trusted by this server's own TPC requests
    ca_dir: str | None = None  # and a hashed CA directory ($X509_CERT_DIR), when it exists
    #: remotes a COPY may reach besides public addresses (listed: failures are told)
    tpc_allow: AllowList = field(default_factory=AllowList)
    limits: Limits = field(default_factory=Limits)  # per-token limits (upload sessions, hashing)
    marking: Marking = field(default_factory=Marking)  # SciTags: default tag, firefly dests
    metrics: bool = False  # GET /metrics answers the mover's series (server/metrics.py)
    metrics_anonymous: bool = False  # /metrics without a read token
    capacity: float | None = None  # bytes/s the streams share (None: the link's speed)


@dataclass
class Counters:
    """What the server did; read by tests and benchmarks."""

    requests: int = 0
    sendfile_bytes: int = 0
    tls_body_bytes: int = 0
    received_bytes: int = 0
    checksum_bytes: int = 0
    range_puts: int = 0  # partial-upload ranges recorded (upload sessions)
    range_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, value: int) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {
                k: getattr(self, k)
                for k in (
                    "requests",
                    "sendfile_bytes",
                    "tls_body_bytes",
                    "received_bytes",
                    "checksum_bytes",
                    "range_puts",
                    "range_bytes",
                )
            }


def tls_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 or later) from a PEM certificate and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise BadInput(
            f"TLS certificate {cert} / key {key}",
            f"cannot be loaded ({exc})",
            "pass a PEM certificate with --cert and its private key with --key",
        ) from None
    return context
