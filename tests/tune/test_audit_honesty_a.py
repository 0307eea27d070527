"""Issue 10 item 5, speed / memory / verdict half: audit claims no more than it knows.

Each test runs `dtnkit tune audit --tree T --format json` in-process on a copy of a captured
host tree (tests/fixtures/hosts) changed the way the issue's reproduction needs: a NIC that
reports no speed, a 16 GB host's MemTotal, tcp_mem values.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.tune.context import nominal_ram
from dtnkit.tune.kinds.base import Scope
from dtnkit.tune.registry import tunable_for_key
from dtnkit.units import parse_speed

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
GiB = 2**30
KB_16GB_HOST = 16318520  # MemTotal (kB) of a 16 GiB host: 15.56 GiB after the kernel's share


@pytest.fixture
def dtn_b(tmp_path: Path) -> Path:
    dst = tmp_path / "dtn-b"
    shutil.copytree(HOSTS / "dtn-b", dst, symlinks=True)
    return dst


def audit(environment: Environment, tree: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["tune", "audit", "--format", "json", "--tree", str(tree), *args], environment)
    return code, json.loads(taken(environment.stdout))


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in doc["findings"]}


def set_sysctl(tree: Path, name: str, value: str) -> None:
    (tree / "proc/sys" / name.replace(".", "/")).write_text(value.replace(" ", "\t") + "\n")


def set_memtotal(tree: Path, kb: int) -> None:
    path = tree / "proc/meminfo"
    lines = path.read_text().splitlines(keepends=True)
    lines[0] = f"MemTotal:       {kb} kB\n"
    path.write_text("".join(lines))


def kernel_tcp_mem(kb: int) -> str:
    """The kernel's default tcp_mem for a MemTotal (tcp_init_mem), as the fixtures take it."""
    limit = int(kb // 4 * 0.995) // 16
    low = limit // 4 * 3
    return f"{low} {limit} {low * 2}"


# ---- the verdict --------------------------------------------------------------------------


def test_only_unknown_items_make_the_host_not_compliant(
    dtn_b: Path, environment: Environment
) -> None:
    # ens2 reports no speed (a VM NIC, or a port without carrier): its pacing is unknown; the
    # one other pacing item is made to comply, so only ok and unknown remain
    set_sysctl(dtn_b, "net.core.default_qdisc", "fq")
    code, doc = audit(environment, dtn_b, "--group", "pacing", "--iface", "ens2")
    assert {f["status"] for f in doc["findings"]} == {"ok", "unknown"}
    assert code == ExitStatus.DRIFT and doc["compliant"] is False
    assert doc["undecided"] == [
        {"give": "--speed", "hint": "give --speed and audit again", "keys": ["qdisc/ens2/root"]}
    ]
    # the table says what to give too
    assert (
        main(
            ["tune", "audit", "--tree", str(dtn_b), "--group", "pacing", "--iface", "ens2"],
            environment,
        )
        == ExitStatus.DRIFT
    )
    table = taken(environment.stdout)
    assert "not compliant" in table and "give --speed" in table
    # and given the speed, the same host complies... except that it now differs: pfifo_fast
    code, doc = audit(
        environment, dtn_b, "--group", "pacing", "--iface", "ens2", "--speed", "25gbit"
    )
    assert rows(doc)["qdisc/ens2/root"]["status"] == "differs"
    assert doc["undecided"] == []


# ---- --speed ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["25gbit", "25G", "25g", "25000mbit", "25000Mb/s", "25"])
def test_speed_takes_units(text: str, dtn_b: Path, environment: Environment) -> None:
    code, doc = audit(environment, dtn_b, "--group", "buffers", "--speed", text)
    assert code == ExitStatus.DRIFT
    assert doc["decisions"][0] == {
        "what": "speed",
        "value": 25000,
        "why": "given with --speed: it sizes every speed-dependent item (buffers, tiers, "
        "pacing) on every selected interface, whatever the NICs report",
    }
    assert rows(doc)["sysctl/net.ipv4.tcp_rmem"]["recommended"] == [4096, 131072, 536870912]


def test_bare_speed_over_1000_is_refused_with_the_mbit_hint(
    dtn_b: Path, environment: Environment
) -> None:
    # ethtool says "Speed: 10000Mb/s"; pasted as --speed 10000 it was read as 10 Tbit/s
    code = main(["tune", "audit", "--tree", str(dtn_b), "--speed", "10000"], environment)
    err = taken(environment.stderr)
    assert code == ExitStatus.BAD_INPUT
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: ")
    assert "Mb/s" in err and "--speed 10000mbit" in err and "Traceback" not in err
    assert taken(environment.stdout) == ""


@pytest.mark.parametrize("text", ["nan", "-1", "inf", "0", "25Gbps", "fast", "1e3", "2000"])
def test_parse_speed_refuses(text: str) -> None:
    with pytest.raises(BadInput):
        parse_speed(text)


@pytest.mark.parametrize(
    ("text", "mbps"),
    [
        ("100G", 100_000),
        ("10000mbit", 10_000),
        ("2.5", 2_500),
        ("400gbit", 400_000),
        ("1000", 1_000_000),
        ("100M", 100),
    ],
)
def test_parse_speed_reads(text: str, mbps: int) -> None:
    assert parse_speed(text) == mbps


def test_speed_sizes_every_per_interface_item(
    dtn_b: Path, tmp_path: Path, environment: Environment
) -> None:
    # a site profile whose txqueuelen follows the speed tier: per-interface tiers and pacing
    # must follow --speed as the buffers do (enp1s0 reports 25G, ens2 nothing)
    site = tmp_path / "site.toml"
    site.write_text(
        'schema = 1\ninclude = ["dtn"]\n[tune."link/*/txqueuelen"]\n'
        "tiers = { 10 = 10000, 25 = 12000, 40 = 18000, 100 = 25000, 200 = 25000, "
        '400 = 25000 }\nsource = "test"\n'
    )
    # named with --iface: eno1 (1G, no default route) and ens2 are not data NICs by default
    code, doc = audit(
        environment,
        dtn_b,
        "--profile",
        str(site),
        "--speed",
        "100",
        "--iface",
        "eno1",
        "--iface",
        "enp1s0",
        "--iface",
        "ens2",
        "--group",
        "pacing",
        "--group",
        "backlog",
        "--group",
        "buffers",
    )
    assert code == ExitStatus.DRIFT
    found = rows(doc)
    for dev in ("eno1", "enp1s0", "ens2"):
        assert found[f"qdisc/{dev}/root"]["recommended"]["maxrate_bps"] == 20 * 10**9, dev
        assert found[f"link/{dev}/txqueuelen"]["recommended"] == 25000, dev
    assert found["sysctl/net.core.optmem_max"]["recommended"] == 1048576
    assert doc["undecided"] == []


# ---- RAM: the nominal size ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kb", "nominal_gib"),
    [
        (KB_16GB_HOST, 16),
        (24683584, 24),
        (65646488, 64),
        (263518136, 256),
        (int(192 * GiB * 0.975) // 1024, 192),
        (int(15 * GiB * 0.98) // 1024, 15),
        (int(8 * GiB * 0.96) // 1024, 8),
    ],
)
def test_nominal_ram_is_the_installed_size(kb: int, nominal_gib: int) -> None:
    assert nominal_ram(kb * 1024) == nominal_gib * GiB


def test_a_16gb_host_gets_1gib_buffers_at_100g(dtn_b: Path, environment: Environment) -> None:
    # pow2floor(MemTotal / 16) gave 512 MiB: MemTotal is a little under 16 GiB
    set_memtotal(dtn_b, KB_16GB_HOST)
    _, doc = audit(environment, dtn_b, "--group", "buffers", "--speed", "100")
    found = rows(doc)
    assert found["sysctl/net.ipv4.tcp_rmem"]["recommended"] == [4096, 131072, 1073741824]
    assert found["sysctl/net.core.rmem_max"]["recommended"] == 1073741824
    assert "of RAM (16 GiB: 1024 MiB)" in found["sysctl/net.core.rmem_max"]["why"]
    ram = [d for d in doc["decisions"] if d["what"] == "RAM"]
    assert ram and ram[0]["value"] == 16 * GiB


# ---- tcp_mem ------------------------------------------------------------------------------


def test_tcp_mem_too_small_for_the_buffers_is_flagged(
    dtn_b: Path, environment: Environment
) -> None:
    # 16 GB host, kernel default tcp_mem, 1 GiB sockets at 100G: the memory pressure
    set_memtotal(dtn_b, KB_16GB_HOST)
    set_sysctl(dtn_b, "net.ipv4.tcp_mem", kernel_tcp_mem(KB_16GB_HOST))
    code, doc = audit(environment, dtn_b, "--group", "buffers", "--speed", "100gbit")
    item = rows(doc)["sysctl/net.ipv4.tcp_mem"]
    assert item["status"] == "differs" and item["scope"] == "host" and code == ExitStatus.DRIFT
    # room for 4 full 1 GiB sockets before pressure: 4 GiB = 1048576 pages of 4 KiB
    assert item["recommended"] == [786432, 1048576, 1572864]
    assert "now 0 fit before pressure and 1 under the ceiling" in item["why"]
    assert "a full-size socket holds 1024 MiB" in item["why"]
    assert item["source"]


def test_tcp_mem_already_large_is_ok_and_never_lowered(
    dtn_b: Path, environment: Environment
) -> None:
    set_sysctl(dtn_b, "net.ipv4.tcp_mem", "3000000 4000000 6000000")
    _, doc = audit(environment, dtn_b, "--group", "buffers")
    item = rows(doc)["sysctl/net.ipv4.tcp_mem"]
    assert item["status"] == "ok"
    assert "never lowered" in item["why"] and "fit before pressure" in item["why"]


def test_tcp_mem_is_capped_at_half_the_ram(
    dtn_b: Path, tmp_path: Path, environment: Environment
) -> None:
    # a 4 GiB host whose site lets one socket take a quarter of RAM (1 GiB): 4 such sockets
    # before pressure would put the ceiling at 6 GiB; it stops at half the RAM and says so
    kb = int(4 * GiB * 0.97) // 1024
    set_memtotal(dtn_b, kb)
    set_sysctl(dtn_b, "net.ipv4.tcp_mem", kernel_tcp_mem(kb))
    site = tmp_path / "site.toml"
    site.write_text('schema = 1\ninclude = ["dtn"]\n[params]\nram_fraction = 0.25\n')
    _, doc = audit(
        environment, dtn_b, "--profile", str(site), "--group", "buffers", "--speed", "100gbit"
    )
    item = rows(doc)["sysctl/net.ipv4.tcp_mem"]
    low, pressure, high = item["recommended"]  # an array of integers in the JSON
    assert high * 4096 == 2 * GiB and pressure == high * 2 // 3 and low == pressure * 3 // 4
    assert "capped: max at 0.5 of RAM (4 GiB), so only 1 fit before pressure" in item["why"]


def test_tcp_mem_is_host_global() -> None:
    assert tunable_for_key("sysctl/net.ipv4.tcp_mem").scope is Scope.HOST


@pytest.fixture
def own_netns() -> Iterator[str]:
    name = f"dkaa-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.mark.needs_netns
def test_tcp_mem_is_host_scope_in_a_namespace(own_netns: str, environment: Environment) -> None:
    # the kernel has no tcp_mem inside a namespace: audit must say host-scope, not unsupported
    code = main(
        [
            "tune",
            "audit",
            "--format",
            "json",
            "--netns",
            own_netns,
            "--group",
            "buffers",
            "--speed",
            "10gbit",
        ],
        environment,
    )
    doc = json.loads(taken(environment.stdout))
    assert code in (ExitStatus.OK, ExitStatus.DRIFT)
    assert rows(doc)["sysctl/net.ipv4.tcp_mem"]["status"] == "host-scope"
