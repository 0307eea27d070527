"""The SSH test hosts themselves (tests/support/sshhosts.py): each inventory host is served by
its own sshd in its own namespace, the hosts reach each other across the lab path, and the
teardown leaves nothing of theirs behind."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support import sshhosts
from tests.support.polling import until

pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.needs_netns,
    pytest.mark.needs_sshd,
    pytest.mark.needs_ansible,
    pytest.mark.skipif(
        bool(sshhosts.missing() or sshhosts.missing_ansible()),
        reason=str(sshhosts.missing() or sshhosts.missing_ansible()),
    ),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sshhosts.SshHosts]:
    with sshhosts.ssh_hosts(tmp_path_factory.mktemp("fss-hosts"), prefix="fssh") as hosts:
        yield hosts


def test_each_host_is_served_by_its_own_sshd_in_its_own_namespace(
    fleet: sshhosts.SshHosts, tmp_path: Path
) -> None:
    inv = fleet.inventory(tmp_path / "inventory.yml")
    proc = fleet.ansible(
        inv,
        "all",
        "-m",
        "ansible.builtin.shell",
        "-a",
        "ip netns identify; ip -4 -o addr show dev dklink0",
        "-f",
        "4",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for h in fleet.hosts:
        block = proc.stdout.split(f"{h.name} | CHANGED | rc=0 >>", 1)[1].split(" | ")[0]
        lines = block.split("\n")
        assert lines[1] == h.netns, block
        assert f"inet {h.address}/" in lines[2], block
    # no master is shared: a session multiplexed over another host's master would have
    # answered from that host's namespace and address above.  The masters live in the run's
    # own ControlPath directory and nowhere else; how many are up at one moment is the
    # machine's business (a master backgrounds itself after its session, one of an earlier
    # test persists 60 s, and on a loaded machine ssh may skip becoming one: a count per host
    # failed twice in CI for that alone)
    until(
        "a ControlPath socket in the run's own directory",
        lambda: any(p.is_socket() for p in fleet.control_dir.iterdir()),
        60,
    )
    assert all(p.is_socket() for p in fleet.control_dir.iterdir())


def test_pairs_reach_each_other_across_the_path(fleet: sshhosts.SshHosts) -> None:
    for client, server in fleet.pairs:
        proc = client.run(["ping", "-n", "-c", "1", "-W", "3", server.address], check=False)
        assert proc.returncode == 0, proc.stdout
        # the path's RTT is there (a configured 20 ms; never less)
        ms = float(proc.stdout.split("time=")[1].split()[0])
        assert ms >= 20.0


def test_a_host_key_other_than_the_one_made_is_refused(
    fleet: sshhosts.SshHosts, tmp_path: Path
) -> None:
    h = fleet.hosts[0]
    other = tmp_path / "known_hosts"
    real = fleet.known_hosts.read_text().splitlines()
    # the first host's address with the second host's key
    wrong = [f"{h.address} {' '.join(real[1].split()[1:])}"]
    other.write_text("\n".join(wrong) + "\n")
    proc = subprocess.run(
        [
            "ssh",
            "-i",
            str(fleet.client_key),
            "-o",
            "BatchMode=yes",
            "-o",
            "ControlMaster=no",
            "-o",
            f"ProxyCommand=ip netns exec {h.netns} nc %h %p",
            "-o",
            f"UserKnownHostsFile={other}",
            "-o",
            "StrictHostKeyChecking=yes",
            f"root@{h.address}",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 255
    assert (
        "HOST IDENTIFICATION HAS CHANGED" in proc.stderr or "verification failed" in proc.stderr
    ), proc.stderr


def test_close_removes_its_namespaces_and_sshds_only(tmp_path: Path) -> None:
    with sshhosts.ssh_hosts(tmp_path / "h", prefix="fssc", pairs=1) as hosts:
        pids = [h.sshd_pid for h in hosts.hosts]
        mine = {h.netns for h in hosts.hosts} | {hosts.lab.mid}
        listed = set(
            subprocess.run(
                ["ip", "netns", "list"], capture_output=True, text=True, check=True
            ).stdout.split()
        )
        assert mine <= listed
        inv = hosts.inventory(tmp_path / "inv.yml")
        assert hosts.ansible(inv, "all", "-m", "ansible.builtin.ping").returncode == 0
        # a master to stop (how many are up at one moment is the machine's business: a count
        # of one per host failed in CI here too, as in the test above)
        until(
            "a ControlPath socket in the run's own directory",
            lambda: any(p.is_socket() for p in hosts.control_dir.iterdir()),
            60,
        )
    after = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert not mine & set(after)
    for pid in pids:
        assert pid is not None and not Path(f"/proc/{pid}").exists()
    assert not list(hosts.control_dir.iterdir())  # masters stopped


_MODULES = sshhosts.missing_collection("plugins/modules")


@pytest.mark.skipif(bool(_MODULES), reason=str(_MODULES))
def test_the_collections_audit_module_runs_on_every_host_over_ssh(
    fleet: sshhosts.SshHosts, tmp_path: Path
) -> None:
    # each host's own value, so each answer shows which host gave it
    for k, h in enumerate(fleet.hosts):
        h.run(["sh", "-c", f"echo '4096 16384 {65536 + 4096 * k}' > /proc/sys/net/ipv4/tcp_rmem"])
    inv = fleet.inventory(tmp_path / "inventory.yml")
    proc = fleet.ansible(
        inv,
        "all",
        "-f",
        "4",
        "-m",
        "dtn.dtnkit.audit",
        "-a",
        "dtnkit_path={{ dtnkit_path }} groups=buffers rtt=20ms",
        "-o",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for k, h in enumerate(fleet.hosts):
        (line,) = [x for x in proc.stdout.splitlines() if x.startswith(f"{h.name} | ")]
        doc = json.loads(line.split("=> ", 1)[1])
        assert doc["changed"] is False
        assert doc["audit"]["environment"]["initial_netns"] is False
        current = {f["key"]: f["current"] for f in doc["audit"]["findings"]}
        want = [4096, 16384, 65536 + 4096 * k]  # an array of integers in the audit's JSON
        assert current["sysctl/net.ipv4.tcp_rmem"] == want
