"""The one retry policy of a copy: which failures are worth another try, how many tries, how
long to wait between them, and what is said when they run out.

Two kinds of failure are retried (as rclone's ``fserrors`` marks errors retryable or fatal):

* a **transport** failure of one request (a connection error, a stall, a 5xx:
  :data:`RETRYABLE`) is tried again on a new connection after ``backoff * 2**n`` seconds, up
  to ``retries`` more times (:class:`Attempt`, :meth:`RetryPolicy.call`); a certificate that
  does not verify or a deadline that passed is fatal at once (:func:`fatal_transport`);
* a **whole-file** failure (the checksum did not match, the upload session was lost) runs
  the file again, up to ``retries`` more times, the bad-block rounds of a download included
  (:class:`Budget`, :meth:`RetryPolicy.again`).
"""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from dtnkit.transfer.client.errors import (
    CertificateRefused,
    ChecksumMismatch,
    DeadlinePassed,
    Retryable,
    TransferError,
)

T = TypeVar("T")

#: What one request may fail with and still be worth another try on a new connection.
RETRYABLE = (Retryable, OSError, http.client.HTTPException)

#: Builds the error raised when the tries ran out: (attempts made, the last failure).
GiveUp = Callable[[int, BaseException], BaseException]
#: What is tried, as errors name it (or a callable giving it when they are raised).
What = str | Callable[[], str]


def certificate_refused(exc: ssl.SSLCertVerificationError, what: str) -> CertificateRefused:
    """The error for a certificate that did not verify: not retried, exit 22."""
    why = exc.verify_message or exc.reason or str(exc)
    return CertificateRefused(
        what,
        f"the server's TLS certificate was not accepted ({why})",
        "pass --ca-file with the CA bundle that signed it (or put it "
        "in X509_CERT_DIR, hashed), and check the host name in the URL "
        "(--insecure skips the check)",
    )


def fatal_transport(exc: BaseException, what: str) -> TransferError | None:
    """The error for a transport failure that retrying cannot help (a certificate that does
    not verify, the deadline passed); None for one worth a retry."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return certificate_refused(exc, what)
    if isinstance(exc, DeadlinePassed):
        return TransferError(what, str(exc), "raise --deadline; a rerun resumes what was kept")
    return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a copy tries again (``--retries``; the backoff)."""

    retries: int = 3
    backoff: float = 0.5

    def attempt(self, what: What, give_up: GiveUp | None = None) -> Attempt:
        """The tries of one request (or one block): see :class:`Attempt`."""
        return Attempt(self, what, give_up)

    def call(
        self,
        what: What,
        once: Callable[[], T],
        *,
        cleanup: Callable[[], object] | None = None,
        retried: Callable[[], object] | None = None,
        give_up: GiveUp | None = None,
    ) -> T:
        """``once()``, tried again after a :data:`RETRYABLE` failure while the policy allows:
        ``cleanup()`` after each failure (e.g. closing the connection it used), ``retried()``
        before each new try.  *what* names the request in errors (a callable: as it is
        when the tries end)."""
        attempt = self.attempt(what, give_up)
        while True:
            try:
                return once()
            except RETRYABLE as exc:
                if cleanup is not None:
                    cleanup()
                attempt.failed(exc)
                if retried is not None:
                    retried()

    def budget(self) -> Budget:
        """The whole-file tries of one file: see :class:`Budget`."""
        return Budget(self.retries)

    def again(
        self,
        once: Callable[[], T],
        *,
        on: tuple[type[BaseException], ...] = (ChecksumMismatch,),
        budget: Budget | None = None,
        exhausted: Callable[[BaseException, int], BaseException] | None = None,
    ) -> tuple[T, int]:
        """``once()``, run again after one of *on* while *budget* (default: a new one) has
        tries left; its result and the runs made again.  When none are left the last failure
        is raised (:meth:`Budget.spend`)."""
        budget = budget if budget is not None else self.budget()
        while True:
            try:
                return once(), budget.retries
            except on as exc:
                budget.spend(exc, exhausted)


class Attempt:
    """The tries of one request: after each :data:`RETRYABLE` failure, :meth:`failed` raises
    the error that ends them (fatal at once, or the tries ran out) or waits before the next
    one."""

    __slots__ = ("failures", "give_up", "policy", "what")

    def __init__(self, policy: RetryPolicy, what: What, give_up: GiveUp | None) -> None:
        self.policy, self.what, self.give_up = policy, what, give_up
        self.failures = 0

    def failed(self, exc: BaseException) -> None:
        """After a failure: raise what ends the tries, else wait ``backoff * 2**n``."""
        what = self.what() if callable(self.what) else self.what
        fatal = fatal_transport(exc, what)
        if fatal is not None:
            raise fatal from None
        if self.failures >= self.policy.retries:
            if self.give_up is not None:
                raise self.give_up(self.failures + 1, exc) from None
            raise TransferError(
                what,
                f"failed after {self.failures + 1} attempts ({exc})",
                "check that the server is up and reachable",
            ) from None
        time.sleep(self.policy.backoff * 2**self.failures)
        self.failures += 1


class Budget:
    """The whole-file tries of one file, shared by a download's bad-block rounds and its runs
    from the start: ``retries`` more after the first."""

    __slots__ = ("left", "refetched_blocks", "retries", "used")

    def __init__(self, retries: int) -> None:
        self.left = retries  # tries still allowed
        self.used = 1  # tries made (the first is try 1)
        self.retries = 0
        self.refetched_blocks = 0  # blocks fetched again after a mismatch

    def spend(
        self,
        exc: BaseException,
        exhausted: Callable[[BaseException, int], BaseException] | None = None,
    ) -> None:
        """One more try after *exc*; when none is left, raise *exc* (a checksum mismatch
        saying after how many tries), or ``exhausted(exc, tries)`` for another failure."""
        if self.left <= 0:
            if isinstance(exc, ChecksumMismatch):
                exc.why += f" (after {self.used} attempts)"
            elif exhausted is not None:
                raise exhausted(exc, self.used)
            raise exc
        self.take()

    def take(self) -> None:
        """One more try (the caller checked :attr:`left`)."""
        self.left -= 1
        self.used += 1
        self.retries += 1
