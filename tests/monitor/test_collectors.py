"""The collectors on real kernel files (the host's, copied into a tree, and a real namespace
read from outside), `dtnkit metrics` and its textfile, and `dtnkit exporter` over HTTP(S)."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.conftest import Netns, taken
from tests.support.ports import free_port

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore
from dtnkit.monitor import cpu, softnet
from dtnkit.monitor.base import View, read_table, registry
from dtnkit.monitor.build import collect_once, sources, write_textfile
from dtnkit.monitor.netns import NetnsView
from dtnkit.monitor.nic import NicCollector
from dtnkit.monitor.tcp import TcpCollector

NET_FILES = ("netstat", "snmp", "softnet_stat")


@pytest.fixture
def host_tree(tmp_path: Path) -> View:
    """This host's /proc/net files and two interfaces' statistics, copied: real kernel text
    in a tree a test can change."""
    net = tmp_path / "proc" / "net"
    net.mkdir(parents=True)
    for name in NET_FILES:
        (net / name).write_text(Path("/proc/net", name).read_text())
    shutil.copy("/proc/softirqs", tmp_path / "proc" / "softirqs")
    for dev, values in (
        ("eth9", {"rx_dropped": 7, "rx_missed_errors": 5, "rx_errors": 2}),
        ("lo", {"rx_dropped": 1}),
    ):
        stats = tmp_path / "sys" / "class" / "net" / dev / "statistics"
        stats.mkdir(parents=True)
        for name in (
            "rx_dropped",
            "rx_missed_errors",
            "rx_over_errors",
            "rx_crc_errors",
            "rx_length_errors",
            "rx_errors",
            "tx_dropped",
            "tx_errors",
        ):
            (stats / name).write_text(f"{values.get(name, 0)}\n")
    return View(
        proc_net=net, sys_class_net=tmp_path / "sys" / "class" / "net", proc=tmp_path / "proc"
    )


def samples(view: View, **kw: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reg, _ = registry(sources(kw.get("db"), None), view)
    families, text = collect_once(reg)
    parsed = list(text_string_to_metric_families(text.decode()))  # the exposition parses
    assert {f.name for f in parsed} >= {"dtnkit_collector_success"}
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def names(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> set[str]:
    return {n for n, _ in found}


def test_read_table_pairs_headers_with_values() -> None:
    ext = read_table(Path("/proc/net/netstat"), "TcpExt")
    assert "TCPDSACKRecv" in ext and "IpExt" not in ext and len(ext) > 50
    tcp = read_table(Path("/proc/net/snmp"), "Tcp")
    assert tcp["OutSegs"] > 0 and "InErrs" in tcp


def test_softnet_and_softirqs_parse_the_kernel_text() -> None:
    rows = softnet.parse(Path("/proc/net/softnet_stat").read_text())
    assert sorted(r[12] for r in rows) == list(range(len(rows)))  # one row per CPU, its id
    assert softnet.parse("0000000a 00000002 00000003\n")[0][:3] == [10, 2, 3]  # old kernels
    table = cpu.parse(Path("/proc/softirqs").read_text())
    assert len(table["NET_RX"]) == os.cpu_count()


def test_host_view_exports_only_what_node_exporter_lacks(host_tree: View) -> None:
    found = samples(host_tree)
    got = names(found)
    assert {
        "dtnkit_tcp_dsacks_received_total",
        "dtnkit_tcp_undos_total",
        "dtnkit_softnet_flow_limit_drops_total",
        "dtnkit_nic_receive_missed_total",
        "dtnkit_cpu_net_softirqs_total",
    } <= got
    # node_exporter has these for the host: not exported again
    assert not got & {
        "dtnkit_tcp_segments_sent_total",
        "dtnkit_softnet_drops_total",
        "dtnkit_nic_receive_drops_total",
    }
    ext = read_table(host_tree.proc_net / "netstat", "TcpExt")
    assert (
        found[("dtnkit_tcp_dsacks_received_total", ())]
        == ext["TCPDSACKRecv"] + ext["TCPDSACKOfoRecv"]
    )
    assert found[("dtnkit_nic_receive_missed_total", (("device", "eth9"),))] == 5
    assert not [k for k in found if ("device", "lo") in k[1]]
    for name in ("tcp", "softnet", "nic", "cpu"):
        assert found[("dtnkit_collector_success", (("collector", name),))] == 1


def test_a_failing_collector_costs_only_its_series(host_tree: View) -> None:
    (host_tree.proc_net / "netstat").write_text("TcpExt: garbled\n")
    found = samples(host_tree)
    assert found[("dtnkit_collector_success", (("collector", "tcp"),))] == 0
    assert found[("dtnkit_collector_success", (("collector", "nic"),))] == 1
    assert "dtnkit_tcp_dsacks_received_total" not in names(found)
    assert "dtnkit_nic_receive_missed_total" in names(found)


def test_last_probe_results_and_a_missing_store(host_tree: View, tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    missing = samples(host_tree, db=db)
    assert not db.exists(), "the store is read, never created"
    assert missing[("dtnkit_collector_success", (("collector", "results"),))] == 1
    store = ResultStore(db)
    store.add(
        ProbeResult(
            "net", {}, {"throughput_bps": 8e9, "rtt_ms_mean": 20.0}, started=1000.0, duration_s=10.0
        )
    )
    store.add(ProbeResult("net", {}, {"throughput_bps": 4e9}, ok=False, started=2000.0))
    found = samples(host_tree, db=db)
    net = (("kind", "net"),)
    assert found[("dtnkit_probe_last_timestamp_seconds", net)] == 2000.0
    assert found[("dtnkit_probe_last_success", net)] == 0
    assert found[("dtnkit_probe_last_rate_bytes_per_second", net)] == 5e8
    assert ("dtnkit_probe_last_rtt_seconds", net) not in found  # the last one had none
    assert ("dtnkit_probe_last_success", (("kind", "disk"),)) not in found


def test_the_last_finished_sweep(host_tree: View, tmp_path: Path) -> None:
    """The newest finished run of the sweep store is exported; a run still going is not."""
    from dtnkit.sweep.grid import parse_grid_flags
    from dtnkit.sweep.store import PointResult, SweepStore

    db = tmp_path / "results.sqlite"
    ResultStore(db).add(ProbeResult("net", {}, {}, started=1.0))  # the probe tables
    assert not any(n.startswith("dtnkit_sweep_") for n in names(samples(host_tree, db=db)))
    store = SweepStore(db)
    grid = parse_grid_flags(["rtt=5ms", "streams=1,2", "duration=1s", "sample_interval=1s"])
    points = grid.points()
    store.create_run("old", "schema = 1", {}, len(points))
    store.store_point("old", PointResult(points[0], "ok", samples=((1.0, 4e8),)))
    store.set_status("old", "done")
    store.create_run("new", "schema = 1", {}, len(points))
    store.store_point("new", PointResult(points[0], "ok", samples=((1.0, 8e8), (2.0, 6e8))))
    store.store_point("new", PointResult(points[1], "failed", error="boom"))
    store.set_status("new", "interrupted")
    store.create_run("going", "schema = 1", {}, len(points))  # running: not exported
    found = samples(host_tree, db=db)
    run = (("sweep", "new"),)
    assert found[("dtnkit_sweep_last_points", run)] == 2
    assert found[("dtnkit_sweep_last_points_ok", run)] == 1
    assert found[("dtnkit_sweep_last_best_rate_bytes_per_second", run)] == 7e8 / 8
    assert not [k for k in found if k[0].startswith("dtnkit_sweep_") and k[1] != run]
    assert found[("dtnkit_collector_success", (("collector", "results"),))] == 1


@pytest.fixture
def ns() -> Iterator[Netns]:
    n = Netns(prefix="p19")
    try:
        n.create()
        yield n
    finally:
        n.delete()


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_a_namespace_is_read_from_outside(ns: Netns) -> None:
    ns.run("ip", "link", "set", "lo", "up")
    with NetnsView(ns.name) as view:
        holder = view.proc
        found = {}
        for collector in (TcpCollector(), NicCollector()):
            for fam in collector.collect(view.view):
                for s in fam.samples:
                    found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    assert holder.poll() is not None, "the process in the namespace ended with the view"
    devices = {dict(k[1])["device"] for k in found if k[0] == "dtnkit_nic_receive_drops_total"}
    assert devices == {"dkv0", "dkv1"}  # the namespace's, not the host's
    sent = found[("dtnkit_tcp_segments_sent_total", ())]
    host_sent = read_table(Path("/proc/net/snmp"), "Tcp")["OutSegs"]
    assert sent < 1000 < host_sent  # a fresh namespace has sent (almost) nothing


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_metrics_json_in_a_namespace_with_drift(ns: Netns, environment: Environment) -> None:
    rc = main(["metrics", "--netns", ns.name, "--format", "json"], environment)
    doc = json.loads(taken(environment.stdout))
    assert rc == 0, doc
    assert [c["collector"] for c in doc["collectors"]] == [
        "tcp",
        "softnet",
        "nic",
        "cpu",
        "drift",
        "results",
    ]
    compliant = [s for s in doc["samples"] if s["name"] == "dtnkit_tuning_compliant"]
    assert {s["labels"]["group"] for s in compliant} >= {"buffers", "congestion"}
    info = {
        s["labels"]["group"]: s["labels"]["reason"]
        for s in doc["samples"]
        if s["name"] == "dtnkit_tuning_drift_info"
    }
    for s in compliant:
        assert s["labels"]["profile"] == "dtn" and "reason" not in s["labels"]
        assert (s["value"] == 1.0) == (s["labels"]["group"] not in info)


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["metrics", "--netns", "p19-no-such-ns"], "no network namespace 'p19-no-such-ns'"),
        (["metrics", "--netns", "../x"], "bad namespace name"),
        (["exporter", "--listen", "localhost"], "bad --listen 'localhost'"),
        (["exporter", "--listen", "example.org:9"], "is not an IP address"),
        (["metrics", "--profile", "p19-nope"], "p19-nope"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], what: str, environment: Environment) -> None:
    rc = main(argv, environment)
    err = taken(environment.stderr)
    assert rc in (2, 9), err
    assert what in err and err.count("\n") == 1 and "Traceback" not in err


def test_textfile_is_written_atomically_without_following_symlinks(
    tmp_path: Path, environment: Environment
) -> None:
    d = tmp_path / "textfile"
    d.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (d / "dtnkit.prom").symlink_to(victim)  # the old file a rename replaces, not follows
    rc = main(["metrics", "--textfile", str(d), "--no-drift", "--format", "json"], environment)
    doc = json.loads(taken(environment.stdout))
    assert rc == 0 and doc["textfile"] == str(d / "dtnkit.prom")
    assert victim.read_text() == "keep\n"
    assert not (d / "dtnkit.prom").is_symlink()
    assert os.listdir(d) == ["dtnkit.prom"]  # no temporary file left
    text = (d / "dtnkit.prom").read_text()
    assert "dtnkit_tcp_dsacks_received_total" in text and text.endswith("\n")

    link = tmp_path / "link"
    link.symlink_to(d)
    for target, why in (
        (link, "it is a symlink"),
        (tmp_path / "none", "No such file"),
        (victim, "not a directory"),
    ):
        assert main(["metrics", "--textfile", str(target), "--no-drift"], environment) == 9
        assert why in taken(environment.stderr)
    assert main(["metrics", "--textfile", str(d), "--name", "x.txt"], environment) == 9
    assert "bad textfile name 'x.txt'" in taken(environment.stderr)
    with pytest.raises(BadInput, match="bad textfile name"):
        write_textfile(d, "../dtnkit.prom", b"")
    assert os.listdir(d) == ["dtnkit.prom"]


def until_scraped(url: str, context: ssl.SSLContext | None = None, timeout: float = 20) -> str:
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5, context=context) as resp:
                return str(resp.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # polling the server's own answer, bounded


@pytest.mark.skipif(
    shutil.which("prometheus-node-exporter") is None, reason="needs prometheus-node-exporter"
)
def test_node_exporter_reads_the_textfile(tmp_path: Path, environment: Environment) -> None:
    d = tmp_path / "textfile"
    d.mkdir()
    assert main(["metrics", "--textfile", str(d), "--no-drift"], environment) == 0
    port = free_port()
    proc = subprocess.Popen(
        [
            "prometheus-node-exporter",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={d}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        text = until_scraped(f"http://127.0.0.1:{port}/metrics")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "node_textfile_scrape_error 0" in text
    assert "dtnkit_tcp_dsacks_received_total" in text
    assert 'dtnkit_collector_success{collector="tcp"} 1' in text


def test_exporter_serves_https_and_stops_on_sigterm(tmp_path: Path, pki: Any) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--no-drift",
            "--cert",
            str(pki.cert),
            "--key",
            str(pki.key),
            "--db",
            str(tmp_path / "x.sqlite"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("dtnkit exporter: listening on https://127.0.0.1:"), line
        url = line.split()[-1]
        text = until_scraped(url, ssl.create_default_context(cafile=str(pki.ca_file)))
        assert "dtnkit_exporter_build_info" in text
        assert "dtnkit_exporter_process_cpu_seconds_total" in text
        assert "\nprocess_cpu_seconds_total " in text  # the standard name too
        with pytest.raises(OSError):  # plain HTTP gets nothing
            until_scraped(url.replace("https", "http"), timeout=0)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_bad_certificate_is_one_line(tmp_path: Path, environment: Environment) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    rc = main(
        [
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--no-drift",
            "--cert",
            str(bad),
            "--key",
            str(bad),
        ],
        environment,
    )
    err = taken(environment.stderr)
    assert rc == 9 and err.startswith("dtnkit: error: TLS: Cannot load server certificate")
    assert err.count("\n") == 1 and "('" not in err


def test_drift_audits_at_most_once_per_interval(tree: Path) -> None:
    """The audit behind the drift series (a captured host: its findings are fixed) runs on
    the first scrape, then answers the scrapes of its interval."""
    from dtnkit.host.host import Host
    from dtnkit.monitor.drift import DriftCollector
    from dtnkit.tune.audit import Audit, run_audit
    from dtnkit.tune.profile import load_profile

    audit = run_audit(Host.from_tree(tree), load_profile("dtn"))
    runs: list[View] = []

    def run(view: View) -> Audit:
        runs.append(view)
        return audit

    for interval, expected in ((300.0, 1), (0.0, 3)):
        runs.clear()
        drift = DriftCollector(run, interval)
        for _ in range(3):
            families = {f.name: f for f in drift.collect(View())}
        assert len(runs) == expected
    compliant = families["dtnkit_tuning_compliant"].samples
    bad = {f.group for f in audit.findings if f.status in ("differs", "unknown")}
    assert {s.labels["group"] for s in compliant if s.value == 0} == bad
    reasons = {
        s.labels["group"]: s.labels["reason"] for s in families["dtnkit_tuning_drift_info"].samples
    }
    assert set(reasons) == bad and all(reasons.values())
    for s in compliant:
        assert "reason" not in s.labels  # free text would restart the alert's for:
        assert s.labels["profile"] == "dtn"
