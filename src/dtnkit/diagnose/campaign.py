"""The pieces of a fleet campaign that the Ansible collection (dtn.dtnkit) runs through the CLI:
the NIC-headroom gate, the verdict of one group on one pair, and an iperf3 server kept by a PID
file between the probes of a pair.

The gate: a group is never applied on a pair where it is harmful.  It is *measured* harmful
when an earlier run on the same pair judged it so (the caller says so), and *predicted*
harmful when the pair's baseline already fills the slower NIC of the two ends: the headroom
left, ``1 - median(baseline) / nic_bps``, is inside the noise margin that :func:`judge` uses
(the baseline's own spread, at least 5 %), so no gain could be told from noise and any change
could only show as a loss.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import socket
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtnkit.diagnose.experiment import judge
from dtnkit.errors import BadInput, DtnkitError, ToolMissing
from dtnkit.host import process
from dtnkit.measure.tools.iperf3 import AUTH_USER
from dtnkit.tune.audit import check_groups
from dtnkit.units import format_rate

#: how long `server start` waits for iperf3 to listen, and `server stop` for it to exit
WAIT_S = 10.0


def check_rates(values: Sequence[float], what: str) -> list[float]:
    """Throughputs in bit/s: finite and not negative (nan, inf and -1 are refused)."""
    out = []
    for v in values:
        if not (v == v and 0 <= v < 1e15):  # nan != nan
            raise BadInput(
                f"bad {what} value {v!r}",
                "a throughput in bit/s, 0 to 1e15",
                f"give e.g. {what} 9.4e9",
            )
        out.append(float(v))
    return out


def one_group(group: str) -> str:
    if "," in group or not group:
        raise BadInput(f"bad group {group!r}", "one group at a time", "e.g. --group buffers")
    check_groups([group])
    return group


def gate(
    group: str, baseline: Sequence[float], nic_bps: float | None, measured_harmful: bool = False
) -> dict[str, Any]:
    """Whether ``group`` must stay off this pair, and why."""
    one_group(group)
    base = check_rates(baseline, "--baseline")
    doc: dict[str, Any] = {
        "group": group,
        "gated": False,
        "baseline_bps": base,
        "nic_bps": nic_bps,
        "headroom": None,
        "margin": None,
    }
    if measured_harmful:
        return {
            **doc,
            "gated": True,
            "why": "measured harmful on this pair before: never applied here",
        }
    if not base:
        return {**doc, "why": "no baseline measured: not gated"}
    margin = judge(base, base)[2]  # the baseline's own noise, as judge() counts it
    doc["margin"] = margin
    if nic_bps is None or nic_bps <= 0:
        return {**doc, "why": "the NIC speed of the pair is unknown: not gated"}
    median = statistics.median(base)
    headroom = 1 - median / nic_bps
    doc["headroom"] = headroom
    if headroom < margin:
        return {
            **doc,
            "gated": True,
            "why": f"predicted harmful: the baseline {format_rate(median)} leaves "
            f"{headroom:.0%} of the slower NIC's {format_rate(nic_bps)}, inside the "
            f"noise ({margin:.0%}): no gain could show, only a loss",
        }
    return {
        **doc,
        "why": f"headroom {headroom:.0%} of the slower NIC's "
        f"{format_rate(nic_bps)} is above the noise ({margin:.0%})",
    }


def verdict(group: str, baseline: Sequence[float], applied: Sequence[float]) -> dict[str, Any]:
    """The group's verdict on the pair, by the experiment's rule (:func:`judge`)."""
    one_group(group)
    base, got = check_rates(baseline, "--baseline"), check_rates(applied, "--applied")
    if not base or not got:
        raise BadInput(
            "a verdict needs both runs",
            "give --baseline and --applied at least once",
            "e.g. --baseline 9.1e9 --applied 9.4e9",
        )
    name, ratio, margin = judge(base, got)
    why = (
        f"median x{ratio:.2f} of the baseline; noise +-{margin:.0%}"
        if statistics.median(base) > 0
        else "the baseline measured 0 bit/s"
    )
    return {
        "group": group,
        "verdict": name,
        "applied": True,
        "ratio": ratio,
        "margin": margin,
        "baseline_bps": base,
        "applied_bps": got,
        "why": why,
    }


# --- an iperf3 server between a pair's probes --------------------------------------------


def _pid_file(state_dir: Path, port: int) -> Path:
    return state_dir / "servers" / f"iperf3-{port}.pid"


def _listening(port: int) -> bool:
    """Is a TCP socket of this network namespace listening on ``port``?"""
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _is_iperf3(pid: int) -> bool:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"iperf3"


#: who the server runs as when started by root: it needs no privilege
RUN_AS = "nobody"


def _check_bind(bind: str) -> str:
    if (
        not bind
        or bind.startswith("-")
        or len(bind) > 253
        or not all(c.isalnum() or c in ".:-_%" for c in bind)
    ):
        raise BadInput(
            f"bad address {bind[:60]!r}",
            "an IP address or host name of this host (the one the campaign's client probes)",
            "e.g. --bind 192.0.2.10",
        )
    return bind


def _memfd(name: str, data: bytes, owner: tuple[int, int] | None) -> int:
    """A file in memory holding *data*, readable (0400) by *owner* only: iperf3 opens it as
    /dev/fd/N (each open reads it from the start), and nothing of it is on a disk."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        if owner is not None:
            os.fchown(fd, *owner)
        os.fchmod(fd, 0o400)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _keypair() -> tuple[bytes, bytes]:
    """A fresh RSA key pair (PEM private, PEM public) for iperf3's authentication."""
    try:
        private = process.run(
            ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
            text=False,
            check=True,
            timeout=60,
        ).stdout
        public = process.run(
            ["openssl", "pkey", "-pubout"], input=private, text=False, check=True, timeout=60
        ).stdout
    except FileNotFoundError as exc:
        raise ToolMissing(
            "openssl is not installed",
            "the probe server's key pair is made with it",
            "install openssl",
        ) from exc
    except (process.CalledProcessError, process.TimeoutExpired) as exc:
        raise DtnkitError(
            "cannot make the probe server's key pair", str(exc), "check openssl"
        ) from exc
    return private, public


def _unprivileged() -> tuple[int, int] | None:
    """(uid, gid) of :data:`RUN_AS` when we are root and it exists; None: run as we are."""
    if os.geteuid() != 0:
        return None
    try:
        ent = pwd.getpwnam(RUN_AS)
    except KeyError:
        return None
    return ent.pw_uid, ent.pw_gid


def server_start(state_dir: Path, port: int, bind: str, token: str | None) -> dict[str, Any]:
    """Start ``iperf3 -s`` in this namespace, detached, its PID in STATE/servers/; the port
    of one that already runs there is reused (idempotent).

    It listens on *bind* only (``-B``), lets in only clients that hold the campaign's *token*
    (iperf3's RSA authentication: user :data:`AUTH_USER`, the token as password; a fresh key
    pair per server, the private key in memory only, the public one in the document and in
    ``iperf3-PORT.pub``), and runs as :data:`RUN_AS` when started by root."""
    if not 0 <= port <= 65535:
        raise BadInput(f"bad port {port}", "0 to 65535 (0: a free one)", "e.g. --port 5201")
    _check_bind(bind)
    if not token:
        raise BadInput(
            "no campaign token",
            "the probe server lets in only clients that hold "
            "it (iperf3 authentication), and none was given",
            "set $DTNKIT_TOKEN (the dtn.dtnkit probe module passes the campaign's)",
        )
    users = f"{AUTH_USER},{hashlib.sha256(f'{{{AUTH_USER}}}{token}'.encode()).hexdigest()}\n"
    #: which server this is: its address and token (a hash of the users line, not the token)
    ident = hashlib.sha256(f"{bind}\n{users}".encode()).hexdigest()
    if port:
        pid_file = _pid_file(state_dir, port)
        try:
            pid = int(pid_file.read_text())
            public_key = pid_file.with_suffix(".pub").read_text()
            same = pid_file.with_suffix(".id").read_text().strip() == ident
        except (OSError, ValueError):
            pid, public_key, same = 0, "", False
        if pid and _is_iperf3(pid) and _listening(port):
            if same:
                return {
                    "pid": pid,
                    "port": port,
                    "bind": bind,
                    "pid_file": str(pid_file),
                    "started": False,
                    "user": _owner(pid),
                    "public_key": public_key,
                }
            server_stop(state_dir, port)  # another address or token: not this campaign's
    port = port or _free_port()
    pid_file = _pid_file(state_dir, port)
    try:
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        log = open(pid_file.with_suffix(".log"), "wb")  # noqa: SIM115 (the child keeps it)
    except OSError as exc:
        raise BadInput(
            f"cannot write under {state_dir}",
            exc.strerror or str(exc),
            "give a writable --state-dir",
        ) from exc
    owner = _unprivileged()
    fds: list[int] = []
    try:
        private, public = _keypair()
        fds = [_memfd("iperf3-key", private, owner), _memfd("iperf3-users", users.encode(), owner)]
        argv = [
            "iperf3",
            "-s",
            "-p",
            str(port),
            "-B",
            bind,
            "--rsa-private-key-path",
            f"/dev/fd/{fds[0]}",
            "--authorized-users-path",
            f"/dev/fd/{fds[1]}",
        ]
        # detached: it outlives this process, stopped by its PID file (server_stop)
        proc = process.start(
            argv,
            stdin=process.DEVNULL,
            stdout=log,
            stderr=log,
            own_group=True,
            pass_fds=fds,
            run_as=owner,
        )
    except FileNotFoundError as exc:
        raise ToolMissing(
            "iperf3 is not installed", "the server side of a probe runs iperf3 -s", "install iperf3"
        ) from exc
    finally:
        log.close()
        for fd in fds:
            os.close(fd)
    pid_file.write_text(f"{proc.pid}\n")
    pid_file.with_suffix(".pub").write_bytes(public)
    pid_file.with_suffix(".id").write_text(ident + "\n")
    deadline = time.monotonic() + WAIT_S
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.stop(0)
            pid_file.unlink(missing_ok=True)
            pid_file.with_suffix(".pub").unlink(missing_ok=True)
            pid_file.with_suffix(".id").unlink(missing_ok=True)
            text = pid_file.with_suffix(".log").read_text(errors="replace").strip()
            raise DtnkitError(
                f"iperf3 -s on {bind} port {port} did not start",
                text.splitlines()[-1] if text else "it did not listen in time",
                "check --bind (an address of this host) or pick another --port",
            )
        with contextlib.suppress(process.TimeoutExpired):
            proc.wait(0.02)  # wait a little on the child itself, not a sleep
    return {
        "pid": proc.pid,
        "port": port,
        "bind": bind,
        "pid_file": str(pid_file),
        "started": True,
        "user": _owner(proc.pid),
        "public_key": public.decode(),
    }


def _owner(pid: int) -> str | None:
    """The user name a process runs as (None: gone)."""
    try:
        uid = Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def server_stop(state_dir: Path, port: int) -> dict[str, Any]:
    """Stop the iperf3 server started for ``port``, by its PID file; nothing to stop is not an
    error (``stopped: false``)."""
    pid_file = _pid_file(state_dir, port)
    try:
        pid = int(pid_file.read_text())
    except FileNotFoundError:
        return {"port": port, "pid": None, "stopped": False, "why": "no server started here"}
    except (OSError, ValueError) as exc:
        raise BadInput(f"cannot read {pid_file}", str(exc), "remove it by hand") from exc
    if not _is_iperf3(pid):
        pid_file.unlink(missing_ok=True)
        return {"port": port, "pid": pid, "stopped": False, "why": "it was no longer running"}
    process.stop_pid(pid, WAIT_S, is_ours=_is_iperf3, reap_s=WAIT_S)
    pid_file.unlink(missing_ok=True)
    pid_file.with_suffix(".log").unlink(missing_ok=True)
    pid_file.with_suffix(".pub").unlink(missing_ok=True)
    pid_file.with_suffix(".id").unlink(missing_ok=True)
    return {"port": port, "pid": pid, "stopped": True, "why": "stopped"}
