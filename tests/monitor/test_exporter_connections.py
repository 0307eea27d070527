"""Silent connections do not stop `dtnkit exporter`: TLS handshakes and request heads are read
by one selector thread under a deadline (--head-timeout), never by a thread each, and one
client address gets a share of the connection cap (--max-connections-per-client).  A real
exporter process; a real Prometheus scrapes it over HTTPS while the silent connections are
held."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.polling import until
from tests.support.xrootd import Pki

SILENT = 30


@contextlib.contextmanager
def exporter(tmp_path: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "exporter",
            "--no-drift",
            "--listen",
            "127.0.0.1:0",
            "--db",
            str(tmp_path / "none.sqlite"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()  # printed once the socket listens
        assert line.startswith("dtnkit exporter: listening on "), line + proc.stderr.read()
        yield line.split()[-1], proc
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


def silent(port: int, n: int, source: str = "127.0.0.1") -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


def closed_by_server(s: socket.socket) -> bool:
    """Whether the exporter closed *s* (what it sent first, a 503, is read and dropped)."""
    s.setblocking(False)
    try:
        while s.recv(65536):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def threads(proc: subprocess.Popen[str]) -> int:
    return len(list(Path(f"/proc/{proc.pid}/task").iterdir()))


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus")
def test_prometheus_scrapes_https_while_silent_connections_are_held(
    tmp_path: Path, pki: Pki
) -> None:
    with exporter(
        tmp_path, "--cert", str(pki.cert), "--key", str(pki.key), "--head-timeout", "600s"
    ) as (url, proc):
        port = int(urllib.parse.urlsplit(url).port or 0)
        held = silent(port, SILENT)  # TCP connected, never a TLS ClientHello
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                prom_port = s.getsockname()[1]
            config = tmp_path / "prometheus.yml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "global": {"scrape_interval": "2s", "scrape_timeout": "2s"},
                        "scrape_configs": [
                            {
                                "job_name": "dtnkit",
                                "scheme": "https",
                                "tls_config": {"ca_file": str(pki.ca_file)},
                                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
                            }
                        ],
                    }
                )
            )
            with open(tmp_path / "prometheus.log", "w") as log:
                prom = subprocess.Popen(
                    [
                        "prometheus",
                        f"--config.file={config}",
                        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                        f"--web.listen-address=127.0.0.1:{prom_port}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            base = f"http://127.0.0.1:{prom_port}"

            def up() -> Any:
                q = urllib.parse.urlencode({"query": 'up{job="dtnkit"} == 1'})
                with urllib.request.urlopen(f"{base}/api/v1/query?{q}", timeout=5) as resp:
                    return json.loads(resp.read())["data"]["result"]

            def stored() -> Any:
                q = urllib.parse.urlencode({"query": "dtnkit_exporter_build_info"})
                with urllib.request.urlopen(f"{base}/api/v1/query?{q}", timeout=5) as resp:
                    return json.loads(resp.read())["data"]["result"]

            try:
                until("the exporter scraped (up == 1) while silent connections are held", up, 120)
                assert until("a series stored", stored, 60)
                # the silent connections are still open: the scrapes did not wait for them
                assert not any(closed_by_server(s) for s in held)
                assert threads(proc) < 12, threads(proc)
            finally:
                prom.terminate()
                prom.wait(timeout=60)
        finally:
            for s in held:
                s.close()


def test_silent_plain_connections_hold_no_thread_and_are_cut_at_the_deadline(
    tmp_path: Path,
) -> None:
    with exporter(tmp_path, "--head-timeout", "2s", "--max-connections-per-client", "8") as (
        url,
        proc,
    ):
        port = int(urllib.parse.urlsplit(url).port or 0)
        held = silent(port, SILENT, source="127.0.0.2")
        try:
            # beyond its share, one address is refused at once (503, then closed) ...
            until(
                "the connections past the share refused",
                lambda: sum(closed_by_server(s) for s in held[8:]) == SILENT - 8,
                60,
            )
            # ... while another address is served, and no connection costs a thread
            with urllib.request.urlopen(url, timeout=30) as resp:
                assert resp.status == 200 and b"dtnkit_exporter_build_info" in resp.read()
            assert threads(proc) < 12, threads(proc)
            # the admitted silent ones are closed at the head deadline, not held forever
            t0 = time.monotonic()
            until(
                "the silent connections closed",
                lambda: all(closed_by_server(s) for s in held[:8]),
                60,
            )
            assert time.monotonic() - t0 < 60
        finally:
            for s in held:
                s.close()
