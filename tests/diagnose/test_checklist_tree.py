"""`dtnkit checklist --tree`: a captured host tree with processes (proc/PID/cmdline) and /etc
of the test's own.  No root needed: everything is read from the tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment


def run(env: Environment, tree: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["checklist", "--tree", str(tree), *argv, "--format", "json"], env)
    err = taken(env.stderr)
    assert "Traceback" not in err, err
    items = json.loads(taken(env.stdout))["items"]
    for item in items:  # a warn or a fail always says what to do next; a pass never
        assert (item["next"] is None) == (item["status"] == "pass"), item
    return code, {i["id"]: i for i in items}


def proc(tree: Path, pid: int, argv: bytes) -> None:
    (tree / "proc" / str(pid)).mkdir(parents=True, exist_ok=True)
    (tree / "proc" / str(pid) / "cmdline").write_bytes(argv)


def write(tree: Path, path: str, text: str) -> None:
    (tree / path).parent.mkdir(parents=True, exist_ok=True)
    (tree / path).write_text(text)


def test_the_captured_tree_as_it_is(tree: Path, environment: Environment) -> None:
    code, got = run(environment, tree)
    assert code == 3  # dtn-a is an untuned host
    assert got["ipv6-address"]["status"] == "pass"
    assert got["jumbo"]["status"] == "fail"
    assert got["scitags"]["status"] == "fail" and got["flow-monitoring"]["status"] == "fail"
    assert got["tcp-rmem"]["summary"].startswith("max 6.00 MiB < 1.00 GiB")  # 100G NICs


def test_a_process_table_that_is_not_text(tree: Path, environment: Environment) -> None:
    """A command line is bytes: one that is not UTF-8 is skipped, an empty one (a kernel
    thread's) and a process gone meanwhile too; never a traceback (it was one)."""
    proc(tree, 4000, b"\xff\xfe\x00--scitag\x00")
    proc(tree, 4001, b"")
    proc(tree, 4002, b"/usr/bin/flowd-go\x00--conf\x00/etc/flowd-go/conf.yaml\x00run\x00")
    (tree / "proc" / "4003").mkdir()  # gone between the listing and the read
    code, got = run(environment, tree)
    assert code == 3
    assert got["scitags"]["status"] == "pass"
    assert got["scitags"]["summary"] == "flowd-go running"


def test_marking_found_and_incomplete(tree: Path, environment: Environment) -> None:
    # a dtnkit serve without marking, an XRootD whose pmark has nowhere to send: warn
    proc(tree, 4100, b"/opt/venv/bin/python3\x00-m\x00dtnkit\x00serve\x00--root\x00/data\x00")
    proc(tree, 4101, b"/usr/bin/xrootd\x00-c\x00/srv/x/xrootd.cfg\x00")
    write(tree, "srv/x/xrootd.cfg", "all.export /\ncontinue /srv/x/more/\n")
    write(tree, "srv/x/more/pmark.cfg", "xrootd.pmark domain any\n")
    write(tree, "etc/flowd-go/conf.yaml", "# backends:\n#   marker: {}\n")
    code, got = run(environment, tree)
    assert code == 3  # dtn-a is untuned: other items fail
    sci = got["scitags"]
    assert sci["status"] == "warn", sci
    assert "firefly disabled; configuration incomplete" in sci["summary"]
    assert "runs without --scitag or --firefly-dest" in sci["summary"]
    assert "/etc/flowd-go/conf.yaml turns on no backend" in sci["summary"]
    sources = [e["source"] for e in sci["evidence"]]
    assert "/srv/x/xrootd.cfg" in sources and "process 4100" in sources
    # the serve marks, dCache too: pass, and both named
    proc(
        tree,
        4100,
        b"dtnkit\x00serve\x00--root\x00/data\x00--scitag=130\x00"
        b"--firefly-dest\x00c.example.org:10514\x00",
    )
    write(tree, "etc/dcache/layouts/pool.conf", "[pool]\npool.enable.firefly = true\n")
    code, got = run(environment, tree)
    assert code == 3  # dtn-a is untuned: other items fail
    sci = got["scitags"]
    assert sci["status"] == "pass", sci
    assert "dtnkit serve with --firefly-dest, --scitag" in sci["summary"]
    assert "dCache fireflies on" in sci["summary"]


def test_flow_monitoring_from_processes_and_files(tree: Path, environment: Environment) -> None:
    proc(tree, 4200, b"/usr/bin/prometheus-node-exporter\x00--web.listen-address=:9100\x00")
    code, got = run(environment, tree)
    assert code == 3  # dtn-a is untuned: other items fail
    assert got["flow-monitoring"]["status"] == "warn"
    assert "no flow export on this host" in got["flow-monitoring"]["summary"]
    write(tree, "etc/pmacct/pmacctd.conf", "plugins: nfprobe\nnfprobe_receiver: 192.0.2.9:2100\n")
    code, got = run(environment, tree)
    assert code == 3  # dtn-a is untuned: other items fail
    assert got["flow-monitoring"]["status"] == "pass"
    assert "pmacct nfprobe -> 192.0.2.9:2100" in got["flow-monitoring"]["summary"]


def test_perfsonar_in_a_tree(tree: Path, environment: Environment) -> None:
    code, got = run(environment, tree)
    assert code == 3  # dtn-a is untuned: other items fail
    assert got["perfsonar"]["status"] == "warn"
    write(tree, "usr/bin/pscheduler", "#!/bin/sh\n")
    code, got = run(environment, tree)
    assert code == 3  # dtn-a is untuned: other items fail
    assert got["perfsonar"]["status"] == "pass"
    assert got["perfsonar"]["summary"] == "/usr/bin/pscheduler"


def test_a_peer_the_tree_cannot_tell(tree: Path, environment: Environment) -> None:
    code, got = run(environment, tree, "--peer", "192.0.2.9")
    assert code == 3  # dtn-a is untuned: other items fail
    assert got["path-mtu"]["status"] == "warn"
    assert "cannot tell" in got["path-mtu"]["summary"]
    assert got["ipv6-peer"]["status"] == "warn"  # an IPv4 literal
