"""`python -m dtnkit.sweep.ports COUNT`: COUNT distinct ports the kernel picked, in the network
namespace it runs in; a bad COUNT is a usage error."""

from __future__ import annotations

import subprocess

import pytest

from dtnkit.sweep import ports


@pytest.mark.parametrize("count", [1, 2, 5])
def test_it_prints_count_distinct_ports(count: int) -> None:
    out = subprocess.run(
        ports.command(count), capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    got = [int(p) for p in out]
    assert len(got) == len(set(got)) == count
    assert all(0 < p < 65536 for p in got)


@pytest.mark.parametrize("args", [[], ["0"], ["-1"], ["two"], ["1001"], ["1", "2"]])
def test_a_bad_count_is_a_usage_error(args: list[str]) -> None:
    proc = subprocess.run(
        [*ports.command(1)[:-1], *args], capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 2
    assert "usage:" in proc.stderr and proc.stdout == ""
