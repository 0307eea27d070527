"""A file whose bytes are not UTF-8 (an interface alias set in Latin-1, a hand-edited
capture) is read as-is, each odd byte as U+FFFD, the same way by every path of the Host seam:
a captured tree, the live host, a namespace's helper and a namespace read by `cat`.  The audit
reports it and goes on; before, UnicodeDecodeError reached the admin as a traceback."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.runners import CountingRunner

from conftest import HOSTS, Netns, sh, taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.host.host import Host
from dtnkit.host.runner import SubprocessRunner

ODD = b"caf\xe9 \xff\n"  # Latin-1 and a byte no encoding of text starts with
AS_READ = "caf\ufffd \ufffd\n"


def test_a_captured_tree_reads_odd_bytes_as_replacement_characters(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sys/class/net/eth0").mkdir(parents=True)
    (tree / "sys/class/net/eth0/ifalias").write_bytes(ODD)
    (tree / "cmd").mkdir()
    (tree / "cmd/ethtool-i-eth0.txt").write_bytes(b"$ ethtool -i eth0\ndriver: " + ODD)
    host = Host.from_tree(tree)
    assert host.read("/sys/class/net/eth0/ifalias") == AS_READ
    assert host.query(["ethtool", "-i", "eth0"]).stdout == "driver: " + AS_READ


@pytest.mark.parametrize("where", ["proc/config.gz", "boot/config-6.1.0-l21"])
def test_a_kernel_config_with_odd_bytes_is_read(tmp_path: Path, where: str) -> None:
    text = b"# Linux/x86 6.1.0 Kernel Configuration, built by caf\xe9\nCONFIG_NET_SCH_FQ=m\n"
    (tmp_path / where).parent.mkdir(parents=True)
    (tmp_path / where).write_bytes(gzip.compress(text) if where.endswith(".gz") else text)
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.1.0-l21\n")
    assert Host.from_tree(tmp_path).kernel_config() == {"CONFIG_NET_SCH_FQ": "m"}


def test_the_audit_of_a_tree_with_odd_bytes_reports_them_and_goes_on(
    tmp_path: Path, environment: Environment
) -> None:
    def audit(tree: Path) -> tuple[int, str]:
        code = main(["tune", "audit", "--tree", str(tree), "--format", "json"], environment)
        assert "Traceback" not in taken(environment.stderr)
        return code, taken(environment.stdout)

    tree = tmp_path / "dtn-a"
    shutil.copytree(HOSTS / "dtn-a", tree, symlinks=True)
    plain_code, _ = audit(tree)
    cc = tree / "proc/sys/net/ipv4/tcp_congestion_control"
    cc.write_bytes(b"cub\xffic\n")
    code, out = audit(tree)
    assert code == plain_code
    assert "cub\ufffdic" in json.dumps(json.loads(out), ensure_ascii=False)


def test_the_live_host_reads_odd_bytes_as_the_tree_does(tmp_path: Path) -> None:
    odd = tmp_path / "odd"
    odd.write_bytes(ODD)
    assert Host.live().read(str(odd)) == AS_READ
    assert SubprocessRunner().run(["cat", str(odd)]).stdout == AS_READ


@pytest.fixture
def ns() -> Iterator[Netns]:
    with Netns(prefix="l21") as made:
        yield made


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_a_namespace_reads_odd_bytes_as_the_host_does(ns: Netns) -> None:
    alias = "/sys/class/net/dkv0/ifalias"  # what `ip link set dkv0 alias ...` sets
    ns.run("sh", "-c", f"printf 'caf\\351 \\377\\n' > {alias}")
    assert ns.run("od", "-An", "-c", alias).stdout.split()[:5] == ["c", "a", "f", "351", "377"]
    # an interface named in Latin-1 (the kernel takes any bytes but / : and blanks), down:
    # its line of /proc/net/dev (read by `cat`, outside the batch) does not change
    sh(
        "ip",
        "-n",
        ns.name,
        "link",
        "add",
        "name",
        os.fsdecode(b"l\xe9x"),
        "type",
        "veth",
        "peer",
        "name",
        "l21y",
    )
    helper = Host.live(ns.name)  # the namespace's helper reads the files and runs `cat`
    by_cat = Host(Path("/"), netns=ns.name, runner=CountingRunner())  # a process each
    assert helper.read(alias) == by_cat.read(alias) == AS_READ

    def odd_line(host: Host) -> list[str]:
        return [
            line
            for line in (host.read("/proc/net/dev") or "").splitlines()
            if line.lstrip().startswith("l\ufffdx:")
        ]

    assert len(odd_line(helper)) == 1
    assert odd_line(helper) == odd_line(by_cat)
    assert ("cat", "/proc/net/dev") in {c[-2:] for c in by_cat.runner.calls}  # type: ignore[attr-defined]
