"""The IPv6 flow label on the wire: an upload by ``dtnkit cp --scitag`` from one namespace to
``dtnkit serve`` in another (a veth pair of this test's own), captured with a packet socket
in the receiving namespace, carries the SciTags layout of its tag in every packet the client
sends; the server's answers (an accepted socket) keep the kernel's own label."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.transfer.wire import scitags as st

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]

CAPTURE = Path(__file__).with_name("flowlabel_capture.py")
A_ADDR, B_ADDR = "fd19:7419::1", "fd19:7419::2"
RW = "tagrw"


def sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)


@pytest.fixture
def pair() -> Iterator[tuple[str, str]]:
    """Namespaces fla… and flb… joined by a veth pair, IPv6 addresses without DAD."""
    tag = uuid.uuid4().hex[:6]
    a, b = f"fla{tag}", f"flb{tag}"
    try:
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
        sh(
            "ip",
            "-n",
            a,
            "link",
            "add",
            "tagv0",
            "type",
            "veth",
            "peer",
            "name",
            "tagv1",
            "netns",
            b,
        )
        for ns, dev, addr in ((a, "tagv0", A_ADDR), (b, "tagv1", B_ADDR)):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/64", "dev", dev, "nodad")
            sh("ip", "-n", ns, "link", "set", dev, "up")
        yield a, b
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def in_ns(ns: str, *argv: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, *argv], text=True, start_new_session=True, **kw
    )  # type: ignore[call-overload]


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def upload(tmp_path: Path, pair: tuple[str, str], extra: list[str]) -> list[list[int]]:
    """Upload 2 MiB from A to B's server with *extra* cp flags; the captured packets."""
    a, b = pair
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (tmp_path / "tokens").write_text(f"{RW} read,write\n")
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(2 * 2**20))
    server = in_ns(
        b,
        "-m",
        "dtnkit",
        "serve",
        "--root",
        str(root),
        "--host",
        B_ADDR,
        "--port",
        "0",
        "--tokens",
        str(tmp_path / "tokens"),
        "--quiet",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    capture = None
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        m = re.search(r"listening on (http://\[[0-9a-f:]+\]:([0-9]+)/)", line)
        assert m, line
        url, port = m.group(1), m.group(2)
        capture = in_ns(
            b, str(CAPTURE), "tagv1", port, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert capture.stdout is not None and capture.stdin is not None
        assert capture.stdout.readline().strip() == "ready"
        name = f"up{uuid.uuid4().hex[:6]}.bin"
        cp = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                a,
                sys.executable,
                "-m",
                "dtnkit",
                "cp",
                "--token",
                RW,
                "--streams",
                "1",
                *extra,
                str(src),
                url + name,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cp.returncode == 0, cp.stderr
        assert (root / name).read_bytes() == src.read_bytes()
        capture.stdin.close()
        out = capture.stdout.readline()
        capture.wait(timeout=10)
        packets: list[list[int]] = json.loads(out)
        return packets
    finally:
        if capture is not None:
            stop(capture)
        stop(server)


def test_an_upload_carries_the_scitags_flow_label(tmp_path: Path, pair: tuple[str, str]) -> None:
    packets = upload(tmp_path, pair, ["--scitag", "143"])
    to_server = [p for p in packets if p[0] == 1]
    data = [p for p in to_server if p[2] > 0]
    assert sum(p[2] for p in data) >= 2 * 2**20  # the upload's bytes were seen
    # every packet the client sent (SYN, data, ACKs) carries atlas / Production Input
    assert {st.label_tag(p[1]) for p in to_server} == {(2, 15)}
    # the answers of the accepted socket keep the kernel's label (flowd-go's eBPF marker is
    # what marks those)
    assert {st.label_tag(p[1]) for p in packets if p[0] == 0} != {(2, 15)}


def test_without_a_tag_the_labels_are_the_kernels(tmp_path: Path, pair: tuple[str, str]) -> None:
    packets = upload(tmp_path, pair, [])
    assert packets
    assert {st.label_tag(p[1]) for p in packets if p[0] == 1} != {(2, 15)}
