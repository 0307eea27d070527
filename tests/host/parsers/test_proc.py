"""Unit tests for dtnkit.host.parsers.proc.

Fixtures: ``tests/fixtures/captured`` (public captures, see SOURCES.md), ``captured/local``
(captured on the development VM, see its README.md), ``captured/mail`` (quoted in a netdev mail)
and ``tests/fixtures/synthetic`` (hand-written from the tools' formats, see its README.md).
"""

from __future__ import annotations

import pytest
from tests.support.captures import (
    captured,
    local,
    synthetic,
)

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.proc import (
    Bond,
    Interrupt,
    parse_cpu_list,
    parse_governors,
    parse_meminfo,
    parse_proc_interrupts,
    parse_proc_net_bonding,
)

# --------------------------------------------------------------------------- cpus, governors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
        ("", []),
        ("\n", []),
        ("5", [5]),
        ("3,1,1-2", [1, 2, 3]),
        (local("sys-cpu-online.txt"), [0, 1]),
    ],
)
def test_cpu_list(text: str, expected: list[int]) -> None:
    assert parse_cpu_list(text) == expected


@pytest.mark.parametrize("text", ["a", "3-1", "0-", "1,,2", "0-7:2", "-1", "1 2"])
def test_cpu_list_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_cpu_list(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "intel-pstate.procfs-fixture.cpu1.scaling_available_governors.txt",
            ["performance", "powersave"],
        ),
        ("intel-pstate.procfs-fixture.cpu1.scaling_governor.txt", ["powersave"]),
        # 16 files concatenated by `cat cpu*/...`: duplicates are dropped
        ("amd-pstate-active.scaling_available_governors.16cpus.txt", ["performance", "powersave"]),
    ],
)
def test_governors(name: str, expected: list[str]) -> None:
    assert parse_governors(captured(name)) == expected


def test_governors_acpi_cpufreq_and_empty() -> None:
    text = "conservative ondemand userspace powersave performance schedutil \n"
    assert parse_governors(text) == [
        "conservative",
        "ondemand",
        "userspace",
        "powersave",
        "performance",
        "schedutil",
    ]
    assert parse_governors("") == []


# --------------------------------------------------------------------------- meminfo


def test_meminfo_capture() -> None:
    info = parse_meminfo(local("proc-meminfo.txt"))
    assert info["MemTotal"] == 24683656 * 1024
    assert info["MemFree"] == 24406744 * 1024
    assert info["HugePages_Total"] == 0  # no unit: kept as is
    assert info["Hugepagesize"] == 2048 * 1024
    assert "Active(anon)" in info
    assert len(info) == len(local("proc-meminfo.txt").splitlines())


@pytest.mark.parametrize("text", ["", "MemTotal: lots kB\n", "MemTotal 5 kB\n", "MemTotal: 5 MB\n"])
def test_meminfo_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_meminfo(text)


def test_meminfo_malformed_names_line() -> None:
    with pytest.raises(ParseError, match="line 2"):
        parse_meminfo("MemTotal: 1 kB\nbroken\n")


# --------------------------------------------------------------------------- /proc/interrupts


def test_interrupts_local_capture() -> None:
    text = local("proc-interrupts.firecracker-2cpu.txt")
    interrupts = parse_proc_interrupts(text)
    numeric = [line for line in text.splitlines()[1:] if line.split(":")[0].strip().isdigit()]
    assert len(interrupts) == len(numeric) == 19
    assert all(irq.irq.isdigit() and len(irq.counts) == 2 for irq in interrupts)
    by_irq = {irq.irq: irq for irq in interrupts}
    assert by_irq["36"] == Interrupt("36", (0, 32484), "PCI-MSIX-0000:00:02.0", "virtio1-req.0")
    assert by_irq["24"] == Interrupt("24", (1, 0), "IO-APIC", "ACPI:Ged")


def test_interrupts_mlx5_synthetic() -> None:
    interrupts = parse_proc_interrupts(synthetic("proc-interrupts.mlx5-4cpu.synthetic.txt"))
    assert [irq.irq for irq in interrupts] == [
        "0",
        "8",
        "9",
        "16",
        "120",
        "121",
        "122",
        "123",
        "124",
    ]
    comp = [irq for irq in interrupts if irq.name.startswith("mlx5_comp")]
    assert [irq.name for irq in comp] == [f"mlx5_comp{i}@pci:0000:3b:00.0" for i in range(4)]
    assert comp[1] == Interrupt("122", (0, 4987654, 0, 0), "IR-PCI-MSIX-0000:3b:00.0", comp[1].name)
    shared = next(irq for irq in interrupts if irq.irq == "16")
    assert (shared.chip, shared.name) == ("IO-APIC", "i801_smbus, ehci_hcd:usb1")


def test_interrupts_arm_gic_layout() -> None:
    text = (
        "           CPU0       CPU1       \n"
        " 11:      12345       6789     GICv3  27 Level     arch_timer\n"
        " 45:          7          0     GICv3 160 Edge      eth0\n"
        " 50:          0          0  ITS-MSI 524288 Edge      mlx5_comp0@pci:0000:01:00.0\n"
        "IPI0:       100        200       Rescheduling interrupts\n"
        " 60:          1          2\n"
    )
    irqs = parse_proc_interrupts(text)
    assert [(irq.irq, irq.chip, irq.name) for irq in irqs] == [
        ("11", "GICv3", "arch_timer"),
        ("45", "GICv3", "eth0"),
        ("50", "ITS-MSI", "mlx5_comp0@pci:0000:01:00.0"),
        ("60", "", ""),
    ]


def test_interrupts_old_chip_type_layout() -> None:
    text = "           CPU0\n 50:     123456   PCI-MSI-edge      eth0-TxRx-0\n"
    assert parse_proc_interrupts(text) == [
        Interrupt("50", (123456,), "PCI-MSI-edge", "eth0-TxRx-0")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 24: 1 0 IO-APIC 5-edge x\n",
        "           CPU0       CPU1\n 24:  1  IO-APIC 5-edge x\n",
        "           CPU0       CPU1\n 24  1  0  IO-APIC 5-edge x\n",
    ],
)
def test_interrupts_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_proc_interrupts(text)


# --------------------------------------------------------------------------- bonding


def test_bonding_capture() -> None:
    assert parse_proc_net_bonding(captured("bond0-802.3ad.proc-net-bonding.txt")) == Bond(
        mode="802.3ad", slaves=("eth1", "eth2")
    )


@pytest.mark.parametrize(
    ("mode_line", "mode"),
    [
        ("fault-tolerance (active-backup)", "active-backup"),
        ("load balancing (round-robin)", "balance-rr"),
        ("load balancing (xor)", "balance-xor"),
        ("adaptive load balancing", "balance-alb"),
        ("some future mode", "some future mode"),
    ],
)
def test_bonding_modes(mode_line: str, mode: str) -> None:
    text = (
        "Ethernet Channel Bonding Driver: v6.1.0\n\n"
        f"Bonding Mode: {mode_line}\nPrimary Slave: None\nCurrently Active Slave: ens1\n\n"
        "Slave Interface: ens1\nMII Status: up\n"
    )
    assert parse_proc_net_bonding(text) == Bond(mode=mode, slaves=("ens1",))


@pytest.mark.parametrize("text", ["", "Slave Interface: eth1\n", "Bonding Mode: \n"])
def test_bonding_malformed(text: str) -> None:
    with pytest.raises(ParseError):
        parse_proc_net_bonding(text)
