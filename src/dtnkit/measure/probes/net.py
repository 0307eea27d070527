"""The network probe: memory-to-memory throughput to a peer, with per-flow state sampled.

Every network tool's summary holds :data:`SUMMARY_KEYS` (units in key names); a tool may add
its own figures beside them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from dtnkit.errors import BadInput
from dtnkit.host.host import Host

KIND = "net"
TITLE = "network"
SUMMARY_KEYS = (
    "throughput_bps",
    "bytes",
    "retransmits",
    "rtt_ms_mean",
    "rtt_ms_min",
    "streams",
    "duration_s",
)


@dataclass
class NetSpec:
    kind: ClassVar[str] = KIND

    peer: str
    streams: int = 1
    duration_s: int = 10
    cc: str | None = None
    fq_rate: str | None = None
    reverse: bool = False
    port: int = 5201
    interval_s: float = 5.0
    connect_timeout_s: float = 5.0
    #: the probe server's RSA public key (PEM file): authenticate (iperf3 --username dtnkit
    #: --rsa-public-key-path) with the token the context carries
    server_key: str | None = None

    def validate(self) -> None:
        if not 1 <= self.streams <= 128:
            raise BadInput(
                f"{self.streams} streams is out of range", "allowed: 1 to 128", "e.g. --streams 4"
            )
        if not 1 <= self.duration_s <= 3600:
            raise BadInput(
                f"duration {self.duration_s} s is out of range",
                "allowed: 1 to 3600 s",
                "e.g. --duration 10",
            )
        if not 1 <= self.port <= 65535:
            raise BadInput(f"port {self.port} is out of range", "", "e.g. --port 5201")


@dataclass(frozen=True)
class Peer:
    address: str
    netns: str | None  # where to start a server; None with local=False: an external server
    local: bool  # we start (and stop) the server
    label: str


# NAME, HOST of a lab path -> the peer; given by the caller (the lab sits above measure)
LabPeers = Callable[[str, str], Peer]


def resolve_peer(peer: str, lab_peers: LabPeers | None = None) -> Peer:
    """``NAME/HOST`` (a lab host), ``localhost``/``127.0.0.1``, or an address with a server."""
    if "/" in peer:
        name, _, host = peer.partition("/")
        if lab_peers is None:
            raise BadInput(
                f"lab peer {peer!r} cannot be resolved here",
                "this caller knows no lab paths",
                "give an address instead",
            )
        return lab_peers(name, host)
    if peer in ("localhost", "127.0.0.1", "::1"):
        return Peer("127.0.0.1" if peer == "localhost" else peer, None, True, "localhost")
    if not peer or peer.startswith("-") or any(c.isspace() for c in peer):
        raise BadInput(
            f"bad peer {peer!r}",
            "give NAME/HOST of a lab path, localhost or an address running iperf3 -s",
            "e.g. --peer demo/dst",
        )
    return Peer(peer, None, False, peer)


def egress_speed_mbps(host: Host, address: str) -> tuple[str | None, int | None]:
    """The device toward ``address`` and its link speed (None when unknown)."""
    res = host.query(["ip", "-j", "route", "get", address])
    try:
        dev = json.loads(res.stdout)[0].get("dev") if res.ok else None
    except (json.JSONDecodeError, IndexError):
        dev = None
    if not dev:
        return None, None
    text = host.read(f"/sys/class/net/{dev}/speed")
    try:
        speed = int((text or "").strip())
    except ValueError:
        speed = -1
    return dev, speed if speed > 0 else None
