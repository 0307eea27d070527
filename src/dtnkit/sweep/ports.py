"""Free TCP ports, as the kernel picks them in the network namespace this process runs in:
run inside a lab host's namespace (``python -m dtnkit.sweep.ports COUNT``), it prints COUNT
distinct port numbers on one line.  The sockets are held together while the kernel picks, so
the ports differ, then closed: a sweep's lab namespace is its own, nothing else takes them
meanwhile."""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence


def command(count: int) -> list[str]:
    """The argv that prints *count* free ports of the namespace it runs in."""
    return [sys.executable, "-m", "dtnkit.sweep.ports", str(count)]


def pick(count: int) -> list[int]:
    """*count* distinct ports the kernel picks for sockets bound to 0.0.0.0."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("0.0.0.0", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def main(args: Sequence[str]) -> int:
    count = args[0] if len(args) == 1 else ""
    if not (count.isascii() and count.isdigit()) or not 0 < int(count) <= 1000:
        print("usage: python -m dtnkit.sweep.ports COUNT (1 to 1000)", file=sys.stderr)
        return 2
    print(" ".join(str(p) for p in pick(int(count))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
