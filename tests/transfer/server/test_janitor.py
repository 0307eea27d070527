"""Part files left by killed uploads: the janitor removes every kind at start and
periodically, never one in use; a killed client's PUT leaves nothing."""

from __future__ import annotations

import http.client
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support import fsrace

from dtnkit.transfer import files, paths, tokens
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.server.janitor import sweep

TOKEN = "janitor-rw"
MiB = 2**20

# A client that sends a PUT's head and 2 MiB of a 64 MiB body, says so, and waits to be
# killed (or, with "stall", to be told nothing: it just holds the connection).
_CLIENT = r"""
import socket, sys, time
port, path = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
s.sendall((f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer janitor-rw\r\n"
           f"Content-Length: {64 << 20}\r\n\r\n").encode())
s.sendall(b"x" * (2 << 20))  # the server writes a body in 1 MiB pieces: one is whole
print("sent", flush=True)
sys.stdin.read()
"""


def parts(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if paths.PART_MARK in p.name)


def wait_for(what: str, cond: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / "d").mkdir(parents=True)
    return r


def serve(root: Path, max_age: float) -> ServerHandle:
    return start_server(
        root, tokens=tokens.parse(f"{TOKEN} read,write\n"), quiet=True, upload_expiry=max_age
    )


@pytest.fixture
def client_of() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)


def start_client(procs: list[subprocess.Popen[str]], port: int, path: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, str(port), path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == "sent\n"
    return proc


def test_live_part_is_kept_and_a_killed_client_leaves_nothing(
    root: Path, client_of: list[subprocess.Popen[str]]
) -> None:
    with serve(root, 0.05) as h:  # sweeps every 0.05 s, removes parts older than 0.05 s
        janitor = h._server.janitor
        proc = start_client(client_of, h.port, "/d/big")
        wait_for("the part file", lambda: len(parts(root)) == 1)
        part = parts(root)[0]
        wait_for("1 MiB in the part file", lambda: part.stat().st_size >= MiB)
        age(part, 3600)  # as if the upload had stalled for an hour
        seen = janitor.sweeps
        wait_for("two sweeps", lambda: janitor.sweeps >= seen + 2)
        assert part.exists()  # in use: kept
        proc.send_signal(signal.SIGKILL)
        wait_for("the killed PUT's part file to go", lambda: not parts(root))
        assert not (root / "d" / "big").exists()


def test_parts_of_a_killed_server_are_removed_at_start(
    tmp_path: Path, root: Path, client_of: list[subprocess.Popen[str]]
) -> None:
    tok = tmp_path / "tokens"
    tok.write_text(f"{TOKEN} read,write\n")
    code = "from dtnkit.cli.serve import serve; serve()"
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "--root",
            str(root),
            "--port",
            "0",
            "--tokens",
            str(tok),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    client_of.append(server)  # type: ignore[arg-type]
    assert server.stdout is not None
    line = server.stdout.readline()
    port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1].strip("/"))
    for i in range(3):
        start_client(client_of, port, f"/d/f{i}")
    wait_for("three part files", lambda: len(parts(root)) == 3)
    server.kill()  # the server dies mid-PUT: its part files stay
    server.wait(10)
    left = parts(root)
    assert len(left) == 3
    young = root / "d" / ".young.dtnkit-part-u0123456789abcdef"  # another kind, recent
    young.write_bytes(b"y")
    pull = root / "d" / ".p.dtnkit-part-0011223344556677"  # a COPY pull's, and the client's
    pull.write_bytes(b"p")
    inner = root / "d" / "..p.dtnkit-part-0011223344556677.dtnkit-part"
    inner.write_bytes(b"q")
    for p in [*left, pull, inner]:
        age(p, 7200)
    (root / "d" / "keep").write_bytes(b"k")
    age(root / "d" / "keep", 7200)  # not a part file: never touched
    with serve(root, 3600) as h:
        janitor = h._server.janitor
        wait_for("the first sweep", lambda: janitor.sweeps >= 1)
        assert janitor.removed == 5
    assert parts(root) == [young]
    assert (root / "d" / "keep").read_bytes() == b"k"


def test_sweep_does_not_follow_symlinks(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / ".v.dtnkit-part-0123"
    victim.write_bytes(b"v")
    age(victim, 7200)
    (root / "d" / "link").symlink_to(outside)
    (root / ".linkfile.dtnkit-part-1").symlink_to(victim)
    assert sweep(root.resolve(), 60) == 0
    assert victim.exists() and (root / ".linkfile.dtnkit-part-1").is_symlink()


def test_live_names_of_a_copy_pull_are_kept(root: Path) -> None:
    d = root / "d"
    tmp = ".x.dtnkit-part-00aa11bb22cc33dd"  # a pull's temporary name, and the client's files
    names = [tmp, f".{tmp}.dtnkit-part", f".{tmp}.dtnkit-part.json", ".y.dtnkit-part-ff"]
    for name in names:
        (d / name).write_bytes(b"z")
        age(d / name, 7200)
    directory = os.stat(d)
    files.LIVE.add_name(directory, tmp)
    try:
        assert sweep(root.resolve(), 60) == 1  # only the other one
    finally:
        files.LIVE.discard_name(directory, tmp)
    assert sorted(p.name for p in parts(root)) == sorted(names[:3])
    assert sweep(root.resolve(), 60) == 3


def test_symlinks_inside_the_tree_are_not_followed(root: Path) -> None:
    (root / "d" / "f").write_bytes(b"data")
    (root / "inlink").symlink_to("d")
    (root / "d" / "flink").symlink_to("f")
    with serve(root, 3600) as h:
        for method, path in (
            ("GET", "/inlink/f"),
            ("GET", "/d/flink"),
            ("PUT", "/inlink/new"),
            ("MKCOL", "/inlink/new"),
            ("PROPFIND", "/d/flink"),
        ):
            conn = http.client.HTTPConnection(h.host, h.port, timeout=10)
            conn.request(
                method,
                path,
                body=b"x" if method == "PUT" else None,
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            r = conn.getresponse()
            body = r.read()
            conn.close()
            assert r.status == 400 and b"symbolic link" in body, (method, path, r.status)
        conn = http.client.HTTPConnection(h.host, h.port, timeout=10)
        conn.request("GET", "/d/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert conn.getresponse().read() == b"f\n"  # links are not listed
        conn.close()
    assert sorted(os.listdir(root / "d")) == ["f", "flink"]


def test_periodic_sweep_finds_a_part_left_while_running(root: Path) -> None:
    with serve(root, 0.05) as h:
        janitor = h._server.janitor
        part = root.resolve() / "d" / ".leak.dtnkit-part-abcdef"
        fd = files.create_part(part, root.resolve())  # as a request that died without cleanup
        files.release(fd)
        os.close(fd)
        wait_for("the leaked part file to go", lambda: not part.exists())
        assert janitor.removed == 1


@pytest.mark.skipif(platform.machine() != "x86_64", reason="renameat2 as syscall 316")
def test_sweep_under_directory_swaps() -> None:
    base = Path(tempfile.mkdtemp(prefix="dk11fs-"))
    lay = fsrace.Layout.make(base)
    try:
        names = [f".p{i}.dtnkit-part-u{i:016x}" for i in range(20)]
        old = time.time() - 7200

        def plant(dirfd: int) -> None:
            for name in names:
                fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=dirfd)
                os.utime(fd, (old, old))
                os.close(fd)

        plant(lay.outside_fd)
        before = lay.outside_names()
        sweeps = removed = 0
        with fsrace.swapping(lay) as swapper:
            while sweeps < 200 or swapper.swaps() < 10_000:
                plant(lay.inside_fd)
                removed += sweep(lay.root.resolve(), 60)
                sweeps += 1
        assert lay.outside_names() == before  # nothing removed outside
        assert removed > 0  # and the sweeps that met the real directory did their work
    finally:
        lay.close()
        shutil.rmtree(base)
