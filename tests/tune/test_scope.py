"""tune never writes outside its scope (issue 10, item 1).

A key is accepted only when a kind claims it and a known group holds it; a site profile adds
only allow-listed network sysctls; each sysctl's scope is asked of the kernel (a write in a
throw-away namespace), and inside a namespace nothing host-global and no host file is written,
by apply or by restore.  The namespace tests use real namespaces named ``dksc…``.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, DtnkitError, ExitStatus
from dtnkit.host.host import Host
from dtnkit.host.sysctl_scope import ScopeProbe
from dtnkit.tune.kinds.sysctl import SysctlTunable
from dtnkit.tune.persist import SYSCTL_FILE
from dtnkit.tune.profile import build_profile, load_profile, site_sysctl_allowed
from dtnkit.tune.registry import accept_snapshot_key, in_known_group
from dtnkit.tune.snapshot import SCHEMA, Snapshot

ROOT = [pytest.mark.needs_root, pytest.mark.needs_netns]
SOURCE = 'source = "dksc test"'


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def host_sysctl(name: str) -> str:
    return Path("/proc/sys", name.replace(".", "/")).read_text()


class Ns:
    """A namespace of this file's own (``dksc`` + random), with a veth pair inside."""

    def __init__(self) -> None:
        self.name = f"dksc{uuid.uuid4().hex[:8]}"

    def create(self) -> None:
        sh("ip", "netns", "add", self.name)
        sh("ip", "-n", self.name, "link", "add", "dkscv0", "type", "veth", "peer", "name", "dkscv1")

    def delete(self) -> None:
        sh("ip", "netns", "del", self.name, check=False)

    def sysctl(self, name: str) -> str:
        return sh(
            "ip", "netns", "exec", self.name, "cat", "/proc/sys/" + name.replace(".", "/")
        ).stdout


@pytest.fixture
def ns() -> Iterator[Ns]:
    space = Ns()
    try:
        space.create()
        yield space
    finally:
        space.delete()


def run(env: Environment, *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv), env)
    out, err = taken(env.stdout), taken(env.stderr)
    return code, json.loads(out) if out.strip() else None, err


def write_profile(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "dksc-site.toml"
    path.write_text(f'include = ["dtn"]\n{body}')
    return path


def netns_snapshot(
    env: Environment, ns: Ns, values: dict[str, Any], files: dict[str, str | None] | None = None
) -> str:
    """A snapshot saved by `tune save` in ``ns``, then given extra values and files."""
    code, saved, err = run(
        env,
        "tune",
        "save",
        "--netns",
        ns.name,
        "--label",
        "dksc",
        "--state-dir",
        str(env.state_dir),
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    path = Path(saved["path"])
    doc = json.loads(path.read_text())
    doc["values"].update(values)
    doc["files"] = files or {}
    path.write_text(json.dumps(doc))
    return str(saved["id"])


# ---- key acceptance (no root) -------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "kernel.core_pattern",
        "vm.swappiness",
        "fs.file-max",
        "net.ipv4.ip_forward",
        "net.ipv4.conf.all.rp_filter",
        "net.core.bpf_jit_harden",
        "net.ipv6.conf.all.forwarding",
    ],
)
def test_a_site_profile_may_not_add_a_sysctl_outside_the_allow_list(name: str) -> None:
    raw = {
        "params": dict(load_profile("dtn", ()).params),
        "tune": {f"sysctl/{name}": {"value": 1, "group": "congestion", "source": "s"}},
    }
    with pytest.raises(BadInput) as err:
        build_profile("site", raw, ())
    assert err.value.status is ExitStatus.BAD_INPUT
    assert f"sysctl/{name}" in err.value.what
    assert "net.ipv4.tcp_*" in err.value.why  # names the allow-list
    assert "docs/profiles.md" in err.value.why


@pytest.mark.parametrize(
    "name",
    [
        "net.ipv4.tcp_notsent_lowat",
        "net.core.somaxconn",
        "net.ipv4.udp_rmem_min",
        "net.ipv4.ip_local_port_range",
    ],
)
def test_allow_listed_network_sysctls_are_accepted_with_a_group(name: str) -> None:
    assert site_sysctl_allowed(name)
    raw = {
        "params": dict(load_profile("dtn", ()).params),
        "tune": {f"sysctl/{name}": {"value": 1, "group": "buffers", "source": "s"}},
    }
    assert build_profile("site", raw, ()).items[f"sysctl/{name}"].group == "buffers"


@pytest.mark.parametrize(
    "key",
    [
        "sysctl/net.ipv4.tcp_rmem",
        "link/eth0/txqueuelen",
        "qdisc/ens5f1np1/root",
        "ring/eth0/rx",
        "cpu/governor",
        "sysctl/net.ipv4.tcp_notsent_lowat",
    ],
)
def test_snapshot_keys_in_a_known_group_are_accepted(key: str) -> None:
    assert in_known_group(key)
    assert accept_snapshot_key(key, "snapshot t").key == key


@pytest.mark.parametrize(
    "key",
    [
        "sysctl/kernel.core_pattern",
        "sysctl/vm.swappiness",
        "sysctl/net.ipv4.ip_forward",
        "link/eth0/mtu/x",
        "sysctl/../../etc/passwd",
        "sysctl/net..x",
    ],
)
def test_snapshot_keys_outside_every_group_are_bad_input(key: str) -> None:
    doc = {"schema": SCHEMA, "id": "x", "kind": "manual", "created": "t", "values": {key: "1"}}
    with pytest.raises(BadInput) as err:
        Snapshot.from_dict(doc, "snapshot x")
    assert err.value.status is ExitStatus.BAD_INPUT
    assert key in err.value.what


# ---- the kernel's own answer: the probe ---------------------------------------------------
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_the_probe_asks_the_kernel_once_per_batch_and_changes_nothing_on_the_host() -> None:
    names = [
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_no_metrics_save",
        "net.ipv4.tcp_congestion_control",
        "net.core.rmem_max",
        "net.core.netdev_max_backlog",
        "net.ipv4.tcp_mem",
        "kernel.core_pattern",
        "vm.swappiness",
    ]
    before = {n: host_sysctl(n) for n in names}
    probe = ScopeProbe()
    verdicts = probe.classify(names)
    assert {n: v.per_netns for n, v in verdicts.items()} == {
        "net.ipv4.tcp_rmem": True,  # a write in a new namespace leaves the host alone
        "net.ipv4.tcp_no_metrics_save": True,
        "net.ipv4.tcp_congestion_control": True,
        "net.core.rmem_max": False,  # read-only in a new namespace (shared)
        "net.core.netdev_max_backlog": False,  # absent in a new namespace
        "net.ipv4.tcp_mem": False,
        "kernel.core_pattern": False,  # the namespace sees the host's own file
        "vm.swappiness": False,
    }
    assert "read-only" in verdicts["net.core.rmem_max"].why
    assert "absent" in verdicts["net.core.netdev_max_backlog"].why
    assert "host's own file" in verdicts["kernel.core_pattern"].why
    assert probe.probes == 1
    probe.classify(["net.ipv4.tcp_rmem", "kernel.core_pattern"])  # cached: no new probe
    assert probe.probes == 1
    assert {n: host_sysctl(n) for n in names} == before
    alone = ScopeProbe()  # only absent keys: still one answer, not a failed probe
    assert alone.classify(["net.core.netdev_max_backlog"])["net.core.netdev_max_backlog"].final
    assert alone.probes == 1


def test_a_probe_that_cannot_run_classes_every_key_host_global() -> None:
    class Failing:
        def run(self, argv: Any, *, stdin: str | None = None) -> Any:
            from dtnkit.host.runner import Result

            return Result(tuple(argv), 1, "", "unshare: Operation not permitted")

    probe = ScopeProbe(runner=Failing())
    verdict = probe.classify(["net.ipv4.tcp_rmem"])["net.ipv4.tcp_rmem"]
    assert not verdict.per_netns
    assert "Operation not permitted" in verdict.why
    assert probe.probes == 2 and probe.cache == {}  # asked again once, a doubt never cached


class Leaking:
    """A stand-in for the throw-away namespace whose write reaches the "host" file (what a
    global-but-writable key would do), or where someone else changes the host meanwhile."""

    def __init__(self, host_file: Path, value: str | None) -> None:
        self.host_file, self.value, self.calls = host_file, value, 0

    def run(self, argv: Any, *, stdin: str | None = None) -> Any:
        from dtnkit.host.runner import Result

        self.calls += 1
        if self.calls > 1:
            return Result(tuple(argv), 1, "", "unshare: no more this time")
        written = self.value if self.value is not None else "4096 131072 6291455"
        self.host_file.write_text(written + "\n")
        out = "P 1 644 /proc/sys/net/ipv4/tcp_rmem\nW 0 1 4096 131072 6291455\n"
        return Result(tuple(argv), 0, out, "")


def test_a_write_that_reaches_the_host_classes_the_key_global_and_is_put_back(
    tmp_path: Path,
) -> None:
    host_file = tmp_path / "net" / "ipv4" / "tcp_rmem"
    host_file.parent.mkdir(parents=True)
    host_file.write_text("4096\t131072\t6291456\n")
    probe = ScopeProbe(runner=Leaking(host_file, None), proc_sys=tmp_path)
    verdict = probe.classify(["net.ipv4.tcp_rmem"])["net.ipv4.tcp_rmem"]
    assert not verdict.per_netns and "changed the host's value (put back)" in verdict.why
    assert host_file.read_text() == "4096\t131072\t6291456\n"
    assert "net.ipv4.tcp_rmem" in probe.cache


def test_a_host_value_changed_by_someone_else_is_a_doubt_and_is_not_reverted(
    tmp_path: Path,
) -> None:
    host_file = tmp_path / "net" / "ipv4" / "tcp_rmem"
    host_file.parent.mkdir(parents=True)
    host_file.write_text("4096\t131072\t6291456\n")
    probe = ScopeProbe(runner=Leaking(host_file, "4096 87380 9999999"), proc_sys=tmp_path)
    verdict = probe.classify(["net.ipv4.tcp_rmem"])["net.ipv4.tcp_rmem"]
    assert not verdict.per_netns and not verdict.final
    assert host_file.read_text() == "4096 87380 9999999\n"  # someone else's value stays
    assert probe.probes == 2 and probe.cache == {}  # asked again, and no answer is cached


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_a_host_global_sysctl_is_never_written_inside_a_namespace(ns: Ns) -> None:
    before = host_sysctl("vm.stat_interval")
    try:
        with pytest.raises(DtnkitError, match=r"refusing to write vm\.stat_interval"):
            SysctlTunable("vm.stat_interval").write(Host.live(ns.name), str(int(before) + 1))
    finally:
        if host_sysctl("vm.stat_interval") != before:  # only on a broken dtnkit
            Path("/proc/sys/vm/stat_interval").write_text(before)
    assert host_sysctl("vm.stat_interval") == before


# ---- apply and audit in a namespace -------------------------------------------------------
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_a_profile_adding_kernel_core_pattern_is_refused_and_nothing_is_written(
    ns: Ns, environment: Environment, tmp_path: Path
) -> None:
    profile = write_profile(
        tmp_path,
        '[tune."sysctl/kernel.core_pattern"]\n'
        f'value = "|/bin/false dksc"\ngroup = "congestion"\n{SOURCE}\n',
    )
    core, rmem = host_sysctl("kernel.core_pattern"), ns.sysctl("net.ipv4.tcp_rmem")
    for extra in (("--dry-run",), ()):
        code, out, err = run(
            environment,
            "tune",
            "apply",
            "--netns",
            ns.name,
            "--profile",
            str(profile),
            "--state-dir",
            str(environment.state_dir),
            "--format",
            "json",
            *extra,
        )
        assert code == ExitStatus.BAD_INPUT, (extra, err)
        assert "sysctl/kernel.core_pattern" in out["error"]["what"]
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "sysctl/kernel.core_pattern" in err and "net.ipv4.tcp_*" in err
    assert host_sysctl("kernel.core_pattern") == core
    assert ns.sysctl("net.ipv4.tcp_rmem") == rmem
    assert not environment.state_dir.exists()  # no baseline, no lock: nothing written


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_an_allow_listed_key_the_kernel_keeps_global_is_host_scope_and_never_planned(
    ns: Ns, environment: Environment, tmp_path: Path
) -> None:
    # net.ipv4.tcp_mem matches net.ipv4.tcp_* but the kernel keeps it for the host
    mem = host_sysctl("net.ipv4.tcp_mem")
    profile = write_profile(
        tmp_path,
        '[tune."sysctl/net.ipv4.tcp_mem"]\n'
        f'value = "1 2 3"\nmode = "exact"\ngroup = "buffers"\n{SOURCE}\n',
    )
    code, audit, err = run(
        environment,
        "tune",
        "audit",
        "--netns",
        ns.name,
        "--profile",
        str(profile),
        "--group",
        "buffers",
        "--format",
        "json",
    )
    found = {f["key"]: f for f in audit["findings"]}
    assert found["sysctl/net.ipv4.tcp_mem"]["status"] == "host-scope"
    assert found["sysctl/net.ipv4.tcp_mem"]["scope"] == "host"
    assert "absent in a new network namespace" in found["sysctl/net.ipv4.tcp_mem"]["why"]
    assert found["sysctl/net.core.rmem_max"]["status"] == "host-scope"
    assert found["sysctl/net.ipv4.tcp_rmem"]["scope"] == "netns"
    code, plan, err = run(
        environment,
        "tune",
        "apply",
        "--netns",
        ns.name,
        "--profile",
        str(profile),
        "--group",
        "buffers",
        "--speed",
        "10",
        "--dry-run",
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    planned = [s["key"] for s in plan["plan"]]
    assert "sysctl/net.ipv4.tcp_mem" not in planned
    assert not [k for k in planned if k.startswith("sysctl/net.core.rmem")]
    assert host_sysctl("net.ipv4.tcp_mem") == mem


# ---- restore in a namespace ---------------------------------------------------------------
@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_restore_in_a_namespace_refuses_a_snapshot_naming_a_kernel_key(
    ns: Ns, environment: Environment
) -> None:
    before = host_sysctl("vm.stat_interval")
    snap = netns_snapshot(environment, ns, {"sysctl/vm.stat_interval": int(before) + 1})
    try:
        code, _, err = run(
            environment,
            "tune",
            "restore",
            snap,
            "--netns",
            ns.name,
            "--state-dir",
            str(environment.state_dir),
        )
    finally:
        if host_sysctl("vm.stat_interval") != before:  # only on a broken dtnkit
            Path("/proc/sys/vm/stat_interval").write_text(before)
    assert code == ExitStatus.BAD_INPUT, err
    assert "sysctl/vm.stat_interval" in err and "Traceback" not in err
    assert host_sysctl("vm.stat_interval") == before


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_restore_in_a_namespace_skips_host_global_keys_with_a_line_and_leaves_the_host(
    ns: Ns, environment: Environment
) -> None:
    rmem_max, backlog = host_sysctl("net.core.rmem_max"), host_sysctl("net.core.netdev_max_backlog")
    snap = netns_snapshot(
        environment,
        ns,
        {
            "sysctl/net.core.rmem_max": 1234567,
            "sysctl/net.core.netdev_max_backlog": 4321,
            "sysctl/net.ipv4.tcp_no_metrics_save": 1,
        },
    )
    code, dry, err = run(
        environment,
        "tune",
        "restore",
        snap,
        "--netns",
        ns.name,
        "--state-dir",
        str(environment.state_dir),
        "--dry-run",
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    assert [s["key"] for s in dry["plan"]] == ["sysctl/net.ipv4.tcp_no_metrics_save"]
    code, out, err = run(
        environment,
        "tune",
        "restore",
        snap,
        "--netns",
        ns.name,
        "--state-dir",
        str(environment.state_dir),
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    assert [s["key"] for s in out["applied"]] == ["sysctl/net.ipv4.tcp_no_metrics_save"]
    for result in (dry, out):
        skipped = "\n".join(result["skipped"])
        assert "sysctl/net.core.rmem_max: global to the host" in skipped
        assert "sysctl/net.core.netdev_max_backlog: global to the host" in skipped
    assert host_sysctl("net.core.rmem_max") == rmem_max
    assert host_sysctl("net.core.netdev_max_backlog") == backlog
    assert ns.sysctl("net.ipv4.tcp_no_metrics_save").strip() == "1"
    # people see the same lines
    code = main(
        [
            "tune",
            "restore",
            snap,
            "--netns",
            ns.name,
            "--state-dir",
            str(environment.state_dir),
            "--dry-run",
        ],
        environment,
    )
    text = taken(environment.stdout)
    assert code == ExitStatus.OK
    assert "left alone: sysctl/net.core.rmem_max: global to the host" in text


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_restore_in_a_namespace_never_writes_the_hosts_persist_files(
    ns: Ns, environment: Environment
) -> None:
    path = Path(SYSCTL_FILE)
    existed = path.exists()
    before = (path.read_text(), path.stat().st_mtime_ns) if existed else None
    snap = netns_snapshot(
        environment, ns, {}, files={SYSCTL_FILE: "# dksc: must never reach the host\n"}
    )
    try:
        code, out, err = run(
            environment,
            "tune",
            "restore",
            snap,
            "--netns",
            ns.name,
            "--state-dir",
            str(environment.state_dir),
            "--format",
            "json",
        )
        after = (path.read_text(), path.stat().st_mtime_ns) if path.exists() else None
    finally:
        if not existed and path.exists() and "dksc" in path.read_text():
            os.unlink(path)  # only on a broken dtnkit: the file this test made
    assert code == ExitStatus.OK, err
    assert after == before
    assert out["persisted"] == []
    assert any(
        line.startswith(f"{SYSCTL_FILE}: a host file; not restored") for line in out["skipped"]
    )
