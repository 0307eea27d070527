"""A real PostgreSQL for tests: initdb + ``postgres`` on a temporary directory, listening only
on a Unix socket in that directory (``listen_addresses=''``), so no TCP port is taken and any
network namespace reaches it (a socket path is a file, not an address).

Stable API (other helpers' tests import it)::

    from tests.support.postgres import postgres_server, missing_postgres, needs_postgres

    with postgres_server(tmp_path, "fss") as pg:
        pg.url                    # postgresql://postgres@/dtnkit?host=/tmp/fss-pg-XXXX
        pg.create_database("x")   # -> the URL of a new database "x"
        pg.password_url           # the same database as role "dtnkit" with a password
        pg.socket_dir, pg.pid, pg.log()

- ``postgres_server(tmp, prefix, *, dbname="dtnkit")``: a context manager.  The server's
  directory is ``PREFIX-pg-XXXXXX`` under ``tmp`` when the ``postgres`` user can reach
  ``tmp`` and the socket path stays short, else under ``/tmp`` (pytest's ``tmp_path`` is a
  root-only 0700 tree).  As root, initdb and the server run as Debian's ``postgres`` system
  user (PostgreSQL refuses root) and the directory is made theirs; as another user, as that
  user.  The server is the context's own child: it is stopped by its PID (SIGINT = fast
  shutdown; SIGKILL after 30 s) and the directory removed at the end.
- Authentication on the socket: role ``postgres`` is trusted (no password); role ``dtnkit``
  (a superuser too) needs its password (scram-sha-256), ``pg.password``.
- ``missing_postgres()``: why a server cannot be started here (no binaries, no ``postgres``
  user when root, no psycopg), or None; ``needs_postgres``: the pytest mark (the marker plus
  a skip with that reason), for ``pytestmark = needs_postgres``.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

BIN = Path("/usr/lib/postgresql/15/bin")
READY = "database system is ready to accept connections"
SOCKET_MAX = 100  # a Unix socket path has 107 bytes; ".s.PGSQL.5432" is 13 of them


def missing_postgres(*, psycopg: bool = True) -> str | None:
    """Why a real PostgreSQL cannot be started here, or None when it can."""
    for tool in ("initdb", "postgres", "createdb", "psql"):
        if not (BIN / tool).is_file():
            return f"needs PostgreSQL 15's {tool} in {BIN} (Debian postgresql-15)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "needs the postgres system user (Debian's postgresql package makes it)"
    if psycopg:
        try:
            import psycopg as _psycopg  # noqa: F401
        except ImportError:
            return "needs psycopg 3 (pip install 'dtnkit[postgresql]')"
    return None


_REASON = missing_postgres()


#: ``pytestmark = needs_postgres`` (a module's tests; or ``[*needs_postgres, ...]``): the
#: marker, and a skip with the reason when a server cannot run here
needs_postgres = [
    pytest.mark.needs_postgres,
    pytest.mark.skipif(bool(_REASON), reason=str(_REASON)),
]


class PostgresServer:
    """One running server (see the module's docstring)."""

    def __init__(
        self,
        root: Path,
        dbname: str,
        proc: subprocess.Popen[str],
        owner: tuple[int, int] | None,
        password: str,
    ) -> None:
        self.root = root
        self.socket_dir = root
        self.data_dir = root / "data"
        self.dbname = dbname
        self.proc = proc
        self.pid = proc.pid
        self.owner = owner
        self.user = "postgres"
        self.password = password
        self._log: list[str] = []

    @property
    def url(self) -> str:
        """The test database as the trusted superuser ``postgres`` (no password)."""
        return self.url_for(self.dbname)

    @property
    def password_url(self) -> str:
        """The test database as role ``dtnkit`` with its password in the URL."""
        return f"postgresql://dtnkit:{self.password}@/{self.dbname}?host={self.socket_dir}"

    def url_for(self, dbname: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@/{dbname}?host={self.socket_dir}"

    def create_database(self, dbname: str) -> str:
        """A new empty database; its URL."""
        self._run([str(BIN / "createdb"), "-h", str(self.socket_dir), "-U", "postgres", dbname])
        return self.url_for(dbname)

    def psql(self, sql: str, dbname: str | None = None) -> str:
        """Run SQL as ``postgres`` (psql -At); its output."""
        return self._run(
            [
                str(BIN / "psql"),
                "-X",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                str(self.socket_dir),
                "-U",
                "postgres",
                "-d",
                dbname or self.dbname,
                "-c",
                sql,
            ]
        ).stdout

    def log(self) -> str:
        """What the server has written to stderr so far."""
        return "".join(self._log)

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            argv, capture_output=True, text=True, check=False, **_as_owner(self.owner)
        )
        if out.returncode:
            raise RuntimeError(f"{argv[0]} failed ({out.returncode}): {out.stderr.strip()}")
        return out

    def stop(self) -> None:
        """Fast shutdown by PID; SIGKILL when it does not end in 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _as_owner(owner: tuple[int, int] | None) -> dict[str, Any]:
    if owner is None:
        return {}
    return {"user": owner[0], "group": owner[1], "extra_groups": []}


def _reachable(path: Path, uid: int) -> bool:
    """Whether user ``uid`` can search every directory down to ``path``."""
    for part in [path, *path.parents]:
        try:
            st = part.stat()
        except OSError:
            return False
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            return False
    return True


def _drain(stream: IO[str], into: list[str]) -> None:
    for line in stream:
        into.append(line)


@contextmanager
def postgres_server(tmp: Path, prefix: str, *, dbname: str = "dtnkit") -> Iterator[PostgresServer]:
    """Start a PostgreSQL on a directory ``PREFIX-pg-*``; yield it; stop it and remove it."""
    reason = missing_postgres(psycopg=False)
    if reason:
        raise RuntimeError(reason)
    owner: tuple[int, int] | None = None
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        owner = (entry.pw_uid, entry.pw_gid)
    uid = owner[0] if owner else os.geteuid()
    parent = Path(tmp)
    if not (_reachable(parent, uid) and len(str(parent)) + 40 < SOCKET_MAX):
        parent = Path(tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix=f"{prefix}-pg-", dir=parent))
    proc: subprocess.Popen[str] | None = None
    server: PostgresServer | None = None
    try:
        if owner:
            os.chown(root, *owner)
        root.chmod(0o700)
        password = secrets.token_hex(12)
        pwfile = root / "pw"
        pwfile.write_text(password + "\n")
        if owner:
            os.chown(pwfile, *owner)
        data = root / "data"
        init = subprocess.run(
            [
                str(BIN / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
                "--auth-local=trust",
            ],
            capture_output=True,
            text=True,
            check=False,
            **_as_owner(owner),
        )
        if init.returncode:
            raise RuntimeError(f"initdb failed: {init.stderr.strip()}")
        (data / "pg_hba.conf").write_text("local all postgres trust\nlocal all all scram-sha-256\n")
        proc = subprocess.Popen(
            [
                str(BIN / "postgres"),
                "-D",
                str(data),
                "-k",
                str(root),
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "shared_buffers=16MB",
                "-c",
                "max_connections=40",
                "-c",
                "log_min_messages=warning",
                "-c",
                "log_min_error_statement=panic",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            **_as_owner(owner),
        )
        assert proc.stderr is not None
        lines: list[str] = []
        for line in proc.stderr:  # the server says when it accepts connections
            lines.append(line)
            if READY in line:
                break
        else:
            proc.wait()
            raise RuntimeError(f"postgres did not start: {''.join(lines)[-2000:]}")
        server = PostgresServer(root, dbname, proc, owner, password)
        server._log = lines
        threading.Thread(target=_drain, args=(proc.stderr, lines), daemon=True).start()
        server.psql(f"CREATE ROLE dtnkit LOGIN SUPERUSER PASSWORD '{password}'", "postgres")
        server.create_database(dbname)
        yield server
    finally:
        if server is not None:
            server.stop()
        elif proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)
