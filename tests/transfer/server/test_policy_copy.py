"""COPY is not a request-forgery proxy: a token of the local side's scope in both directions
(never anonymous), remote hosts checked against ``--tpc-allow`` (loopback, link-local,
private and unspecified refused unless listed; a name resolved once and the checked address
used; every redirect hop checked), only the documented ``TransferHeader``s forwarded, failure
lines that do not tell a scanner which ports are open, and no server paths in them.

The remotes are small HTTP servers on 127.0.0.x that count every connection they accept.
"""

from __future__ import annotations

import http.client
import socket
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dtnkit.transfer import tokens
from dtnkit.transfer.client.tpc import request_copy
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.server import tpc_allow as ta

RW, RO, WO = "pol-rw", "pol-ro", "pol-wo"
DATA = bytes(range(256)) * 512  # 128 KiB


class Remote(ThreadingHTTPServer):
    """Serves DATA (HEAD with Digest, ranged GET), accepts PUT and DELETE; counts connections
    and records (method, path, headers)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        status: int | None = None,
        redirect: str | None = None,
        data: bytes = DATA,
    ) -> None:
        self.connections = 0
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.status = status  # answer everything with this status
        self.redirect = redirect  # answer everything with 307 to redirect + path
        self.data = data
        super().__init__(address, _Handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.connections += 1
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Remote

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
        self.server.seen.append((self.command, self.path, dict(self.headers.items())))
        length = int(self.headers.get("Content-Length", "0"))
        if length:
            self.rfile.read(length)
        if self.server.redirect is not None:
            self._answer(307, {"Location": self.server.redirect + self.path.lstrip("/")})
        elif self.server.status is not None:
            self._answer(self.server.status, {}, b"nope\n")
        elif self.command == "HEAD":
            self._answer(
                200,
                {
                    "Digest": f"adler32={zlib.adler32(self.server.data):08x}",
                    "Accept-Ranges": "bytes",
                    "ETag": '"x"',
                },
                self.server.data,
            )
        elif self.command == "GET":
            spec = self.headers.get("Range", f"bytes=0-{len(self.server.data) - 1}")
            first, last = (int(x) for x in spec.split("=")[1].split("-"))
            self._answer(
                206,
                {"Content-Range": f"bytes {first}-{last}/{len(self.server.data)}"},
                self.server.data[first : last + 1],
            )
        elif self.command == "PUT":
            self._answer(201, {})
        else:
            self._answer(204, {})

    do_HEAD = do_GET = do_PUT = do_DELETE = _any


@pytest.fixture
def remotes() -> Iterator[list[Remote]]:
    started: list[tuple[Remote, threading.Thread]] = []

    def make(host: str = "127.0.0.1", port: int = 0, **kw: Any) -> Remote:
        server = Remote((host, port), **kw)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        started.append((server, thread))
        return server

    holder: list[Any] = [make]
    try:
        yield holder
    finally:
        for server, thread in started:
            server.shutdown()
            server.server_close()
            thread.join(5)


def new_remote(remotes: list[Any], **kw: Any) -> Remote:
    made: Remote = remotes[0](**kw)
    return made


def url(remote: Remote, path: str = "x.bin") -> str:
    host, port = remote.server_address[:2]
    return f"http://{host}:{port}/{path}"


def serve(root: Path, **kw: Any) -> ServerHandle:
    root.mkdir(exist_ok=True)
    store = tokens.parse(f"{RW} read,write\n{RO} read\n{WO} write\n")
    return start_server(root, tokens=store, quiet=True, marker_interval=0.2, **kw)


def copy_raw(server: ServerHandle, path: str, headers: dict[str, str]) -> tuple[int, str]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("COPY", path, headers={"Credential": "none", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def final_line(body: str) -> str:
    return [line for line in body.splitlines() if line.strip()][-1]


# --- who may ask for a copy ------------------------------------------------------------


def test_copy_is_never_anonymous(tmp_path: Path, remotes: list[Any]) -> None:
    """With --anonymous-read a COPY without a token was served: a push sent HEAD, PUT and
    DELETE to any URL, a pull fetched any URL into the tree."""
    remote = new_remote(remotes)
    with serve(tmp_path / "root", anonymous_read=True, tpc_allow=["127.0.0.1"]) as server:
        (server.root / "x.bin").write_bytes(DATA)
        status, body = copy_raw(server, "/x.bin", {"Destination": url(remote, "y.bin")})
        assert status == 401, body
        status, body = copy_raw(server, "/p.bin", {"Source": url(remote)})
        assert status == 401, body
    assert remote.connections == 0 and not (tmp_path / "root" / "p.bin").exists()


def test_copy_needs_the_local_sides_scope(tmp_path: Path, remotes: list[Any]) -> None:
    remote = new_remote(remotes)
    with serve(tmp_path / "root", tpc_allow=["127.0.0.1"]) as server:
        (server.root / "x.bin").write_bytes(DATA)
        # push reads locally: read scope; a write-only token is refused
        status, _ = copy_raw(
            server, "/x.bin", {"Authorization": f"Bearer {WO}", "Destination": url(remote, "y.bin")}
        )
        assert status == 403
        # pull writes locally: write scope; a read-only token is refused
        status, _ = copy_raw(
            server, "/p.bin", {"Authorization": f"Bearer {RO}", "Source": url(remote)}
        )
        assert status == 403
        assert remote.connections == 0
        res = request_copy(
            server.url + "x.bin", destination=url(remote, "y.bin"), token=RO, timeout=20
        )
        assert res.ok, res.final
        res = request_copy(server.url + "p.bin", source=url(remote), token=RW, timeout=20)
        assert res.ok, res.final
        assert (server.root / "p.bin").read_bytes() == DATA


# --- where a copy may go ---------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "127.0.0.1",
        "127.8.9.10",
        "[::1]",
        "localhost",
        "0.0.0.0",
        "[::]",
        "10.1.2.3",
        "192.168.1.1",
        "172.16.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "[fe80::1]",
        "[fd00::1]",
        "[::ffff:127.0.0.1]",
        "224.0.0.1",
        "2130706433",
        "0x7f000001",
        "127.1",
        "017700000001",
    ],
)
def test_special_addresses_are_refused_unless_listed(
    tmp_path: Path, remotes: list[Any], target: str
) -> None:
    remote = new_remote(remotes)
    port = remote.server_address[1]
    with serve(tmp_path / "root") as server:
        (server.root / "x.bin").write_bytes(DATA)
        for header, path in (("Source", "/p.bin"), ("Destination", "/x.bin")):
            status, body = copy_raw(
                server,
                path,
                {"Authorization": f"Bearer {RW}", header: f"http://{target}:{port}/x.bin"},
            )
            assert status == 403 and "--tpc-allow" in body, (status, body)
            assert str(tmp_path) not in body
    assert remote.connections == 0 and not (tmp_path / "root" / "p.bin").exists()


def test_allow_list_entries(tmp_path: Path, remotes: list[Any]) -> None:
    remote = new_remote(remotes)
    port = remote.server_address[1]
    for allow, ok in (
        (["127.0.0.1"], True),
        ([f"127.0.0.1:{port}"], True),
        ([f"127.0.0.1:{port + 1 if port < 65535 else 1}"], False),
        (["127.0.0.0/8"], True),
        (["10.0.0.0/8"], False),
        (["localhost"], False),
        (["[::1]"], False),
    ):
        with serve(tmp_path / "root", tpc_allow=allow) as server:
            status, body = copy_raw(
                server, "/p.bin", {"Authorization": f"Bearer {RW}", "Source": url(remote)}
            )
            assert (status == 202) is ok, (allow, status, body)
            if ok:
                assert final_line(body) == "success: Created", (allow, body)
    # a listed name is allowed whatever it resolves to
    with serve(tmp_path / "root", tpc_allow=["LOCALHOST."]) as server:
        res = request_copy(
            server.url + "q.bin", source=f"http://localhost:{port}/x.bin", token=RW, timeout=20
        )
        assert res.ok, res.final


@pytest.mark.parametrize(
    "value",
    ["", "a b", "10.0.0.0/33", "host:0", "host:99999", "[::1", "[::1]x", "ho$t", "1.2.3.4:80:90"],
)
def test_bad_allow_entries_are_one_error(tmp_path: Path, value: str) -> None:
    from dtnkit.errors import BadInput

    with pytest.raises(BadInput, match="--tpc-allow"):
        serve(tmp_path / "root", tpc_allow=[value])


def test_redirects_are_checked_again(tmp_path: Path, remotes: list[Any]) -> None:
    """A listed remote redirecting to an address that is not listed: that one is never
    contacted."""
    hidden = new_remote(remotes)
    door = new_remote(remotes, redirect=f"http://127.0.0.1:{hidden.server_address[1]}/")
    with serve(tmp_path / "root", tpc_allow=[f"127.0.0.1:{door.server_address[1]}"]) as server:
        (server.root / "x.bin").write_bytes(DATA)
        for header, path in (("Source", "/p.bin"), ("Destination", "/x.bin")):
            status, body = copy_raw(
                server, path, {"Authorization": f"Bearer {RW}", header: url(door)}
            )
            assert status == 202 and final_line(body).startswith("failure:"), body
            assert str(tmp_path) not in body
    assert door.connections >= 2 and hidden.connections == 0
    assert not (tmp_path / "root" / "p.bin").exists()


def test_a_name_is_resolved_once_and_the_checked_address_is_used(
    tmp_path: Path, remotes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name first resolves to the listed 127.0.0.1, then to 127.0.0.2
    (not listed). Every connection of the copy goes to the address that was checked."""
    # two blocks of the pull's 8 MiB: two streams, so two connections that each resolve
    big = DATA * (8 * 2**20 // len(DATA) + 1)
    good = new_remote(remotes, data=big)
    port = good.server_address[1]
    try:
        evil = new_remote(remotes, host="127.0.0.2", port=port, data=b"E" * len(big))
    except OSError:
        pytest.skip("cannot bind 127.0.0.2 on the same port")
    real = socket.getaddrinfo
    answers = ["127.0.0.1"]

    def rebinding(host: Any, *args: Any, **kw: Any) -> Any:
        if host == "rebind.invalid":
            address = answers.pop() if answers else "127.0.0.2"
            return real(address, *args, **kw)
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with serve(tmp_path / "root", tpc_allow=["127.0.0.1"]) as server:
        res = request_copy(
            server.url + "p.bin",
            source=f"http://rebind.invalid:{port}/x.bin",
            token=RW,
            timeout=20,
            streams=2,
        )
        assert res.ok, res.final
        assert (server.root / "p.bin").read_bytes() == big
    assert evil.connections == 0 and good.connections >= 2


# --- what is forwarded -----------------------------------------------------------------


def test_only_documented_transfer_headers_are_forwarded(tmp_path: Path, remotes: list[Any]) -> None:
    remote = new_remote(remotes)
    with serve(tmp_path / "root", tpc_allow=["127.0.0.1"]) as server:
        (server.root / "x.bin").write_bytes(DATA)
        for name in ("Cookie", "X-Forwarded-For", "Proxy-Authorization", "Host", "Origin"):
            status, body = copy_raw(
                server,
                "/x.bin",
                {
                    "Authorization": f"Bearer {RO}",
                    "Destination": url(remote, "y.bin"),
                    f"TransferHeader{name}": "session=stolen",
                },
            )
            assert status == 400 and "Authorization" in body, (name, status, body)
        assert remote.connections == 0
        res = request_copy(
            server.url + "x.bin",
            destination=url(remote, "y.bin"),
            token=RO,
            transfer_headers={"Authorization": "Bearer remote-token", "ArchiveMetadata": "tape=1"},
            timeout=20,
        )
        assert res.ok, res.final
    sent = [h for _m, _p, h in remote.seen]
    assert sent and all(h.get("Authorization") == "Bearer remote-token" for h in sent)
    assert all("Cookie" not in h for h in sent)


# --- what a failure says -----------------------------------------------------------------


def test_failure_lines_do_not_tell_open_from_closed_ports(
    tmp_path: Path, remotes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a remote that is allowed but not listed (here 127.0.0.2 stands for a public
    address), a closed port, an HTTP error and a missing digest give the same line."""
    real = ta.is_public
    monkeypatch.setattr(ta, "is_public", lambda a: str(a) == "127.0.0.2" or real(a))
    try:
        answering = new_remote(remotes, host="127.0.0.2", status=404)
        plain = new_remote(remotes, host="127.0.0.2")
    except OSError:
        pytest.skip("cannot bind 127.0.0.2")
    probe = socket.socket()
    probe.bind(("127.0.0.2", 0))
    closed = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    cases = [(f"http://127.0.0.2:{closed}/x.bin", h, {}) for h in ("Source", "Destination")]
    cases += [(url(answering), h, {}) for h in ("Source", "Destination")]
    cases += [(url(plain), "Source", {"Want-Digest": "md5"})]  # offers adler32 only
    lines = set()
    with serve(tmp_path / "root") as server:
        (server.root / "x.bin").write_bytes(DATA)
        for source, header, extra in cases:
            path = "/p.bin" if header == "Source" else "/x.bin"
            status, body = copy_raw(
                server, path, {"Authorization": f"Bearer {RW}", header: source, **extra}
            )
            assert status == 202, body
            lines.add(final_line(body).replace(path, "PATH"))
    assert len(lines) == 1, lines
    assert lines.pop().startswith("failure: COPY PATH: ")


def test_listed_remotes_get_the_reason(tmp_path: Path, remotes: list[Any]) -> None:
    answering = new_remote(remotes, status=404)
    with serve(tmp_path / "root", tpc_allow=["127.0.0.1"]) as server:
        res = request_copy(server.url + "p.bin", source=url(answering), token=RW, timeout=20)
    assert not res.ok and "404" in res.final


def test_failure_lines_hold_no_server_paths(tmp_path: Path, remotes: list[Any]) -> None:
    """A push refused with 412 said 'checksum mismatch for /abs/server/root/x.bin -> ...'."""
    refusing = new_remote(remotes, status=412)
    with serve(tmp_path / "root", tpc_allow=["127.0.0.1"]) as server:
        (server.root / "x.bin").write_bytes(DATA)
        res = request_copy(
            server.url + "x.bin", destination=url(refusing, "y.bin"), token=RO, timeout=20
        )
        assert not res.ok
        assert str(server.root) not in res.final and str(tmp_path) not in res.final
        assert "/x.bin" in res.final, res.final


@pytest.mark.parametrize(
    "argv",
    [
        ["--tpc-allow", "10.0.0.0/33"],
        ["--tpc-allow", "a b"],
        ["--session-bytes-per-token", "lots"],
        ["--range-digest-max", "-1"],
    ],
)
def test_bad_serve_flags_are_one_error_line(
    tmp_path: Path, environment: Any, argv: list[str]
) -> None:
    from tests.conftest import taken

    from dtnkit.cli.main import main

    (tmp_path / "root").mkdir()
    rc = main(
        ["serve", "--root", str(tmp_path / "root"), "--anonymous-read", "--port", "0", *argv],
        environment,
    )
    err = taken(environment.stderr)
    assert rc == 9, err
    assert err.count("\n") == 1 and err.startswith("dtnkit: error:") and "Traceback" not in err
