"""Does a third-party copy reach an internal HTTP service?  A network namespace whose
loopback holds the addresses of every special-purpose form (10.0.0.5, fec0::5, the NAT64
address 64:ff9b::a00:5 that a NAT64 gateway would turn into 10.0.0.5, ...), names for some
of them in the namespace's /etc/hosts, one internal HTTP service listening on all of them
(it records every connection it accepts), and a ``dtnkit serve`` in the same namespace
asked, over a raw socket, to COPY from (pull) and to (push) each form.

The kernel here has no NAT64, 6to4 relay or Teredo: the embedded forms' addresses are
configured on the namespace's loopback instead, so a server that connects to one of them
reaches the service, as it would reach 10.0.0.5 through the translator.

Run inside the namespace as ``python -m tests.support.tpc_reach --root DIR [--allow CIDR]``
(it prints one JSON document); :func:`internal_netns` makes the namespace and
:func:`run_forms` runs it there.  Used by tests/transfer/server/test_copy_internal_reach.py
and `python -m bench tpc-address-forms` (the form -> decision -> reached table, for any source
tree).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
import zlib
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: (form, the URL's authority with {port}); the addresses are put on the namespace's lo
FORMS: list[tuple[str, str]] = [
    ("private 10.0.0.5", "10.0.0.5:{port}"),
    ("decimal", "167772165:{port}"),
    ("hex", "0xa000005:{port}"),
    ("octal", "012.0.0.05:{port}"),
    ("short a.b", "10.5:{port}"),
    ("short a.b.c", "10.0.5:{port}"),
    ("trailing dot", "10.0.0.5.:{port}"),
    ("userinfo", "dtn.example.org@10.0.0.5:{port}"),
    ("userinfo with port", "8.8.8.8:443@10.0.0.5:{port}"),
    ("percent-encoded", "10.0.0.%35:{port}"),
    ("IPv4-mapped", "[::ffff:10.0.0.5]:{port}"),
    ("IPv4-mapped hex", "[::ffff:a00:5]:{port}"),
    ("IPv4-compatible", "[::10.0.0.5]:{port}"),
    ("NAT64 64:ff9b::/96", "[64:ff9b::a00:5]:{port}"),
    ("NAT64 dotted", "[64:ff9b::10.0.0.5]:{port}"),
    ("NAT64 local-use /48", "[64:ff9b:1::a00:5]:{port}"),
    ("6to4 2002::/16", "[2002:a00:5::1]:{port}"),
    ("Teredo 2001::/32", "[2001:0:a00:5::f5ff:fffa]:{port}"),
    ("site-local fec0::/10", "[fec0::5]:{port}"),
    ("unique-local fd00::/8", "[fd00::5]:{port}"),
    ("link-local with zone", "[fe80::5%25lo]:{port}"),
    ("loopback 127.0.0.1", "127.0.0.1:{port}"),
    ("loopback 127.1", "127.1:{port}"),
    ("loopback [::1]", "[::1]:{port}"),
    ("localhost", "localhost:{port}"),
    ("unspecified 0.0.0.0", "0.0.0.0:{port}"),
    ("unspecified 0", "0:{port}"),
    ("unspecified [::]", "[::]:{port}"),
    ("link-local 169.254.169.254", "169.254.169.254:{port}"),
    ("shared 100.64.0.0/10", "100.64.0.5:{port}"),
    ("documentation 192.0.2.0/24", "192.0.2.5:{port}"),
    ("documentation 2001:db8::/32", "[2001:db8::5]:{port}"),
    ("documentation 3fff::/20", "[3fff::5]:{port}"),
    ("benchmarking 198.18.0.0/15", "198.18.0.5:{port}"),
    ("benchmarking 2001:2::/48", "[2001:2::5]:{port}"),
    ("6to4 relay 192.88.99.0/24", "192.88.99.5:{port}"),
    ("reserved 240.0.0.0/4", "240.0.0.5:{port}"),
    ("SRv6 5f00::/16", "[5f00::5]:{port}"),
    ("multicast 224.0.0.5", "224.0.0.5:{port}"),
    ("name -> 10.0.0.5", "internal.dtnkit-test:{port}"),
    ("name -> NAT64", "nat64.dtnkit-test:{port}"),
    ("name -> site-local", "sitelocal.dtnkit-test:{port}"),
    ("name -> IPv4-mapped", "mapped.dtnkit-test:{port}"),
]

#: the addresses put on the namespace's loopback (each one reaches the service)
ADDRESSES = [
    "10.0.0.5/32",
    "127.0.0.1/8",
    "169.254.169.254/32",
    "100.64.0.5/32",
    "192.0.2.5/32",
    "198.18.0.5/32",
    "192.88.99.5/32",
    "240.0.0.5/32",
    "fec0::5/128",
    "fd00::5/128",
    "fe80::5/128",
    "64:ff9b::a00:5/128",
    "64:ff9b:1::a00:5/128",
    "2002:a00:5::1/128",
    "2001:0:a00:5::f5ff:fffa/128",
    "::a00:5/128",
    "2001:db8::5/128",
    "3fff::5/128",
    "2001:2::5/128",
    "5f00::5/128",
]
#: the namespace's /etc/hosts
HOSTS = (
    "10.0.0.5 internal.dtnkit-test\n64:ff9b::a00:5 nat64.dtnkit-test\n"
    "fec0::5 sitelocal.dtnkit-test\n::ffff:10.0.0.5 mapped.dtnkit-test\n"
    "127.0.0.1 localhost\n::1 localhost\n"
)
TOKEN = "reach-rw"
DATA = bytes(range(256)) * 4096  # 1 MiB


# --- the namespace (made from outside it) ------------------------------------------------


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def internal_netns(prefix: str) -> Iterator[str]:
    """A namespace ``PREFIX<random>`` with :data:`ADDRESSES` on its lo and :data:`HOSTS` as
    its /etc/hosts (``ip netns exec`` binds /etc/netns/NAME/hosts); removed at the end."""
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    etc = Path("/etc/netns") / name
    try:
        _ip("netns", "add", name)
        _ip("-n", name, "link", "set", "lo", "up")
        subprocess.run(
            ["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.lo.disable_ipv6=0"],
            check=False,
            capture_output=True,
        )
        for address in ADDRESSES:
            if address != "127.0.0.1/8":
                extra = ["nodad"] if ":" in address else []
                _ip("-n", name, "addr", "add", address, "dev", "lo", *extra)
        etc.mkdir(parents=True)
        (etc / "hosts").write_text(HOSTS)
        yield name
    finally:
        shutil.rmtree(etc, ignore_errors=True)
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def run_forms(
    netns: str, root: Path, allow: Sequence[str] = (), *, pythonpath: str | None = None
) -> dict[str, Any]:
    """Run this module in *netns* (with ``PYTHONPATH`` *pythonpath* first: another source
    tree); its JSON document."""
    here = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (pythonpath, str(here), env.get("PYTHONPATH")) if p
    )
    argv = [
        "ip",
        "netns",
        "exec",
        netns,
        sys.executable,
        "-m",
        "tests.support.tpc_reach",
        "--root",
        str(root),
    ]
    for entry in allow:
        argv += ["--allow", entry]
    res = subprocess.run(argv, capture_output=True, text=True, cwd=here, env=env, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"tpc_reach failed ({res.returncode}): {res.stderr[-4000:]}")
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


# --- inside the namespace -----------------------------------------------------------------


class Service(ThreadingHTTPServer):
    """The internal service: 1 MiB at any path (HEAD with its adler32 Digest, GET with
    ranges), PUT answered 201, DELETE 204; every accepted connection counted."""

    daemon_threads = True
    address_family = socket.AF_INET6

    def __init__(self, redirects: Sequence[str] = ()) -> None:
        self.connections = 0
        self.probes = 0
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self.redirects = list(redirects)  # a door: /r/I/... answers 307 to redirects[I]/...
        super().__init__(("::", 0), _Handler)

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # IPv4 too
        super().server_bind()

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self.lock:
            self.connections += 1
        return True

    def settled(self) -> tuple[int, list[str]]:
        """Connections and requests so far, every connection made before this call
        counted: a probe request is answered only after everything queued before it was
        accepted (one accept loop, first come first served); probes are not counted."""
        with self.lock:
            self.probes += 1
        with socket.create_connection(("127.0.0.1", self.server_address[1]), timeout=30) as s:
            s.sendall(b"GET /.probe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while s.recv(65536):
                pass
        with self.lock:
            return (
                self.connections - self.probes,
                [r for r in self.requests if r != "GET /.probe"],
            )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Service

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _any(self) -> None:
        path = self.path.split("?", 1)[0]
        with self.server.lock:
            self.server.requests.append(f"{self.command} {path}")
        length = int(self.headers.get("Content-Length", "0") or "0")
        if length:
            self.rfile.read(length)
        parts = path.split("/", 3)
        if self.server.redirects and len(parts) == 4 and parts[1] == "r":
            self._answer(307, {"Location": f"{self.server.redirects[int(parts[2])]}/{parts[3]}"})
        elif self.command == "HEAD":
            self._answer(
                200, {"Digest": f"adler32={zlib.adler32(DATA):08x}", "Accept-Ranges": "bytes"}, DATA
            )
        elif self.command == "GET":
            first, last = 0, len(DATA) - 1
            spec = self.headers.get("Range")
            if spec:
                a, b = spec.split("=", 1)[1].split("-")
                first, last = int(a), min(int(b), last)
            self._answer(
                206 if spec else 200,
                {
                    "Content-Range": f"bytes {first}-{last}/{len(DATA)}",
                    "Digest": f"adler32={zlib.adler32(DATA):08x}",
                },
                DATA[first : last + 1],
            )
        elif self.command == "PUT":
            self._answer(201, {})
        else:
            self._answer(204, {})

    do_HEAD = do_GET = do_PUT = do_DELETE = _any


def copy_raw(port: int, path: str, header: str, url: str) -> tuple[int, str]:
    """One COPY over a raw socket; the status and the last line of the answer."""
    raw = (
        f"COPY {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nCredential: none\r\n{header}: {url}\r\n"
        "Connection: close\r\nContent-Length: 0\r\n\r\n"
    ).encode()
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(raw)
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    text = b"".join(chunks).decode("utf-8", "replace")
    status = int(text.split(" ", 2)[1]) if text.startswith("HTTP/1.1 ") else 0
    head, _sep, body = text.partition("\r\n\r\n")
    lines = [
        x.strip()
        for x in body.splitlines()
        if x.strip() and not all(c in "0123456789abcdefABCDEF" for c in x.strip())
    ]
    final = lines[-1] if lines else head.splitlines()[0]
    return status, final[:300]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tpc_reach")
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--allow", action="append", default=[])
    args = parser.parse_args(argv)

    from dtnkit.transfer import tokens
    from dtnkit.transfer.server import start_server

    root: Path = args.root
    root.mkdir(parents=True, exist_ok=True)
    (root / "local.bin").write_bytes(DATA)
    service = Service()
    port = service.server_address[1]
    # a door the allow-list names, redirecting /r/I/... to form I: redirects are checked too
    door = Service([f"http://{authority.format(port=port)}" for _form, authority in FORMS])
    for listener in (service, door):
        threading.Thread(
            target=listener.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
    store = tokens.parse(f"{TOKEN} read,write\n")
    results = []
    allow = [*args.allow, f"127.0.0.1:{door.server_address[1]}"]
    with start_server(
        root, tokens=store, quiet=True, marker_interval=0.2, tpc_allow=allow
    ) as server:
        for i, (form, authority) in enumerate(FORMS):
            row: dict[str, Any] = {"form": form, "authority": authority.format(port="PORT")}
            direct = f"http://{authority.format(port=port)}"
            redirected = f"http://127.0.0.1:{door.server_address[1]}/r/{i}"
            for mode, header, path, remote in (
                ("pull", "Source", f"/pulled-{i}.bin", f"{direct}/data.bin"),
                ("push", "Destination", "/local.bin", f"{direct}/pushed-{i}.bin"),
                ("pull via redirect", "Source", f"/pulled-r{i}.bin", f"{redirected}/data.bin"),
                ("push via redirect", "Destination", "/local.bin", f"{redirected}/pushed-r{i}.bin"),
            ):
                before, earlier = service.settled()
                status, final = copy_raw(server.port, path, header, remote)
                after, seen = service.settled()
                row[mode] = {
                    "status": status,
                    "final": final,
                    "reached": after > before,
                    "connections": after - before,
                    "requests": seen[len(earlier) :],
                }
            results.append(row)
    service.shutdown()
    door.shutdown()
    json.dump(
        {"dtnkit": __import__("dtnkit").__file__, "allow": args.allow, "forms": results}, sys.stdout
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
