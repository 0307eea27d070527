"""Habits of the people who use gfal-copy and xrdcp, over real sockets against in-process
``dtnkit serve`` instances on 127.0.0.1: ``dav://``/``davs://`` URLs, ``root://`` refused
with a hint, no overwrite of an existing destination without ``-f``, ``-K``, ``--format
json``, rates in bit/s and digests in hex."""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.transfer import files, tokens
from dtnkit.transfer.client.copy import copy
from dtnkit.transfer.client.errors import DestinationExists, TransferError
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.client.session import Url, is_url
from dtnkit.transfer.client.tpc import TpcError, TpcResult, request_copy, third_party_copy
from dtnkit.transfer.client.tpc import source_size as tpc_total
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.units import format_rate

TOKEN = "habits-rw"
SIZE = 3 * 65536 + 777


def payload(size: int = SIZE, seed: int = 11) -> bytes:
    return random.Random(seed).randbytes(size)


def _serve(root: Path) -> ServerHandle:
    root.mkdir(exist_ok=True)
    return start_server(
        root,
        host="127.0.0.1",
        port=0,
        quiet=True,
        marker_interval=0.2,
        tokens=tokens.parse(f"{TOKEN} read,write\n"),
        tpc_allow=("127.0.0.1",),
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerHandle]:
    handle = _serve(tmp_path / "srv")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ServerHandle, ServerHandle]]:
    a = _serve(tmp_path / "a")
    try:
        b = _serve(tmp_path / "b")
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def dav(handle: ServerHandle, path: str = "") -> str:
    """The server's URL as gfal users write it: dav:// for plain HTTP."""
    assert handle.url.startswith("http://")
    return "dav://" + handle.url[len("http://") :] + path


def cp(environment: Environment, *argv: str) -> tuple[int, str, str]:
    code = main(["cp", *argv, "--token", TOKEN, "--block-size", "65536"], environment)
    return code, taken(environment.stdout), taken(environment.stderr)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dtnkit: error: ") and "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------------------- URL schemes


def test_dav_and_davs_urls_are_http_and_https() -> None:
    assert Url.parse("davs://dtn.example:1094/store/f") == Url.parse(
        "https://dtn.example:1094/store/f"
    )
    assert Url.parse("dav://dtn.example/data/f?authz=x") == Url.parse(
        "http://dtn.example:80/data/f?authz=x"
    )
    assert Url.parse("DAVS://dtn.example/f").scheme == "https"
    assert is_url("davs://dtn.example/f") and is_url("dav://dtn.example/f")


@pytest.mark.parametrize(
    "url", ["root://eos.example//eos/f", "xroot://eos.example:1094//f", "roots://eos.example//f"]
)
def test_root_urls_are_refused_with_a_hint(url: str) -> None:
    assert is_url(url)  # a URL, so never taken for a local path
    with pytest.raises(BadInput) as caught:
        Url.parse(url)
    text = caught.value.render()
    assert "davs://" in text and "xrdcp" in text


def test_cp_root_url_is_one_line_and_writes_nothing(
    tmp_path: Path, environment: Environment
) -> None:
    src = tmp_path / "f"
    src.write_bytes(b"x")
    code, out, err = cp(environment, str(src), "root://eos.example//eos/f")
    assert code == ExitStatus.BAD_INPUT and out == ""
    line = one_error_line(err)
    assert "root://" in line and "davs://eos.example:1094/eos/f" in line and "xrdcp" in line
    code, _out, err = cp(environment, "root://eos.example//eos/f", str(tmp_path / "g"))
    assert code == ExitStatus.BAD_INPUT
    one_error_line(err)
    assert not (tmp_path / "g").exists()


def test_cp_dav_download_upload_and_tree(
    served: ServerHandle, tmp_path: Path, environment: Environment
) -> None:
    data = payload()
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    code, _out, err = cp(environment, str(src), dav(served, "up.bin"), "--streams", "2")
    assert code == 0, err
    assert (served.root / "up.bin").read_bytes() == data
    code, _out, err = cp(
        environment, dav(served, "up.bin"), str(tmp_path / "down.bin"), "--streams", "2"
    )
    assert code == 0, err
    assert (tmp_path / "down.bin").read_bytes() == data
    (served.root / "tree" / "sub").mkdir(parents=True)
    (served.root / "tree" / "sub" / "leaf").write_bytes(data[:1000])
    code, _out, err = cp(environment, "-r", dav(served, "tree"), str(tmp_path / "copy"))
    assert code == 0, err
    assert (tmp_path / "copy" / "sub" / "leaf").read_bytes() == data[:1000]


def test_cp_tpc_with_dav_urls(
    pair: tuple[ServerHandle, ServerHandle], environment: Environment
) -> None:
    a, b = pair
    data = payload()
    (a.root / "x").write_bytes(data)
    for mode, name in (("pull", "pulled"), ("push", "pushed")):
        code, _out, err = cp(
            environment, "--tpc", mode, "--remote-token", TOKEN, dav(a, "x"), dav(b, name)
        )
        assert code == 0, err
        assert (b.root / name).read_bytes() == data


# --------------------------------------------------------------------------- server: PUT
# conditions, checked again at the commit (a file that appears while the body arrives)


def _conn(handle: ServerHandle) -> http.client.HTTPConnection:
    port = int(handle.url.rsplit(":", 1)[1].strip("/"))
    return http.client.HTTPConnection("127.0.0.1", port, timeout=20)


def in_flight_max() -> int:
    """Bytes the kernel may hold between a sender and a receiver that has read nothing (both
    socket buffers at their largest)."""

    def top(key: str) -> int:
        return int(Path(f"/proc/sys/net/ipv4/{key}").read_text().split()[2])

    return top("tcp_rmem") + top("tcp_wmem")


def put_with_interlude(
    handle: ServerHandle,
    name: str,
    body: bytes,
    headers: dict[str, str],
    interlude: Callable[[], None],
) -> tuple[int, bytes]:
    """PUT a body of more than the socket buffers hold, then *body*; *interlude* runs in
    between, when the send of the first part has returned: the server is then reading the
    body (its checks before the body are done) and cannot commit before the rest."""
    first = in_flight_max() + 2**20
    conn = _conn(handle)
    try:
        conn.putrequest("PUT", "/" + name, skip_accept_encoding=True)
        for key, value in {
            "Authorization": f"Bearer {TOKEN}",
            "Content-Length": str(first + len(body)),
            **headers,
        }.items():
            conn.putheader(key, value)
        conn.endheaders()
        conn.send(bytes(first))
        interlude()
        conn.send(body)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def put(handle: ServerHandle, name: str, body: bytes, headers: dict[str, str]) -> int:
    status, _r = _session_request(handle, "PUT", name, headers, body)
    return status


def head_etag(handle: ServerHandle, name: str) -> str:
    conn = _conn(handle)
    try:
        conn.request("HEAD", "/" + name, headers={"Authorization": f"Bearer {TOKEN}"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200
        tag = r.getheader("ETag")
        assert tag
        return tag
    finally:
        conn.close()


def test_put_if_none_match_star_is_checked_at_the_commit(served: ServerHandle) -> None:
    target = served.root / "late"
    status, body = put_with_interlude(
        served,
        "late",
        payload(),
        {"If-None-Match": "*"},
        lambda: target.write_bytes(b"another writer"),
    )
    assert status == 412, body
    assert target.read_bytes() == b"another writer"
    assert [p.name for p in served.root.iterdir()] == ["late"]  # no part file left


def test_put_if_match(served: ServerHandle) -> None:
    target = served.root / "f"
    target.write_bytes(b"version one")
    tag = head_etag(served, "f")
    # another tag, and the right one as a weak tag (never matches a strong comparison)
    for value in ('"0-0-0"', f"W/{tag}"):
        assert put(served, "f", b"v2", {"If-Match": value}) == 412, value
    assert target.read_bytes() == b"version one"
    assert put(served, "f", b"version two", {"If-Match": f'"nope", {tag}'}) == 204
    assert target.read_bytes() == b"version two"
    # If-Match on a file that does not exist: 412, nothing created; malformed: 400
    assert put(served, "g", b"x", {"If-Match": "*"}) == 412
    assert put(served, "g", b"x", {"If-Match": "no quotes"}) == 400
    assert put(served, "g", b"x", {"If-None-Match": tag}) == 201
    assert put(served, "f", b"x", {"If-None-Match": f'"a", W/{head_etag(served, "f")}'}) == 412
    assert (served.root / "g").read_bytes() == b"x"
    assert target.read_bytes() == b"version two"


def test_put_if_match_is_checked_at_the_commit(served: ServerHandle) -> None:
    target = served.root / "f"
    target.write_bytes(b"version one")
    tag = head_etag(served, "f")

    def other_writer() -> None:
        target.write_bytes(b"version one, changed meanwhile")

    status, _body = put_with_interlude(served, "f", payload(), {"If-Match": tag}, other_writer)
    assert status == 412
    assert target.read_bytes() == b"version one, changed meanwhile"
    assert [p.name for p in served.root.iterdir()] == ["f"]


def _session_request(
    handle: ServerHandle, method: str, name: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, http.client.HTTPResponse]:
    conn = _conn(handle)
    try:
        conn.request(
            method, "/" + name, body=body, headers={"Authorization": f"Bearer {TOKEN}", **headers}
        )
        r = conn.getresponse()
        r.read()
        return r.status, r
    finally:
        conn.close()


def test_session_commit_if_none_match_star_is_atomic(served: ServerHandle) -> None:
    data = payload(1000)
    status, r = _session_request(
        served,
        "POST",
        "s",
        {"Dtnkit-Upload": "start", "Upload-Length": "1000", "If-None-Match": "*"},
    )
    assert status == 201
    ident = r.getheader("Dtnkit-Upload-Id") or ""
    status, _r = _session_request(
        served, "PUT", "s", {"Dtnkit-Upload-Id": ident, "Content-Range": "bytes 0-999/1000"}, data
    )
    assert status == 204
    (served.root / "s").write_bytes(b"another writer")
    status, _r = _session_request(
        served,
        "POST",
        "s",
        {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident, "If-None-Match": "*"},
    )
    assert status == 412
    assert (served.root / "s").read_bytes() == b"another writer"
    assert [p.name for p in served.root.iterdir()] == ["s"]
    # a session start for an existing file with If-None-Match: * is refused at once
    status, _r = _session_request(
        served,
        "POST",
        "s",
        {"Dtnkit-Upload": "start", "Upload-Length": "1000", "If-None-Match": "*"},
    )
    assert status == 412


# --------------------------------------------------------------------------- no overwrite
# without -f, as xrdcp and gfal-copy


CASES = ["download", "upload", "upload-session", "relay", "relay-session", "tpc-pull", "tpc-push"]


def _case(case: str, a: ServerHandle, b: ServerHandle, tmp_path: Path) -> tuple[list[str], Path]:
    """The cp arguments of *case* and the destination file they write."""
    local = tmp_path / "local.bin"
    streams = ["--streams", "2"] if case.endswith("session") else ["--streams", "1"]
    if case == "download":
        return [dav(a, "src.bin"), str(local)], local
    if case.startswith("upload"):
        local.write_bytes(payload())
        return [str(local), a.url + "dst.bin", *streams], a.root / "dst.bin"
    if case.startswith("relay"):
        return [a.url + "src.bin", b.url + "dst.bin", *streams], b.root / "dst.bin"
    mode = case.split("-")[1]
    return [
        "--tpc",
        mode,
        "--remote-token",
        TOKEN,
        a.url + "src.bin",
        b.url + "dst.bin",
    ], b.root / "dst.bin"


@pytest.mark.parametrize("case", CASES)
def test_an_existing_destination_is_kept_without_force(
    case: str, pair: tuple[ServerHandle, ServerHandle], tmp_path: Path, environment: Environment
) -> None:
    a, b = pair
    (a.root / "src.bin").write_bytes(payload())
    argv, dst = _case(case, a, b, tmp_path)
    dst.write_bytes(b"precious")
    code, out, err = cp(environment, *argv)
    assert code == ExitStatus.REFUSED and out == ""
    line = one_error_line(err)
    assert "exists" in line and "--force" in line
    assert dst.read_bytes() == b"precious"
    assert not [p for p in dst.parent.iterdir() if "dtnkit-part" in p.name]
    for force in ("-f", "--force"):
        dst.write_bytes(b"precious")
        code, _out, err = cp(environment, *argv, force)
        assert code == 0, err
        assert dst.read_bytes() == payload()


def test_a_destination_that_appears_during_a_download_is_kept(
    served: ServerHandle, tmp_path: Path
) -> None:
    (served.root / "src.bin").write_bytes(payload())
    dst = tmp_path / "dst.bin"

    def other_writer(_n: int) -> None:
        if not dst.exists():
            dst.write_bytes(b"another writer")

    options = CopyRequest(token=TOKEN, block_size=65536, streams=2, overwrite=False)
    with pytest.raises(DestinationExists):
        copy(served.url + "src.bin", str(dst), options, progress=other_writer)
    assert dst.read_bytes() == b"another writer"
    assert [p.name for p in tmp_path.iterdir()] == ["dst.bin", "srv"]


@pytest.mark.parametrize("streams", [1, 2])
def test_a_destination_that_appears_during_an_upload_is_kept(
    streams: int, served: ServerHandle, tmp_path: Path
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(payload())
    dst = served.root / "dst.bin"

    def other_writer(_n: int) -> None:
        if not dst.exists():
            dst.write_bytes(b"another writer")

    options = CopyRequest(
        token=TOKEN, block_size=65536, streams=streams, overwrite=False, backoff=0.01
    )
    with pytest.raises(DestinationExists):
        copy(str(src), served.url + "dst.bin", options, progress=other_writer)
    assert dst.read_bytes() == b"another writer"
    assert [p.name for p in served.root.iterdir()] == ["dst.bin"]


# --------------------------------------------------------------------------- output habits


@pytest.mark.parametrize(
    ("bits", "shown"),
    [
        (0, "0.00 bit/s"),
        (941e6, "941 Mbit/s"),
        (9.41e9, "9.41 Gbit/s"),
        (23.46e9, "23.5 Gbit/s"),
        (112.4e6, "112 Mbit/s"),
        (999.7e6, "1.00 Gbit/s"),
        (5.5e3, "5.50 kbit/s"),
        (2.5e15, "2500 Tbit/s"),
    ],
)
def test_rates_read_with_iperf3s_digits_in_the_docs_units(bits: float, shown: str) -> None:
    """iperf3's three significant digits, in the one rate vocabulary (Gbit/s, not
    iperf3's Gbits/sec)."""
    assert format_rate(bits) == shown


@pytest.mark.parametrize(
    ("algorithm", "expected"),
    [
        ("md5", lambda d: hashlib.md5(d).hexdigest()),
        ("sha256", lambda d: hashlib.sha256(d).hexdigest()),
        ("adler32", lambda d: f"{zlib.adler32(d):08x}"),
    ],
)
def test_k_format_json_and_hex_digests(
    algorithm: str,
    expected: Callable[[bytes], str],
    served: ServerHandle,
    tmp_path: Path,
    environment: Environment,
) -> None:
    data = payload()
    src = tmp_path / "f"
    src.write_bytes(data)
    code, out, err = cp(
        environment, str(src), served.url + "f", "-K", algorithm, "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["checksum"] == algorithm and doc["digest"] == expected(data)  # as md5sum
    code, out, err = cp(
        environment, served.url + "f", str(tmp_path / "g"), "-K", algorithm, "--json"
    )  # the old spelling still works
    assert code == 0, err
    assert json.loads(out)["digest"] == expected(data)
    code, out, err = cp(environment, served.url + "f", str(tmp_path / "h"), "-K", algorithm)
    assert code == 0 and out == ""
    assert f"{algorithm} {expected(data)}" in err
    assert re.search(r"\(\d[\d.]* [kMGT]?bit/s\)", err), err


def test_tpc_json_has_a_hex_digest_and_a_rate(
    pair: tuple[ServerHandle, ServerHandle], environment: Environment
) -> None:
    a, b = pair
    data = payload()
    (a.root / "x").write_bytes(data)
    code, out, err = cp(
        environment,
        "--tpc",
        "pull",
        "--remote-token",
        TOKEN,
        "-K",
        "md5",
        a.url + "x",
        b.url + "y",
        "--format",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["digest"] == hashlib.md5(data).hexdigest()
    code, out, err = cp(
        environment, "--tpc", "pull", "--remote-token", TOKEN, "-K", "md5", a.url + "x", b.url + "z"
    )
    assert code == 0 and out == ""
    assert hashlib.md5(data).hexdigest() in err and "bit/s" in err


def test_tpc_progress_knows_the_total_size(served: ServerHandle) -> None:
    a = served
    (a.root / "x").write_bytes(payload())
    for mode, token, remote in (("pull", "wrong", TOKEN), ("push", TOKEN, "wrong")):
        # the source's own token: the remote one for a pull, the client's for a push
        assert (
            tpc_total(
                mode, a.url + "x", token=token, remote_token=remote, ca_file=None, insecure=False
            )
            == SIZE
        )
    assert (
        tpc_total(
            "pull", a.url + "missing", token=TOKEN, remote_token=TOKEN, ca_file=None, insecure=False
        )
        is None
    )


def test_serve_format_json(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    root.mkdir()
    (root / "f").write_bytes(b"hello")
    exe = Path(sys.executable).parent / "dtnkit"
    proc = subprocess.Popen(
        [
            str(exe),
            "serve",
            "--root",
            str(root),
            "--port",
            "0",
            "--anonymous-read",
            "--quiet",
            "--format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())
        assert doc["root"] == str(root) and doc["url"].startswith("http://127.0.0.1:")
        with urllib.request.urlopen(doc["url"] + "f", timeout=10) as r:
            assert r.read() == b"hello"
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err


# --------------------------------------------------------------------------- COPY Overwrite: F
# with peers that hold the copy at a chosen moment (deterministic, no sleeps)


class Peer(BaseHTTPRequestHandler):
    """A source (GET waits for ``gate``) or a destination (PUT answers 412, as after another
    writer's commit) of a third-party copy; it records the methods it was sent."""

    data = b""
    gate: threading.Event
    reached: threading.Event
    seen: list[str]
    exists: bool = False

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self.seen.append("HEAD")
        if self.path.endswith("/dst") and not self.exists:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.data)))
        self.send_header("ETag", '"peer-1"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Digest", f"adler32={zlib.adler32(self.data):08x}")
        self.end_headers()

    def do_GET(self) -> None:
        self.seen.append("GET")
        self.reached.set()
        assert self.gate.wait(30)
        if "Range" not in self.headers:  # the whole file (a one-stream pull's first GET)
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.data)))
            self.send_header("ETag", '"peer-1"')
            self.end_headers()
            self.wfile.write(self.data)
            return
        first, last = (int(v) for v in self.headers["Range"].split("=")[1].split("-"))
        body = self.data[first : last + 1]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(self.data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:
        self.seen.append("PUT " + ("If-None-Match: " + self.headers.get("If-None-Match", "")))
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).exists = True  # another writer committed first
        self.send_response(412)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.seen.append("DELETE")
        self.send_response(204)
        self.end_headers()


@pytest.fixture
def peer() -> Iterator[tuple[str, type[Peer]]]:
    handler = type(
        "OnePeer",
        (Peer,),
        {
            "data": payload(),
            "gate": threading.Event(),
            "reached": threading.Event(),
            "seen": [],
            "exists": False,
        },
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        handler.gate.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_copy_pull_overwrite_f_keeps_a_file_that_appears_meanwhile(
    served: ServerHandle, peer: tuple[str, type[Peer]]
) -> None:
    url, handler = peer
    target = served.root / "y"
    result: list[object] = []

    def copy_it() -> None:
        try:
            result.append(
                request_copy(
                    served.url + "y", source=url + "/x", token=TOKEN, timeout=20, overwrite=False
                )
            )
        except BaseException as exc:
            result.append(exc)

    t = threading.Thread(target=copy_it)
    t.start()
    assert handler.reached.wait(20)
    target.write_bytes(b"another writer")
    handler.gate.set()
    t.join(30)
    done = result[0]
    assert isinstance(done, TpcResult) and not done.ok, done
    assert "exists" in done.final
    assert target.read_bytes() == b"another writer"
    assert [p.name for p in served.root.iterdir()] == ["y"]


def test_copy_push_overwrite_f_never_deletes_what_another_writer_made(
    served: ServerHandle, peer: tuple[str, type[Peer]]
) -> None:
    url, handler = peer
    (served.root / "x").write_bytes(payload())
    done = request_copy(
        served.url + "x", destination=url + "/dst", token=TOKEN, timeout=20, overwrite=False
    )
    assert not done.ok and "exists" in done.final, done.final
    assert "PUT If-None-Match: *" in handler.seen and "DELETE" not in handler.seen


def test_resuming_a_kept_part_file_is_not_an_overwrite(tmp_path: Path) -> None:
    """An interrupted download keeps its part file; the rerun without -f resumes it (the
    destination does not exist), while an existing destination is still refused and the
    kept part file left for a later rerun."""
    root = tmp_path / "srv"
    handle = _serve(root)
    data = payload(40 * 4096)
    (root / "r.bin").write_bytes(data)
    dst = tmp_path / "r.bin"
    seen = [0]
    lock = threading.Lock()

    def stop_half_way(n: int) -> None:
        with lock:
            seen[0] += n
            if seen[0] >= len(data) // 2 > seen[0] - n:
                handle.stop()
                # the rest may already sit in the socket buffers (one GET per stream):
                # the copy fails here, as after a transport failure
                raise TransferError("GET r.bin", "the server stopped half-way")

    def options(**kw: object) -> CopyRequest:
        base: dict[str, object] = {
            "token": TOKEN,
            "block_size": 4096,
            "streams": 2,
            "retries": 1,
            "backoff": 0.01,
            "stall_timeout": 5.0,
            "overwrite": False,
        }
        return CopyRequest(**{**base, **kw})  # type: ignore[arg-type]

    with pytest.raises(TransferError):
        copy(handle.url + "r.bin", str(dst), options(), progress=stop_half_way)
    handle = start_server(
        root,
        host="127.0.0.1",
        port=handle.port,
        quiet=True,
        tokens=tokens.parse(f"{TOKEN} read,write\n"),
    )
    try:
        kept = sorted(p.name for p in tmp_path.iterdir() if "dtnkit-part" in p.name)
        assert len(kept) == 2  # the part file and its journal
        dst.write_bytes(b"precious")
        with pytest.raises(DestinationExists):
            copy(handle.url + "r.bin", str(dst), options())
        assert dst.read_bytes() == b"precious"
        assert sorted(p.name for p in tmp_path.iterdir() if "dtnkit-part" in p.name) == kept
        dst.unlink()
        summary = copy(handle.url + "r.bin", str(dst), options())
        assert dst.read_bytes() == data and summary.files[0].resumed_blocks > 0
    finally:
        handle.stop()


@pytest.mark.parametrize("kernel", [True, False])
def test_rename_noreplace(kernel: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not kernel:  # a C library or filesystem without renameat2: the hard-link way
        monkeypatch.setattr(files, "_renameat2", None)
    src, dst = tmp_path / "part", tmp_path / "dst"
    src.write_bytes(b"new")
    dst.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        files.rename_noreplace(src, dst)
    dst.unlink()
    dst.symlink_to(tmp_path / "nowhere")  # a dangling symlink is there too
    with pytest.raises(FileExistsError):
        files.rename_noreplace(src, dst)
    assert src.read_bytes() == b"new" and dst.is_symlink()
    dst.unlink()
    files.rename_noreplace(src, dst)
    assert dst.read_bytes() == b"new" and not src.exists()


def test_cp_tpc_never_deletes_a_file_that_appeared_during_the_copy(
    served: ServerHandle, peer: tuple[str, type[Peer]]
) -> None:
    """The clean-up of a failed copy (XRootD leaves partial files) must not remove the file
    that made an Overwrite: F copy fail."""
    url, handler = peer
    target = served.root / "y"
    result: list[object] = []

    def copy_it() -> None:
        try:
            result.append(
                third_party_copy(
                    "pull",
                    url + "/x",
                    served.url + "y",
                    token=TOKEN,
                    remote_token=None,
                    streams=1,
                    checksum="adler32",
                    timeout=20,
                    ca_file=None,
                    insecure=False,
                    overwrite=False,
                )
            )
        except BaseException as exc:
            result.append(exc)

    t = threading.Thread(target=copy_it)
    t.start()
    assert handler.reached.wait(20)
    target.write_bytes(b"another writer")
    handler.gate.set()
    t.join(30)
    assert isinstance(result[0], TpcError) and "exists" in result[0].render(), result
    assert target.read_bytes() == b"another writer"
