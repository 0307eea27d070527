"""A cell of a WAN table: one lab path (RTT, rate, MTU), the ends untuned or tuned, one file
size.  Cells are data: ``--paths 50ms/1gbit,10ms/2gbit@9000 --ends untuned,tuned --sizes 256``
makes four."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from dtnkit.errors import DtnkitError
from dtnkit.units import parse_ms, parse_rate

MiB = 2**20
ENDS = ("untuned", "tuned")


@dataclass(frozen=True)
class Path:
    rtt_ms: float
    rate_bps: int
    mtu: int = 1500


@dataclass(frozen=True)
class Cell:
    rtt_ms: float
    rate_bps: int
    tuned: bool
    size: int
    mtu: int = 1500

    @property
    def label(self) -> str:
        jumbo = f", MTU {self.mtu}" if self.mtu != 1500 else ""
        return (
            f"{self.rtt_ms:g} ms / {self.rate_bps / 1e9:g} Gbit/s{jumbo}, ends "
            f"{'tuned' if self.tuned else 'untuned'}, {self.size // MiB} MiB"
        )

    @property
    def short_label(self) -> str:
        """The cell in a summary row: ``50ms/1g untuned`` (the MTU and size when not the
        default)."""
        jumbo = f"@{self.mtu}" if self.mtu != 1500 else ""
        return (
            f"{self.rtt_ms:g}ms/{self.rate_bps / 1e9:g}g{jumbo} "
            f"{'tuned' if self.tuned else 'untuned'} {self.size // MiB}M"
        )

    @property
    def wire_floor_s(self) -> float:
        """The file's bits at the path's rate cap: no tool can finish sooner."""
        return self.size * 8 / self.rate_bps

    def as_json(self) -> dict[str, object]:
        return {
            "rtt_ms": self.rtt_ms,
            "rate_bps": self.rate_bps,
            "mtu": self.mtu,
            "tuned": self.tuned,
            "size": self.size,
        }


def parse_paths(text: str) -> list[Path]:
    """``RTT/RATE[@MTU]``, comma-separated (argparse type: one clear error)."""
    paths = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        rtt, slash, rest = item.partition("/")
        rate, _, mtu = rest.partition("@")
        try:
            if not slash or (mtu and not mtu.isdigit()):
                raise ValueError("RTT/RATE[@MTU]")
            p = Path(parse_ms(rtt), parse_rate(rate), int(mtu) if mtu else 1500)
        except (ValueError, DtnkitError):
            raise argparse.ArgumentTypeError(
                f"{item!r}: give RTT/RATE[@MTU], e.g. 50ms/1gbit or 50ms/5gbit@9000"
            ) from None
        if not 576 <= p.mtu <= 65535:
            raise argparse.ArgumentTypeError(f"{item!r}: MTU 576 to 65535")
        paths.append(p)
    if not paths:
        raise argparse.ArgumentTypeError("no path given, e.g. 50ms/1gbit")
    return paths


def parse_ends(text: str) -> list[str]:
    ends = [e.strip() for e in text.split(",") if e.strip()]
    if not ends or set(ends) - set(ENDS):
        raise argparse.ArgumentTypeError(f"{text!r}: give untuned, tuned or both")
    return ends


def parse_sizes(text: str) -> list[int]:
    """MiB, comma-separated, into bytes."""
    try:
        sizes = [int(s) * MiB for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: MiB, e.g. 256 or 64,1024") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1 MiB")
    return sizes


def cells(paths: list[Path], ends: list[str], sizes: list[int]) -> list[Cell]:
    """Every size x path x ends, in that nesting (a size's file is made once)."""
    return [
        Cell(p.rtt_ms, p.rate_bps, e == "tuned", s, p.mtu)
        for s in sizes
        for p in paths
        for e in ends
    ]
