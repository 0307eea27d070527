"""The Host seam inside a real network namespace: files read in one batch process, with the
same answers as reading each file on its own."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.runners import CountingRunner

from conftest import Netns
from dtnkit.host import nsfork
from dtnkit.host.host import Host
from dtnkit.host.runner import SubprocessRunner
from dtnkit.tune.audit import run_audit
from dtnkit.tune.profile import load_profile

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]


@pytest.fixture
def ns() -> Iterator[Netns]:
    made = Netns(prefix="dkhn")  # this module's own namespaces
    try:
        made.create()
        yield made
    finally:
        made.delete()


def one_by_one(ns: Netns, path: str) -> tuple[bool, str | None, bool]:
    """(exists, content or None, writable) as `test`/`cat` inside the namespace see it."""
    exists = ns.run("test", "-e", path, check=False).returncode == 0
    cat = ns.run("cat", path, check=False)
    return (
        exists,
        cat.stdout if cat.returncode == 0 else None,
        ns.run("test", "-w", path, check=False).returncode == 0,
    )


def test_batch_reads_agree_with_reading_each_file(ns: Netns) -> None:
    host = Host(Path("/"), netns=ns.name, runner=CountingRunner())
    ns.set_sysctl("net.core.somaxconn", "1234")  # differs from the root namespace's
    paths = [
        "/proc/sys/net/core/rmem_max",  # read-only in a child namespace
        "/proc/sys/net/ipv4/tcp_rmem",
        "/proc/sys/net/ipv4/tcp_congestion_control",
        "/proc/sys/net/core/somaxconn",
        "/proc/sys/net/ipv6/conf/all/disable_ipv6",
        "/proc/sys/net/core/nosuchkey",
        "/sys/class/net/dkv0/mtu",
        "/sys/class/net/dkv0/speed",  # EINVAL on a veth
        "/sys/class/net/dkv1/tx_queue_len",
        "/sys/class/net/dkv0/device",
        "/sys/class/net/dkv0/device/numa_node",
        "/sys/class/net/nosuchdev/mtu",
        "/sys/class/net/lo/operstate",
        "/proc/sys/net/ipv4/conf/dkv0/forwarding",
    ]  # outside the batch: one by one
    for path in paths:
        assert (host.exists(path), host.read(path), host.writable(path)) == one_by_one(ns, path), (
            path
        )
    # a counter (outside the batch too) may grow between two reads: never shrinks
    counter = "/sys/class/net/dkv0/statistics/rx_bytes"
    mine = (host.exists(counter), host.read(counter), host.writable(counter))
    exists, theirs, writable = one_by_one(ns, counter)
    assert (mine[0], mine[2]) == (exists, writable)
    assert mine[1] is not None and theirs is not None
    assert int(mine[1]) <= int(theirs)
    assert host.read("/proc/sys/net/core/somaxconn") == "1234\n"
    assert host.listdir("/sys/class/net") == sorted(["dkv0", "dkv1", "lo"])
    assert host.listdir("/proc/sys/net/core") == sorted(
        ns.run("ls", "/proc/sys/net/core").stdout.split()
    )
    runner = host.runner
    assert isinstance(runner, CountingRunner)
    batches = [c for c in runner.calls if "-I" in c]
    assert len(batches) == 1  # one process answered for every batched path
    singles = [c[-1] for c in runner.calls if c[4:5] in (("cat",), ("test",))]
    assert set(singles) == {
        "/proc/sys/net/ipv4/conf/dkv0/forwarding",
        "/sys/class/net/dkv0/statistics/rx_bytes",
    }


def test_a_write_drops_the_batch(ns: Netns) -> None:
    host = Host.live(ns.name)
    assert host.read("/proc/sys/net/core/somaxconn") is not None
    host.write("/proc/sys/net/core/somaxconn", "4321")
    assert host.read("/proc/sys/net/core/somaxconn") == "4321\n"
    ns.set_sysctl("net.core.somaxconn", "5432")  # behind the host's back
    assert host.read("/proc/sys/net/core/somaxconn") == "4321\n"  # cached until refreshed
    host.refresh()
    assert host.read("/proc/sys/net/core/somaxconn") == "5432\n"


def test_an_audit_in_a_namespace_reads_its_files_in_one_process(ns: Netns) -> None:
    """Before the batch, every file was its own `ip netns exec cat` (26 for this audit)."""
    runner = CountingRunner()
    audit = run_audit(
        Host(Path("/"), netns=ns.name, runner=runner, read_only=True), load_profile("dtn")
    )
    assert audit.findings
    reads = [c for c in runner.calls if c[4:5] in (("cat",), ("test",), ("ls",))]
    assert reads == []
    assert len([c for c in runner.calls if "-I" in c]) == 1


def test_an_audit_in_a_namespace_starts_one_process_and_finds_the_same(
    ns: Netns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the plain runner, a process inside the namespace answers every read and runs every
    command; the findings are those of one process per command (the counting runner)."""
    one_each = run_audit(
        Host(Path("/"), netns=ns.name, runner=CountingRunner(), read_only=True), load_profile("dtn")
    )
    started: list[list[str]] = []

    class Counting(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, args: list[str], *rest: Any, **kw: Any) -> None:
            started.append(list(args))
            super().__init__(args, *rest, **kw)

    monkeypatch.setattr(subprocess, "Popen", Counting)
    host = Host.live(ns.name, read_only=True)
    helper = run_audit(host, load_profile("dtn"))
    # the helper is a fork of this process (dtnkit.host.nsfork), so is the scope probe
    assert started == [] and isinstance(host._helper[None].proc, nsfork.ForkedChild)
    assert [(f.key, f.device, f.current, f.status) for f in helper.findings] == [
        (f.key, f.device, f.current, f.status) for f in one_each.findings
    ]
    host.refresh()  # a write would do the same: the helper stays, its answers are fresh
    ns.set_sysctl("net.core.somaxconn", "777")  # the test's own process
    assert host.read("/proc/sys/net/core/somaxconn") == "777\n"
    assert host.query(["cat", "/proc/sys/net/core/somaxconn"]).stdout == "777\n"
    assert len(started) == 1, started  # the test's own set_sysctl: nothing of the Host's


def test_the_helper_reports_commands_as_the_runner_does(ns: Netns) -> None:
    host = Host.live(ns.name, read_only=True)
    plain = SubprocessRunner()
    for argv in (
        ["sh", "-c", "echo out; echo err >&2; exit 3"],
        ["cat", "/proc/sys/net/core/somaxconn"],
        ["cat", "/nonexistent"],
    ):
        got, want = host.query(argv), plain.run(host.argv(argv))
        assert (got.argv, got.returncode, got.stdout, got.stderr) == (
            want.argv,
            want.returncode,
            want.stdout,
            want.stderr,
        )
    # a missing tool is 127 as in the root namespace (`ip netns exec` itself says 1)
    missing = host.query(["dtnkit-no-such-tool"])
    assert (missing.returncode, missing.stderr) == (127, "dtnkit-no-such-tool: command not found")
    host.runner = SubprocessRunner(timeout=0.5)
    assert host.query(["sleep", "5"]).returncode == 124
