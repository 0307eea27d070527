"""Real peers on loopback: a throwaway CA, XRootD 5.5 (XrdHttp + HTTP-TPC over TLS) as a child
process, and a TLS ``dtnkit serve`` whose certificate comes from the same CA.

Usage (tests or bench cases, with the repository root on ``sys.path``)::

    from tests.support.xrootd import make_pki, running_xrootd, running_dtnkit

    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(Path(tmp) / "pki")
        with running_xrootd(pki) as xrd, running_dtnkit(pki, tokens="tok read,write") as dk:
            ...  # xrd.url, xrd.root, xrd.digest("f"), dk.url, dk.root, pki.ca_file

Authorization: the packaged XRootD 5.5.3 has no SciTokens plugin installed (Debian ships it
as ``xrootd-scitokens-plugins``, which also needs a token issuer), so XRootD runs **without
authorization** (anyone on loopback may read and write its data root).  Bearer tokens are
still sent to it (XRootD ignores them) and dtnkit's own token checks are exercised on the
dtnkit side.

XRootD refuses to run as root: when we are root it is started with ``-R xrootd`` and its
working directory (config, PKI copy, data root, admin path) is handed to that user.  It runs
in the foreground, logs to ``<workdir>/xrootd.log`` and is stopped by PID (SIGTERM, then
SIGKILL) however the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import pwd
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

from dtnkit.sweep import servers
from dtnkit.transfer import tokens as tokmod
from dtnkit.transfer.server import ServerHandle, start_server

XROOTD_USER = "xrootd"
HTTP_TPC_LIB = "libXrdHttpTPC-5.so"
LIBDIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")


def missing(*binaries: str) -> str | None:
    """A skip reason when a binary is not on PATH, else None."""
    for name in binaries:
        if shutil.which(name) is None:
            return f"needs the {name} binary"
    return None


def missing_xrootd() -> str | None:
    """A skip reason when XRootD with its HTTP-TPC plugin cannot be run here, else None."""
    reason = missing("xrootd", "openssl")
    if reason:
        return reason
    if not any(Path(d, HTTP_TPC_LIB).exists() for d in LIBDIRS):
        return f"needs {HTTP_TPC_LIB} (Debian: xrootd-server-plugins)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(XROOTD_USER)
        except KeyError:
            return f"running as root needs the {XROOTD_USER!r} user to drop privileges to"
    return None


def gfal_python() -> str | None:
    """A Python that can ``import gfal2`` (the gfal-copy wrapper script needs one)."""
    for candidate in (os.environ.get("GFAL_PYTHONBIN"), "/usr/bin/python3", "python3"):
        exe = shutil.which(candidate) if candidate else None
        if (
            exe
            and subprocess.run(
                [exe, "-c", "import gfal2"], capture_output=True, check=False
            ).returncode
            == 0
        ):
            return exe
    return None


def missing_gfal2_python() -> str | None:
    return None if gfal_python() else "needs a python3 with the gfal2 module (python3-gfal2)"


def gfal_env(pki: Pki, token: str | None) -> dict[str, str]:
    """Environment for gfal-* commands: trust the test CA, use ``token`` as bearer token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("X509_", "BEARER_"))}
    env["X509_CERT_DIR"] = str(pki.ca_dir)
    env["GFAL_PYTHONBIN"] = gfal_python() or "python3"
    if token is not None:
        env["BEARER_TOKEN"] = token
    return env


# --------------------------------------------------------------------------- PKI


# the throwaway CA and host certificate the sweep's servers use (dtnkit.sweep.servers)
Pki = servers.Pki
make_pki = servers.make_pki


def client_context(pki: Pki) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki.ca_file))


# --------------------------------------------------------------------------- XRootD


@dataclass
class Xrootd:
    """A running XRootD: ``url`` (https, ends in /), ``root`` (its data directory)."""

    workdir: Path
    root: Path
    port: int  # xroot protocol
    http_port: int
    log: Path
    process: subprocess.Popen[bytes]
    pki: Pki
    host: str = "127.0.0.1"  # the address or name clients use (a lab host's)

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.http_port}/"

    @property
    def xroot_url(self) -> str:
        return f"root://{self.host}:{self.port}/"

    def put(self, name: str, data: bytes) -> Path:
        """Place a file in XRootD's data root, owned by the user XRootD runs as."""
        path = self.root / name
        path.write_bytes(data)
        if os.geteuid() == 0:
            ent = pwd.getpwnam(XROOTD_USER)
            os.chown(path, ent.pw_uid, ent.pw_gid)
        return path

    def request(
        self, method: str, name: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.http_port, timeout=30, context=client_context(self.pki)
        )
        try:
            conn.request(method, "/" + name.lstrip("/"), headers=headers or {})
            r = conn.getresponse()
            body = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, body
        finally:
            conn.close()

    def digest(self, name: str, algorithm: str = "adler32") -> str:
        """XRootD's own ``Digest`` answer for ``name`` (``alg=value``)."""
        status, headers, body = self.request("HEAD", name, {"Want-Digest": algorithm})
        if status != 200 or "digest" not in headers:
            raise AssertionError(
                f"HEAD {name} with Want-Digest {algorithm}: {status} {headers} {body[:200]!r}"
            )
        return headers["digest"]

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        proc = self.process
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _config(workdir: Path, root: Path, pki: Pki, port: int, http_port: int) -> str:
    return servers.xrootd_config(
        workdir, root, pki, port, http_port, extra=("http.trace all", "tpc.trace all")
    )


def wait_https(
    port: int,
    ca_file: Path,
    deadline: float,
    *,
    alive: subprocess.Popen[bytes] | None = None,
    what: str = "server",
) -> None:
    """Poll until an HTTPS request on 127.0.0.1:port gets any answer (or raise)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"{what} exited with status {alive.returncode} while starting")
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=context)
        try:
            conn.request("HEAD", "/")
            conn.getresponse().read()
            return
        except (OSError, http.client.HTTPException) as exc:
            last = exc
        finally:
            conn.close()
        time.sleep(0.05)  # poll interval, not synchronisation: the deadline bounds the wait
    raise RuntimeError(f"{what} on port {port} not ready in time (last error: {last})")


def wait_https_in(
    netns: str,
    port: int,
    ca_file: Path,
    deadline: float,
    *,
    alive: subprocess.Popen[bytes],
    what: str = "server",
) -> None:
    """:func:`wait_https` from inside network namespace ``netns`` (one child polls its
    127.0.0.1 there)."""
    probe = (
        "import http.client, ssl, sys, time\n"
        "ctx = ssl.create_default_context(cafile=sys.argv[3])\n"
        "end = time.monotonic() + float(sys.argv[4])\n"
        "while time.monotonic() < end:\n"
        "    c = http.client.HTTPSConnection(sys.argv[1], int(sys.argv[2]), timeout=10,\n"
        "                                    context=ctx)\n"
        "    try:\n"
        "        c.request('HEAD', '/'); c.getresponse().read(); sys.exit(0)\n"
        "    except (OSError, http.client.HTTPException):\n"
        "        time.sleep(0.05)\n"
        "    finally:\n"
        "        c.close()\n"
        "sys.exit(1)\n"
    )
    left = max(deadline - time.monotonic(), 0.1)
    proc = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            netns,
            sys.executable,
            "-I",
            "-S",
            "-c",
            probe,
            "127.0.0.1",
            str(port),
            str(ca_file),
            f"{left:.2f}",
        ],
        capture_output=True,
        check=False,
        timeout=left + 10,
    )
    if proc.returncode != 0 or alive.poll() is not None:
        raise RuntimeError(
            f"{what} on port {port} in {netns} not ready in time (exit {alive.poll()})"
        )


@contextlib.contextmanager
def running_xrootd(
    pki: Pki, *, timeout: float = 20.0, netns: str | None = None, host: str = "127.0.0.1"
) -> Iterator[Xrootd]:
    """Start XRootD in a fresh temporary directory; stop it (by PID) and remove the directory.

    The PKI is copied into the work directory so that XRootD (running as ``xrootd`` when we
    are root) can read its key (mode 600, owned by that user).  ``netns``: run it in that
    network namespace (a lab host's, under ``ip netns exec``, which execs it: same PID),
    reached at ``host``.
    """
    workdir = Path(tempfile.mkdtemp(prefix="dkxrd-"))
    proc: subprocess.Popen[bytes] | None = None
    server: Xrootd | None = None
    try:
        own_pki = Pki(
            workdir / "pki",
            workdir / "pki" / "ca.pem",
            workdir / "pki" / "ca",
            workdir / "pki" / "host.pem",
            workdir / "pki" / "host.key",
        )
        shutil.copytree(pki.dir, own_pki.dir, symlinks=True)
        root = workdir / "data"
        root.mkdir()
        (workdir / "admin").mkdir()
        port, http_port = free_port(), free_port()
        while http_port == port:
            http_port = free_port()
        cfg = workdir / "xrootd.cfg"
        cfg.write_text(_config(workdir, root, own_pki, port, http_port))
        log = workdir / "xrootd.log"
        argv = ["xrootd", "-c", str(cfg), "-l", str(log), "-n", "dkxrd"]
        if os.geteuid() == 0:
            ent = pwd.getpwnam(XROOTD_USER)
            for dirpath, _dirs, files in os.walk(workdir):
                os.chown(dirpath, ent.pw_uid, ent.pw_gid)
                for f in files:
                    os.chown(os.path.join(dirpath, f), ent.pw_uid, ent.pw_gid)
            argv += ["-R", XROOTD_USER]
        if netns is not None:
            argv = ["ip", "netns", "exec", netns, *argv]
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # -n names the instance: XRootD writes its log to <dir of -l>/<name>/<file of -l>
        server = Xrootd(
            workdir, root, port, http_port, workdir / "dkxrd" / "xrootd.log", proc, pki, host
        )
        try:
            if netns is None:
                wait_https(
                    http_port, pki.ca_file, time.monotonic() + timeout, alive=proc, what="xrootd"
                )
            else:
                wait_https_in(
                    netns,
                    http_port,
                    pki.ca_file,
                    time.monotonic() + timeout,
                    alive=proc,
                    what="xrootd",
                )
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n--- xrootd log ---\n{server.log_tail()}") from None
        yield server
    finally:
        if server is not None:
            server.stop()
        elif proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- dtnkit serve


@contextlib.contextmanager
def running_dtnkit(
    pki: Pki, *, tokens: str, root: Path | None = None, marker_interval: float = 0.5
) -> Iterator[ServerHandle]:
    """A TLS ``dtnkit serve`` (in-process threads) with the PKI's certificate, trusting the CA
    for its own third-party copies; yields the ``ServerHandle`` (``url``, ``root``)."""
    tmp: str | None = None
    if root is None:
        tmp = tempfile.mkdtemp(prefix="dkserve-")
        root = Path(tmp)
    handle = start_server(
        root,
        tls=(pki.cert, pki.key),
        tokens=tokmod.parse(tokens),
        quiet=True,
        marker_interval=marker_interval,
        ca_file=pki.ca_file,
        tpc_allow=["127.0.0.1", "localhost"],
    )  # the peers are on loopback
    try:
        yield handle
    finally:
        handle.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


#: the bearer tokens the interop tests' dtnkit servers accept
TOKENS = "rw-token read,write\nro-token read\n"


def adler(data: bytes) -> str:
    """adler32 of *data* as the 8 hex digits peers send."""
    return f"{zlib.adler32(data):08x}"
