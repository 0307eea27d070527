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

import os
import select
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtnkit.diagnose.experiment import judge
from dtnkit.errors import BadInput, DtnkitError, ToolMissing
from dtnkit.tune.audit import check_groups
from dtnkit.units import format_rate

#: how long `server start` waits for iperf3 to listen, and `server stop` for it to exit
WAIT_S = 10.0


def check_rates(values: Sequence[float], what: str) -> list[float]:
    """Throughputs in bit/s: finite and not negative (nan, inf and -1 are refused)."""
    out = []
    for v in values:
        if not (v == v and 0 <= v < 1e15):  # nan != nan
            raise BadInput(f"bad {what} value {v!r}", "a throughput in bit/s, 0 to 1e15",
                           f"give e.g. {what} 9.4e9")
        out.append(float(v))
    return out


def one_group(group: str) -> str:
    if "," in group or not group:
        raise BadInput(f"bad group {group!r}", "one group at a time", "e.g. --group buffers")
    check_groups([group])
    return group


def gate(group: str, baseline: Sequence[float], nic_bps: float | None,
         measured_harmful: bool = False) -> dict[str, Any]:
    """Whether ``group`` must stay off this pair, and why."""
    one_group(group)
    base = check_rates(baseline, "--baseline")
    doc: dict[str, Any] = {"group": group, "gated": False, "baseline_bps": base,
                           "nic_bps": nic_bps, "headroom": None, "margin": None}
    if measured_harmful:
        return {**doc, "gated": True,
                "why": "measured harmful on this pair before: never applied here"}
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
        return {**doc, "gated": True,
                "why": f"predicted harmful: the baseline {format_rate(median)} leaves "
                       f"{headroom:.0%} of the slower NIC's {format_rate(nic_bps)}, inside the "
                       f"noise ({margin:.0%}): no gain could show, only a loss"}
    return {**doc, "why": f"headroom {headroom:.0%} of the slower NIC's "
                          f"{format_rate(nic_bps)} is above the noise ({margin:.0%})"}


def verdict(group: str, baseline: Sequence[float], applied: Sequence[float]) -> dict[str, Any]:
    """The group's verdict on the pair, by the experiment's rule (:func:`judge`)."""
    one_group(group)
    base, got = check_rates(baseline, "--baseline"), check_rates(applied, "--applied")
    if not base or not got:
        raise BadInput("a verdict needs both runs", "give --baseline and --applied at least once",
                       "e.g. --baseline 9.1e9 --applied 9.4e9")
    name, ratio, margin = judge(base, got)
    why = (f"median x{ratio:.2f} of the baseline; noise +-{margin:.0%}"
           if statistics.median(base) > 0 else "the baseline measured 0 bit/s")
    return {"group": group, "verdict": name, "applied": True, "ratio": ratio,
            "margin": margin, "baseline_bps": base, "applied_bps": got, "why": why}


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


def _gone(pid: int, timeout_s: float) -> bool:
    """Wait (on a pidfd, no polling) until ``pid`` has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    finally:
        os.close(fd)


def server_start(state_dir: Path, port: int) -> dict[str, Any]:
    """Start ``iperf3 -s`` in this namespace, detached, its PID in STATE/servers/; the port
    of one that already runs there is reused (idempotent)."""
    if not 0 <= port <= 65535:
        raise BadInput(f"bad port {port}", "0 to 65535 (0: a free one)", "e.g. --port 5201")
    if port:
        pid_file = _pid_file(state_dir, port)
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            pid = 0
        if pid and _is_iperf3(pid) and _listening(port):
            return {"pid": pid, "port": port, "pid_file": str(pid_file), "started": False}
    port = port or _free_port()
    pid_file = _pid_file(state_dir, port)
    try:
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        log = open(pid_file.with_suffix(".log"), "wb")  # noqa: SIM115 (the child keeps it)
    except OSError as exc:
        raise BadInput(f"cannot write under {state_dir}", exc.strerror or str(exc),
                       "give a writable --state-dir") from exc
    try:
        proc = subprocess.Popen(["iperf3", "-s", "-p", str(port)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    except FileNotFoundError as exc:
        raise ToolMissing("iperf3 is not installed", "the server side of a probe runs iperf3 -s",
                          "install iperf3") from exc
    finally:
        log.close()
    pid_file.write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + WAIT_S
    while not _listening(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pid_file.unlink(missing_ok=True)
            text = pid_file.with_suffix(".log").read_text(errors="replace").strip()
            raise DtnkitError(f"iperf3 -s on port {port} did not start",
                              text.splitlines()[-1] if text else "it did not listen in time",
                              "pick another --port")
        _gone(proc.pid, 0.02)  # wait a little on the child itself, not a sleep
    return {"pid": proc.pid, "port": port, "pid_file": str(pid_file), "started": True}


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
    os.kill(pid, signal.SIGTERM)
    if not _gone(pid, WAIT_S):
        os.kill(pid, signal.SIGKILL)
        _gone(pid, WAIT_S)
    pid_file.unlink(missing_ok=True)
    pid_file.with_suffix(".log").unlink(missing_ok=True)
    return {"port": port, "pid": pid, "stopped": True, "why": "stopped"}
