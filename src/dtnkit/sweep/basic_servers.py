"""The runner's own servers, without a CPU quota: ``iperf3 -s`` and plain-HTTP ``dtnkit
serve`` in a lab host's namespace, started through :class:`~dtnkit.sweep.procs.Procs` (so
Ctrl-C stops them) and returned as :class:`~dtnkit.sweep.model.Origin`.

:mod:`dtnkit.sweep.servers` starts servers under a cgroup CPU quota (and XRootD); the runner
uses it when it is present and the point has a quota or an XRootD server, and these
otherwise.
"""

from __future__ import annotations

import os
import re
import secrets
import select
import subprocess
import sys
import time
from pathlib import Path

from dtnkit.errors import DtnkitError
from dtnkit.lab.path import LabHost
from dtnkit.sweep.model import Origin
from dtnkit.sweep.procs import Procs

IPERF3_PORT = 5201  # each lab host is its own namespace: the port is free there
START_TIMEOUT_S = 20.0


def read_line(proc: subprocess.Popen[str], pattern: str, timeout_s: float) -> re.Match[str]:
    """The first line of the process's stdout matching ``pattern``, within ``timeout_s``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    fd = proc.stdout.fileno()
    buf = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            text = line.decode("utf-8", "replace")
            seen.append(text)
            m = re.search(pattern, text)
            if m:
                return m
    why = " | ".join(seen[-3:]) or (f"exit status {proc.returncode}" if proc.poll() is not None
                                    else f"nothing within {timeout_s:g} s")
    raise DtnkitError("a server did not start", why[-400:])


def start_iperf3(procs: Procs, host: LabHost, index: int, log: Path) -> Origin:
    proc = procs.start(["iperf3", "-s", "-p", str(IPERF3_PORT), "--forceflush"], host=host,
                       stderr=log.open("w"))
    try:
        read_line(proc, r"Server listening on", START_TIMEOUT_S)
    except DtnkitError:
        procs.stop(proc)
        raise
    return Origin(index=index, kind="iperf3", host=host, port=IPERF3_PORT, url_base="",
                  pid=proc.pid, cgroup=None)


def dtnkit_argv() -> list[str]:
    return [sys.executable, "-m", "dtnkit"]


def start_dtnkit(procs: Procs, host: LabHost, index: int, root: Path, workdir: Path,
                 files: tuple[str, ...] = ()) -> Origin:
    """``dtnkit serve`` of ``root`` on the host's address, a kernel-chosen port, plain HTTP,
    one token that may read and write."""
    token = secrets.token_hex(16)
    tokens = workdir / f"tokens-{index}"
    tokens.write_text(f"{token} read,write\n")
    tokens.chmod(0o600)
    log = (workdir / f"serve-{index}.log").open("w")
    proc = procs.start([*dtnkit_argv(), "serve", "--root", str(root), "--host", host.address,
                        "--port", "0", "--tokens", str(tokens), "--anonymous-read", "--quiet"],
                       host=host, stderr=log)
    log.close()
    try:
        m = read_line(proc, r"(http://[0-9.]+:([0-9]+))/", START_TIMEOUT_S)
    except DtnkitError as exc:
        procs.stop(proc)
        raise DtnkitError("dtnkit serve did not start", exc.why + " " +
                          (workdir / f"serve-{index}.log").read_text()[-300:]) from None
    return Origin(index=index, kind="dtnkit", host=host, port=int(m.group(2)),
                  url_base=m.group(1), pid=proc.pid, cgroup=None, files=files, token=token)
