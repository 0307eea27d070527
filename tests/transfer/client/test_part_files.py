"""`dtnkit cp`'s part file (``.NAME.dtnkit-part`` beside the destination) is never written
through something planted under its name: a symbolic link to a file elsewhere, a FIFO, with or
without a resume journal beside it.  The copy starts over in a file of its own and the planted
target keeps its bytes."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.served import holding

DATA = random.Random(31).randbytes(3 * 2**20 + 17)
CANARY = b"site secret: must not be overwritten\n"


def _cp(url: str, dst: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "cp",
            url,
            str(dst),
            "--format",
            "json",
            "--block-size",
            "1MiB",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _journal(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}.dtnkit-part.json")


@pytest.mark.parametrize("with_journal", [False, True], ids=["no-journal", "journal"])
def test_planted_link_is_not_written_through(tmp_path: Path, with_journal: bool) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "authorized_keys"
    canary.write_bytes(CANARY)
    dest = tmp_path / "dest"
    dest.mkdir()
    dst = dest / "f"
    part = dest / ".f.dtnkit-part"
    part.symlink_to(canary)
    if with_journal:
        # a journal claiming blocks of the planted "part file", for this very source
        _journal(dst).write_text(json.dumps({"blocks": {"0": None}}))
    with holding(tmp_path / "srv", {"f": DATA}) as h:
        run = _cp(h.url + "f", dst)
    assert run.returncode == 0, run.stderr
    assert canary.read_bytes() == CANARY
    assert dst.read_bytes() == DATA
    assert not os.path.lexists(part)
    assert "Traceback" not in run.stderr


def test_planted_fifo_is_replaced_not_opened(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    dst = dest / "f"
    os.mkfifo(dest / ".f.dtnkit-part")
    with holding(tmp_path / "srv", {"f": DATA}) as h:
        run = _cp(h.url + "f", dst)
    assert run.returncode == 0, run.stderr
    assert dst.read_bytes() == DATA
    assert not os.path.lexists(dest / ".f.dtnkit-part")
