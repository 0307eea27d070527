"""The one environment object: where state lives, which token to send, and the terminal.

Everything dtnkit takes from the process environment is read in one place,
:meth:`Environment.from_os`, called once by ``dtnkit.cli.main.main`` and handed down to every
command.  Nothing reads ``os.environ`` at import time, so a test builds its own
``Environment(state_dir=tmp_path, ...)`` instead of setting variables or patching module
globals (HTTPie's ``Environment`` is the model).

Precedence, for each setting: an explicit command-line flag, then the environment variable
read here, then the default below.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from dtnkit.db.location import DbUrl, Location, is_url

#: snapshots, the apply lock, experiment state ($DTNKIT_STATE_DIR)
DEFAULT_STATE_DIR = Path("/var/lib/dtnkit")
#: the SQLite results store ($DTNKIT_DB)
DEFAULT_RESULTS_DB = Path("/var/lib/dtnkit/results.sqlite")
#: lab path state: one directory per path, and the lab lock ($DTNKIT_LAB_STATE)
DEFAULT_LAB_STATE_ROOT = Path("/run/dtnkit/lab")
#: the grid's CA directory (hashed, `openssl rehash`), trusted when it exists, as gfal2,
#: xrdcp and davix do ($X509_CERT_DIR)
DEFAULT_X509_CERT_DIR = Path("/etc/grid-security/certificates")
#: columns when the width cannot be told (no $COLUMNS, and neither stdout, stderr nor the
#: controlling terminal is a terminal): the classic terminal's, so a log reads as a screen
FALLBACK_WIDTH = 80
#: the process's controlling terminal, asked for its width when stdout and stderr are not
#: terminals (`dtnkit tune audit | tee log 2>&1` in a terminal)
TTY = "/dev/tty"


def _stdin() -> TextIO:
    return sys.stdin


def _stdout() -> TextIO:
    return sys.stdout


def _stderr() -> TextIO:
    return sys.stderr


@dataclass(frozen=True)
class Environment:
    """What a command may know about the process it runs in.

    The defaults describe a quiet, non-interactive run: streams are the ones current when the
    object is built, neither is a terminal, the width is the fallback.  ``from_os`` fills in
    the real values.
    """

    state_dir: Path = DEFAULT_STATE_DIR
    #: an SQLite file, or a postgresql:// URL (shown redacted)
    results_db: Location = DEFAULT_RESULTS_DB
    lab_state_root: Path = DEFAULT_LAB_STATE_ROOT
    #: bearer token for `dtnkit cp` when --token is not given
    token: str | None = None
    #: bearer token for the passive server of `dtnkit cp --tpc` when --remote-token is not
    #: given (so that neither token need be on a command line, where `ps` shows it)
    remote_token: str | None = None
    #: which variable ``token`` came from ("$DTNKIT_TOKEN", "$BEARER_TOKEN"), never its value
    token_origin: str | None = None
    #: the WLCG bearer-token discovery files, in order, after the variables: the one
    #: $BEARER_TOKEN_FILE names (``token_file_named``: it must exist), then
    #: $XDG_RUNTIME_DIR/bt_u$UID and /tmp/bt_u$UID (skipped when absent)
    token_files: tuple[Path, ...] = ()
    token_file_named: bool = False
    #: the uid the discovery files are named for (and must belong to)
    uid: int = field(default_factory=os.getuid)
    #: CA directory TLS clients trust besides --ca-file, when it exists
    x509_cert_dir: Path = DEFAULT_X509_CERT_DIR
    stdin: TextIO = field(default_factory=_stdin)
    stdout: TextIO = field(default_factory=_stdout)
    stderr: TextIO = field(default_factory=_stderr)
    stdout_isatty: bool = False
    stderr_isatty: bool = False
    terminal_width: int = FALLBACK_WIDTH

    @classmethod
    def from_os(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> Environment:
        """Read the process environment (or ``environ``) and the standard streams, once."""
        env = os.environ if environ is None else environ
        out = sys.stdout if stdout is None else stdout
        err = sys.stderr if stderr is None else stderr
        return cls(
            state_dir=Path(env.get("DTNKIT_STATE_DIR", str(DEFAULT_STATE_DIR))),
            results_db=_location(env.get("DTNKIT_DB") or str(DEFAULT_RESULTS_DB)),
            lab_state_root=Path(env.get("DTNKIT_LAB_STATE", str(DEFAULT_LAB_STATE_ROOT))),
            # an empty variable counts as unset (a shell's `DTNKIT_TOKEN= dtnkit cp ...`)
            token=env.get("DTNKIT_TOKEN") or env.get("BEARER_TOKEN") or None,
            remote_token=env.get("DTNKIT_REMOTE_TOKEN") or None,
            token_origin=(
                "$DTNKIT_TOKEN"
                if env.get("DTNKIT_TOKEN")
                else "$BEARER_TOKEN"
                if env.get("BEARER_TOKEN")
                else None
            ),
            token_files=token_files(env, os.getuid()),
            token_file_named=bool(env.get("BEARER_TOKEN_FILE")),
            uid=os.getuid(),
            x509_cert_dir=Path(env.get("X509_CERT_DIR") or str(DEFAULT_X509_CERT_DIR)),
            stdin=sys.stdin if stdin is None else stdin,
            stdout=out,
            stderr=err,
            stdout_isatty=_isatty(out),
            stderr_isatty=_isatty(err),
            terminal_width=terminal_width(env, (out, err), TTY),
        )


def token_files(env: Mapping[str, str], uid: int) -> tuple[Path, ...]:
    """The files WLCG bearer-token discovery reads, in order (after $BEARER_TOKEN)."""
    out = []
    if env.get("BEARER_TOKEN_FILE"):
        out.append(Path(env["BEARER_TOKEN_FILE"]))
    if env.get("XDG_RUNTIME_DIR"):
        out.append(Path(env["XDG_RUNTIME_DIR"]) / f"bt_u{uid}")
    out.append(Path("/tmp") / f"bt_u{uid}")
    return tuple(out)


def _location(text: str) -> Location:
    """$DTNKIT_DB as a path or a URL (the scheme is checked where the store is opened)."""
    return DbUrl(text) if is_url(text) else Path(text)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a stream without a file, or a closed one
        return False


def terminal_width(
    environ: Mapping[str, str], streams: Sequence[object] = (), tty: str | None = TTY
) -> int:
    """Columns: $COLUMNS when it is a positive number, else the width of the first terminal
    among ``streams`` (stdout, stderr), the process's original stdout and stderr and ``tty``
    (the controlling terminal: output piped to `tee` in a terminal has the terminal's
    width), else :data:`FALLBACK_WIDTH`."""
    try:
        columns = int(environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    for stream in (*streams, sys.__stdout__, sys.__stderr__):
        columns = _columns_of(stream)
        if columns > 0:
            return columns
    if tty is not None:
        try:
            fd = os.open(tty, os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:  # no controlling terminal (a service, cron, CI)
            return FALLBACK_WIDTH
        try:
            columns = _columns_of(fd)
        finally:
            os.close(fd)
    return columns if columns > 0 else FALLBACK_WIDTH


def _columns_of(stream: object) -> int:
    """The width of the terminal ``stream`` (a file object or a descriptor) writes to; 0 when
    it is not a terminal."""
    try:
        fd = stream if isinstance(stream, int) else stream.fileno()  # type: ignore[attr-defined]
        return os.get_terminal_size(fd).columns
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return 0
