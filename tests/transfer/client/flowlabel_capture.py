"""Run inside a namespace: capture the IPv6 TCP packets of one port on one device with a
packet socket (AF_PACKET) and print, as JSON, the flow label and direction of each.

Usage: python flowlabel_capture.py DEVICE PORT; prints "ready" once capturing, stops when stdin
closes (or after 60 s), then prints one JSON list of [to_port, label, payload_length]."""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time

ETH_P_IPV6 = 0x86DD


def main() -> int:
    device, port = sys.argv[1], int(sys.argv[2])
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
    sock.setsockopt(socket.SOL_SOCKET, 33, 64 * 2**20)  # SO_RCVBUFFORCE: no drops while slow
    sock.bind((device, ETH_P_IPV6))
    print("ready", flush=True)
    seen: list[list[int]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        readable, _w, _x = select.select([sock, sys.stdin], [], [], 1.0)
        if sys.stdin in readable and not sys.stdin.readline():
            break
        if sock not in readable:
            continue
        frame = sock.recv(65536)
        ip = frame[14:]
        if len(ip) < 40 or ip[6] != 6:  # next header TCP only (no extension headers here)
            continue
        label = struct.unpack("!I", ip[0:4])[0] & 0xFFFFF
        payload = struct.unpack("!H", ip[4:6])[0]
        sport, dport = struct.unpack("!HH", ip[40:44])
        offset = (ip[52] >> 4) * 4
        if port in (sport, dport):
            seen.append([1 if dport == port else 0, label, payload - offset])
    print(json.dumps(seen), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
