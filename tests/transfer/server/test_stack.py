"""The connection layer of `dtnkit serve` (issue 11 item 4): a connection cap, a deadline for
the whole request head, an idle keep-alive timeout, accept back-off when out of descriptors,
and a graceful drain on SIGTERM.  Real sockets, real server processes (stopped by PID)."""

from __future__ import annotations

import http.client
import os
import queue
import select
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from tests.support.rawhttp import LockedLog, exchange
from tests.support.xrootd import Pki

from dtnkit.transfer.server import ServerHandle, start_server

PAYLOAD = os.urandom(4096)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    (r / "f").write_bytes(PAYLOAD)
    return r


def get(port: int, c: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    c = c or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/f")
    r = c.getresponse()
    return r.status, r.read()


def wait_for(predicate: object, timeout: float = 10.0) -> None:
    """Poll a condition the server reaches by itself (no sleep as synchronisation)."""
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the server did not get there in time"
        time.sleep(0.01)


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Read until the server closes or *seconds* pass; (closed, bytes)."""
    deadline = time.monotonic() + seconds
    data = b""
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], deadline - time.monotonic())
        if not readable:
            break
        try:
            chunk = sock.recv(65536)
        except OSError:
            return True, data
        if not chunk:
            return True, data
        data += chunk
    return False, data


def test_the_cap_refuses_more_connections_fast_while_a_get_is_served(root: Path) -> None:
    log = LockedLog()
    with start_server(
        root, anonymous_read=True, max_connections=10, log=log, max_connections_per_client=20
    ) as h:  # all from one address, which may hold more than the whole server: the cap binds
        kept = http.client.HTTPConnection("127.0.0.1", h.port, timeout=10)
        assert get(h.port, kept) == (200, PAYLOAD)
        idle = [socket.create_connection(("127.0.0.1", h.port)) for _ in range(9)]
        try:
            wait_for(lambda: h.connections == 10)
            t0 = time.monotonic()
            answer = exchange(h.port, b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n", deadline=5)
            assert answer.closed and answer.statuses == [503]
            assert answer.seconds < 1.0
            assert get(h.port, kept) == (200, PAYLOAD)  # the connection in use is still served
            assert time.monotonic() - t0 < 2.0
            for s in idle[:5]:
                s.close()
            wait_for(lambda: h.connections == 5)
            assert get(h.port) == (200, PAYLOAD)
        finally:
            for s in idle:
                s.close()
            kept.close()
    assert log.text().count("connections open (the cap)") == 1


def test_the_cap_is_derived_from_the_descriptor_limit() -> None:
    import resource

    from dtnkit.transfer.server import conn

    assert conn.derive_cap(1024, 10) == 1024 - 10 - 256
    assert conn.derive_cap(1_048_576, 10) == 1_048_576 - 10 - (3 * conn.WORKERS + 64)
    assert conn.derive_cap(20, 10) == 8
    soft = conn.raise_fd_limit()
    assert soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert soft == resource.getrlimit(resource.RLIMIT_NOFILE)[1] or soft == 2**20


def test_a_trickled_head_is_cut_at_the_head_deadline(root: Path) -> None:
    with start_server(root, anonymous_read=True, head_timeout=1.0, quiet=True) as h:
        head = b"GET /f HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100 + b"\r\n\r\n"
        with socket.create_connection(("127.0.0.1", h.port)) as s:
            t0 = time.monotonic()
            closed, data = False, b""
            for byte in head:  # one byte per 0.1 s: the head would take 13 s
                try:
                    s.send(bytes([byte]))
                except OSError:  # the server closed between two bytes: read its answer
                    closed, more = True, closed_within(s, 0.5)[1]
                    data += more
                    break
                # the answer and the close may fall into two windows: keep what came before
                closed, more = closed_within(s, 0.1)
                data += more
                if closed:
                    break
            seconds = time.monotonic() - t0
        assert closed and data.startswith(b"HTTP/1.1 408 ")
        assert 0.9 < seconds < 2.5  # the deadline (1 s) plus the sweep, never per byte
        assert get(h.port) == (200, PAYLOAD)


def test_a_silent_connection_and_an_idle_kept_alive_one_are_closed(root: Path) -> None:
    with start_server(
        root, anonymous_read=True, head_timeout=1.0, idle_timeout=1.5, quiet=True
    ) as h:
        with socket.create_connection(("127.0.0.1", h.port)) as silent:
            t0 = time.monotonic()
            assert closed_within(silent, 5.0) == (True, b"")
            assert 0.9 < time.monotonic() - t0 < 2.5
        kept = socket.create_connection(("127.0.0.1", h.port))
        kept.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
        t0 = time.monotonic()
        closed, data = closed_within(kept, 6.0)
        assert closed and data.startswith(b"HTTP/1.1 200 ") and data.endswith(PAYLOAD)
        assert 1.4 < time.monotonic() - t0 < 3.0
        kept.close()


SERVER = textwrap.dedent("""
    import os, resource, sys, time
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
    from dtnkit.transfer.server import start_server
    h = start_server(sys.argv[1], anonymous_read=True, log=sys.stderr)
    hog = []
    try:
        while True:
            hog.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    for fd in hog[-2:]:  # two descriptors left: accept soon fails with EMFILE
        os.close(fd)
    del hog[-2:]
    print("ready", h.port, flush=True)
    sys.stdin.readline()
    for fd in hog:
        os.close(fd)
    print("released", flush=True)
    sys.stdin.readline()
    h.stop()
""")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_backs_off_with_one_line_and_recovers(root: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    flood: list[socket.socket] = []
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        assert line.startswith("ready"), proc.stderr.read() if proc.stderr else line
        port = int(line.split()[1])
        for _ in range(100):  # the kernel completes them; the server cannot accept them
            flood.append(socket.create_connection(("127.0.0.1", port)))
        before = cpu_seconds(proc.pid)
        t0 = time.monotonic()
        time.sleep(3.0)  # measuring CPU over a span of time, not synchronising
        cpu = cpu_seconds(proc.pid) - before
        wall = time.monotonic() - t0
        print(f"server CPU while out of descriptors: {cpu:.3f} s in {wall:.1f} s")
        assert cpu < 0.05 * wall, f"{cpu:.2f} s CPU in {wall:.1f} s: the accept loop spins"
        for s in flood:
            s.close()
        proc.stdin.write("release\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "released"
        # It accepts (and drops) the closed flood first, at the cap for a moment: retry.
        wait_for(lambda: get(port) == (200, PAYLOAD), timeout=5.0)
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        _out, err = proc.communicate(timeout=20)
        assert err.count("cannot accept connections") == 1, err
        assert "Too many open files" in err and "Traceback" not in err
    finally:
        for s in flood:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_sigterm_drains_a_running_download_and_refuses_new_connections(root: Path) -> None:
    big = root / "big"
    size = 64 * 2**20
    with big.open("wb") as f:
        f.truncate(size)
    code = "from dtnkit.cli.serve import serve; serve()"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "--root",
            str(root),
            "--port",
            "0",
            "--anonymous-read",
            "--drain-timeout",
            "30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(t) for t in proc.stdout or []], daemon=True).start()
    try:
        url = lines.get(timeout=20).split("listening on ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/big")
        r = c.getresponse()
        assert r.status == 200
        got = len(r.read(2**20))
        proc.send_signal(signal.SIGTERM)

        def refused() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except ConnectionRefusedError:
                return True
            return False

        wait_for(refused)
        while chunk := r.read(2**20):  # the download goes on to its end
            got += len(chunk)
        assert got == size
        c.close()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert f'"GET /big HTTP/1.1" 200 {size}' in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_stop_closes_idle_kept_alive_connections(root: Path) -> None:
    h: ServerHandle = start_server(root, anonymous_read=True, quiet=True)
    c = http.client.HTTPConnection("127.0.0.1", h.port, timeout=10)
    assert get(h.port, c) == (200, PAYLOAD)
    h.stop(drain=5.0)
    with pytest.raises((ConnectionError, http.client.HTTPException)):  # idle: closed
        get(h.port, c)


def test_tls_keep_alive_pipelining_and_a_stalled_handshake(root: Path, pki: Pki) -> None:
    with start_server(
        root, anonymous_read=True, tls=(pki.cert, pki.key), head_timeout=1.0, quiet=True
    ) as h:
        ctx = ssl.create_default_context(cafile=str(pki.ca_file))
        c = http.client.HTTPSConnection("127.0.0.1", h.port, timeout=10, context=ctx)
        for _ in range(3):  # the same TLS connection, parked between requests
            assert get(h.port, c) == (200, PAYLOAD)
        c.close()
        with socket.create_connection(("127.0.0.1", h.port)) as raw:
            raw.sendall(b"\x16\x03\x01\x00")  # the start of a ClientHello, then nothing
            t0 = time.monotonic()
            closed, _data = closed_within(raw, 5.0)
            assert closed and 0.9 < time.monotonic() - t0 < 2.5
        with socket.create_connection(("127.0.0.1", h.port)) as raw:
            tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            two = b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n" * 2
            tls.sendall(two)  # pipelined: both answered in order
            data = b""
            while data.count(PAYLOAD) < 2:
                chunk = tls.recv(65536)
                assert chunk
                data += chunk
            assert data.count(b"HTTP/1.1 200 ") == 2
            tls.close()
