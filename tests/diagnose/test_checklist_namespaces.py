"""`dtnkit checklist` on real namespaces: a pair of namespaces joined by a veth (MTUs and IPv6
set per end), and a lab path whose middle has a smaller MTU than its ends.

The services an item looks for are real processes where they can be (prometheus-node-exporter,
a process that runs as `flowd-go`, an HTTP server answering as pScheduler's API does); the
configuration files (XRootD, softflowd) are put in a temporary root that a Host reads /etc
from, with /proc and /sys linked to the real ones: the machine's /etc is never written.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import sh, taken
from tests.support.polling import until

from dtnkit.cli.main import main
from dtnkit.diagnose import checklist as core
from dtnkit.diagnose.sitecfg import parse_peer
from dtnkit.environment import Environment
from dtnkit.host.host import Host
from dtnkit.host.runner import SubprocessRunner
from dtnkit.lab import path as lab
from dtnkit.tune.judging import Judging

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns, pytest.mark.needs_ethtool]

IDS_WITH_PEER = [
    "ipv6-address",
    "ipv6-route",
    "ipv6-peer",
    "jumbo",
    "path-mtu",
    "scitags",
    "perfsonar",
    "tuned",
    "flow-monitoring",
    "traffic-type",
    "tcp-rmem",
    "udp-gro-forwarding",
    "slow-start-idle",
    "tcp-frto",
]
V6 = ("2001:db8:c19::1", "2001:db8:c19::2")
V4 = ("192.0.2.1", "192.0.2.2")

PSCHEDULER = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"This is the pScheduler API server on c19 (test)." if \
            self.path.rstrip("/") == "/pscheduler" else b"not here"
        self.send_response(200 if body.startswith(b"This") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


@dataclass
class Pair:
    """Namespaces `a` and `b` joined by a veth (c19v0 in a, c19v1 in b), IPv4 and IPv6 on
    both, each end's default routes pointing at the other."""

    a: str
    b: str

    def create(self, mtu_a: int = 9000, mtu_b: int = 9000) -> None:
        sh("ip", "netns", "add", self.a)
        sh("ip", "netns", "add", self.b)
        sh(
            "ip",
            "-n",
            self.a,
            "link",
            "add",
            "c19v0",
            "mtu",
            str(mtu_a),
            "type",
            "veth",
            "peer",
            "name",
            "c19v1",
            "mtu",
            str(mtu_b),
            "netns",
            self.b,
        )
        for ns, dev, i in ((self.a, "c19v0", 0), (self.b, "c19v1", 1)):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "addr", "add", f"{V4[i]}/24", "dev", dev)
            sh("ip", "-n", ns, "-6", "addr", "add", f"{V6[i]}/64", "dev", dev, "nodad")
            sh("ip", "-n", ns, "route", "add", "default", "via", V4[1 - i])
            sh("ip", "-n", ns, "-6", "route", "add", "default", "via", V6[1 - i])

    def delete(self) -> None:
        for ns in (self.a, self.b):
            sh("ip", "netns", "del", ns, check=False)

    def run(self, ns: str, *argv: str) -> str:
        return sh("ip", "netns", "exec", ns, *argv).stdout


@pytest.fixture
def pair() -> Iterator[Pair]:
    tag = uuid.uuid4().hex[:6]
    p = Pair(f"c19{tag}a", f"c19{tag}b")
    try:
        yield p
    finally:
        p.delete()


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts: ended by their own PID at teardown."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def checklist(env: Environment, *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["checklist", *argv, "--format", "json"], env)
    out = taken(env.stdout)
    return code, json.loads(out)


def items(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["id"]: i for i in doc["items"]}


def evidence(item: dict[str, Any]) -> str:
    return "\n".join(f"{e['source']}: {e['value']}" for e in item["evidence"])


def net_state(ns: str) -> str:
    """What a write could change in the namespace: sysctls, links, qdiscs, features."""
    out = sh(
        "ip",
        "netns",
        "exec",
        ns,
        "sh",
        "-c",
        "grep -r . /proc/sys/net/ipv4 /proc/sys/net/core /proc/sys/net/ipv6/conf "
        "2>/dev/null | grep -v -e tcp_fastopen_key -e /neigh/ | sort",
        check=False,
    ).stdout
    out += sh("ip", "-n", ns, "-d", "link", "show").stdout
    out += sh("tc", "-n", ns, "qdisc", "show").stdout
    out += sh("ip", "netns", "exec", ns, "ethtool", "-k", "c19v0", check=False).stdout
    return re.sub(r"(?m)^.*(link/ether|alias|/stable_secret).*$", "", out)


def in_order(pair: Pair, env: Environment, started: list[subprocess.Popen[str]]) -> int:
    """Make `a` a host with everything in order; the pScheduler-like server's port."""
    pair.create(9000, 9000)
    code = main(
        [
            "tune",
            "apply",
            "--netns",
            pair.a,
            "--speed",
            "100gbit",
            "--state-dir",
            str(env.state_dir),
            "--format",
            "json",
        ],
        env,
    )
    assert code == 0, taken(env.stderr)
    taken(env.stdout)
    pair.run(pair.a, "ethtool", "-K", "c19v0", "rx-udp-gro-forwarding", "on")
    pair.run(pair.a, "sysctl", "-qw", "net.ipv4.tcp_frto=2")
    # in the namespace checked: the checklist counts only the processes that run there
    flowd = subprocess.Popen(
        ["ip", "netns", "exec", pair.a, "bash", "-c", "exec -a flowd-go sleep 600"], text=True
    )
    started.append(flowd)
    until(
        "flowd-go running in the namespace",
        lambda: Path(f"/proc/{flowd.pid}/cmdline").read_bytes().startswith(b"flowd-go\0"),
        10,
    )
    started.append(
        subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                pair.a,
                "prometheus-node-exporter",
                "--web.listen-address=127.0.0.1:0",
                "--collector.disable-defaults",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    )
    server = subprocess.Popen(
        ["ip", "netns", "exec", pair.a, sys.executable, "-c", PSCHEDULER],
        stdout=subprocess.PIPE,
        text=True,
    )
    started.append(server)
    assert server.stdout is not None
    return int(server.stdout.readline())


def test_a_host_with_everything_in_order(
    pair: Pair, environment: Environment, started: list[subprocess.Popen[str]]
) -> None:
    port = in_order(pair, environment, started)
    code, doc = checklist(
        environment,
        "--netns",
        pair.a,
        "--peer",
        V6[1],
        "--speed",
        "100gbit",
        "--perfsonar",
        f"http://127.0.0.1:{port}",
    )
    got = items(doc)
    assert list(got) == IDS_WITH_PEER
    # what a host cannot show by itself: the path its traffic takes, and (here) flow export
    warned = {i: got[i]["summary"] for i in got if got[i]["status"] != "pass"}
    assert set(warned) <= {"traffic-type", "flow-monitoring"}, warned
    assert got["traffic-type"]["status"] == "warn"
    assert code == 0, warned
    assert doc["ok"] is True and doc["counts"]["fail"] == 0
    assert "9000-byte packets reach 2001:db8:c19::2 unfragmented" in got["path-mtu"]["summary"]
    assert "flowd-go" in got["scitags"]["summary"]
    assert "node-exporter" in got["flow-monitoring"]["summary"]
    assert got["perfsonar"]["summary"] == f"toolkit answers at http://127.0.0.1:{port}/pscheduler/"
    assert "1.00 GiB" in got["tcp-rmem"]["summary"]
    # the table for people: 80 columns
    narrow = dataclasses.replace(environment, terminal_width=80)
    assert main(["checklist", "--netns", pair.a, "--speed", "100gbit"], narrow) == 0
    table = taken(environment.stdout)
    assert "ipv6-address" in table and "tcp-frto" in table
    assert max(len(line) for line in table.splitlines()) <= 80, table


def test_config_files_in_a_temporary_root(
    pair: Pair, environment: Environment, started: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    """The items that read /etc, from a root of the test's own (proc, sys: the real ones) and
    in the namespace: XRootD marking and softflowd export pass; the Host is read-only."""
    port = in_order(pair, environment, started)
    root = tmp_path / "root"
    (root / "etc" / "xrootd").mkdir(parents=True)
    (root / "etc" / "default").mkdir()
    for d in ("proc", "sys", "usr", "boot"):
        (root / d).symlink_to(f"/{d}")
    (root / "etc" / "xrootd" / "xrootd-c19.cfg").write_text(
        "all.export /data\nxrootd.pmark ffdest collector.example.org:10514\n"
        "xrootd.pmark domain any\n"
    )
    (root / "etc" / "default" / "softflowd").write_text(
        'INTERFACE="c19v0"\nOPTIONS="-n 192.0.2.2:2055"\n'
    )
    before = net_state(pair.a)
    host = Host(root, netns=pair.a, runner=SubprocessRunner(), read_only=True)
    opts = core.Options(peer=parse_peer(V4[1]), perfsonar=f"http://127.0.0.1:{port}")
    result = core.run_checklist(host, Judging(speed_mbps=100_000, netns=pair.a), opts)
    got = {i.id: i for i in result.items}
    assert got["flow-monitoring"].status == "pass", got["flow-monitoring"]
    assert "softflowd c19v0 -> 192.0.2.2:2055" in got["flow-monitoring"].summary
    scitags = got["scitags"]
    assert scitags.status == "pass"
    assert "xrootd.pmark ffdest collector.example.org:10514" in scitags.summary
    assert any(e.source == "/etc/xrootd/xrootd-c19.cfg" for e in scitags.evidence)
    assert host.writes == [] and net_state(pair.a) == before
    assert result.ok


def test_mtu_mismatch_between_two_namespaces(pair: Pair, environment: Environment) -> None:
    pair.create(9000, 1500)  # b's end takes no frame above 1500: a's jumbo frames are lost
    code, doc = checklist(environment, "--netns", pair.a, "--peer", f"[{V6[1]}]")
    got = items(doc)
    assert code == 3 and doc["ok"] is False
    assert got["jumbo"]["status"] == "pass"  # a's own interface is fine ...
    mtu = got["path-mtu"]  # ... the path is not
    assert mtu["status"] == "fail", mtu
    assert "path MTU to 2001:db8:c19::2 is between 1500 and 3999, c19v0 has 9000" in mtu["summary"]
    shown = evidence(mtu)
    assert "ping -6 -n -c 2 -i 0.2 -w 2 -W 1 -M do -s 8952 2001:db8:c19::2: " in shown
    assert "-s 8952 2001:db8:c19::2: reply" not in shown
    assert "-s 1452 2001:db8:c19::2: reply" in shown
    # where the checklist looked: pasted in the host's shell, it runs in the namespace
    assert mtu["next"].startswith(f"ip netns exec {pair.a} tracepath -6 -n 2001:db8:c19::2")
    assert got["ipv6-peer"]["status"] == "pass"


def test_mtu_smaller_in_the_middle_of_a_lab_path(environment: Environment, tmp_path: Path) -> None:
    """The ends have 9000, the router's link to dst 1500: it answers 'Frag needed', which
    the kernel caches and ping names; peers by name through the lab's hosts file."""
    name = f"c19m{uuid.uuid4().hex[:6]}"
    with lab.path(name, state_root=tmp_path / "lab", rtt_ms=0.0, mtu=9000) as p:
        dst = next(h for h in p.hosts if h.side == "dst")
        sh("ip", "-n", p.mid, "link", "set", dst.mid_dev, "mtu", "1500")
        code, doc = checklist(environment, "--netns", p.src.netns, "--peer", p.hostname(dst))
        got = items(doc)
        assert code == 3
        mtu = got["path-mtu"]
        assert mtu["status"] == "fail", mtu
        assert f"path MTU to {dst.address} is between 1500 and 3999" in mtu["summary"]
        assert "ICMP says mtu 1500" in mtu["summary"]
        assert re.search(r"Frag needed and DF set \(mtu = 1500\)|mtu=1500", evidence(mtu))
        assert got["ipv6-peer"]["status"] == "fail"  # the lab path is IPv4 only
        assert "no IPv6 address" in got["ipv6-peer"]["summary"]
        # a name nobody knows: the peer items fail with why; nothing else changes
        code, doc = checklist(environment, "--netns", p.src.netns, "--peer", "c19-nosuch.invalid")
        got = items(doc)
        assert code == 3
        for ident in ("ipv6-peer", "path-mtu"):
            assert got[ident]["status"] == "fail"
            assert got[ident]["summary"] == "c19-nosuch.invalid does not resolve"


def test_ipv6_disabled_on_one_end(pair: Pair, environment: Environment) -> None:
    pair.create()
    pair.run(pair.a, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    code, doc = checklist(environment, "--netns", pair.a)
    got = items(doc)
    assert code == 3
    assert got["ipv6-address"]["status"] == "fail"
    assert "IPv6 is disabled on all interfaces" in got["ipv6-address"]["summary"]
    assert "/proc/sys/net/ipv6/conf/all/disable_ipv6: 1" in evidence(got["ipv6-address"])
    assert got["ipv6-route"]["status"] == "fail"  # the kernel dropped it with the addresses
    assert "ipv6-peer" not in got and "path-mtu" not in got  # no --peer: no peer items
    # the other end: its own IPv6 is fine, the peer does not answer over it
    code, doc = checklist(environment, "--netns", pair.b, "--peer", V6[0])
    got = items(doc)
    assert code == 3
    assert got["ipv6-address"]["status"] == "pass"
    assert got["ipv6-peer"]["status"] == "fail"
    assert got["ipv6-peer"]["summary"].startswith(f"no IPv6 reply from {V6[0]}")


def test_json_shape(pair: Pair, environment: Environment) -> None:
    pair.create()
    code, doc = checklist(environment, "--netns", pair.a, "--peer", V4[1])
    assert set(doc) == {"schema", "host", "peer", "ok", "counts", "items"}
    assert doc["schema"] == "dtnkit.checklist/1" and doc["peer"] == V4[1]
    assert doc["host"].endswith(f"(netns {pair.a})")
    assert list(items(doc)) == IDS_WITH_PEER
    assert sum(doc["counts"].values()) == len(doc["items"])
    assert code == (0 if doc["counts"]["fail"] == 0 else 3)
    for item in doc["items"]:
        assert set(item) == {"id", "section", "title", "status", "summary", "evidence", "next"}
        assert item["section"] in ("dc27", "troubleshooting")
        assert item["status"] in ("pass", "warn", "fail")
        assert item["summary"] and item["evidence"], item
        assert all(
            set(e) == {"source", "value"} and all(isinstance(v, str) for v in e.values())
            for e in item["evidence"]
        )
        assert (item["next"] is None) == (item["status"] == "pass"), item
    assert items(doc)["ipv6-peer"]["status"] == "warn"  # an IPv4 literal: IPv6 not tested


@pytest.mark.parametrize(
    "peer",
    [
        "-c99",
        "--help",
        "a b",
        "$(id)",
        "host:2811",
        "1.2.3",
        "",
        "x" * 300,
        "ff02::1",
        "fe80::1%bad zone",
    ],
)
def test_hostile_peer_is_one_error_line(peer: str, environment: Environment) -> None:
    code = main(["checklist", "--peer", peer, "--format", "json"], environment)
    err = taken(environment.stderr)
    doc = json.loads(taken(environment.stdout))
    assert code == 9, err
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: ") and "Next:" in err
    assert "Traceback" not in err
    assert doc["error"]["exit_status"] == 9


@pytest.mark.parametrize(
    "argv",
    [
        ["--perfsonar", "ftp://x"],
        ["--perfsonar", "-k"],
        ["--netns", "c19-nosuch-ns"],
        ["--netns", "../x"],
        ["--speed", "fast"],
        ["--iface", "c19nosuch"],
        ["--tree", "/nonexistent/c19"],
    ],
)
def test_bad_options_are_one_error_line(argv: list[str], environment: Environment) -> None:
    code = main(["checklist", *argv], environment)
    err = taken(environment.stderr)
    assert code in (1, 2, 9), err
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: "), err
    assert taken(environment.stdout) == ""


def test_never_writes_in_a_namespace(pair: Pair) -> None:
    pair.create(9000, 1500)
    before = net_state(pair.a)
    host = Host.live(pair.a, read_only=True)  # a write would raise ReadOnlyViolation
    result = core.run_checklist(
        host, Judging(speed_mbps=10_000, netns=pair.a), core.Options(peer=parse_peer(V6[1]))
    )
    assert {i.id for i in result.items} == set(IDS_WITH_PEER)
    assert host.writes == [] and net_state(pair.a) == before
    assert os.path.exists(f"/run/netns/{pair.a}")
