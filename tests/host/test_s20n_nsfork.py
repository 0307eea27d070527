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

from conftest import Netns
from dtnkit.host import nsfork
from dtnkit.host.host import Host

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]


@pytest.fixture
def ns() -> Iterator[Netns]:
    made = Netns(prefix="s20n")
    try:
        made.create()
        yield made
    finally:
        made.delete()


def mounts() -> list[str]:
    """This process's mount table without the per-mount ids that never change meaning."""
    return sorted(Path("/proc/self/mountinfo").read_text().splitlines())


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
    assert os.stat(f"/proc/{proc.pid}/ns/net").st_ino == os.stat(
        f"/run/netns/{ns.name}").st_ino
    assert mounts() == before  # the fresh sysfs is the child's alone
    assert "dkv0" not in os.listdir("/sys/class/net")
    del host
    assert mounts() == before


def test_falls_back_to_ip_netns_exec_when_setns_is_refused(
        ns: Netns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the child finds a plain file where the namespace should be: setns fails (EINVAL)
    (tmp_path / ns.name).write_text("")
    monkeypatch.setattr(nsfork, "NETNS_RUN_DIR", str(tmp_path))
    ns.set_sysctl("net.core.somaxconn", "1235")
    host = Host.live(ns.name, read_only=True)
    assert isinstance(helper_of(host), nsfork.ForkedChild)
    assert host.read("/proc/sys/net/core/somaxconn") == "1235\n"
    assert sorted(host.listdir("/sys/class/net")) == ["dkv0", "dkv1", "lo"]
    assert isinstance(helper_of(host), subprocess.Popen)  # ip netns exec took over


def test_not_forked_where_ip_netns_exec_would_bind_etc(
        ns: Netns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ns.name).mkdir()  # /etc/netns/NS: files ip netns exec bind-mounts on /etc
    monkeypatch.setattr(nsfork, "NETNS_ETC_DIR", str(tmp_path))
    host = Host.live(ns.name, read_only=True)
    assert isinstance(helper_of(host), subprocess.Popen)
    assert sorted(host.listdir("/sys/class/net")) == ["dkv0", "dkv1", "lo"]


def test_the_child_dies_with_its_parent(ns: Netns) -> None:
    code = ("import sys\nfrom dtnkit.host.host import Host\n"
            f"h = Host.live({ns.name!r}, read_only=True)\n"
            "h.read('/proc/sys/net/core/somaxconn')\n"
            "print(h._helper[None].proc.pid, flush=True)\nsys.stdin.read()\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
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
