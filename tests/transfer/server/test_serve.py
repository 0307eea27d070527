"""`dtnkit serve` over real sockets on 127.0.0.1: ranges, PUT commit rules, WebDAV, digests,
tokens, hostile paths, TLS, sendfile, the CLI.  No mocks; every server is stopped."""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import queue
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support import polling

from dtnkit.errors import BadInput
from dtnkit.transfer import paths, tokens
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.wire.ranges import RangeNotSatisfiable, parse_range

READ, WRITE, BOTH = "tok-read-only", "tok-write-only", "tok-read-write"
DATA = bytes(range(256)) * 40 + b"tail"  # 10244 bytes
N = len(DATA)


# --------------------------------------------------------------------------- helpers


def store() -> tokens.TokenStore:
    return tokens.parse(
        f"# test tokens\n{READ} read\n{WRITE} write # note\n\n  {BOTH}  read,write\n"
    )


def call(
    h: ServerHandle,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    token: str | None = BOTH,
    conn: http.client.HTTPConnection | None = None,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    c = conn or http.client.HTTPConnection(h.host, h.port, timeout=20)
    hdrs = dict(headers or {})
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    try:
        c.request(method, path, body=body, headers=hdrs)
        r = c.getresponse()
        return r.status, r.headers, r.read()
    finally:
        if conn is None:
            c.close()


def no_part_files(directory: Path) -> bool:
    return not [p for p in directory.rglob("*") if paths.PART_MARK in p.name]


def tree(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(directory)): (
            p.read_bytes() if p.is_file() else b"",
            p.lstat().st_mtime_ns,
        )
        for p in sorted(directory.rglob("*"))
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / "dir" / "sub").mkdir(parents=True)
    (r / "data.bin").write_bytes(DATA)
    (r / "empty").write_bytes(b"")
    (r / "dir" / "f.txt").write_bytes(b"in dir\n")
    return r


@pytest.fixture
def server(root: Path) -> Iterator[ServerHandle]:
    with start_server(root, tokens=store(), quiet=True) as h:
        yield h


# --------------------------------------------------------------------------- paths.resolve


@pytest.mark.parametrize(
    "url",
    [
        "/../etc/passwd",
        "/a/../../etc",
        "/%2e%2e/etc",
        "/%2E%2E/",
        "/.%2e/x",
        "/%2e%2e%2fetc",
        "/a/..",
        "/a%00b",
        "/%00",
        "/x%0a",
        "/%zz",
        "/50%",
        "etc/passwd",
        "",
        "http://x/",
        "/" + "a" * 256,
        "/d/" + "é" * 128,
    ],
)
def test_resolve_refuses_hostile_paths(tmp_path: Path, url: str) -> None:
    with pytest.raises(BadInput):
        paths.resolve(tmp_path, url)


def test_resolve_length_limits(tmp_path: Path) -> None:
    assert paths.resolve(tmp_path, "/" + "a" * 255).name == "a" * 255
    long = "/" + "/".join(["d" * 200] * 21)  # 4221 bytes
    with pytest.raises(paths.PathTooLong):
        paths.resolve(tmp_path, long)
    with pytest.raises(paths.PathTooLong):
        paths.resolve(tmp_path, "/" + "%41" * 4096)  # counted after decoding


def test_resolve_normalises_inside_root(tmp_path: Path) -> None:
    real = tmp_path.resolve()
    assert paths.resolve(tmp_path, "/") == real
    assert paths.resolve(tmp_path, "//etc/passwd") == real / "etc" / "passwd"
    assert paths.resolve(tmp_path, "/./a//b/./") == real / "a" / "b"
    assert paths.resolve(tmp_path, "/%252e%252e/x") == real / "%2e%2e" / "x"  # decoded once
    assert paths.resolve(tmp_path, "/a%2Fb") == real / "a" / "b"
    assert paths.resolve(tmp_path, "/caf%C3%A9") == real / "café"
    odd = paths.resolve(tmp_path, "/%FF")  # not UTF-8: kept as the raw byte
    assert os.fsencode(odd.name) == b"\xff"
    assert paths.relative_url(real, odd) == "/%FF"
    assert paths.relative_url(real, real / "a b" / "c?#") == "/a%20b/c%3F%23"


def test_resolve_symlinks(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "in").mkdir(parents=True)
    outside.mkdir()
    (root / "out").symlink_to(outside)
    (root / "outfile").symlink_to(outside / "secret")  # dangling, outside
    (root / "abs").symlink_to("/")
    (root / "inlink").symlink_to("in")
    (root / "loop").symlink_to("loop")
    for url in ("/out", "/out/secret", "/outfile", "/abs/etc/passwd", "/loop/x", "/inlink/../.."):
        with pytest.raises(BadInput):
            paths.resolve(root, url)
    # A link that stays inside is followed for the check, but the link itself is returned.
    assert paths.resolve(root, "/inlink/x") == root.resolve() / "inlink" / "x"


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("value", "size", "span"),
    [
        ("bytes=0-0", 10, (0, 0)),
        ("bytes=9-9", 10, (9, 9)),
        ("bytes=-3", 10, (7, 9)),
        ("bytes=-30", 10, (0, 9)),
        ("bytes=4-", 10, (4, 9)),
        ("bytes=2-99", 10, (2, 9)),
        (" Bytes = 1-2 ", 10, (1, 2)),
    ],
)
def test_parse_range(value: str, size: int, span: tuple[int, int]) -> None:
    assert parse_range(value, size) == span


@pytest.mark.parametrize("value", ["bytes=10-", "bytes=10-20", "bytes=-0"])
def test_parse_range_unsatisfiable(value: str) -> None:
    with pytest.raises(RangeNotSatisfiable):
        parse_range(value, 10)


@pytest.mark.parametrize(
    "value",
    [
        "bytes=5-2",
        "bytes=abc",
        "bytes=",
        "bytes=-",
        "items=0-1",
        "0-1",
        "bytes=0-1,3-4",
        "bytes=1-2-3",
        "bytes=²-3",
        "bytes=+1-2",
    ],
)
def test_parse_range_malformed(value: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_range(value, 10)
    assert not isinstance(info.value, RangeNotSatisfiable)


def test_token_file(tmp_path: Path) -> None:
    s = store()
    assert s.scopes(READ) == frozenset({"read"}) and s.scopes(BOTH) == frozenset({"read", "write"})
    assert s.scopes("nope") is None and s.scopes(READ + "x") is None and s.scopes("") is None
    for bad in ("tok", "tok read extra", "tok admin", "tok read,,write"):
        with pytest.raises(BadInput) as info:
            tokens.parse(f"# c\n{bad}\n")
        assert "line 2" in info.value.what and "tok" not in info.value.why
    assert tokens.bearer("Bearer  abc ") == "abc" and tokens.bearer("bearer x") == "x"
    assert tokens.bearer("Basic abc") is None and tokens.bearer("Bearer") is None
    f = tmp_path / "t"
    f.write_text(f"{READ} read\n")
    assert tokens.load(f).scopes(READ) == frozenset({"read"})
    with pytest.raises(BadInput):
        tokens.load(tmp_path / "missing")


def test_start_server_refuses_no_access(root: Path) -> None:
    with pytest.raises(BadInput):
        start_server(root)
    with pytest.raises(BadInput):
        start_server(root / "data.bin", anonymous_read=True)


# --------------------------------------------------------------------------- GET / HEAD


def test_get_and_head(server: ServerHandle) -> None:
    status, hdrs, body = call(server, "GET", "/data.bin")
    assert status == 200 and body == DATA
    assert hdrs["Content-Length"] == str(N) and hdrs["Accept-Ranges"] == "bytes"
    assert hdrs["ETag"].startswith('"') and hdrs["Last-Modified"].endswith("GMT")
    assert "Digest" not in hdrs
    status, hhdrs, body = call(server, "HEAD", "/data.bin")
    assert status == 200 and body == b"" and hhdrs["Content-Length"] == str(N)
    assert hhdrs["ETag"] == hdrs["ETag"]
    status, _, body = call(server, "GET", "/empty")
    assert status == 200 and body == b""
    status, _, body = call(server, "GET", "/missing")
    assert status == 404 and body.startswith(b"/missing: not found")
    status, _, body = call(server, "GET", "/dir")
    assert status == 200 and body.decode().split() == ["f.txt", "sub/"]
    status, _, _ = call(server, "GET", "/data.bin", headers={"If-None-Match": hdrs["ETag"]})
    assert status == 304


@pytest.mark.parametrize(
    ("rng", "start", "end"),
    [
        ("bytes=0-0", 0, 0),
        (f"bytes={N - 1}-{N - 1}", N - 1, N - 1),
        ("bytes=-4", N - 4, N - 1),
        ("bytes=100-", 100, N - 1),
        ("bytes=10-99999999", 10, N - 1),
        (f"bytes=-{N * 2}", 0, N - 1),
    ],
)
def test_range(server: ServerHandle, rng: str, start: int, end: int) -> None:
    status, hdrs, body = call(server, "GET", "/data.bin", headers={"Range": rng})
    assert status == 206
    assert hdrs["Content-Range"] == f"bytes {start}-{end}/{N}"
    assert body == DATA[start : end + 1] and hdrs["Content-Length"] == str(end - start + 1)


def test_range_errors(server: ServerHandle) -> None:
    for rng in (f"bytes={N}-", f"bytes={N + 5}-{N + 9}", "bytes=-0"):
        status, hdrs, body = call(server, "GET", "/data.bin", headers={"Range": rng})
        assert status == 416 and hdrs["Content-Range"] == f"bytes */{N}", rng
        assert b"beyond" in body or b"selects nothing" in body
    status, _, _ = call(server, "GET", "/empty", headers={"Range": "bytes=0-"})
    assert status == 416
    for rng in ("bytes=5-2", "bytes=x-y", "pages=1-2", "bytes=0-1,4-5"):
        status, hdrs, body = call(server, "GET", "/data.bin", headers={"Range": rng})
        assert status == 400 and hdrs["Content-Type"].startswith("text/plain"), rng
        assert body.startswith(f"Range '{rng}': ".encode())
    # If-Range with another validator: the whole file, 200.
    status, _, body = call(
        server, "GET", "/data.bin", headers={"Range": "bytes=0-1", "If-Range": '"other"'}
    )
    assert status == 200 and body == DATA


def test_keep_alive_survives_errors(server: ServerHandle) -> None:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        for _ in range(3):
            assert call(server, "GET", "/missing", conn=conn)[0] == 404
            assert call(server, "GET", "/data.bin", conn=conn)[2] == DATA
            assert call(server, "GET", "/data.bin", headers={"Range": "bad"}, conn=conn)[0] == 400
            assert call(server, "PUT", "/dir/k", body=b"k", conn=conn)[0] in (201, 204)
    finally:
        conn.close()


# --------------------------------------------------------------------------- PUT


def test_put_round_trip(server: ServerHandle, root: Path) -> None:
    body = os.urandom(300_000)
    sha = base64.b64encode(hashlib.sha256(body).digest()).decode()
    headers = {
        "Digest": f"adler32={zlib.adler32(body):08x}",
        "Repr-Digest": f"sha-256=:{sha}:",
        "Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode(),
    }
    status, _, _ = call(server, "PUT", "/dir/new.bin", body=body, headers=headers)
    assert status == 201
    assert call(server, "GET", "/dir/new.bin")[2] == body
    status, _, _ = call(server, "PUT", "/dir/new.bin", body=b"second")
    assert status == 204 and (root / "dir" / "new.bin").read_bytes() == b"second"
    # Chunked transfer coding (no Content-Length).
    status, _, _ = call(server, "PUT", "/chunked", body=iter([b"abc", b"", b"def" * 1000]))  # type: ignore[arg-type]
    assert status == 201 and (root / "chunked").read_bytes() == b"abc" + b"def" * 1000
    assert no_part_files(root)


@pytest.mark.parametrize(
    "headers",
    [
        {"Digest": "adler32=00000001"},
        {"Digest": "md5=" + base64.b64encode(b"\0" * 16).decode()},
        {"Repr-Digest": "crc32c=:AAAAAA==:"},
        {"Content-MD5": base64.b64encode(b"\1" * 16).decode()},
        {"Digest": "sha-384=abc, adler32=1"},  # unknown algorithms skipped, known one checked
    ],
)
def test_put_wrong_digest_commits_nothing(
    server: ServerHandle, root: Path, headers: dict[str, str]
) -> None:
    status, _, body = call(server, "PUT", "/bad.bin", body=b"payload" * 1000, headers=headers)
    assert status == 412 and b"checksum mismatch" in body and b"expected" in body
    assert not (root / "bad.bin").exists() and no_part_files(root)
    status, _, _ = call(server, "PUT", "/data.bin", body=b"new", headers=headers)
    assert status == 412 and (root / "data.bin").read_bytes() == DATA and no_part_files(root)


def test_put_refusals(server: ServerHandle, root: Path) -> None:
    status, _, body = call(server, "PUT", "/nope/x", body=b"x")
    assert status == 409 and b"parent" in body
    status, _, body = call(
        server, "PUT", "/data.bin", body=b"x", headers={"Content-Range": "bytes 0-0/10"}
    )
    assert status == 501 and b"partial" in body and (root / "data.bin").read_bytes() == DATA
    status, _, _ = call(server, "PUT", "/dir", body=b"x")
    assert status == 405
    status, _, body = call(server, "PUT", "/x", body=b"x", headers={"Digest": "md5=!!"})
    assert status == 400 and not (root / "x").exists()
    status, _, _ = call(server, "PUT", "/data.bin", body=b"x", headers={"If-None-Match": "*"})
    assert status == 412 and (root / "data.bin").read_bytes() == DATA
    assert no_part_files(root)


def test_put_broken_off_commits_nothing(server: ServerHandle, root: Path) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(
            f"PUT /cut HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {BOTH}\r\n"
            "Content-Length: 100000\r\n\r\n".encode()
            + b"x" * 5000
        )
        # the server is receiving into its part file; only then break the body off (else
        # the check below could run before the part file even exists)
        deadline = time.monotonic() + 5
        while no_part_files(root) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not no_part_files(root)
    deadline = time.monotonic() + 5
    while not no_part_files(root) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert no_part_files(root) and not (root / "cut").exists()


def test_expect_continue_refused_before_body(server: ServerHandle, root: Path) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(
            b"PUT /e HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"
        )
        reply = b""
        while b"\r\n\r\n" not in reply and (piece := s.recv(4096)):
            reply += piece
    assert reply.startswith(b"HTTP/1.1 401 ") and b"WWW-Authenticate: Bearer" in reply
    assert not (root / "e").exists()


def test_expect_continue_then_mismatch(server: ServerHandle, root: Path) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(
            f"PUT /e HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {BOTH}\r\n"
            "Content-Length: 4\r\nDigest: adler32=00000001\r\n"
            "Expect: 100-continue\r\n\r\n".encode()
        )
        assert s.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(b"body")
        reply = b""
        while b"got" not in reply and (piece := s.recv(4096)):
            reply += piece
    assert reply.startswith(b"HTTP/1.1 412 ") and b"adler32 expected 00000001 got" in reply
    assert not (root / "e").exists() and no_part_files(root)


def test_unsupported_transfer_coding(server: ServerHandle, root: Path) -> None:
    status, _, body = call(
        server, "PUT", "/g", body=b"x", headers={"Transfer-Encoding": "gzip", "Content-Length": "1"}
    )
    assert status == 501 and b"only chunked" in body and not (root / "g").exists()


def test_ipv6_loopback(root: Path) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback (::1) on this host")
    with start_server(root, host="::1", anonymous_read=True, quiet=True) as h:
        assert h.url == f"http://[::1]:{h.port}/"
        assert call(h, "GET", "/data.bin", token=None)[2] == DATA


# --------------------------------------------------------------------------- WebDAV


def test_mkcol_delete(server: ServerHandle, root: Path) -> None:
    assert call(server, "MKCOL", "/newdir")[0] == 201 and (root / "newdir").is_dir()
    assert call(server, "MKCOL", "/newdir")[0] == 405
    assert call(server, "MKCOL", "/data.bin")[0] == 405
    assert call(server, "MKCOL", "/a/b")[0] == 409 and not (root / "a").exists()
    assert call(server, "DELETE", "/dir")[0] == 409 and (root / "dir" / "f.txt").exists()
    assert call(server, "DELETE", "/dir/f.txt")[0] == 204 and not (root / "dir/f.txt").exists()
    assert call(server, "DELETE", "/dir/sub")[0] == 204
    assert call(server, "DELETE", "/dir")[0] == 204 and not (root / "dir").exists()
    assert call(server, "DELETE", "/dir")[0] == 404
    assert call(server, "DELETE", "/")[0] == 403 and root.is_dir()


def _propfind(server: ServerHandle, path: str, depth: str) -> dict[str, dict[str, str | bool]]:
    status, hdrs, body = call(
        server,
        "PROPFIND",
        path,
        headers={"Depth": depth},
        body=b'<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>',
    )
    assert status == 207 and hdrs["Content-Type"].startswith("application/xml")
    out: dict[str, dict[str, str | bool]] = {}
    ns = {"D": "DAV:"}
    for resp in ET.fromstring(body).findall("D:response", ns):
        href = resp.findtext("D:href", namespaces=ns)
        prop = resp.find("D:propstat/D:prop", ns)
        assert href is not None and prop is not None
        out[href] = {
            "collection": prop.find("D:resourcetype/D:collection", ns) is not None,
            "length": prop.findtext("D:getcontentlength", default="", namespaces=ns),
            "modified": prop.findtext("D:getlastmodified", default="", namespaces=ns),
        }
    return out


def test_propfind(server: ServerHandle, root: Path) -> None:
    (root / ".x.dtnkit-part-0123").write_bytes(b"upload in progress")
    (root / "sp ace%").write_bytes(b"1")
    items = _propfind(server, "/", "1")
    assert sorted(items) == ["/", "/data.bin", "/dir/", "/empty", "/sp%20ace%25"]
    assert items["/"]["collection"] and items["/dir/"]["collection"]
    assert items["/data.bin"] == {
        "collection": False,
        "length": str(N),
        "modified": items["/data.bin"]["modified"],
    }
    assert str(items["/data.bin"]["modified"]).endswith("GMT")
    assert list(_propfind(server, "/data.bin", "0")) == ["/data.bin"]
    assert list(_propfind(server, "/dir", "0")) == ["/dir/"]
    assert sorted(_propfind(server, "/dir/", "1")) == ["/dir/", "/dir/f.txt", "/dir/sub/"]
    assert call(server, "PROPFIND", "/", headers={"Depth": "infinity"})[0] == 403
    assert call(server, "PROPFIND", "/missing", headers={"Depth": "0"})[0] == 404
    assert call(server, "GET", "/.x.dtnkit-part-0123")[0] == 403
    status, hdrs, _ = call(server, "OPTIONS", "/", token=None)
    assert status == 200 and "PROPFIND" in hdrs["Allow"] and hdrs["DAV"] == "1"


# --------------------------------------------------------------------------- digests


def _decode(name: str, value: str) -> bytes:
    if name in ("adler32", "crc32c"):
        return int(value, 16).to_bytes(4, "big")
    return base64.b64decode(value)


def _expected(name: str, data: bytes) -> bytes:
    if name == "adler32":
        return zlib.adler32(data).to_bytes(4, "big")
    if name == "crc32c":
        crc32c = pytest.importorskip("crc32c", reason="crc32c reference needs the crc32c package")
        return int(crc32c.crc32c(data)).to_bytes(4, "big")
    return hashlib.new(name.replace("-", ""), data).digest()


@pytest.mark.parametrize("name", ["adler32", "crc32c", "md5", "sha-256", "sha-512"])
def test_want_digest(server: ServerHandle, name: str) -> None:
    for method in ("HEAD", "GET"):
        status, hdrs, _ = call(
            server,
            method,
            "/data.bin",
            headers={"Want-Digest": f"{name.upper()};q=0.9, unixcksum;q=1"},
        )
        assert status == 200
        label, _, value = hdrs["Digest"].partition("=")
        assert label == name and _decode(name, value) == _expected(name, DATA)
    repr_name = "adler" if name == "adler32" else name
    status, hdrs, _ = call(
        server, "HEAD", "/data.bin", headers={"Want-Repr-Digest": f"{repr_name}=7, sha-384=9"}
    )
    label, _, value = hdrs["Repr-Digest"].partition("=")
    assert label == repr_name and value.startswith(":") and value.endswith(":")
    assert base64.b64decode(value.strip(":")) == _expected(name, DATA)
    assert "Digest" not in hdrs


@pytest.mark.parametrize("want", ["sha-384", "adler32;q=0", "UNIXcksum, sha", "md5;q=0, md5"])
def test_want_digest_nothing_acceptable(server: ServerHandle, want: str) -> None:
    status, hdrs, _ = call(server, "HEAD", "/data.bin", headers={"Want-Digest": want})
    assert status == 200 and "Digest" not in hdrs


def test_want_digest_preference_and_errors(server: ServerHandle) -> None:
    _, hdrs, _ = call(
        server, "HEAD", "/data.bin", headers={"Want-Digest": "crc32c;q=0.5, adler32;q=1"}
    )
    assert hdrs["Digest"].startswith("adler32=")  # q honoured (xrootd ignores it)
    _, hdrs, _ = call(
        server, "HEAD", "/data.bin", headers={"Want-Digest": "adler32;q=0, md5;q=0.1"}
    )
    assert hdrs["Digest"].startswith("md5=")
    status, _, body = call(server, "GET", "/data.bin", headers={"Want-Digest": "md5;q=7"})
    assert status == 400 and body.startswith(b"Want-Digest: ")
    status, _, _ = call(server, "GET", "/data.bin", headers={"Want-Repr-Digest": "md5"})
    assert status == 400


def test_checksum_cache_invalidation(server: ServerHandle, root: Path) -> None:
    f = root / "data.bin"

    def md5_header() -> bytes:
        return base64.b64decode(
            call(server, "HEAD", "/data.bin", headers={"Want-Digest": "md5"})[1]["Digest"][4:]
        )

    assert md5_header() == hashlib.md5(DATA).digest()
    read = server.counters["checksum_bytes"]
    assert md5_header() == hashlib.md5(DATA).digest()
    assert server.counters["checksum_bytes"] == read  # served from the cache
    changed = bytes(reversed(DATA))  # same size, same inode
    with open(f, "r+b") as out:
        out.write(changed)
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert md5_header() == hashlib.md5(changed).digest()
    f.unlink()  # a new inode (and size)
    f.write_bytes(b"new")
    assert md5_header() == hashlib.md5(b"new").digest()
    # A verified PUT fills the cache: no re-read for the HEAD that follows (dCache push).
    body = b"pushed" * 1000
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    assert call(server, "PUT", "/p", body=body, headers={"Content-MD5": md5})[0] == 201
    read = server.counters["checksum_bytes"]
    _, hdrs, _ = call(server, "HEAD", "/p", headers={"Want-Digest": "md5"})
    assert hdrs["Digest"] == f"md5={md5}" and server.counters["checksum_bytes"] == read


# --------------------------------------------------------------------------- tokens


def test_tokens(server: ServerHandle, root: Path) -> None:
    before = tree(root)
    status, hdrs, body = call(server, "GET", "/data.bin", token=None)
    assert status == 401 and hdrs["WWW-Authenticate"].startswith("Bearer")
    assert b"bearer token" in body
    status, hdrs, _ = call(server, "GET", "/data.bin", token="wrong")
    assert status == 401 and "invalid_token" in hdrs["WWW-Authenticate"]
    assert call(server, "GET", "/data.bin", token=READ)[0] == 200
    assert call(server, "PROPFIND", "/", token=READ, headers={"Depth": "0"})[0] == 207
    assert call(server, "GET", "/data.bin", token=WRITE)[0] == 403
    for method, path in (
        ("PUT", "/data.bin"),
        ("PUT", "/new"),
        ("DELETE", "/data.bin"),
        ("MKCOL", "/d2"),
        ("DELETE", "/empty"),
    ):
        status, _, body = call(server, method, path, token=READ, body=b"zz")
        assert status == 403 and b"write scope" in body, (method, path)
        assert call(server, method, path, token=None, body=b"zz")[0] == 401
    assert tree(root) == before


def test_anonymous_read(root: Path) -> None:
    with start_server(root, anonymous_read=True, quiet=True) as h:
        assert call(h, "GET", "/data.bin", token=None)[2] == DATA
        assert call(h, "PUT", "/x", body=b"x", token=None)[0] == 401
        assert call(h, "PUT", "/x", body=b"x", token=BOTH)[0] == 401  # no token file
        assert not (root / "x").exists()


# --------------------------------------------------------------------------- hostile paths


def test_hostile_paths(tmp_path: Path, root: Path, server: ServerHandle) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"TOP-SECRET-CONTENT")
    (root / "escape").symlink_to(outside)
    (root / "linkfile").symlink_to(outside / "secret")
    before = tree(outside)
    long_name = "/" + "n" * 300
    long_path = "/" + "/".join(["d" * 200] * 25)
    cases = [
        ("GET", "/../outside/secret", 400),
        ("GET", "/%2e%2e/outside/secret", 400),
        ("GET", "/%2E%2E%2Foutside%2Fsecret", 400),
        ("GET", "/.%2e/outside/secret", 400),
        ("GET", "/dir/../../outside/secret", 400),
        ("GET", "//etc/passwd", 404),
        ("GET", "/data.bin%00.txt", 400),
        ("GET", "/escape/secret", 400),
        ("GET", "/linkfile", 400),
        ("GET", long_name, 400),
        ("GET", long_path, 414),
        ("GET", "/%zz", 400),
        ("GET", "/%C3", 404),
        ("PUT", "/escape/new", 400),
        ("PUT", "/../outside/new", 400),
        ("PUT", "/linkfile", 400),
        ("PUT", "/%2e%2e/outside/secret", 400),
        ("PUT", long_name, 400),
        ("DELETE", "/escape/secret", 400),
        ("DELETE", "/linkfile", 400),
        ("DELETE", "/%2e%2e/outside/secret", 400),
        ("MKCOL", "/escape/newdir", 400),
        ("PROPFIND", "/escape/", 400),
        ("PROPFIND", "/../", 400),
    ]
    for method, path, expected in cases:
        status, _, body = call(
            server, method, path, body=b"overwritten" if method == "PUT" else None
        )
        assert status == expected, (method, path, status, body)
        assert b"TOP-SECRET" not in body and b"root:" not in body
    assert tree(outside) == before
    listed = _propfind(server, "/", "1")
    assert "/escape/" not in listed and "/linkfile" not in listed
    assert no_part_files(root)


# --------------------------------------------------------------------------- TLS, sendfile


def _self_signed(directory: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("TLS test needs the openssl command to make a throwaway certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    proc = subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {proc.stderr.strip()[:200]}")
    return cert, key


def test_tls(tmp_path: Path, root: Path) -> None:
    cert, key = _self_signed(tmp_path)
    big = os.urandom(3 * 2**20 + 17)
    (root / "big").write_bytes(big)
    client = ssl.create_default_context(cafile=str(cert))
    with start_server(root, tls=(cert, key), tokens=store(), quiet=True) as h:
        assert h.url.startswith("https://127.0.0.1:")
        conn = http.client.HTTPSConnection(h.host, h.port, context=client, timeout=20)
        try:
            assert call(h, "GET", "/big", conn=conn)[2] == big
            status, hdrs, body = call(h, "GET", "/big", headers={"Range": "bytes=-10"}, conn=conn)
            assert status == 206 and body == big[-10:]
            assert call(h, "PUT", "/up", body=b"over tls", conn=conn)[0] == 201
            _, hdrs, _ = call(h, "HEAD", "/up", headers={"Want-Digest": "adler32"}, conn=conn)
            assert hdrs["Digest"] == f"adler32={zlib.adler32(b'over tls'):08x}"
        finally:
            conn.close()
        assert (root / "up").read_bytes() == b"over tls"
        counters = h.counters
        assert counters["tls_body_bytes"] >= len(big) and counters["sendfile_bytes"] == 0
        # A plain-HTTP client gets no answer from a TLS port, and the server keeps going.
        with socket.create_connection((h.host, h.port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                reply = s.recv(100)
            except ConnectionResetError:
                reply = b""
            assert not reply.startswith(b"HTTP/")
        assert (
            call(
                h,
                "GET",
                "/up",
                conn=http.client.HTTPSConnection(h.host, h.port, context=client, timeout=20),
            )[0]
            == 200
        )


def test_sendfile_large_get(root: Path) -> None:
    size = 64 * 2**20
    block = os.urandom(2**20)
    digest = hashlib.sha256()
    with open(root / "large", "wb") as f:
        for i in range(64):
            piece = block[i:] + block[:i]
            f.write(piece)
            digest.update(piece)
    with start_server(root, anonymous_read=True, quiet=True) as h:
        conn = http.client.HTTPConnection(h.host, h.port, timeout=60)
        try:
            conn.request("GET", "/large")
            r = conn.getresponse()
            assert r.status == 200 and r.headers["Content-Length"] == str(size)
            got = hashlib.sha256()
            total = 0
            while chunk := r.read(4 * 2**20):
                got.update(chunk)
                total += len(chunk)
        finally:
            conn.close()
        assert total == size and got.digest() == digest.digest()
        # counted when sendfile() returns in the server's thread, which can be after the
        # client has read the last byte (the kernel's buffers held it)
        polling.until("sendfile counted", lambda: h.counters["sendfile_bytes"] == size, 30)


def test_stop_cuts_idle_connections(root: Path) -> None:
    h = start_server(root, anonymous_read=True, quiet=True)
    conn = http.client.HTTPConnection(h.host, h.port, timeout=10)
    try:
        assert call(h, "GET", "/data.bin", conn=conn, token=None)[0] == 200
        before = threading.active_count()
        t0 = time.monotonic()
        h.stop()
        assert time.monotonic() - t0 < 3
        assert threading.active_count() < before
        with pytest.raises(OSError):
            socket.create_connection((h.host, h.port), timeout=2).close()
    finally:
        conn.close()
        h.stop()


# --------------------------------------------------------------------------- CLI


def test_cli_serve(tmp_path: Path, root: Path) -> None:
    tok = tmp_path / "tokens"
    tok.write_text(f"{BOTH} read,write\n")
    code = "import sys; from dtnkit.cli.serve import serve; serve()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--root", str(root), "--port", "0", "--tokens", str(tok)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def reader() -> None:
        for text in proc.stdout or []:
            lines.put(text)

    threading.Thread(target=reader, daemon=True).start()
    try:
        line = lines.get(timeout=20)
        assert "listening on http://127.0.0.1:" in line
        url = line.split("listening on ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/data.bin", headers={"Authorization": f"Bearer {BOTH}"})
        r = c.getresponse()
        assert r.status == 200 and r.read() == DATA
        c.close()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 0
        assert '"GET /data.bin HTTP/1.1" 200 10244' in err and BOTH not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
