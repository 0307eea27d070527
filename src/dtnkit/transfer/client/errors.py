"""The client's error family, each mapped to an :class:`~dtnkit.errors.ExitStatus`."""

from __future__ import annotations

from dtnkit.errors import DtnkitError, ExitStatus


class TransferError(DtnkitError):
    """A copy failed (after retries when they apply)."""

    status = ExitStatus.TRANSFER_FAILED

    def __str__(self) -> str:
        return f"{self.what}: {self.why}" if self.why else self.what


class FatalHttp(TransferError):
    """An HTTP answer that retrying cannot fix (401, 403, 404, ...)."""

    status = ExitStatus.REFUSED


class DestinationExists(FatalHttp):
    """The destination is there and the copy may not replace it (no ``-f/--force``)."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"destination {where}",
            "exists",
            "pass -f/--force to overwrite it, or pick another name",
        )


class DigestNotOffered(TransferError):
    """The source offered no digest of the checksum the copy verifies with."""

    def __init__(self, what: str, name: str, offered: list[str]) -> None:
        super().__init__(
            what,
            f"the server did not offer {name} (offered: {', '.join(offered) or 'none'})",
            "pick another --checksum or --verify none",
        )
        self.name, self.offered = name, offered


class BadAnswer(TransferError):
    """A server's answer that is unsafe or malformed (a listing pointing outside the
    destination, a 206 for other bytes, a negative length): retrying will not fix it."""

    status = ExitStatus.REFUSED


class CertificateRefused(TransferError):
    """The server's TLS certificate did not verify: retrying will not change it."""

    status = ExitStatus.REFUSED


class Retryable(Exception):
    """A connection error, a stall or a 5xx: worth another try."""


class Refused(Retryable):
    """An answer that refuses one request worth another try (a range's digest did not
    match, a 5xx) on a connection that stays usable: a pipelined stream sends that request
    again and keeps reading the answers to the others."""


class ChecksumMismatch(TransferError):
    status = ExitStatus.INTEGRITY


class Redirected(Exception):
    """A 3xx answer to a HEAD; :meth:`~dtnkit.transfer.client.session.Session.resolve`
    follows it."""

    def __init__(self, location: str | None) -> None:
        super().__init__(location)
        self.location = location


class TooSlow(TimeoutError):
    """Fewer than ``low_speed_limit`` bytes a second over ``low_speed_time`` seconds: a
    stall, retried on a new connection (:mod:`~dtnkit.transfer.client.pace`)."""


class DeadlinePassed(TimeoutError):
    """The copy's ``--deadline`` passed: not retried."""


class Abort(Exception):
    """Raised inside a stream's block work when the run is stopping: leave quietly."""


class UseSinglePut(Exception):
    """Upload sessions are not available (or not worth it): send one PUT stream."""


class SessionLost(Exception):
    """The server no longer knows the upload session (expired, restarted): start a new one."""


def reason(body: bytes) -> str:
    """The first line of an error answer's body, for messages."""
    return body.decode("utf-8", "replace").strip().splitlines()[0][:200] if body.strip() else ""
