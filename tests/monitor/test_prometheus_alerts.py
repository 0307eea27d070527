"""A real Prometheus scrapes `dtnkit exporter` reading a lab namespace; loss on the lab path
makes the retransmit alert fire, and removing it clears the alert.

The rules are the shipped file with test-speed windows and `for:` (every `[Nm]` range becomes
[5s], every `for:` 1s); the expressions, thresholds and labels are the shipped ones.
Synchronisation is by polling Prometheus's own API with deadlines, never by sleeping.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.polling import until
from tests.support.ports import free_port

from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath, PathSpec
from dtnkit.monitor.build import rules_text

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]
NEEDS = [t for t in ("prometheus", "promtool", "iperf3") if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")

ALERT = "DtnkitTcpRetransmitHigh"
LOSS = 0.08  # a retransmit share clearly above the rule's 5 % once DSACKs are taken off


def fast_rules() -> str:
    text = re.sub(r"\[\d+m\]", "[5s]", rules_text())
    return re.sub(r"for: \d+m", "for: 1s", text)


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture
def path(tmp_path: Path) -> Iterator[LabPath]:
    state = tmp_path / "lab"
    name = f"p19{secrets.token_hex(3)}"
    p = lab.up(name, PathSpec(rtt_ms=4, rate_bps=200 * 10**6), state_root=state)
    try:
        yield p
    finally:
        lab.down(name, state_root=state, missing_ok=True)


@pytest.fixture
def exporter(path: LabPath, tmp_path: Path) -> Iterator[str]:
    """`dtnkit exporter` in the root namespace reading the sending host's namespace; yields
    its host:port."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--netns",
            path.src.netns,
            "--no-drift",
            "--db",
            str(tmp_path / "none.sqlite"),
            "--format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        url = json.loads(line)["url"]
        assert url.endswith("/metrics") and json.loads(line)["netns"] == path.src.netns
        yield urllib.parse.urlsplit(url).netloc
    finally:
        stop(proc)


@pytest.fixture
def prometheus(exporter: str, tmp_path: Path) -> Iterator[str]:
    rules = tmp_path / "rules.yml"
    rules.write_text(fast_rules())
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{rules}']\n"
        "scrape_configs:\n"
        "  - job_name: dtnkit\n"
        f"    static_configs: [{{targets: ['{exporter}']}}]\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "prometheus.log", "w"),  # noqa: SIM115
    )
    try:
        base = f"http://127.0.0.1:{port}"
        until(
            "Prometheus ready",
            lambda: urllib.request.urlopen(base + "/-/ready", timeout=5).status == 200,
            30,
        )
        yield base
    finally:
        stop(proc)


def query(base: str, expr: str) -> list[dict[str, Any]]:
    doc = get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def alert_state(base: str) -> str | None:
    for a in get(f"{base}/api/v1/alerts")["data"]["alerts"]:
        if a["labels"]["alertname"] == ALERT:
            return str(a["state"])
    return None


@needs_tools
def test_retransmit_alert_fires_on_loss_and_clears(
    path: LabPath, exporter: str, prometheus: str
) -> None:
    server = path.dst.popen(
        ["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    client = None
    try:
        path.src.run(["sh", "-c", "true"])  # the namespace answers
        until(
            "iperf3 server listening",
            lambda: "5201" in path.dst.run(["ss", "-Hltn", "sport = :5201"]).stdout,
            10,
        )
        client = path.src.popen(
            ["iperf3", "-c", path.dst.address, "-t", "120", "-b", "50M"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # the scrape works and traffic flows, without loss: the alert is not there
        until(
            "segments/s over the rule's floor in Prometheus",
            lambda: [
                r
                for r in query(prometheus, "instance:tcp_segments_sent:rate2m")
                if float(r["value"][1]) > 100
            ],
            40,
        )
        # the exposition of a real scrape (a namespace's: with the netns-only series) lints
        with urllib.request.urlopen(f"http://{exporter}/metrics", timeout=10) as resp:
            scraped = resp.read().decode()
        assert "dtnkit_tcp_segments_retransmitted_total" in scraped
        lint = subprocess.run(
            ["promtool", "check", "metrics"],
            input=scraped,
            text=True,
            capture_output=True,
            timeout=60,
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
        ok = query(prometheus, 'dtnkit_collector_success{collector="tcp"}')
        assert [float(r["value"][1]) for r in ok] == [1.0]
        assert alert_state(prometheus) is None

        path.set(loss=LOSS)
        added = time.monotonic()
        until(
            f"{ALERT} firing after loss was added", lambda: alert_state(prometheus) == "firing", 60
        )
        fired_after = time.monotonic() - added
        ratio = query(prometheus, "instance:tcp_retransmit_honest:ratio_rate2m")
        assert float(ratio[0]["value"][1]) > 0.05
        print(
            f"\n{ALERT} fired {fired_after:.1f} s after loss {LOSS:.0%} was added "
            "(scrape and evaluation every 1 s, rate over 5 s, for: 1s)"
        )

        path.set(loss=0.0)
        removed = time.monotonic()
        until(
            f"{ALERT} cleared after loss was removed", lambda: alert_state(prometheus) is None, 60
        )
        print(f"{ALERT} cleared {time.monotonic() - removed:.1f} s after the loss was removed")
        assert client.poll() is None, "iperf3 ran all along"
    finally:
        for proc in (client, server):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
