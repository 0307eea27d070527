"""The audit's shortcuts give what the long way gave: links parsed once per rtnetlink dump,
the kernel config's lines kernel_caps reads, the irqbalance scan.

The host audit's wall time is measured by `python -m bench audit` and start-up by `python -m
bench cp-start` (docs/benchmarks.md), not by a list of modules a run must not load.
"""

from __future__ import annotations

import gzip
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import sh

from dtnkit.host import facts
from dtnkit.host.host import Host, parse_kernel_config


@pytest.fixture
def ns() -> Iterator[str]:
    name = f"aud{uuid.uuid4().hex[:8]}"
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "-n", name, "link", "add", "s20v0", "type", "veth", "peer", "name", "s20v1")
        yield name
    finally:
        sh("ip", "netns", "del", name, check=False)


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_links_parsed_once_per_dump_and_again_after_a_refresh(
    ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[bytes] = []
    real = facts.parse_links

    def counting(data: bytes) -> Any:
        parsed.append(data)
        return real(data)

    monkeypatch.setattr(facts, "parse_links", counting)
    host = Host.live(ns, read_only=True)
    first = facts.interfaces(host)
    assert facts.default_routes(host, "-4") == []
    assert facts.interfaces(host) == first
    assert len(parsed) == 1  # three reads of the links, one parse
    assert set(first) == {"lo", "s20v0", "s20v1"}
    sh("ip", "-n", ns, "link", "add", "s20d0", "type", "veth", "peer", "name", "s20d1")
    host.refresh()  # a new dump: parsed again, and what changed is seen
    assert set(facts.interfaces(host)) == {"lo", "s20v0", "s20v1", "s20d0", "s20d1"}
    assert len(parsed) == 2


# ---- kernel config: the lines kernel_caps reads --------------------------------------------

NEEDLES = ("CONFIG_NET_SCH_", "CONFIG_MODULES", "CONFIG_TCP_CONG_")
CRAFTED = "\n".join(
    [
        "#",
        "# Automatically generated file; DO NOT EDIT.",
        "CONFIG_MODULES=y",
        "CONFIG_NET_SCH_FQ=m",
        "# CONFIG_NET_SCH_FQ is not set",
        "CONFIG_NET_SCH_FQ=y",
        "# CONFIG_NET_SCH_TBF   is not set",
        "#  CONFIG_NET_SCH_HTB is not set",
        "# CONFIG_NET_SCH_NETEM is not set, really",
        "CONFIG_NET_SCH_CAKE",
        "CONFIG_TCP_CONG_BBR=m",
        "CONFIG_TCP_CONG_CUBIC=y",
        'CONFIG_DEFAULT_TCP_CONG="cubic"',
        'CONFIG_OTHER="CONFIG_NET_SCH_FQ_CODEL=y"',
        "CONFIG_TCP_CONG_BBR=x=m",
        "# CONFIG_TCP_CONG_VEGAS is not set",
        "CONFIG_NET_SCH_FQ_CODEL=",
    ]
)


def _tree(tmp_path: Path, text: str, *, gz: bool) -> Host:
    if gz:
        (tmp_path / "proc").mkdir(parents=True)
        (tmp_path / "proc/config.gz").write_bytes(gzip.compress(text.encode()))
    else:
        (tmp_path / "proc/sys/kernel").mkdir(parents=True)
        (tmp_path / "proc/sys/kernel/osrelease").write_text("6.1.0-test\n")
        (tmp_path / "boot").mkdir()
        (tmp_path / "boot/config-6.1.0-test").write_text(text)
    return Host.from_tree(tmp_path, read_only=True)


def assert_subset_agrees(host: Host) -> None:
    whole = host.kernel_config()
    only = host.kernel_config(only=NEEDLES)
    assert whole is not None and only is not None
    assert {k: whole[k] for k in only} == only  # the values the whole parse gives
    assert {k for k in whole if any(n in k for n in NEEDLES)} <= set(only)  # every symbol


@pytest.mark.parametrize(
    "text",
    [
        CRAFTED,
        CRAFTED + "\n",
        "\n\n" + CRAFTED,
        CRAFTED.replace("\n", "\r\n"),
        CRAFTED.replace("CONFIG_MODULES=y", "CONFIG_MODULES=y\x0c"),
    ],
    ids=["plain", "newline-end", "blank-start", "crlf", "formfeed"],
)
@pytest.mark.parametrize("gz", [True, False], ids=["config.gz", "boot"])
def test_kernel_config_only_agrees_with_the_whole_parse(
    tmp_path: Path, text: str, gz: bool
) -> None:
    assert_subset_agrees(_tree(tmp_path, text, gz=gz))


def test_kernel_config_only_keeps_the_last_of_a_symbol(tmp_path: Path) -> None:
    only = _tree(tmp_path, CRAFTED, gz=True).kernel_config(only=NEEDLES)
    assert only is not None
    assert only["CONFIG_NET_SCH_FQ"] == "y" and only["CONFIG_TCP_CONG_BBR"] == "x=m"
    assert only["CONFIG_NET_SCH_TBF"] == "n" and "CONFIG_NET_SCH_CAKE" not in only
    assert "CONFIG_NET_SCH_NETEM" not in only and "CONFIG_NET_SCH_HTB" not in only


@pytest.mark.skipif(not Path("/proc/config.gz").exists(), reason="no /proc/config.gz here")
def test_kernel_config_only_agrees_on_this_kernel() -> None:
    assert_subset_agrees(Host.live(read_only=True))


def test_parse_kernel_config_is_the_line_loop() -> None:
    assert parse_kernel_config(CRAFTED.splitlines())["CONFIG_NET_SCH_FQ_CODEL"] == ""
    assert parse_kernel_config(["# CONFIG_A is not set", "CONFIG_A=y"]) == {"CONFIG_A": "y"}


# ---- irqbalance: the /proc scan ------------------------------------------------------------


def test_process_running_finds_a_process_by_its_name(tmp_path: Path) -> None:
    comm = f"aud{uuid.uuid4().hex[:8]}"  # a name no other process has (comm: 15 at most)
    program = tmp_path / comm  # a script's process is named after the script
    program.write_text("#!/bin/sh\necho started\nread line\n")
    program.chmod(0o755)
    host = Host.live(read_only=True)
    assert host.process_running(comm) is False
    proc = subprocess.Popen(
        [str(program)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "started\n"
        assert host.process_running(comm) is True
        assert host.process_running(comm[:-1]) is False  # the whole name, as pgrep -x
    finally:
        proc.communicate("\n", timeout=10)  # its read ends, it exits
    assert host.process_running(comm) is False
