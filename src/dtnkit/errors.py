"""Exit codes and the one error shape every command uses.

Every failure a user can meet is a :class:`DtnkitError` carrying three parts: *what* went
wrong, *why*, and *what next*.  The CLI's single catch site renders it as::

    dtnkit: error: <what>: <why>. Next: <next step>

and exits with the error's :class:`ExitStatus`.  URL query strings are never shown
(:func:`hide_queries`): a presigned URL's query is its credential.
"""

from __future__ import annotations

import enum
import re

#: a URL's query: from "?" to the next white space or quote, a ':', ',', '.', ';' or ')'
#: before one (the message's own punctuation) excluded; a fragment goes with it
_QUERY = re.compile(
    r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?'\"]*)\?[^\s'\"]*?"
    r"(?=[:,.;)]?(?:[\s'\"]|$))"
)
HIDDEN = "?REDACTED"


def hide_queries(text: str) -> str:
    """*text* with the query of every URL in it replaced by ``?REDACTED`` (presigned URLs
    carry their signature there: X-Amz-Signature, sig, authz, ...)."""
    return _QUERY.sub(lambda m: m.group(1) + HIDDEN, text) if "?" in text else text


class ExitStatus(enum.IntEnum):
    """Documented exit codes (see docs/reference.md)."""

    OK = 0
    ERROR = 1  # generic failure; the message says what
    USAGE = 2  # bad command line (click's own code)
    DRIFT = 3  # audit: at least one selected item differs from the profile
    PARTIAL_APPLY = 4  # apply failed and was rolled back (host is as before)
    ROLLBACK_FAILED = 5  # apply failed AND rollback could not restore everything
    NEEDS_ROOT = 6
    TOOL_MISSING = 7
    LOCKED = 8  # another dtnkit apply/restore holds the lock
    BAD_INPUT = 9  # malformed profile, snapshot, sysctl file; unknown interface or group
    # diagnose: the layer that binds (OK when none does; docs/measure.md has the checks)
    BINDS_NIC = 10  # iperf3 reaches the NIC's line rate
    BINDS_HOST_NETWORK = 11  # flows are window-limited, or a core is saturated by softirq
    BINDS_PATH = 12  # below line rate, neither window- nor CPU-limited
    BINDS_STORAGE = 13  # storage is slower than the network
    BINDS_APPLICATION = 14  # end to end is well below both network and storage
    INCONCLUSIVE = 15  # diagnose: too few samples to name a layer (run longer or sample faster)
    UNDECIDED = 16  # tune apply: some items could not be decided (the plan says what to give)
    TRANSFER_FAILED = 20  # cp/serve peer: connection, stall, 5xx after retries (rerun resumes)
    INTEGRITY = 21  # cp: checksum mismatch after retries; nothing was committed
    REFUSED = 22  # cp: the server refused (401, 403, 404, ...): retrying will not help
    INTERRUPTED = 130
    BROKEN_PIPE = 141  # stdout's reader left (`| head`): killed by SIGPIPE, as Unix tools


class DtnkitError(Exception):
    """An error with what / why / next, and the exit status it maps to."""

    status: ExitStatus = ExitStatus.ERROR

    def __init__(
        self, what: str, why: str = "", next_step: str = "", *, status: ExitStatus | None = None
    ) -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.next_step = next_step
        if status is not None:
            self.status = status

    def render(self) -> str:
        text = f"dtnkit: error: {self.what}"
        if self.why:
            text += f": {self.why}"
        if self.next_step:
            text += f". Next: {self.next_step}"
        return hide_queries(text)

    def as_dict(self) -> dict[str, str | int]:
        return {
            "what": hide_queries(self.what),
            "why": hide_queries(self.why),
            "next": hide_queries(self.next_step),
            "exit_status": int(self.status),
        }


class BadInput(DtnkitError):
    status = ExitStatus.BAD_INPUT


class NeedsRoot(DtnkitError):
    status = ExitStatus.NEEDS_ROOT


class ToolMissing(DtnkitError):
    status = ExitStatus.TOOL_MISSING


class Locked(DtnkitError):
    status = ExitStatus.LOCKED
