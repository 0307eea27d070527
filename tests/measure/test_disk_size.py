"""The storage probe's size: limited by the room where the file goes (free space, and RAM
for a file system in memory), not by a fixed 2 GiB.  Real fio on real tmpfs mounts."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")


def probe(
    capsys: pytest.CaptureFixture[str], path: Path, size: str, db: Path | None = None
) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(
        [
            "probe",
            "disk",
            "--path",
            str(path),
            "--size",
            size,
            "--buffered",
            "--db",
            str(db or path.parent / "r.sqlite"),
            "--format",
            "json",
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable")


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mount a tmpfs of a given size (root only), unmounted at the end."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"prg-{uuid.uuid4().hex[:6]}"
        where.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "prg-tmpfs", str(where)], check=True
        )
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", str(where)], check=True)


@pytest.mark.needs_root
def test_a_size_that_does_not_fit_is_refused_before_fio_runs(
    capsys: pytest.CaptureFixture[str], tmpfs: Callable[[str], Path]
) -> None:
    small = tmpfs("64m")
    # 4 GiB, as the docs show, used to be refused as "out of range" (over 2 GiB) everywhere;
    # now it is refused only where it does not fit, saying how much does
    code, doc = probe(capsys, small, "4GiB")
    assert code == ExitStatus.BAD_INPUT, doc
    err = doc["error"]
    assert err["what"] == f"--size 4.0 GiB does not fit in {small}"
    assert "64 MiB is free" in err["why"] and "leaves a tenth" in err["why"]
    assert err["next"] == "give --size 57MiB or less, or another --path"
    assert list(small.iterdir()) == []  # nothing written, not even the empty probe file

    code, doc = probe(capsys, small, "57MiB")  # what the error offered runs
    assert code == ExitStatus.OK, doc
    assert doc["summary"]["size_bytes"] == 57 * 2**20
    assert list(small.iterdir()) == []


@pytest.mark.needs_root
def test_in_memory_the_limit_is_the_ram_available(
    capsys: pytest.CaptureFixture[str], tmpfs: Callable[[str], Path]
) -> None:
    big = tmpfs("1024g")  # a tmpfs may be larger than RAM: its free space is not the limit
    ask = int(mem_available() * 0.95) // 2**20
    code, doc = probe(capsys, big, f"{ask}MiB")
    assert code == ExitStatus.BAD_INPUT, doc
    assert f"{big} is in memory (tmpfs)" in doc["error"]["why"]
    assert "of RAM is available" in doc["error"]["why"]
    assert list(big.iterdir()) == []


def test_more_than_2_gib_runs_where_it_fits(capsys: pytest.CaptureFixture[str]) -> None:
    """2.25 GiB in a directory of /dev/shm (buffered: tmpfs; ~15 s on a loaded 2-core box)."""
    where = Path(f"/dev/shm/dtnkit-prg-{uuid.uuid4().hex[:8]}")
    where.mkdir()
    try:
        code, doc = probe(capsys, where, "2304MiB", where / "r.sqlite")
        assert code == ExitStatus.OK, doc
        assert doc["summary"]["size_bytes"] == 2304 * 2**20 > 2**31
        assert doc["summary"]["write_bps"] > 0 and doc["summary"]["read_bps"] > 0
    finally:
        shutil.rmtree(where)
