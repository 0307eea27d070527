"""The mover's Prometheus series: ``dtnkit serve --metrics`` answers ``GET /metrics`` (read
token unless anonymous), its exposition passes ``promtool check metrics``, a transfer in
progress shows as an active stream with its rate and utilisation; ``dtnkit cp
--metrics-textfile`` writes the same names for its own copy."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server

RW, RO = "tagrw", "tagro"
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool")


def scrape(url: str, token: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url + "metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def values(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def lint(text: str) -> None:
    """``promtool check metrics``: exit 0 and nothing said."""
    out = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def server(tmp_path: Path, **kw: object) -> ServerHandle:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    return start_server(
        root, tokens=tokens.parse(f"{RW} read,write\n{RO} read\n"), quiet=True, **kw
    )  # type: ignore[arg-type]


def test_metrics_need_a_read_token_unless_anonymous(tmp_path: Path) -> None:
    with server(tmp_path, metrics=True) as s:
        assert scrape(s.url)[0] == 401
        assert scrape(s.url, "wrong")[0] in (401, 403)
        status, ctype, text = scrape(s.url, RO)
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        assert "dtnkit_transfer_active_streams 0" in text
    with server(tmp_path, metrics=True, metrics_anonymous=True) as s:
        assert scrape(s.url)[0] == 200
    with server(tmp_path) as s:  # without --metrics: a path like any other
        (s.root / "metrics").write_text("a file\n")
        status, _c, text = scrape(s.url, RO)
        assert status == 200 and text == "a file\n"


@needs_promtool
def test_a_transfer_in_progress_is_an_active_stream_with_rate_and_utilisation(
    tmp_path: Path,
) -> None:
    size = 64 * 2**20
    with server(tmp_path, metrics=True, capacity=1e9 / 8) as s:
        (s.root / "big.bin").write_bytes(os.urandom(2**20) * 64)
        client = socket.create_connection(("127.0.0.1", s.port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        try:
            client.sendall(
                b"GET /big.bin HTTP/1.1\r\nHost: x\r\nSciTag: 143\r\n"
                b"Authorization: Bearer " + RO.encode() + b"\r\n\r\n"
            )
            got = client.recv(65536)  # the answer started; the rest waits on our window
            assert got.startswith(b"HTTP/1.1 200")
            deadline = time.monotonic() + 10
            while not s.flows.active and time.monotonic() < deadline:
                time.sleep(0.01)
            _st, _ct, text = scrape(s.url, RO)
            lint(text)
            v = values(text)
            assert v["dtnkit_transfer_active_streams"] == 1
            assert v["dtnkit_transfer_active_transfers"] == 1
            assert 0 < v["dtnkit_transfer_sent_bytes_total"] < size
            rate = v["dtnkit_transfer_stream_rate_bytes_per_second"]
            assert rate > 0
            assert v["dtnkit_transfer_capacity_bytes_per_second"] == 1e9 / 8
            assert v["dtnkit_transfer_stream_utilisation_ratio"] == pytest.approx(
                rate / (1e9 / 8), rel=0.5
            )
            before = v["dtnkit_transfer_sent_bytes_total"]
        finally:
            client.close()
        deadline = time.monotonic() + 10
        while s.flows.active and time.monotonic() < deadline:
            time.sleep(0.01)
        _st, _ct, text = scrape(s.url, RO)
        lint(text)
        v = values(text)
        assert v["dtnkit_transfer_active_streams"] == 0
        assert v["dtnkit_transfer_streams_total"] == 1
        assert v["dtnkit_transfer_tagged_streams_total"] == 1
        assert v["dtnkit_transfer_sent_bytes_total"] >= before  # a counter never goes down
        assert v["dtnkit_transfer_stream_utilisation_ratio"] == 0


@needs_promtool
def test_cp_metrics_textfile_is_written_and_lints(tmp_path: Path, environment: Environment) -> None:
    data = os.urandom(2**20 + 5)
    prom = tmp_path / "textfile" / "dtnkit_cp.prom"
    prom.parent.mkdir()
    with server(tmp_path) as s:
        (s.root / "f.bin").write_bytes(data)
        code = main(
            [
                "cp",
                "--token",
                RO,
                "--scitag",
                "143",
                "--streams",
                "2",
                "--metrics-textfile",
                str(prom),
                "--capacity",
                "1g",
                s.url + "f.bin",
                str(tmp_path / "f.bin"),
            ],
            environment,
        )
        assert code == 0, taken(environment.stderr)
    text = prom.read_text()
    lint(text)
    v = values(text)
    assert v["dtnkit_transfer_active_transfers"] == 0
    assert v["dtnkit_transfer_received_bytes_total"] == len(data)
    assert v["dtnkit_transfer_sent_bytes_total"] == 0
    assert v["dtnkit_transfer_capacity_bytes_per_second"] == 1e9 / 8
    assert abs(v["dtnkit_transfer_last_success_timestamp_seconds"] - time.time()) < 60
    assert [p.name for p in prom.parent.iterdir()] == ["dtnkit_cp.prom"]  # no temporary left


def test_cp_metrics_textfile_errors(tmp_path: Path, environment: Environment) -> None:
    src = tmp_path / "x"
    src.write_bytes(b"x")
    for argv, why in (
        (["--metrics-textfile", str(tmp_path / "no" / "x.prom")], "does not exist"),
        (["--metrics-textfile", str(tmp_path)], "is a directory"),
        (["--capacity", "1g"], "only scales"),
        (["--capacity", "fast", "--metrics-textfile", str(tmp_path / "m.prom")], "capacity"),
        (["--scitags-registry", str(src)], "only read for"),
    ):
        code = main(["cp", *argv, str(src), "http://127.0.0.1:9/x"], environment)
        err = taken(environment.stderr)
        assert code == 9 and why in err and err.count("\n") == 1, err
        assert not (tmp_path / "m.prom").exists()


def test_serve_metrics_flags_need_metrics(tmp_path: Path, environment: Environment) -> None:
    for argv in (["--metrics-anonymous"], ["--capacity", "10g"]):
        code = main(
            ["serve", "--root", str(tmp_path), "--anonymous-read", "--port", "0", *argv],
            environment,
        )
        err = taken(environment.stderr)
        assert code == 9 and "--metrics" in err, err
