"""Issue 10 item 5, the interface-stack half: audit claims only what it knows.

- IPv6 wants a global address on a data interface and an IPv6 default route (not just
  ``disable_ipv6 = 0``, which a link-local address alone satisfies);
- ``--mtu`` raises members, then the bond or bridge, then its VLANs or macvlans, and audit
  checks every level (real namespaces: this kernel has no bonding, 8021q or dummy, so the stack
  is a bridge over veth members with a macvlan on top, which obey the same kernel rules);
- links below 10G or without the default route are not data interfaces unless ``--iface``
  names them, and audit says why;
- ``iommu=pt`` at 100G+, a bond's ``xmit_hash_policy``, NIC driver and firmware in the JSON.

The trees are copies of tests/fixtures/hosts/* changed in tmp_path.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def audit(capsys: pytest.CaptureFixture[str], tree: Path, *extra: str) -> dict[str, Any]:
    code, doc = run_json(capsys, "tune", "audit", "--tree", str(tree), "--format", "json", *extra)
    assert code in (ExitStatus.OK, ExitStatus.DRIFT), doc
    return dict(doc)


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in doc["findings"]}


def write_cmd(tree: Path, argv: str, body: str) -> None:
    """Replace the tree's captured output of ``argv`` (one file per command)."""
    first = f"$ {argv}\n"
    for path in (tree / "cmd").iterdir():
        if path.read_text().startswith(first):
            path.write_text(first + body + "\n")
            return
    raise AssertionError(f"{tree.name} has no capture of {argv}")


# --------------------------------------------------------------------------- IPv6


LINK_LOCAL_ONLY = json.dumps(
    [
        {
            "ifindex": 1,
            "ifname": "lo",
            "addr_info": [{"family": "inet6", "local": "::1", "prefixlen": 128, "scope": "host"}],
        },
        {
            "ifindex": 2,
            "ifname": "enp1s0",
            "addr_info": [
                {
                    "family": "inet6",
                    "local": "fe80::3efd:feff:fe12:3456",
                    "prefixlen": 64,
                    "scope": "link",
                }
            ],
        },
    ]
)


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_ipv6_link_local_only_is_not_dual_stack(
    capsys: pytest.CaptureFixture[str], tree: Path
) -> None:
    assert rows(audit(capsys, tree, "--group", "checks"))["check/ipv6"]["status"] == "ok"
    write_cmd(tree, "ip -6 -j addr show", LINK_LOCAL_ONLY)
    row = rows(audit(capsys, tree, "--group", "checks"))["check/ipv6"]
    assert row["status"] == "differs"
    assert "no global IPv6 address on enp1s0 (link-local only)" in row["current"]
    assert (tree / "proc/sys/net/ipv6/conf/all/disable_ipv6").read_text().strip() == "0"


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_a_unique_local_ipv6_address_is_not_dual_stack(
    capsys: pytest.CaptureFixture[str], tree: Path
) -> None:
    doc = json.loads(LINK_LOCAL_ONLY)
    doc[1]["addr_info"].append(
        {"family": "inet6", "local": "fd12:3456:789a::10", "prefixlen": 64, "scope": "global"}
    )
    write_cmd(tree, "ip -6 -j addr show", json.dumps(doc))
    row = rows(audit(capsys, tree, "--group", "checks"))["check/ipv6"]
    assert row["status"] == "differs"
    assert "no global IPv6 address on enp1s0 (unique-local fc00::/7 only" in row["current"]


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_ipv6_without_a_default_route_is_not_dual_stack(
    capsys: pytest.CaptureFixture[str], tree: Path
) -> None:
    write_cmd(tree, "ip -6 -j route show default", "[]")
    row = rows(audit(capsys, tree, "--group", "checks"))["check/ipv6"]
    assert row["status"] == "differs"
    assert row["current"] == "no IPv6 default route"


@pytest.mark.parametrize("tree", ["dtn-a"], indirect=True)
def test_ipv6_address_on_a_management_port_does_not_count(
    capsys: pytest.CaptureFixture[str], tree: Path
) -> None:
    # the global address and the v6 default route on a link that is not a data interface
    doc = json.loads((tree / "cmd/ip-6-j-addr-show.txt").read_text().split("\n", 1)[1])
    for link in doc:
        if link["ifname"] == "ens5f1np1":
            link["ifname"] = "bond0.111"  # moved away: data links keep link-local only
            link["addr_info"] = [a for a in link["addr_info"] if a["scope"] == "global"]
    write_cmd(tree, "ip -6 -j addr show", json.dumps(doc))
    row = rows(audit(capsys, tree, "--group", "checks", "--iface", "ens5f1np1"))["check/ipv6"]
    assert row["status"] == "differs"
    assert row["current"].startswith("no global IPv6 address on ens5f1np1")


# --------------------------------------------------------------------------- data interfaces


def test_a_1g_management_port_gets_no_advice(capsys: pytest.CaptureFixture[str]) -> None:
    tree = Path(__file__).parents[1] / "fixtures" / "hosts" / "dtn-b"
    doc = audit(capsys, tree)
    keys = set(rows(doc))
    assert not [k for k in keys if "/eno1/" in k], "eno1 (1G, no default route) was tuned"
    assert "link/enp1s0/mtu" in keys and "qdisc/enp1s0/root" in keys
    skipped = {
        d["value"]: d["why"] for d in doc["decisions"] if d["what"] == "not a data interface"
    }
    assert skipped["eno1"].startswith("1 Gbit/s, no default route")
    assert skipped["ens2"].startswith("no default route")  # 25G, down, no route
    assert [i["device"] for i in doc["interfaces"]] == ["enp1s0"]
    # --iface still names it on purpose
    named = rows(audit(capsys, tree, "--iface", "eno1"))
    assert {"link/eno1/mtu", "link/eno1/txqueuelen", "qdisc/eno1/root"} <= set(named)


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_a_1g_port_with_the_default_route_is_still_not_a_data_nic(
    capsys: pytest.CaptureFixture[str], tree: Path
) -> None:
    write_cmd(
        tree,
        "ip -j route show default",
        '[{"dst":"default","gateway":"192.0.2.1","dev":"eno1","metric":100,"flags":[]}]',
    )
    write_cmd(tree, "ip -6 -j route show default", "[]")
    doc = audit(capsys, tree)
    skipped = {
        d["value"]: d["why"] for d in doc["decisions"] if d["what"] == "not a data interface"
    }
    assert skipped["eno1"].startswith("1 Gbit/s (")  # speed alone; it has the route
    # the route decides nothing when no fast link has it: enp1s0 and ens2 stay data links
    assert [i["device"] for i in doc["interfaces"]] == ["enp1s0", "ens2"]


# --------------------------------------------------------------------------- iommu, bond hash


@pytest.mark.parametrize("tree", ["dtn-a"], indirect=True)
def test_100g_without_iommu_pt(capsys: pytest.CaptureFixture[str], tree: Path) -> None:
    row = rows(audit(capsys, tree, "--group", "checks"))["check/iommu"]
    assert (row["status"], row["current"], row["recommended"]) == ("differs", "not set", "pt")
    cmdline = tree / "proc/cmdline"
    cmdline.write_text(cmdline.read_text().rstrip("\n") + " intel_iommu=on iommu=pt\n")
    assert rows(audit(capsys, tree, "--group", "checks"))["check/iommu"]["status"] == "ok"


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_iommu_does_not_matter_at_25g(capsys: pytest.CaptureFixture[str], tree: Path) -> None:
    (tree / "proc/cmdline").write_text("BOOT_IMAGE=/boot/vmlinuz ro quiet\n")
    row = rows(audit(capsys, tree, "--group", "checks"))["check/iommu"]
    assert (row["status"], row["current"], row["recommended"]) == ("ok", "not set", "any")


@pytest.mark.parametrize("tree", ["dtn-a"], indirect=True)
def test_bond_with_layer2_hash(capsys: pytest.CaptureFixture[str], tree: Path) -> None:
    row = rows(audit(capsys, tree, "--group", "checks"))["check/bond-hash"]
    assert (row["status"], row["current"]) == ("differs", "bond0: layer2 (802.3ad)")
    proc = tree / "proc/net/bonding/bond0"
    proc.write_text(
        proc.read_text().replace(
            "Transmit Hash Policy: layer2 (0)", "Transmit Hash Policy: layer3+4 (1)"
        )
    )
    assert rows(audit(capsys, tree, "--group", "checks"))["check/bond-hash"]["status"] == "ok"
    # sysfs, where present, is read first
    sysfs = tree / "sys/class/net/bond0/bonding"
    sysfs.mkdir()
    (sysfs / "mode").write_text("802.3ad 4\n")
    (sysfs / "xmit_hash_policy").write_text("encap2+3 3\n")
    row = rows(audit(capsys, tree, "--group", "checks"))["check/bond-hash"]
    assert (row["status"], row["current"]) == ("differs", "bond0: encap2+3 (802.3ad)")
    (sysfs / "mode").write_text("active-backup 1\n")  # one member at a time: no hashing
    assert rows(audit(capsys, tree, "--group", "checks"))["check/bond-hash"]["status"] == "ok"


def test_driver_and_firmware_in_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    tree = Path(__file__).parents[1] / "fixtures" / "hosts" / "dtn-a"
    nics = {i["device"]: i for i in audit(capsys, tree, "--group", "checks")["interfaces"]}
    assert (nics["ens5f1np1"]["driver"], nics["ens5f1np1"]["firmware"]) == (
        "mlx5_core",
        "16.35.2000 (MT_0000000008)",
    )
    assert nics["ens1f0np0"]["firmware"] == "14.23.1020 (MT_2420110034)"


# --------------------------------------------------------------------------- MTU stack


def test_mtu_is_checked_over_the_whole_bond_stack(capsys: pytest.CaptureFixture[str]) -> None:
    tree = Path(__file__).parents[1] / "fixtures" / "hosts" / "dtn-a"
    doc = audit(capsys, tree, "--group", "nic")
    mtu = [f for f in doc["findings"] if f["key"].endswith("/mtu")]
    assert [f["device"] for f in mtu] == [
        "ens1f0np0",
        "ens1f1np1",
        "ens5f1np1",
        "bond0",
        "bond0.111",
    ]  # lowest first: the order apply raises
    status = {f["device"]: (f["current"], f["status"]) for f in mtu}
    assert status["bond0"] == (1500, "differs") and status["bond0.111"] == (1500, "differs")


@pytest.mark.parametrize("tree", ["dtn-a"], indirect=True)
def test_mtu_apply_on_a_tree_writes_members_bond_then_vlan(
    capsys: pytest.CaptureFixture[str], tree: Path, tmp_path: Path
) -> None:
    code, out = run_json(
        capsys,
        "tune",
        "apply",
        "--tree",
        str(tree),
        "--group",
        "nic",
        "--mtu",
        "--dry-run",
        "--format",
        "json",
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert code == ExitStatus.OK, out
    keys = [s["key"] for s in out["plan"] if s["key"].endswith("/mtu")]
    assert keys == [
        "link/ens1f0np0/mtu",
        "link/ens1f1np1/mtu",
        "link/bond0/mtu",
        "link/bond0.111/mtu",
    ]


def ip(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, check=check)


class Stack:
    """Namespace dkab…: bridge dkbr over veth members dkm0/dkm1 (peers dkp0/dkp1), macvlan
    dkbr.7 on the bridge (named like a VLAN,
    so it sorts before its lower device); all up, MTU 1500."""

    def __init__(self) -> None:
        self.ns = f"dkab{uuid.uuid4().hex[:8]}"
        self.devices = ("dkm0", "dkm1", "dkbr", "dkbr.7")

    def create(self) -> None:
        ip("netns", "add", self.ns)
        n = ("-n", self.ns)
        ip(*n, "link", "add", "dkbr", "type", "bridge")
        for i in (0, 1):
            ip(*n, "link", "add", f"dkm{i}", "type", "veth", "peer", "name", f"dkp{i}")
            ip(*n, "link", "set", f"dkm{i}", "master", "dkbr")
        ip(*n, "link", "add", "link", "dkbr", "name", "dkbr.7", "type", "macvlan", "mode", "bridge")
        for dev in ("dkbr", "dkm0", "dkm1", "dkp0", "dkp1", "dkbr.7"):
            ip(*n, "link", "set", dev, "up")

    def mtus(self) -> dict[str, int]:
        doc = json.loads(ip("-n", self.ns, "-j", "link", "show").stdout)
        return {link["ifname"]: link["mtu"] for link in doc if link["ifname"] in self.devices}

    def delete(self) -> None:
        ip("netns", "del", self.ns, check=False)


@pytest.fixture
def stack() -> Iterator[Stack]:
    s = Stack()
    try:
        s.create()
        yield s
    finally:
        s.delete()


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_kernel_refuses_an_upper_mtu_above_its_lower(stack: Stack) -> None:
    """Why the order matters: raising the macvlan before the bridge under it fails."""
    res = ip("-n", stack.ns, "link", "set", "dev", "dkbr.7", "mtu", "9000", check=False)
    assert res.returncode != 0
    assert stack.mtus()["dkbr.7"] == 1500


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_mtu_apply_raises_the_whole_stack_and_restore_lowers_it(
    capsys: pytest.CaptureFixture[str], stack: Stack, tmp_path: Path
) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    common = ["--netns", stack.ns, "--iface", "dkbr.7", "--group", "nic", "--format", "json"]
    code, out = run_json(capsys, "tune", "apply", *common, "--mtu", *state)
    assert code == ExitStatus.OK, out
    assert stack.mtus() == dict.fromkeys(stack.devices, 9000)
    code, doc = run_json(capsys, "tune", "audit", *common)
    mtu = {f["device"]: f["status"] for f in doc["findings"] if f["key"].endswith("/mtu")}
    assert mtu == dict.fromkeys(stack.devices, "ok")
    code, out = run_json(capsys, "tune", "restore", "--netns", stack.ns, "--format", "json", *state)
    assert code == ExitStatus.OK, out
    assert stack.mtus() == dict.fromkeys(stack.devices, 1500)


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_audit_flags_a_stack_left_at_1500_over_jumbo_members(
    capsys: pytest.CaptureFixture[str], stack: Stack
) -> None:
    """The reproduction: members at 9000, bridge and macvlan at 1500 used to audit ok."""
    for dev in ("dkm0", "dkm1"):
        ip("-n", stack.ns, "link", "set", "dev", dev, "mtu", "9000")
    assert stack.mtus()["dkbr"] == 1500 or stack.mtus()["dkbr.7"] == 1500
    code, doc = run_json(
        capsys,
        "tune",
        "audit",
        "--netns",
        stack.ns,
        "--iface",
        "dkbr.7",
        "--group",
        "nic",
        "--format",
        "json",
    )
    assert code == ExitStatus.DRIFT
    mtu = {
        f["device"]: (f["current"], f["status"])
        for f in doc["findings"]
        if f["key"].endswith("/mtu")
    }
    assert mtu["dkm0"] == (9000, "ok")
    assert mtu["dkbr.7"] == (1500, "differs")


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_restore_raises_the_stack_lowest_first(
    capsys: pytest.CaptureFixture[str], stack: Stack, tmp_path: Path
) -> None:
    """A jumbo baseline restored over a stack lowered by hand: link/dkbr.7/mtu sorts before
    link/dkbr/mtu (as bond0.111 before bond0), so key order alone writes the upper first and the
    kernel refuses it."""
    state = ["--state-dir", str(tmp_path / "state")]
    for dev in ("dkm0", "dkm1", "dkbr", "dkbr.7"):
        ip("-n", stack.ns, "link", "set", "dev", dev, "mtu", "9000")
    code, out = run_json(
        capsys, "tune", "save", "--netns", stack.ns, "--label", "jumbo", "--format", "json", *state
    )
    assert code == ExitStatus.OK, out
    ip("-n", stack.ns, "link", "set", "dev", "dkbr", "mtu", "1500")  # the kernel lowers dkbr.7
    for dev in ("dkm0", "dkm1"):
        ip("-n", stack.ns, "link", "set", "dev", dev, "mtu", "1500")
    assert stack.mtus() == dict.fromkeys(stack.devices, 1500)
    code, out = run_json(
        capsys, "tune", "restore", "jumbo", "--netns", stack.ns, "--format", "json", *state
    )
    assert code == ExitStatus.OK, out
    assert stack.mtus() == dict.fromkeys(stack.devices, 9000)
