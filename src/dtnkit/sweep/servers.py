"""Servers of a sweep: ``dtnkit serve``, XRootD (XrdHttp + HTTP-TPC) or an iperf3 server,
started in a lab host's namespace under a CPU quota, with prepared source files; each gives
a :class:`~dtnkit.measure.probes.load.Origin` and is stopped by PID.

* **TLS.** :func:`make_pki` makes a throwaway CA and one host certificate valid for the lab
  hosts' addresses and names (``openssl``, as the interop tests do).  Every HTTP server uses
  it; clients trust ``Origin.ca_file``; each server trusts the CA for its own third-party
  copies (``dtnkit serve --ca-file``, XRootD ``xrd.tlsca certdir``).
* **Tokens.** ``dtnkit serve`` gets one token that may read and write (``Origin.token``; a
  sweep uses the same token on every server, so a pull can forward it).  The XRootD 5.5.3
  packaged here has no token plugin: it runs without authorization (``Origin.token`` is "").
* **The quota.** Each server runs in its own cgroup (:mod:`.cgroups`) from birth: a ``sh``
  writes its PID into the cgroup and execs ``ip netns exec NS SERVER`` (the same PID
  throughout; ``ip netns exec`` mounts a sysfs of the namespace, so the cgroup is entered
  before it).  ``cores`` None still makes a cgroup, for the accounting only.
* **Files.** The source files are hard links of one file per size (:func:`prepare_source`),
  so N files cost the memory of one.  Choose a ``workdir`` on tmpfs (``/dev/shm``, the
  default of :func:`default_base`): the files are read from memory and the disk never binds.
  Their content is an 8 MiB block from ``os.urandom`` repeated: incompressible to anything
  that compresses less than 8 MiB back (TLS and HTTP here compress nothing), and a GiB is
  written in a fraction of a second instead of the seconds ``os.urandom`` takes for all of it.
* **Readiness** is the server's own line in its log, polled until a deadline: ``dtnkit serve:
  listening on``, XRootD's ``initialization completed.``, iperf3's ``Server listening on``.
  A server that exits first, or does not say it in time, raises :class:`ServerFailed` naming
  the origin, the host and the log's tail.
* **Ports.** ``port`` 0 (the default): dtnkit serve lets the kernel pick; XRootD and iperf3
  get ports the kernel picked in the namespace just before (the namespace is the lab's own).
  A port given that is already taken fails with :class:`ServerFailed` (the log says why).
* **Stop.** :meth:`RunningServer.stop`: SIGTERM to the PID, SIGKILL after a deadline, reap,
  then every process left in its cgroup by PID, and the cgroup removed; its work directory
  (config, logs, data) too unless ``keep``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import pwd
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from dtnkit.errors import BadInput, DtnkitError, ToolMissing
from dtnkit.host import process
from dtnkit.lab.path import LabHost
from dtnkit.measure.probes.load import SERVER_KINDS, Origin
from dtnkit.sweep import cgroups, ports

XROOTD_USER = "xrootd"
HTTP_TPC_LIB = "libXrdHttpTPC-5.so"
LIBDIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
#: the default base of sweep work directories: tmpfs, so files are read from memory
SHM = Path("/dev/shm")
BLOCK = 8 * 2**20
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_STOP_GRACE_S = 5.0
LOG_TAIL_LINES = 15
#: how much of its servers' logs a failed point keeps in all (what they logged during it);
#: the tool's own output keeps the rest of the point's 64 KiB
SERVER_LOG_BYTES = 24 * 1024
READY = {
    "dtnkit": re.compile(r"listening on (https?)://[^\s]*?:(\d+)/"),
    "xrootd": re.compile(r"------ xrootd \S+ initialization completed\."),
    "iperf3": re.compile(r"Server listening on (\d+)"),
}
#: log lines that say why a server did not start (shown instead of the whole tail)
TELLING = re.compile(r"error|unable|fail|denied|refus|cannot|in use|no such|invalid", re.I)
FAILED = {"xrootd": re.compile(r"initialization failed")}
#: ``xrootd.chksum max``: checksum computations XRootD runs at once.  XRootD keeps at most
#: three times that many checksum queries (running and queued); one more is told to wait
#: 30 s, and XRootD 5.5's HTTP bridge answers a query that has to wait twice with HTTP 500
#: (fixed upstream in 5.8.2: xrootd/xrootd#2480).  gfal-copy asks the destination for each
#: transfer's checksum as it ends, so with the default 4 a point of more than 12 transfers
#: ending together lost some to "DESTINATION CHECKSUM HTTP 500".  A TPC destination is sized
#: for the transfers it takes at once: here the most a sweep makes (a grid's ``streams`` go
#: up to 1024), so every query runs at once and none waits.  (XRootD 5.5's other checksum
#: 500, a finished job left in its job table, does not depend on this: docs/sweep.md.)
XROOTD_CHECKSUM_JOBS = 1024


class ServerFailed(DtnkitError):
    """A server did not start (or could not be prepared)."""


def default_base(prefix: str) -> Path:
    """Where a sweep's servers keep their files: ``/dev/shm/dtnkit-sweep-PREFIX``."""
    cgroups.check_name(prefix)
    return SHM / f"dtnkit-sweep-{prefix}"


def missing(kind: str) -> str | None:
    """Why a server of this kind cannot run here (None: it can)."""
    if kind not in SERVER_KINDS:
        return f"unknown server kind {kind!r} (kinds: {', '.join(SERVER_KINDS)})"
    if kind == "iperf3":
        return None if shutil.which("iperf3") else "iperf3 is not installed"
    if shutil.which("openssl") is None:
        return "openssl is not installed (it makes the servers' certificates)"
    if kind == "xrootd":
        if shutil.which("xrootd") is None:
            return "xrootd is not installed"
        if not any(Path(d, HTTP_TPC_LIB).exists() for d in LIBDIRS):
            return f"{HTTP_TPC_LIB} is not installed (Debian: xrootd-server-plugins)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(XROOTD_USER)
            except KeyError:
                return f"XRootD refuses root and there is no {XROOTD_USER!r} user to run as"
    return None


# --------------------------------------------------------------------------- PKI


@dataclasses.dataclass(frozen=True)
class Pki:
    """A throwaway CA and one host certificate signed by it."""

    dir: Path
    ca_file: Path  # the CA certificate (PEM): --ca-file, curl --cacert
    ca_dir: Path  # hashed CA directory: XRootD's tlsca, X509_CERT_DIR for gfal/davix
    cert: Path
    key: Path


def _openssl(*argv: str, cwd: Path) -> None:
    proc = process.run(["openssl", *argv], cwd=cwd, timeout=60)
    if proc.returncode != 0:
        raise ServerFailed(
            f"openssl {argv[0]} failed",
            proc.stderr.strip()[-300:],
            "check the openssl installation",
        )


def make_pki(directory: Path, names: Sequence[str] = ()) -> Pki:
    """A CA and a host certificate (valid 7 days) for 127.0.0.1, localhost and ``names``
    (addresses or host names of the lab hosts)."""
    if shutil.which("openssl") is None:
        raise ToolMissing(
            "openssl is not installed",
            "it makes the servers' certificates",
            "apt-get install openssl",
        )
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "7",
        "-subj",
        "/CN=dtnkit sweep throwaway CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )
    alt = ",".join(
        f"IP:{n}" if n.replace(".", "").isdigit() or ":" in n else f"DNS:{n}"
        for n in dict.fromkeys(("127.0.0.1", "localhost", *names))
    )
    (directory / "host.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName={alt}\n"
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "host.key",
        "-out",
        "host.csr",
        "-subj",
        "/CN=localhost",
        cwd=directory,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        "host.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "host.pem",
        "-days",
        "7",
        "-extfile",
        "host.ext",
        cwd=directory,
    )
    ca_dir = directory / "ca"
    ca_dir.mkdir(exist_ok=True)
    shutil.copy(directory / "ca.pem", ca_dir / "ca.pem")
    _openssl("rehash", str(ca_dir), cwd=directory)
    os.chmod(directory / "host.key", 0o600)
    os.chmod(directory / "ca.key", 0o600)
    return Pki(
        directory, directory / "ca.pem", ca_dir, directory / "host.pem", directory / "host.key"
    )


# --------------------------------------------------------------------------- files


def prepare_source(directory: Path, size: int) -> Path:
    """One source file of ``size`` bytes in ``directory`` (made once per size; see the
    module's text for its content)."""
    if not isinstance(size, int) or size < 0:
        raise BadInput(
            f"file size {size!r} is not usable",
            "a number of bytes >= 0",
            'e.g. file_size = ["1GiB"]',
        )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"source-{size}.bin"
    if path.exists() and path.stat().st_size == size:
        return path
    tmp = path.with_suffix(".part")
    block = os.urandom(min(BLOCK, size))
    with open(tmp, "wb") as f:
        left = size
        while left:
            n = f.write(block[:left])
            left -= n
    os.chmod(tmp, 0o644)
    tmp.replace(path)
    return path


def file_names(count: int) -> tuple[str, ...]:
    """The names of an origin's source files (relative to its URL)."""
    return tuple(f"f{i}.bin" for i in range(count))


def _place(source: Path, dest: Path, uid: int | None) -> None:
    with contextlib.suppress(FileNotFoundError):
        dest.unlink()
    try:
        os.link(source, dest)
    except OSError:  # another file system: a copy
        shutil.copyfile(source, dest)
        os.chmod(dest, 0o644)
    if uid is not None:
        os.chown(dest, uid, -1)


# --------------------------------------------------------------------------- running


@dataclasses.dataclass
class RunningServer:
    """A server this module started: its :class:`Origin`, process and cgroup."""

    origin: Origin
    proc: process.Child[bytes]
    quota: cgroups.CpuQuota | None
    workdir: Path
    root: Path | None  # its data directory (None: iperf3)
    log: Path
    keep: bool = False
    stopped: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def label(self) -> str:
        o = self.origin
        who = "destination" if o.index < 0 else f"origin {o.index}"
        return f"{who} ({o.kind} on {o.host.name})"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return _tail(self.log, lines)

    def log_size(self) -> int:
        """Where the log ends now (a mark for :meth:`log_since`)."""
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def log_since(self, mark: int, limit: int = SERVER_LOG_BYTES) -> str:
        """What the server logged after ``mark``: its last whole lines within ``limit``
        bytes (from the log's start when it is now shorter: rotated or truncated)."""
        try:
            with open(self.log, "rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                start = mark if mark <= end else 0
                cut = max(start, end - limit)
                fh.seek(cut)
                data = fh.read(limit)
        except OSError:
            return ""
        if cut > start:  # began inside a line: from the next one
            data = data.partition(b"\n")[2]
        return data.decode(errors="replace")

    def usage_s(self) -> float | None:
        """CPU seconds the server used (None without a cgroup)."""
        return None if self.quota is None else self.quota.usage_s()

    def stop(self, grace_s: float = DEFAULT_STOP_GRACE_S) -> None:
        """SIGTERM, SIGKILL after ``grace_s``, reap; then what is left in its cgroup (by PID)
        and the cgroup; then its work directory (unless ``keep``).  Safe to call twice."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.proc.stop(grace_s, group=False)  # what it left: by its cgroup, below
        finally:
            try:
                if self.quota is not None:
                    self.quota.close()
            finally:
                if not self.keep:
                    shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def free_ports(host: LabHost, count: int) -> list[int]:
    """``count`` distinct ports the kernel picks in the host's namespace (held together, then
    released: the namespace is the lab's own, so nothing else takes them meanwhile)."""
    out = host.run(ports.command(count), timeout=30).stdout.split()
    return [int(p) for p in out]


def xrootd_config(
    workdir: Path, root: Path, pki: Pki, port: int, http_port: int, extra: Sequence[str] = ()
) -> str:
    """An XRootD 5 configuration: the root exported over xroot (``port``) and HTTPS with
    XrdHttp and its TPC handler (``http_port``), adler32/md5/crc32c checksums (up to
    :data:`XROOTD_CHECKSUM_JOBS` at once), TLS from ``pki``; ``extra`` lines (e.g. traces)
    at the end."""
    return "\n".join(
        [
            f"xrd.port {port}",
            "all.export /",
            f"oss.localroot {root}",
            f"all.adminpath {workdir / 'admin'}",
            f"all.pidpath {workdir / 'admin'}",
            f"xrootd.chksum max {XROOTD_CHECKSUM_JOBS} adler32 md5 crc32c",
            f"xrd.tls {pki.cert} {pki.key}",
            f"xrd.tlsca certdir {pki.ca_dir}",
            f"xrd.protocol XrdHttp:{http_port} libXrdHttp.so",
            "http.exthandler xrdtpc libXrdHttpTPC.so",
            *extra,
            "",
        ]
    )


def start_server(
    kind: str,
    host: LabHost,
    *,
    index: int,
    workdir: Path,
    address: str | None = None,
    pki: Pki | None = None,
    cores: float | None = None,
    quota_name: str | None = None,
    source: Path | None = None,
    files: int = 0,
    token: str = "",
    tpc_allow: Sequence[str] = (),
    port: int = 0,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    controller: cgroups.CpuController | None = None,
    extra_args: Sequence[str] = (),
    keep: bool = False,
) -> RunningServer:
    """Start one server in ``host``'s namespace and wait until it is ready.

    ``kind``: dtnkit, xrootd or iperf3.  ``index``: the origin's index (-1: the TPC
    destination).  ``workdir``: a directory of this server's own (created; removed at stop
    unless ``keep``), on tmpfs for the files.  ``address``: what clients put in URLs (the
    host's name or address; default its address).  ``pki``: the CA and certificate (needed
    for dtnkit and xrootd).  ``cores``: its CPU quota (None: none); ``quota_name``: the
    cgroup's name (``dtnkit-NAME``; None: no cgroup at all).  ``source``/``files``: that
    many hard links of ``source`` served as ``f0.bin`` ...  ``token``: the read-write token
    of a dtnkit server.  ``tpc_allow``: hosts a dtnkit server may pull from (the origins'
    addresses).  ``port``: 0 picks one.  ``extra_args``: more arguments for the server.

    Raises :class:`ServerFailed` (one line: which server, why, the log's tail) when it does
    not start; nothing is left running then."""
    if kind not in SERVER_KINDS:
        raise BadInput(
            f"unknown server kind {kind!r}", f"kinds: {', '.join(SERVER_KINDS)}", "pick one of them"
        )
    why = missing(kind)
    if why:
        raise ToolMissing(f"cannot start a {kind} server", why, "see dev/bootstrap.sh")
    if kind != "iperf3" and pki is None:
        raise BadInput(f"a {kind} server needs a PKI", "it serves HTTPS", "pass pki=make_pki(...)")
    if files and source is None:
        raise BadInput(
            "files without a source",
            "the files are links of one source file",
            "pass source=prepare_source(...)",
        )
    address = address or host.address
    who = "destination" if index < 0 else f"origin {index}"
    label = f"{who} ({kind} on {host.name})"
    workdir.mkdir(parents=True, exist_ok=False)
    quota: cgroups.CpuQuota | None = None
    proc: process.Child[bytes] | None = None
    try:
        uid = pwd.getpwnam(XROOTD_USER).pw_uid if kind == "xrootd" and os.geteuid() == 0 else None
        root: Path | None = None
        if kind != "iperf3":
            root = workdir / "data"
            root.mkdir()
            if source is not None:
                for name in file_names(files):
                    _place(source, root / name, uid)
        log = workdir / f"{kind}.log"
        argv, log, ports = _argv(
            kind, host, workdir, root, pki, port, token, tpc_allow, log, extra_args
        )
        if uid is not None:
            for dirpath, _dirs, names in os.walk(workdir):
                os.chown(dirpath, uid, -1)
                for n in names:
                    if not (Path(dirpath) / n).is_relative_to(root or workdir / "-"):
                        os.chown(Path(dirpath) / n, uid, -1)
        argv = host.argv(argv)
        if quota_name is not None:
            quota = cgroups.CpuQuota(quota_name, cores, controller=controller)
            argv = quota.wrap(argv)
        elif cores is not None:
            raise BadInput(
                "a CPU quota without a cgroup name", "the quota is a cgroup", "pass quota_name"
            )
        out = open(workdir / "stdout.log" if kind == "xrootd" else log, "ab")  # noqa: SIM115
        with out:
            proc = process.start(
                argv,
                cwd=workdir,
                stdin=process.DEVNULL,
                stdout=out,
                stderr=process.STDOUT,
                own_group=True,
            )
        found = _wait_ready(kind, proc, log, time.monotonic() + timeout_s, label, workdir)
        http_port = ports[-1] if ports else int(found)
        scheme = "https"
        url = f"{scheme}://{_bracket(address)}:{http_port}" if kind != "iperf3" else ""
        origin = Origin(
            index=index,
            kind=kind,
            host=host,
            port=http_port,
            url_base=url,
            pid=proc.pid,
            cgroup=None if quota is None else quota.path,
            files=file_names(files) if kind != "iperf3" else (),
            token=token if kind == "dtnkit" else "",
            ca_file=None if kind == "iperf3" or pki is None else pki.ca_file,
            root=root,
        )
        return RunningServer(origin, proc, quota, workdir, root, log, keep)
    except BaseException:
        if proc is not None:
            proc.stop(2.0, group=False)
        if quota is not None:
            with contextlib.suppress(DtnkitError):
                quota.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        raise


def _bracket(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _argv(
    kind: str,
    host: LabHost,
    workdir: Path,
    root: Path | None,
    pki: Pki | None,
    port: int,
    token: str,
    tpc_allow: Sequence[str],
    log: Path,
    extra: Sequence[str],
) -> tuple[list[str], Path, list[int]]:
    """The server's command line, the log its ready line goes to, the ports chosen here."""
    if kind == "dtnkit":
        assert pki is not None and root is not None
        tokens = workdir / "tokens"
        tokens.write_text(f"{token} read,write\n" if token else "")
        tokens.chmod(0o600)
        argv = [
            sys.executable,
            "-m",
            "dtnkit",
            "serve",
            "--root",
            str(root),
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--cert",
            str(pki.cert),
            "--key",
            str(pki.key),
            "--tokens",
            str(tokens),
            "--ca-file",
            str(pki.ca_file),
            "--quiet",
        ]
        for allowed in tpc_allow:
            argv += ["--tpc-allow", allowed]
        return [*argv, *extra], log, []
    if kind == "iperf3":
        (p,) = [port] if port else free_ports(host, 1)
        return ["iperf3", "-s", "-p", str(p), "--forceflush", *extra], log, [p]
    assert pki is not None and root is not None
    ports = free_ports(host, 2)
    if port:
        ports[1] = port
    own = workdir / "pki"  # XRootD (not root) must read its key
    shutil.copytree(pki.dir, own, symlinks=True)
    own_pki = Pki(
        own, own / pki.ca_file.name, own / pki.ca_dir.name, own / pki.cert.name, own / pki.key.name
    )
    (workdir / "admin").mkdir()
    cfg = workdir / "xrootd.cfg"
    cfg.write_text(xrootd_config(workdir, root, own_pki, ports[0], ports[1]))
    name = "dksweep"
    argv = ["xrootd", "-c", str(cfg), "-l", str(workdir / "xrootd.log"), "-n", name]
    if os.geteuid() == 0:
        argv += ["-R", XROOTD_USER]
    # -n names the instance: XRootD writes its log to <dir of -l>/<name>/<file of -l>
    return [*argv, *extra], workdir / name / "xrootd.log", ports


def _wait_ready(
    kind: str, proc: process.Child[bytes], log: Path, deadline: float, label: str, workdir: Path
) -> str:
    """Poll the log for the ready line until ``deadline``; the first group it captured
    (dtnkit: the port), or ""."""
    ready, failed = READY[kind], FAILED.get(kind)
    while True:
        try:
            text = log.read_text(errors="replace")
        except OSError:
            text = ""
        m = ready.search(text)
        if m:
            return m.group(m.lastindex or 0) if m.lastindex else ""
        status = proc.poll()
        bad = failed.search(text) if failed else None
        if status is not None or bad or time.monotonic() > deadline:
            what = (
                f"exited with status {status} while starting"
                if status is not None
                else "said its initialization failed"
                if bad
                else "did not say it was ready in time"
            )
            tail = _tail(log, 4 * LOG_TAIL_LINES)
            if kind == "xrootd":
                tail = (tail + "\n" + _tail(workdir / "stdout.log", 5)).strip()
            lines = [line.strip() for line in tail.splitlines() if line.strip()]
            telling = [line for line in lines if TELLING.search(line)]
            tail = " | ".join(telling[-5:] if telling else lines[-LOG_TAIL_LINES:])
            raise ServerFailed(
                f"{label} {what}",
                f"log tail: {tail[-1200:] or '(empty)'}",
                f"see the log {log}"
                if status is None
                else "check the server's arguments and that its port is free",
            )
        time.sleep(0.02)  # polling the log for the ready line; the deadline bounds it


@contextlib.contextmanager
def running(servers: Sequence[RunningServer]) -> Iterator[Sequence[RunningServer]]:
    """Stop every server of ``servers`` when the block ends (each by PID)."""
    try:
        yield servers
    finally:
        stop_all(servers)


def stop_all(servers: Sequence[RunningServer], grace_s: float = DEFAULT_STOP_GRACE_S) -> None:
    """Stop each server (all of them, even when one fails); the first error is raised."""
    first: BaseException | None = None
    for s in servers:
        try:
            s.stop(grace_s)
        except Exception as exc:
            first = first or exc
    if first is not None:
        raise first


def start_many(
    kind: str,
    hosts: Sequence[LabHost],
    *,
    base: Path,
    pki: Pki | None,
    cores: float | None,
    prefix: str,
    source: Path | None,
    files: int,
    token: str = "",
    addresses: Sequence[str] | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    controller: cgroups.CpuController | None = None,
) -> list[RunningServer]:
    """One server per host (origin i on ``hosts[i]``), cgroups ``dtnkit-PREFIX-oI`` and work
    directories ``base/PREFIX-oI``, started at once (each waits for its own ready line in a
    thread); when one fails, every one started is stopped and the first error is raised."""

    def one(i: int) -> RunningServer:
        return start_server(
            kind,
            hosts[i],
            index=i,
            workdir=base / f"{prefix}-o{i}",
            address=addresses[i] if addresses else None,
            pki=pki,
            cores=cores,
            quota_name=f"{prefix}-o{i}",
            source=source,
            files=files,
            token=token,
            timeout_s=timeout_s,
            controller=controller,
        )

    with concurrent.futures.ThreadPoolExecutor(max(1, len(hosts))) as pool:
        futures = [pool.submit(one, i) for i in range(len(hosts))]
        concurrent.futures.wait(futures)
    started = [f.result() for f in futures if f.exception() is None]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        with contextlib.suppress(Exception):
            stop_all(started)
        raise errors[0]  # type: ignore[misc]
    return started


def start_destination(
    kind: str,
    host: LabHost,
    *,
    base: Path,
    pki: Pki | None,
    prefix: str,
    origins: Sequence[Origin],
    token: str = "",
    cores: float | None = None,
    address: str | None = None,
    timeout_s: float = DEFAULT_START_TIMEOUT_S,
    controller: cgroups.CpuController | None = None,
) -> RunningServer:
    """The third-party copy's destination (index -1) on the client's host: no files, cgroup
    ``dtnkit-PREFIX-dst`` (accounting; ``cores`` a quota), and, for dtnkit serve, the origins'
    addresses allowed as copy sources (they are private addresses)."""
    allow = sorted({o.host.address for o in origins})
    return start_server(
        kind,
        host,
        index=-1,
        workdir=base / f"{prefix}-dst",
        address=address,
        pki=pki,
        cores=cores,
        quota_name=f"{prefix}-dst",
        token=token,
        tpc_allow=allow,
        timeout_s=timeout_s,
        controller=controller,
    )
