"""The machine a figure was measured on: its commit, its CPUs and kernel, and how busy other
processes kept it meanwhile (the machine is shared: other users' jobs, steal)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far, 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


@dataclass(frozen=True)
class Load:
    """What other processes took while a section ran."""

    seconds: float
    other_cpu_percent: float  # of all CPUs
    cpus: int
    loadavg_end: float

    def line(self, what: str = "This section") -> str:
        return (
            f"_{what} took {self.seconds:.0f} s; other processes used "
            f"{self.other_cpu_percent:.0f} % of the {self.cpus} CPUs meanwhile "
            f"(1-min load average at the end: {self.loadavg_end:.2f})._"
        )

    def as_json(self) -> dict[str, float]:
        return {
            "seconds": round(self.seconds, 3),
            "other_cpu_percent": round(self.other_cpu_percent, 1),
            "cpus": self.cpus,
            "loadavg_end": self.loadavg_end,
        }


class CpuWatch:
    """CPU other processes used while a section runs: the machine's busy time from /proc/stat
    minus this process's, its waited-for children's and those of the running processes
    ``pids()`` names (servers the bench started)."""

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

    def load(self) -> Load:
        now = self._sample()
        wall = now[0] - self.start[0]
        other = max(0.0, (now[1] - self.start[1]) - (now[2] - self.start[2]))
        ncpu = os.cpu_count() or 1
        return Load(wall, 100 * other / (ncpu * max(wall, 1e-9)), ncpu, loadavg())

    def report(self) -> str:
        return self.load().line()


def git(repo: Path, *args: str) -> str | None:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


@dataclass(frozen=True)
class Commit:
    """The commit a tree is at, and whether its src/ or bench/ has uncommitted changes."""

    sha: str | None
    dirty: bool

    @classmethod
    def of(cls, repo: Path) -> Commit:
        sha = git(repo, "rev-parse", "HEAD")
        status = git(repo, "status", "--porcelain", "--", "src", "bench")
        return cls(sha, bool(status))

    def short(self) -> str:
        if self.sha is None:
            return "? (not a git checkout)"
        return self.sha[:10] + (" + uncommitted changes" if self.dirty else "")


def machine() -> dict[str, object]:
    return {
        "cpus": os.cpu_count(),
        "kernel": os.uname().release,
        "python": sys.version.split()[0],
        "executable": sys.executable,
    }
