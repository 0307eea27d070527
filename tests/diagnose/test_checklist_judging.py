"""`dtnkit checklist` judges as `tune audit` and the exporter do, and acts where it looked.

The journey of the README: `lab up` a 50 ms path, `tune apply --rtt 50ms` on both ends, then
`checklist --rtt 50ms --netns SRC`: its tuning items agree with `tune audit` and with the
exporter's drift series given the same flags, its tcp-rmem item knows the link's speed, every
command it prints carries `ip netns exec SRC` or `--netns SRC` (pasted, they change SRC and not
the host), and a server running in the other end's namespace is not taken for this one's.  A
captured tree's hints say it is one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import HOSTS, sh, taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns, pytest.mark.needs_ethtool]


@dataclass
class Lab:
    name: str

    @property
    def src(self) -> str:
        return f"dkl-{self.name}-src"

    @property
    def dst(self) -> str:
        return f"dkl-{self.name}-dst"


@pytest.fixture
def tuned_lab(environment: Environment) -> Iterator[Lab]:
    """`lab up NAME --rtt 50ms --rate 2gbit`, then `tune apply --rtt 50ms` on both ends."""
    lab = Lab(f"hjc{uuid.uuid4().hex[:6]}")
    code = main(
        ["lab", "up", lab.name, "--rtt", "50ms", "--rate", "2gbit", "--format", "json"], environment
    )
    taken(environment.stdout)
    try:
        assert code == 0, taken(environment.stderr)
        for ns in (lab.src, lab.dst):
            code, out = run_json(environment, "tune", "apply", "--rtt", "50ms", "--netns", ns)
            assert code == ExitStatus.OK and out["ok"], out
        yield lab
    finally:
        main(["lab", "down", lab.name, "--format", "json"], environment)
        taken(environment.stdout)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts: ended by their own PID at teardown."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def run_json(env: Environment, *argv: str) -> tuple[int, Any]:
    code = main([*argv, "--format", "json"], env)
    out = taken(env.stdout)
    return code, json.loads(out)


def items(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["id"]: i for i in doc["items"]}


def pasted(hint: str) -> subprocess.CompletedProcess[str]:
    """The command a hint starts with, typed into a root shell as the user would."""
    cmd = hint.split(" (")[0]
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True)


def test_checklist_agrees_with_audit_and_exporter_on_a_tuned_lab(
    tuned_lab: Lab, environment: Environment
) -> None:
    code, doc = run_json(environment, "checklist", "--rtt", "50ms", "--netns", tuned_lab.src)
    got = items(doc)
    rmem = got["tcp-rmem"]
    # the link speed its evidence shows is the speed it judges by
    assert {"source": "link speed", "value": "10000 Mbit/s"} in rmem["evidence"]
    assert rmem["status"] == "pass", rmem
    assert "unknown" not in rmem["summary"] and "at 50 ms" in rmem["summary"]

    # the groups that do not comply: the same for checklist, audit and exporter
    tuned = got["tuned"]
    assert "RTT 50 ms" in tuned["summary"]
    checklist_bad = {
        e["source"].split()[-1]
        for e in tuned["evidence"]
        if "differs" in e["value"] or "unknown" in e["value"]
    }
    code, audit = run_json(environment, "tune", "audit", "--rtt", "50ms", "--netns", tuned_lab.src)
    audit_bad = {f["group"] for f in audit["findings"] if f["status"] in ("differs", "unknown")}
    code, metrics = run_json(environment, "metrics", "--rtt", "50ms", "--netns", tuned_lab.src)
    assert code == 0, metrics["collectors"]
    exporter_bad = {
        s["labels"]["group"]
        for s in metrics["samples"]
        if s["name"] == "dtnkit_tuning_compliant" and s["value"] == 0.0
    }
    assert "buffers" not in checklist_bad  # the buffers were tuned for 50 ms
    assert checklist_bad == audit_bad == exporter_bad, (checklist_bad, audit_bad, exporter_bad)
    # and the hint to act on them judges as this run did, where it looked
    if checklist_bad:
        assert tuned["next"] == f"dtnkit tune apply --dry-run --netns {tuned_lab.src} --rtt 50ms"


def test_pasted_hints_change_the_namespace_not_the_host(
    tuned_lab: Lab, environment: Environment
) -> None:
    src = tuned_lab.src
    sh("ip", "netns", "exec", src, "sysctl", "-qw", "net.ipv4.tcp_frto=0")
    sh("ip", "netns", "exec", src, "ethtool", "-K", "dklink0", "rx-udp-gro-forwarding", "off")
    host_frto = Path("/proc/sys/net/ipv4/tcp_frto").read_text()
    code, doc = run_json(environment, "checklist", "--rtt", "50ms", "--netns", src)
    assert code == ExitStatus.DRIFT
    got = items(doc)
    frto, gro = got["tcp-frto"], got["udp-gro-forwarding"]
    assert frto["status"] == gro["status"] == "fail"
    assert frto["next"].startswith(f"ip netns exec {src} sysctl -w net.ipv4.tcp_frto=2")
    assert gro["next"] == f"ip netns exec {src} ethtool -K dklink0 rx-udp-gro-forwarding on"
    assert got["jumbo"]["next"].startswith(f"dtnkit tune apply --mtu --netns {src} --rtt 50ms")
    assert f"dtnkit exporter --netns {src} --rtt 50ms" in got["flow-monitoring"]["next"]
    for item in doc["items"]:  # no command of this host's namespace in any hint
        for cmd in ("sysctl -w", "ethtool -K", "ip link set", "dtnkit tune"):
            if cmd in (item["next"] or ""):
                assert (
                    f"ip netns exec {src} {cmd}" in item["next"] or f"--netns {src}" in item["next"]
                ), item
    pasted(frto["next"])
    pasted(gro["next"])
    assert sh("ip", "netns", "exec", src, "sysctl", "-n", "net.ipv4.tcp_frto").stdout == "2\n"
    assert Path("/proc/sys/net/ipv4/tcp_frto").read_text() == host_frto
    code, doc = run_json(environment, "checklist", "--rtt", "50ms", "--netns", src)
    got = items(doc)
    assert got["tcp-frto"]["status"] == got["udp-gro-forwarding"]["status"] == "pass"


def serve_in(ns: str, root: Path, procs: list[subprocess.Popen[str]]) -> int:
    """A real `dtnkit serve` in namespace ``ns``; its PID once it listens there."""
    root.mkdir()
    proc = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            ns,
            sys.executable,
            "-m",
            "dtnkit",
            "serve",
            "--root",
            str(root),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--anonymous-read",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    assert proc.stdout is not None
    assert "listening on" in proc.stdout.readline()
    return proc.pid


def test_scitags_names_only_servers_of_the_namespace_it_looks_at(
    tuned_lab: Lab, environment: Environment, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    other = serve_in(tuned_lab.dst, tmp_path / "dst", started)
    _, doc = run_json(environment, "checklist", "--rtt", "50ms", "--netns", tuned_lab.src)
    scitags = items(doc)["scitags"]
    assert f"process {other}" not in {e["source"] for e in scitags["evidence"]}, scitags
    assert str(other) not in scitags["summary"]
    here = serve_in(tuned_lab.src, tmp_path / "src", started)
    _, doc = run_json(environment, "checklist", "--rtt", "50ms", "--netns", tuned_lab.src)
    scitags = items(doc)["scitags"]
    sources = {e["source"] for e in scitags["evidence"]}
    assert f"process {here}" in sources and f"process {other}" not in sources, scitags
    assert f"pid {here}" in scitags["summary"] and f"pid {other}" not in scitags["summary"]
    assert scitags["next"].count(f"ip netns exec {tuned_lab.src} dtnkit serve --scitag") == 1


def test_a_captured_tree_says_so_in_its_hints(tmp_path: Path, environment: Environment) -> None:
    tree = tmp_path / "dtn-b"
    shutil.copytree(HOSTS / "dtn-b", tree, symlinks=True)
    _, doc = run_json(
        environment, "checklist", "--tree", str(tree), "--rtt", "50ms", "--speed", "25gbit"
    )
    got = items(doc)
    assert got["tuned"]["next"] == (
        f"dtnkit tune apply --dry-run --tree {tree} --rtt 50ms --speed 25gbit"
    )
    shells = [
        i
        for i in doc["items"]
        if i["next"] and any(c in i["next"] for c in ("sysctl -w", "ethtool -K", "ip link set"))
    ]
    assert shells, doc["items"]
    for item in shells:
        assert f"{tree} is a captured tree: on the host it was captured from" in item["next"]


@pytest.mark.parametrize(
    "flag",
    [
        ["--rtt", "nan"],
        ["--rtt", "-5ms"],
        ["--speed", "fast"],
        ["--speed", "10000"],
        ["--profile", "../../etc/passwd"],
    ],
)
def test_a_bad_judging_flag_is_one_error_line(
    flag: list[str], tmp_path: Path, environment: Environment
) -> None:
    tree = tmp_path / "dtn-b"
    shutil.copytree(HOSTS / "dtn-b", tree, symlinks=True)
    code = main(["checklist", "--tree", str(tree), *flag], environment)
    err = taken(environment.stderr)
    assert code == ExitStatus.BAD_INPUT, err
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: "), err
    assert "Traceback" not in err and taken(environment.stdout) == ""
