"""The buffer cap by RAM: no socket buffer above ``ram_fraction`` (dtn: 1/16) of RAM, and never
far below it.

The cap is ``ram_fraction x RAM`` with RAM the nominal (installed) size MemTotal comes from
(:func:`dtnkit.tune.context.nominal_ram`).  A 4 GiB host shows MemTotal 3.6-3.8 GiB (firmware,
the kernel, a crash kernel and the page structures take their share), which rounds to 3.75
GiB; rounding the cap down to a power of two then gave it 128 MiB, half of its 1/16.  The
audits run in-process on a copy of a captured tree with its MemTotal changed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import taken
from tests.tune.test_recommend import ctx, iface, want

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.tune.context import Want, nominal_ram

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
GiB, MiB = 2**30, 2**20
KEYS = (
    "sysctl/net.core.rmem_max",
    "sysctl/net.core.wmem_max",
    "sysctl/net.ipv4.tcp_rmem",
    "sysctl/net.ipv4.tcp_wmem",
)
# MemTotal (kB) of 4 GiB hosts (synthetic, in the range such hosts show): a KVM guest with a
# 192 MiB crash kernel (EL9's crashkernel=1G-4G:192M), one without, a physical host that
# loses a little more below 4 GiB to firmware
KB_4GIB_HOSTS = (3_770_000, 3_930_000, 3_700_000)


def _max(value: Any) -> int:
    """The largest figure of a value: a number, a triple as text or as a JSON array."""
    if isinstance(value, list):
        return int(value[-1])
    return int(str(value).split()[-1])


def audit_buffers(tree: Path, environment: Environment, kb: int) -> dict[str, dict[str, Any]]:
    path = tree / "proc/meminfo"
    lines = path.read_text().splitlines(keepends=True)
    lines[0] = f"MemTotal:       {kb} kB\n"
    path.write_text("".join(lines))
    main(
        [
            "tune",
            "audit",
            "--format",
            "json",
            "--tree",
            str(tree),
            "--group",
            "buffers",
            "--speed",
            "100gbit",
        ],
        environment,
    )
    return {f["key"]: f for f in json.loads(taken(environment.stdout))["findings"]}


def test_a_4gib_host_gets_a_sixteenth_of_its_ram(tmp_path: Path, environment: Environment) -> None:
    tree = tmp_path / "dtn-b"
    shutil.copytree(HOSTS / "dtn-b", tree, symlinks=True)
    for kb in KB_4GIB_HOSTS:
        found = audit_buffers(tree, environment, kb)
        for key in KEYS:
            top = _max(found[key]["recommended"])
            # at least 1/16 of what the kernel reports, at most 1/16 of 4 GiB (256 MiB)
            assert kb * 1024 / 16 <= top <= 256 * MiB, (kb, key, top)
            assert "of RAM" in found[key]["why"]


def test_the_why_says_the_cap(tmp_path: Path, environment: Environment) -> None:
    tree = tmp_path / "dtn-b"
    shutil.copytree(HOSTS / "dtn-b", tree, symlinks=True)
    found = audit_buffers(tree, environment, 3_770_000)  # sized as 3.75 GiB
    assert found["sysctl/net.ipv4.tcp_rmem"]["recommended"] == [4096, 131072, 240 * MiB]
    assert "capped at 0.0625 of RAM (3.75 GiB: 240 MiB)" in found["sysctl/net.ipv4.tcp_rmem"]["why"]


@settings(max_examples=300, deadline=None)
@given(kb=st.integers(min_value=256 * 1024, max_value=2**40 // 1024))
def test_the_cap_is_the_share_of_ram_at_every_size(kb: int) -> None:
    # from 256 MiB to 1 TiB of MemTotal, at 400G and 200 ms (the BDP is never the limit):
    # the largest buffer is 1/16 of the nominal size (at least 1/16 of MemTotal, never more
    # than 1/16 of MemTotal + 12.5 %), unless a clamp or the floor decides it
    mem_total = kb * 1024
    c = ctx(iface("ens1", 400_000), ram=mem_total, rtt=200.0)
    nominal = nominal_ram(mem_total)
    assert mem_total <= nominal <= mem_total * 1.125
    for key, clamp in (
        ("sysctl/net.core.rmem_max", 2147483647),
        ("sysctl/net.ipv4.tcp_rmem", 1073741824),
    ):
        w = want(c, key)
        assert isinstance(w, Want)
        top = _max(w.value)
        floor = 67108864 if key == "sysctl/net.core.rmem_max" else 33554432
        assert top == min(nominal // 16, clamp), (kb, key, top)
        if nominal // 16 < floor:  # a tiny host: the cap wins over the floor, as it says
            assert "capped at" in w.why
