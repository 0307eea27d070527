"""What the benchmarks share: CPU accounting on a shared machine, a free loopback port, stopping
a child, and the log, output and Markdown table lines every bench prints."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far, 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class CpuWatch:
    """CPU other processes used while a section runs (the VM is shared: other users' jobs,
    steal): the machine's busy time from /proc/stat minus this script's, its waited-for
    children's and those of the running processes ``pids()`` names (servers)."""

    def __init__(self, pids: Callable[[], Iterable[int]] = tuple) -> None:
        self.pids = pids
        self.start = self._sample()

    def _sample(self) -> tuple[float, float, float]:
        cpu = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        busy = (sum(cpu[:8]) - cpu[3] - cpu[4]) / os.sysconf("SC_CLK_TCK")  # not idle, iowait
        t = os.times()
        ours = t.user + t.system + t.children_user + t.children_system
        ours += sum(proc_cpu(p) for p in self.pids())
        return time.monotonic(), busy, ours

    def report(self) -> str:
        now = self._sample()
        wall = now[0] - self.start[0]
        other = max(0.0, (now[1] - self.start[1]) - (now[2] - self.start[2]))
        ncpu = os.cpu_count() or 1
        load = Path("/proc/loadavg").read_text().split()[0]
        return (f"_This section took {wall:.0f} s; other processes used "
                f"{100 * other / (ncpu * max(wall, 1e-9)):.0f} % of the {ncpu} CPUs meanwhile "
                f"(1-min load average at the end: {load})._")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


T0 = time.monotonic()


def log(msg: str) -> None:
    """A progress line on stderr, with the seconds since the bench started."""
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def out(line: str = "") -> None:
    print(line, flush=True)


def table(head: list[str], rows: list[list[str]]) -> None:
    """A Markdown table on stdout (the benches' results go into docs as they print)."""
    out("| " + " | ".join(head) + " |")
    out("|" + "---|" * len(head))
    for r in rows:
        out("| " + " | ".join(r) + " |")
    out()


def stop(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """Stop one child by its PID: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_file(path: Path, size: int) -> None:
    """*size* bytes of random data (16 MiB of it, repeated), mode 0644."""
    chunk = os.urandom(16 * 2**20)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
    path.chmod(0o644)
