"""The namespace helper as a fork of the dtnkit process (dtnkit.host.nsfork): it sees the
namespace's /sys/class/net and /proc/sys/net, leaves the parent's mounts alone, keeps no
descriptor of the parent's, dies with its parent, and falls back to `ip netns exec` when it
cannot enter the namespace."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.runners import CountingRunner

from conftest import Netns
from dtnkit.host import nsfork, nsserve
from dtnkit.host.host import Host
from dtnkit.host.sysctl_scope import ScopeProbe, sysctl_file

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]


@pytest.fixture
def ns() -> Iterator[Netns]:
    made = Netns(prefix="nsf")
    try:
        made.create()
        yield made
    finally:
        made.delete()


def mounts() -> list[str]:
    """This process's mount table, less the namespace files (`nsfs`) under /run/netns:
    every `ip netns add` on the machine, ours or another job's, adds one there, and none is
    what the helper could leak (its fresh sysfs)."""
    return sorted(
        line
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if " - nsfs " not in line
    )


def helper_of(host: Host) -> object:
    return host._helper[None].proc


def test_forked_helper_sees_the_namespace_not_the_host(ns: Netns) -> None:
    before = mounts()
    ns.set_sysctl("net.core.somaxconn", "1234")
    host_value = Path("/proc/sys/net/core/somaxconn").read_text()
    assert host_value.strip() != "1234"
    host = Host.live(ns.name, read_only=True)
    proc = helper_of(host)
    assert isinstance(proc, nsfork.ForkedChild)
    assert host.read("/proc/sys/net/core/somaxconn") == "1234\n"
    assert sorted(host.listdir("/sys/class/net")) == ["dkv0", "dkv1", "lo"]
    assert host.read("/sys/class/net/dkv0/mtu") == "1500\n"
    # a command run by the helper runs in the namespace too
    assert "dkv1" in host.query(["ip", "-o", "link", "show"]).stdout
    # the child holds its two pipes and /dev/null, nothing else of the parent's
    assert sorted(os.listdir(f"/proc/{proc.pid}/fd")) == ["0", "1", "2"]
    assert os.readlink(f"/proc/{proc.pid}/fd/2") == "/dev/null"
    assert os.stat(f"/proc/{proc.pid}/ns/net").st_ino == os.stat(f"/run/netns/{ns.name}").st_ino
    assert mounts() == before  # the fresh sysfs is the child's alone
    assert "dkv0" not in os.listdir("/sys/class/net")
    del host
    assert mounts() == before


def test_falls_back_to_ip_netns_exec_when_setns_is_refused(
    ns: Netns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the child finds a plain file where the namespace should be: setns fails (EINVAL)
    (tmp_path / ns.name).write_text("")
    monkeypatch.setattr(nsfork, "NETNS_RUN_DIR", str(tmp_path))
    ns.set_sysctl("net.core.somaxconn", "1235")
    host = Host.live(ns.name, read_only=True)
    assert isinstance(helper_of(host), nsfork.ForkedChild)
    assert host.read("/proc/sys/net/core/somaxconn") == "1235\n"
    assert sorted(host.listdir("/sys/class/net")) == ["dkv0", "dkv1", "lo"]
    assert isinstance(helper_of(host), subprocess.Popen)  # ip netns exec took over


def test_files_of_etc_netns_are_bound_over_etc_as_ip_netns_exec_does(
    ns: Netns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ns.name).mkdir()  # /etc/netns/NS: files ip netns exec bind-mounts on /etc
    (tmp_path / ns.name / "hosts").write_text("10.9.9.9 nsf-only\n")
    monkeypatch.setattr(nsfork, "NETNS_ETC_DIR", str(tmp_path))
    before, etc_hosts = mounts(), Path("/etc/hosts").read_text()
    host = Host.live(ns.name, read_only=True)
    assert host.query(["cat", "/etc/hosts"]).stdout == "10.9.9.9 nsf-only\n"
    assert isinstance(helper_of(host), nsfork.ForkedChild)
    assert Path("/etc/hosts").read_text() == etc_hosts and mounts() == before


def test_the_child_dies_with_its_parent(ns: Netns) -> None:
    code = (
        "import sys\nfrom dtnkit.host.host import Host\n"
        f"h = Host.live({ns.name!r}, read_only=True)\n"
        "h.read('/proc/sys/net/core/somaxconn')\n"
        "print(h._helper[None].proc.pid, flush=True)\nsys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        pidfd = os.pidfd_open(child)
    finally:
        parent.kill()  # SIGKILL: no clean-up of its own runs
        parent.wait()
    try:
        assert select.select([pidfd], [], [], 10.0)[0], "the helper outlived its parent"
    finally:
        os.close(pidfd)


PROBED = [
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_congestion_control",
    "net.core.rmem_max",
    "net.core.netdev_max_backlog",
    "kernel.core_pattern",
    "vm.swappiness",
]


def recording(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """What each forked probe printed (None: it could not run), in order."""
    forked: list[str | None] = []
    run = nsfork.run_in_new_netns

    def recorded(
        program: nsfork.Program, data: bytes, child: nsfork.ForkedChild | None = None
    ) -> str | None:
        forked.append(run(program, data, child))
        return forked[-1]

    monkeypatch.setattr(nsfork, "run_in_new_netns", recorded)
    return forked


def verdicts(probe: ScopeProbe) -> dict[str, tuple[bool, str, bool]]:
    return {n: (v.per_netns, v.why, v.final) for n, v in probe.classify(PROBED).items()}


def test_the_forked_scope_probe_answers_as_unshare_does(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {n: Path(sysctl_file(n)).read_text() for n in PROBED}
    forked = recording(monkeypatch)
    by_fork = verdicts(ScopeProbe())
    assert len(forked) == 1 and forked[0] is not None and forked[0].startswith("P ")
    counting = CountingRunner()
    by_unshare = verdicts(ScopeProbe(runner=counting))
    assert [c[:2] for c in counting.calls] == [("unshare", "--net")]
    assert by_fork == by_unshare
    assert by_fork["net.ipv4.tcp_rmem"][0] and not by_fork["net.core.rmem_max"][0]
    assert {n: Path(sysctl_file(n)).read_text() for n in PROBED} == before


def test_the_scope_probe_falls_back_to_unshare_when_the_fork_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = verdicts(ScopeProbe(runner=CountingRunner()))
    monkeypatch.setattr(nsfork, "_CLONE_NEWNET", 1)  # unshare(2) refuses it: EINVAL
    forked = recording(monkeypatch)
    assert verdicts(ScopeProbe()) == expected
    assert forked == [None]  # the child could not unshare: the runner's unshare answered


def test_the_scope_probes_early_child_answers_as_unshare_does() -> None:
    expected = verdicts(ScopeProbe(runner=CountingRunner()))
    probe = ScopeProbe()
    probe.warm()
    early = probe.early
    assert isinstance(early, nsfork.ForkedChild)
    probe.warm()  # one early child at a time
    assert probe.early is early
    assert verdicts(probe) == expected
    assert probe.early is None and early.returncode == 0  # used once, reaped
    unused = ScopeProbe()
    unused.warm()
    child = unused.early
    assert child is not None
    child.close()  # an unused early child ends when its stdin closes
    assert child.returncode not in (None, 0)


def test_files_the_batch_did_not_read_come_from_the_helper_not_a_cat(ns: Netns) -> None:
    path = "/proc/sys/net/ipv4/tcp_fin_timeout"  # not one of the batch's names
    ns.set_sysctl("net.ipv4.tcp_fin_timeout", "17")
    assert Path(path).read_text() != "17\n"
    host = Host.live(ns.name, read_only=True)
    assert host.read(path) == "17\n"
    assert host.writable(path)
    assert (
        host.read("/sys/class/net/dkv0/address")
        == ns.run("cat", "/sys/class/net/dkv0/address").stdout
    )
    assert host.read("/proc/sys/net/ipv4/nosuchfile") is None
    assert not any("cat" in key for key in host._cache)
    assert isinstance(helper_of(host), nsfork.ForkedChild)


@pytest.mark.parametrize("name", ["", ".", "..", "../../proc/1/ns/net", "a/b"])
def test_only_a_plain_name_under_run_netns_is_forked_into(name: str) -> None:
    assert not nsfork.usable(name)


def test_a_threaded_process_starts_ip_netns_exec_instead_of_forking(ns: Netns) -> None:
    """A fork copies the locks other threads hold (the import lock, a logging handler's): in
    a process with another thread running (the exporter's server) the helper is a new
    process, never a fork, and reads the same."""
    import threading

    ns.set_sysctl("net.core.somaxconn", "1236")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        assert nsfork.fork_in_netns(ns.name, nsserve.serve) is None
        assert nsfork.fork_new_netns(nsserve.probe_stdin) is None
        host = Host.live(ns.name, read_only=True)
        assert isinstance(helper_of(host), subprocess.Popen)
        assert host.read("/proc/sys/net/core/somaxconn") == "1236\n"
    finally:
        stop.set()
        other.join()
    assert nsfork.usable(ns.name)
