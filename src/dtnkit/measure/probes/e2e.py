"""The end-to-end probe: a real transfer, timed.  Rate = bytes moved / wall time.

The mover is a tool: ``dtnkit cp`` by default, or a command the user gives (xrdcp,
gfal-copy, curl, or a pipe).  Every mover's summary holds :data:`SUMMARY_KEYS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from dtnkit.errors import BadInput

KIND = "e2e"
TITLE = "end-to-end"
SUMMARY_KEYS = ("bytes", "seconds", "throughput_bps")


@dataclass
class E2ESpec:
    kind: ClassVar[str] = KIND

    src: str
    dst: str
    command: str | None = None
    bytes: int | None = None
    timeout_s: float = 3600.0
    interval_s: float = 5.0
    # what the default mover (dtnkit cp) is given: the CA bundle that signed the server's
    # certificate, no certificate check at all, the file holding the bearer token
    ca_file: str | None = None
    insecure: bool = False
    token_file: str | None = None

    def validate(self) -> None:
        """Each mover checks what it needs (a command template, a URL)."""

    def cp_options(self) -> list[str]:
        """The options of ``dtnkit cp`` this spec gives (--ca-file, --insecure, --token-file)."""
        out = ["--ca-file", self.ca_file] if self.ca_file else []
        out += ["--insecure"] if self.insecure else []
        return out + (["--token-file", self.token_file] if self.token_file else [])


def source_size(path: str) -> int:
    """Bytes in a file or block device."""
    try:
        with open(path, "rb") as fh:
            return fh.seek(0, os.SEEK_END)
    except OSError as exc:
        raise BadInput(
            f"cannot read the transfer source {path}",
            exc.strerror or str(exc),
            "give an existing file or device, or --bytes",
        ) from exc


def rate_summary(size: int, wall_s: float) -> dict[str, Any]:
    """The tool-neutral figures of one transfer: what moved, in what wall time."""
    return {
        "bytes": size,
        "seconds": wall_s,
        "throughput_bps": size * 8 / wall_s if wall_s > 0 else 0.0,
    }
