"""Reading a network namespace's counters from outside it.

A process sees /proc/net and (after ``ip netns exec``'s remount) /sys/class/net of its own
namespace, and /proc/PID/net and /proc/PID/root/sys/class/net show them to anyone else.  So
the exporter keeps one idle process in the namespace (``cat`` reading a pipe: it ends when
the exporter ends, even after kill -9) and reads through it, with no process started per
scrape and the exporter's own socket in its own namespace.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from dtnkit.errors import BadInput, DtnkitError, NeedsRoot, ToolMissing
from dtnkit.host import process
from dtnkit.monitor.base import View

NETNS_DIR = Path("/run/netns")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check(name: str) -> Path:
    if not _NAME.match(name):
        raise BadInput(
            f"bad namespace name {name!r}",
            "names are letters, digits, '.', '_' and '-'",
            "see `ip netns list`",
        )
    path = NETNS_DIR / name
    if not path.exists():
        raise BadInput(
            f"no network namespace {name!r}", f"it is not in {NETNS_DIR}", "see `ip netns list`"
        )
    return path


class NetnsView:
    """An idle process inside namespace ``name`` and the :class:`View` through it."""

    def __init__(self, name: str, *, timeout: float = 5.0) -> None:
        path = check(name)
        if os.geteuid() != 0:
            raise NeedsRoot(
                f"cannot read namespace {name}",
                "entering it needs root",
                "run as root, or without --netns",
            )
        if shutil.which("ip") is None:
            raise ToolMissing("ip (iproute2)", "it enters the namespace", "install iproute2")
        self.name = name
        # `cat` ends when its stdin does, so also when this process ends (kill -9 too);
        # close() stops it (SIGTERM, SIGKILL after 5 s) and reaps it
        self.proc = process.start(
            ["ip", "netns", "exec", name, "cat"],
            stdin=process.PIPE,
            stdout=process.DEVNULL,
            stderr=process.PIPE,
            grace_s=5.0,
        )
        want = path.stat().st_ino
        deadline = time.monotonic() + timeout
        pid = self.proc.pid
        while True:  # in the namespace and past ip's remount of /sys (cat is running)
            try:
                inside = (
                    os.stat(f"/proc/{pid}/ns/net").st_ino == want
                    and Path(f"/proc/{pid}/comm").read_text().strip() == "cat"
                )
            except OSError:
                inside = False
            if inside:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = (
                    self.proc.stderr.read().decode(errors="replace").strip()
                    if self.proc.stderr and self.proc.poll() is not None
                    else "timed out"
                )
                self.close()
                raise DtnkitError(
                    f"cannot enter namespace {name}",
                    err or "ip netns exec failed",
                    "see `ip netns list`",
                )
            time.sleep(0.005)  # polls the kernel's own answer, bounded by the deadline
        self.view = View(
            proc_net=Path(f"/proc/{pid}/net"),
            sys_class_net=Path(f"/proc/{pid}/root/sys/class/net"),
            netns=name,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.proc.close()

    def __enter__(self) -> NetnsView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
