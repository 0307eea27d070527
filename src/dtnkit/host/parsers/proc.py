"""Parsers for ``/proc`` and ``/sys`` files: CPU lists, governors, meminfo, interrupts, bonding.

The formats, as the kernel prints them (checked against the real captures under
``tests/fixtures/captured``):

``/proc`` and ``/sys``
    ``/sys/devices/system/cpu/online`` style CPU lists (``0-3,8,10-11``);
    ``scaling_available_governors`` (space separated); ``/proc/meminfo`` (``Key:  N kB``);
    ``/proc/interrupts`` (a ``CPU0 CPU1 ...`` header, then ``IRQ: counts... chip hwirq-type
    name``; non-numeric rows such as ``NMI``/``LOC`` are per-CPU counters, not IRQs);
    ``/proc/net/bonding/BOND`` (``Bonding Mode:`` and ``Slave Interface:`` rows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dtnkit.host.parsers import (
    ParseError,
    error_at,
    is_uint,
    require_text,
)


def parse_cpu_list(text: str) -> list[int]:
    """Parse a kernel CPU list (``0-3,8,10-11``) into sorted unique CPU numbers; blank -> []."""
    source = "cpu list"
    if not isinstance(text, str):
        raise ParseError(f"{source}: expected text (str), got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        return []
    cpus: set[int] = set()
    for part in stripped.split(","):
        match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", part)
        if match is None:
            raise ParseError(f"{source}: cannot parse {part!r} in {stripped!r}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ParseError(f"{source}: descending range {part!r} in {stripped!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def parse_governors(text: str) -> list[str]:
    """Whitespace-separated governor names, first-seen order, duplicates dropped."""
    if not isinstance(text, str):
        raise ParseError(f"governors: expected text (str), got {type(text).__name__}")
    return list(dict.fromkeys(text.split()))


_MEMINFO_RE = re.compile(r"^(?P<key>[^:\s][^:]*):\s*(?P<value>[0-9]+)(?:\s+(?P<unit>kB))?\s*$")


def parse_meminfo(text: str) -> dict[str, int]:
    """Parse ``/proc/meminfo``: ``kB`` values converted to bytes, unitless values as int."""
    source = "/proc/meminfo"
    require_text(text, source)
    info: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _MEMINFO_RE.match(line.strip())
        if match is None:
            raise error_at(source, "expected 'Key: N [kB]'", lineno, line)
        value = int(match["value"])
        info[match["key"]] = value * 1024 if match["unit"] else value
    return info


@dataclass(frozen=True, slots=True)
class Interrupt:
    """One numbered IRQ row of ``/proc/interrupts``.

    ``chip`` is the first field after the counts (``IR-PCI-MSIX-0000:3b:00.0``, ``IO-APIC``,
    ``GICv3``); ``name`` is the text after the hwirq/trigger fields, as printed
    (``mlx5_comp0@pci:0000:3b:00.0``, ``i801_smbus, ehci_hcd:usb1``); either may be "".
    """

    irq: str
    counts: tuple[int, ...]
    chip: str
    name: str


_HWIRQ_RE = re.compile(r"\d+(?:-[A-Za-z]+)?")


def parse_proc_interrupts(text: str) -> list[Interrupt]:
    """Parse ``/proc/interrupts``; only numeric IRQ rows (NMI, LOC, ERR ... are skipped)."""
    source = "/proc/interrupts"
    require_text(text, source)
    lines = text.splitlines()
    header_index = next(index for index, line in enumerate(lines) if line.strip())
    cpus = lines[header_index].split()
    if not cpus or not all(re.fullmatch(r"CPU\d+", cpu) for cpu in cpus):
        raise error_at(
            source, "expected a 'CPU0 CPU1 ...' header", header_index + 1, lines[header_index]
        )
    interrupts: list[Interrupt] = []
    for lineno, line in enumerate(lines[header_index + 1 :], header_index + 2):
        if not line.strip():
            continue
        tokens = list(re.finditer(r"\S+", line))
        first = tokens[0].group()
        if not first.endswith(":"):
            raise error_at(source, "expected 'IRQ: counts...'", lineno, line)
        irq = first[:-1]
        if not irq.isdigit():
            continue
        count_tokens = [token.group() for token in tokens[1 : 1 + len(cpus)]]
        if len(count_tokens) != len(cpus) or not all(is_uint(token) for token in count_tokens):
            raise error_at(source, f"expected {len(cpus)} per-CPU counts", lineno, line)
        rest = tokens[1 + len(cpus) :]
        chip = rest[0].group() if rest else ""
        position = 1
        if position < len(rest) and _HWIRQ_RE.fullmatch(rest[position].group()):
            position += 1
            if position < len(rest) and rest[position].group() in ("Edge", "Level"):
                position += 1
        name = line[rest[position].start() :].strip() if position < len(rest) else ""
        interrupts.append(
            Interrupt(
                irq=irq,
                counts=tuple(int(token) for token in count_tokens),
                chip=chip,
                name=name,
            )
        )
    return interrupts


@dataclass(frozen=True, slots=True)
class Bond:
    """A bond from ``/proc/net/bonding/BOND``.

    ``mode`` is the short name that ip and sysfs use (``802.3ad``, ``active-backup``,
    ``balance-rr`` ...) when the printed description is known, else the description as printed.
    """

    mode: str
    slaves: tuple[str, ...]


_BOND_MODES = {
    "load balancing (round-robin)": "balance-rr",
    "fault-tolerance (active-backup)": "active-backup",
    "load balancing (xor)": "balance-xor",
    "fault-tolerance (broadcast)": "broadcast",
    "IEEE 802.3ad Dynamic link aggregation": "802.3ad",
    "transmit load balancing": "balance-tlb",
    "adaptive load balancing": "balance-alb",
}


def parse_proc_net_bonding(text: str) -> Bond:
    """Parse ``/proc/net/bonding/BOND``: the mode and the slave interfaces in order."""
    source = "/proc/net/bonding"
    require_text(text, source)
    mode: str | None = None
    slaves: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Bonding Mode":
            mode = _BOND_MODES.get(value, value)
        elif key == "Slave Interface":
            if not value:
                raise error_at(source, "empty slave name", lineno, line)
            slaves.append(value)
    if not mode:
        raise ParseError(f"{source}: no 'Bonding Mode:' line")
    return Bond(mode=mode, slaves=tuple(slaves))
