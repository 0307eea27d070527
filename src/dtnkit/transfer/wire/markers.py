"""HTTP-TPC performance markers: the text the active party streams while it copies.

A ``202`` answer to ``COPY`` is ``text/plain``: ``Perf Marker`` ... ``End`` blocks, then one
final line (``success: Created`` or ``failure: <what>: <why>``). The server writes them with
:func:`format_marker`, :func:`success_line` and :func:`failure_line`; the client reads them
with :class:`MarkerParser` / :func:`parse_stream`, which are lenient about case, spacing and
unknown keys (XRootD, dCache and FTS write slightly different blocks).

Parse errors are ValueErrors: :class:`MarkerSyntaxError` for a malformed stream and
:class:`NoFinalLine` for one that ended without its final line; the client turns them into
its own error family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

FINAL_PREFIXES = ("success:", "failure:", "failed:", "aborted:")
#: the longest failure text a final line carries
MAX_FAILURE = 2000
#: The header of dtnkit serve's ``403`` to a ``COPY`` whose remote host it may not reach (not
#: a public address, not in its ``--tpc-allow``): the side refused, ``Source`` or
#: ``Destination``.  The client names the allow-list as the fix, not the token's scope.
REFUSED_REMOTE = "Dtnkit-Tpc-Refused"


class MarkerSyntaxError(ValueError):
    """The marker stream is malformed; ``line`` is its 1-based line number."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line
        self.why = why


class NoFinalLine(ValueError):
    """The stream ended without a final ``success:`` or ``failure:`` line."""


@dataclass
class Marker:
    timestamp: int | None = None
    stripe_index: int | None = None
    stripe_bytes: int | None = None
    stripe_count: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


INT_KEYS = {
    "timestamp": "timestamp",
    "stripe index": "stripe_index",
    "stripe bytes transferred": "stripe_bytes",
    "total stripe count": "stripe_count",
}


class MarkerParser:
    """Line-by-line parser of a marker stream; lenient about case, spacing and unknown keys.

    :meth:`feed` returns a :class:`Marker` when a block ends; :meth:`finish` returns the final
    line (``success: ...``/``failure: ...``) or raises :class:`MarkerSyntaxError` /
    :class:`NoFinalLine`.
    """

    def __init__(self) -> None:
        self._block: Marker | None = None
        self._final: str | None = None
        self._line = 0

    def _error(self, why: str) -> MarkerSyntaxError:
        return MarkerSyntaxError(self._line, why)

    def feed(self, raw: str) -> Marker | None:
        self._line += 1
        line = raw.strip()
        if not line:
            return None
        low = line.lower()
        if self._final is not None:
            raise self._error(f"{line[:80]!r} after the final line {self._final[:80]!r}")
        if self._block is None:
            if low == "perf marker":
                self._block = Marker()
                return None
            if low.startswith(FINAL_PREFIXES):
                self._final = line
                return None
            raise self._error(f"expected 'Perf Marker' or a final line, got {line[:80]!r}")
        if low == "end":
            marker, self._block = self._block, None
            return marker
        if low == "perf marker" or low.startswith(FINAL_PREFIXES):
            raise self._error(f"{line[:80]!r} inside a marker (missing 'End')")
        key, sep, value = line.partition(":")
        if not sep:
            raise self._error(f"{line[:80]!r} is not 'Key: value'")
        key, value = " ".join(key.lower().split()), value.strip()
        attr = INT_KEYS.get(key)
        if attr is None:
            self._block.extra[key] = value
            return None
        if not value.isdigit():
            raise self._error(f"{key} {value[:40]!r} is not a non-negative integer")
        setattr(self._block, attr, int(value))
        return None

    def finish(self) -> str:
        if self._block is not None:
            raise self._error("the stream ended inside a marker")
        if self._final is None:
            raise NoFinalLine(
                "the marker stream ended without a final 'success:' or "
                "'failure:' line (connection lost?)"
            )
        return self._final


def parse_stream(
    lines: Iterable[str | bytes], on_marker: Callable[[Marker], None] | None = None
) -> tuple[str, list[Marker]]:
    """Parse an iterable of lines (str or bytes); returns (final line, markers)."""
    parser = MarkerParser()
    markers: list[Marker] = []
    for raw in lines:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        marker = parser.feed(text)
        if marker is not None:
            markers.append(marker)
            if on_marker is not None:
                on_marker(marker)
    return parser.finish(), markers


def is_success(final: str) -> bool:
    """True when a final line reports success."""
    return final.lower().startswith("success:")


def format_marker(
    sent: int, timestamp: int, *, stripe_index: int = 0, stripe_count: int = 1
) -> str:
    """One marker block: ``sent`` bytes so far on stripe ``stripe_index``."""
    return (
        f"Perf Marker\nTimestamp: {timestamp}\nStripe Index: {stripe_index}\n"
        f"Stripe Bytes Transferred: {sent}\nTotal Stripe Count: {stripe_count}\nEnd\n"
    )


def success_line(reason: str = "Created") -> str:
    return f"success: {reason}\n"


def failure_line(error: str) -> str:
    """The final line of a failed copy: one line, at most :data:`MAX_FAILURE` characters."""
    return "failure: " + " ".join(error.split())[:MAX_FAILURE] + "\n"
