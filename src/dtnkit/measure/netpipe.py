"""A minimal TCP pipe for end-to-end tests and demos before the dtnkit mover exists.

    python -m dtnkit.measure.netpipe recv PORT          # accept one connection, count bytes
    python -m dtnkit.measure.netpipe send HOST:PORT     # stdin -> the socket

``recv`` prints ``listening on PORT`` once it accepts connections, then at the end one JSON
line ``{"bytes": N, "seconds": S}``.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Sequence

CHUNK = 4 * 2**20


def recv(port: int) -> int:
    with socket.create_server(("0.0.0.0", port), reuse_port=False) as srv:
        print(f"listening on {port}", flush=True)
        conn, _ = srv.accept()
        start = time.monotonic()
        total = 0
        buf = bytearray(CHUNK)
        with conn:
            while n := conn.recv_into(buf):
                total += n
        print(json.dumps({"bytes": total, "seconds": time.monotonic() - start}), flush=True)
    return 0


def send(target: str) -> int:
    host, _, port = target.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.settimeout(None)
        stdin = sys.stdin.buffer.raw if hasattr(sys.stdin.buffer, "raw") else sys.stdin.buffer
        while chunk := stdin.read(CHUNK):
            conn.sendall(chunk)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "recv" and args[1].isdigit():
        return recv(int(args[1]))
    if len(args) == 2 and args[0] == "send" and ":" in args[1]:
        return send(args[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
