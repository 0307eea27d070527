"""``--streams auto``: the formula, the host's buffer limits, TCP_INFO's round-trip time on
real sockets, the CLI, and a real 50 ms lab path (root)."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.transfer import tokens
from dtnkit.transfer.client import autostreams as au
from dtnkit.transfer.client.policy import StreamPolicy
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url, tcp_rtt
from dtnkit.transfer.server import ServerHandle, start_server

MiB = 2**20
WRITE = "w11-rw"
UNTUNED = au.BufferLimits(
    tcp_rmem_max=32 * MiB, tcp_wmem_max=4 * MiB, rmem_max=4 * MiB, wmem_max=4 * MiB
)  # this machine's defaults


@pytest.mark.parametrize(
    ("rate", "rtt", "window", "want"),
    [
        (1e9, 0.050, 2 * MiB, 3),  # 6.25 MB in flight, 2 MiB a stream
        (1e9, 0.0503, 2 * MiB, 3),
        (1e9, 0.0517, 2 * MiB, 4),  # 6.46 MB: just over three windows
        (8 * 2 * MiB, 1.0, 2 * MiB, 1),  # exactly one window: no second stream
        (10e9, 0.00003, 2 * MiB, 1),  # loopback: far below one window
        (100e9, 0.1, 2 * MiB, 16),  # 596 windows: capped
        (2e9, 0.010, 16 * MiB, 1),
    ],
)
def test_streams_formula(rate: float, rtt: float, window: int, want: int) -> None:
    assert au.streams_for(rate, rtt, window) == want


def test_streams_formula_refuses_nonsense() -> None:
    for args in ((0.0, 0.05, MiB), (1e9, -1.0, MiB), (1e9, 0.05, 0), (float("nan"), 0.05, MiB)):
        with pytest.raises(ValueError):
            au.streams_for(*args)
    assert au.streams_for(1e12, 1.0, 1, cap=5) == 5


def test_window_is_the_smaller_share_of_the_buffers_and_rcvbuf_only_when_it_beats_autotuning() -> (
    None
):
    """A receiver's window is half its buffer, a sender's three quarters (au.SEND_SHARE)."""
    assert UNTUNED.receive_window == 16 * MiB and UNTUNED.send_window == 3 * MiB
    assert UNTUNED.window == 3 * MiB
    debian = au.BufferLimits(6 * MiB, 4 * MiB, 212992, 212992)  # Debian 12's defaults
    assert debian.receive_window == 3 * MiB and debian.send_window == 3 * MiB
    assert UNTUNED.rcvbuf_to_set() is None  # 4 MiB cap < 16 MiB autotuning reaches
    tuned = au.BufferLimits(
        tcp_rmem_max=256 * MiB, tcp_wmem_max=256 * MiB, rmem_max=256 * MiB, wmem_max=256 * MiB
    )
    assert tuned.rcvbuf_to_set() == 256 * MiB  # SO_RCVBUF's cap beats autotuning's half
    assert tuned.window == 192 * MiB  # the sender's three quarters of 256 MiB


def test_limits_parse_from_sysctl_text() -> None:
    got = au.parse_limits(
        "4096\t131072\t33554432\n", "4096 16384 4194304\n", "4194304\n", "212992\n"
    )
    assert got == au.BufferLimits(33554432, 4194304, 4194304, 212992)
    assert au.parse_limits(None, "4096 16384 4194304", "1", "1") is None
    assert au.parse_limits("4096 131072", "4096 16384 4194304", "1", "1") is None
    assert au.parse_limits("4096 131072 x", "4096 16384 4194304", "1", "1") is None
    assert au.parse_limits("4096 131072 0", "4096 16384 4194304", "1", "1") is None


def test_limits_are_read_through_the_host_seam(tmp_path: Path) -> None:
    for rel, text in (
        ("ipv4/tcp_rmem", "4096 131072 6291456\n"),
        ("ipv4/tcp_wmem", "4096 16384 4194304\n"),
        ("core/rmem_max", "212992\n"),
        ("core/wmem_max", "212992\n"),
    ):
        f = tmp_path / "proc/sys/net" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    (tmp_path / "cmd").mkdir()
    limits = au.host_limits(Host.from_tree(tmp_path))
    assert limits == au.BufferLimits(6291456, 4194304, 212992, 212992)
    assert limits.window == 3 * MiB
    (tmp_path / "proc/sys/net/core/rmem_max").unlink()
    assert au.host_limits(Host.from_tree(tmp_path)) is None


def test_decision_says_why() -> None:
    d = au.decide(0.0503, 1e9, "--rate", UNTUNED)
    assert d.streams == 2
    for part in ("2 streams", "1 Gbit/s (--rate)", "RTT 50.3 ms", "3/4 of tcp_wmem max 4194304"):
        assert part in d.reason
    assert d.as_dict()["rtt_ms"] == 50.3 and d.as_dict()["window_bytes"] == 3 * MiB
    assert d.brief == "2 streams: 1 Gbit/s x 50.3 ms / 3 MiB window"  # as docs/transfer.md
    assert "capped at 16" in au.decide(0.1, 100e9, "--rate", UNTUNED).reason


def test_a_link_rate_is_an_upper_bound_so_auto_stops_at_eight() -> None:
    """The link's speed (or an assumed rate) is not the path's: 16 streams leaving slow start
    together into a one-BDP queue lost to 8 on a 50 ms / 1 Gbit/s path behind 10 Gbit/s
    links.  A rate the user gives is the path's, so it keeps the full cap."""
    link = au.decide(0.05, 10e9, "link speed of eth0", UNTUNED)
    assert link.streams == au.UNKNOWN_PATH_CAP == 8
    assert "capped at 8" in link.reason and "give --rate for more" in link.reason
    assumed = au.decide(0.05, au.ASSUMED_RATE, "assumed; pass --rate", UNTUNED)
    assert assumed.streams == 8
    given = au.decide(0.05, 10e9, "--rate", UNTUNED)
    assert given.streams == au.CAP and "give --rate" not in given.reason
    # below the cap nothing changes: 1 Gbit/s x 50 ms over a 3 MiB window is 2 streams
    assert au.decide(0.05, 1e9, "link speed of eth0", UNTUNED).streams == 2
    assert au.decide(None, 1e9, "--rate", UNTUNED).streams == 1
    assert "could not be read" in au.decide(0.05, 1e9, "--rate", None).reason


def test_auto_decides_once_for_parallel_files() -> None:
    calls: list[int] = []

    def rtt() -> float:
        calls.append(1)
        return 0.05

    auto = StreamPolicy.auto(None, lambda: UNTUNED, lambda _a: (1e9, "link speed of eth9"))
    seen: list[au.StreamsDecision] = []
    threads = [
        threading.Thread(target=lambda: seen.append(auto.decide(rtt, lambda: "10.0.0.1")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(d) for d in seen}) == 1
    assert seen[0].streams == 2 and seen[0].rate_from == "link speed of eth9"
    unknown = StreamPolicy.auto(None, lambda: UNTUNED, lambda _a: None)
    assert unknown.decide(lambda: 0.05, lambda: None).rate_from.startswith("assumed")


def test_tcp_info_rtt_of_a_real_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        try:
            client.sendall(b"x" * 1000)
            assert peer.recv(1000)
            rtt = tcp_rtt(client)
            assert rtt is not None and 0 < rtt < 0.05  # loopback: microseconds, not 0
        finally:
            client.close()
            peer.close()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert tcp_rtt(udp) is None


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, Path]]:
    root = tmp_path / "srv"
    root.mkdir()
    (root / "f").write_bytes(b"z" * 300_000)
    handle = start_server(
        root,
        host="127.0.0.1",
        port=0,
        anonymous_read=True,
        quiet=True,
        tokens=tokens.parse(f"{WRITE} read,write\n"),
    )
    try:
        yield handle, root
    finally:
        handle.stop()


def test_cli_streams_auto_on_loopback(
    served: tuple[ServerHandle, Path], tmp_path: Path, environment: Environment
) -> None:
    handle, root = served
    dst = tmp_path / "got"
    code = main(
        ["cp", f"{handle.url}f", str(dst), "--streams", "auto", "--rate", "10G", "--json", "-v"],
        environment,
    )
    assert code == 0, taken(environment.stderr)
    doc = json.loads(taken(environment.stdout))
    auto = doc["streams_auto"]
    assert doc["streams"] == auto["streams"] == 1  # microseconds of RTT: one window is plenty
    assert auto["rate_bps"] == 10**10 and auto["rate_from"] == "--rate"
    assert 0 < auto["rtt_ms"] < 50
    err = taken(environment.stderr)
    assert err.startswith("dtnkit cp: --streams auto: 1 stream: rate 10 Gbit/s (--rate)")
    assert dst.read_bytes() == (root / "f").read_bytes()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--streams", "4", "--rate", "1g"], "--rate: only chooses the number of streams"),
        (["--streams", "auto", "--rate", "3furlongs"], "bad rate '3furlongs'"),
        (["--streams", "auto", "--rate", "nan"], "bad rate 'nan'"),
    ],
)
def test_cli_bad_rate_is_one_error_line(
    served: tuple[ServerHandle, Path],
    tmp_path: Path,
    environment: Environment,
    argv: list[str],
    says: str,
) -> None:
    handle, _root = served
    code = main(["cp", f"{handle.url}f", str(tmp_path / "got"), *argv], environment)
    assert code == ExitStatus.BAD_INPUT
    err = taken(environment.stderr)
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: ") and says in err
    assert not (tmp_path / "got").exists()


# --------------------------------------------------------------------------- a real lab path

LAB_TOOLS = [t for t in ("iptables", "curl") if shutil.which(t) is None]


@pytest.mark.serial
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(LAB_TOOLS), reason=f"needs {', '.join(LAB_TOOLS)}")
def test_auto_on_a_50ms_lab_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The RTT TCP_INFO gives on a 50 ms path is 50 ms (never less: the delay stage is never
    early; load only adds), the window comes from the namespace's own sysctls, and the
    streams are the formula's."""
    from dtnkit.lab import path as lab

    state = tmp_path / "lab"
    monkeypatch.setenv("DTNKIT_LAB_STATE", str(state))
    root = tmp_path / "srv"
    root.mkdir()
    (root / "f").write_bytes(secrets.token_bytes(4 * MiB))
    (tmp_path / "tokens").write_text("w11-tok read\n")
    with lab.path(f"w11{secrets.token_hex(3)}", state_root=state, rtt_ms=50, rate_bps=10**9) as p:
        server = p.dst.popen(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "serve",
                "--root",
                str(root),
                "--host",
                p.dst.address,
                "--port",
                "0",
                "--anonymous-read",
            ],
            stderr=subprocess.STDOUT,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            assert "listening on" in line, line
            url = line.split("listening on ", 1)[1].split()[0] + "f"
            res = p.src.run(
                [
                    sys.executable,
                    "-m",
                    "dtnkit",
                    "cp",
                    url,
                    str(tmp_path / "got"),
                    "--streams",
                    "auto",
                    "--rate",
                    "1gbit",
                    "--json",
                    "-v",
                ],
                check=False,
            )
            assert res.returncode == 0, res.stderr
            doc = json.loads(res.stdout)
            limits = au.host_limits(Host.live(p.src.netns))
        finally:
            server.terminate()
            server.wait(10)
    auto = doc["streams_auto"]
    assert 50.0 <= auto["rtt_ms"] < 75.0, auto
    assert limits is not None and auto["window_bytes"] == limits.window
    assert (
        doc["streams"]
        == auto["streams"]
        == au.streams_for(10**9, auto["rtt_ms"] / 1e3, limits.window)
    )
    assert auto["streams"] >= 2  # 6 MiB in flight does not fit one untuned window
    assert "--streams auto: " in res.stderr and "RTT 5" in res.stderr
    assert (tmp_path / "got").read_bytes() == (root / "f").read_bytes()


def test_so_rcvbuf_is_set_only_when_it_beats_autotuning(served: tuple[ServerHandle, Path]) -> None:
    """A host whose SO_RCVBUF cap (rmem_max) gives more than autotuning reaches gets it set
    before the handshake; an untuned host (cap 4 MiB < half of tcp_rmem's 32 MiB) keeps
    autotuning: SO_RCVBUF is never set blindly."""
    handle, _root = served
    url = Url.parse(f"{handle.url}f")
    small_autotune = au.BufferLimits(
        tcp_rmem_max=MiB, tcp_wmem_max=4 * MiB, rmem_max=2 * MiB, wmem_max=4 * MiB
    )
    for limits, want in ((small_autotune, 2 * MiB), (UNTUNED, None)):
        auto = StreamPolicy.auto(None, lambda lim=limits: lim, lambda _a: None)
        session = Session(url, CopyRun.of(CopyRequest(), streams=auto))
        conn = session.connect()
        try:
            conn.request("HEAD", url.path)
            assert conn.getresponse().status == 200
            assert conn.sock is not None
            got = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            if want is None:
                assert got < 2 * MiB  # the kernel's initial buffer, left to autotuning
            else:
                assert got == 2 * want  # the kernel doubles it for its bookkeeping
        finally:
            conn.close()


def test_cli_upload_with_auto_decides_on_its_own_connection(
    served: tuple[ServerHandle, Path], tmp_path: Path, environment: Environment
) -> None:
    """An upload makes no request before its streams are chosen: auto opens the first
    connection itself (once deadlocked: that connection asked auto for SO_RCVBUF)."""
    handle, root = served
    src = tmp_path / "up.bin"
    src.write_bytes(secrets.token_bytes(100_000))
    code = main(
        ["cp", str(src), f"{handle.url}up.bin", "--streams", "auto", "--json", "--token", WRITE],
        environment,
    )
    err = taken(environment.stderr)
    assert code == 0, err
    assert json.loads(taken(environment.stdout))["streams_auto"]["streams"] == 1
    assert "dtnkit cp: 1 stream: " in err  # one short line (-v: the reason in full)
    assert (root / "up.bin").read_bytes() == src.read_bytes()
