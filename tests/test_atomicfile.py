"""A file replaced whole: the reader sees the old or the new file, a symlink or a file raced
in beside it is never written through, and a failure leaves nothing behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.atomicfile import replace_file


def test_new_content_mode_and_no_leftover(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old\n")
    old = os.umask(0o077)
    try:
        replace_file(target, "new\n")
    finally:
        os.umask(old)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # whatever the umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
    replace_file(target, b"\x00secret", mode=0o600, durable=False)
    assert target.read_bytes() == b"\x00secret"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_symlink_at_the_path_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    target = tmp_path / "table.json"
    target.symlink_to(victim)
    replace_file(target, "{}\n")
    assert not target.is_symlink()
    assert target.read_text() == "{}\n"
    assert victim.read_text() == "keep\n"


def test_a_name_raced_in_beside_it_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user who guesses the temporary name (here: every name) gets nothing written
    through their symlink, and the target is left as it was."""
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    target = tmp_path / "scitags-api.json"
    target.write_text("old\n")
    monkeypatch.setattr(os, "urandom", lambda n: b"\x01" * n)
    (tmp_path / f".{target.name}.{'01' * 6}").symlink_to(victim)
    with pytest.raises(FileExistsError):
        replace_file(target, "new\n")
    assert victim.read_text() == "keep\n"
    assert target.read_text() == "old\n"


def test_a_failed_rename_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "snapshot"
    target.mkdir()
    (target / "inside").write_text("x")
    with pytest.raises(OSError):
        replace_file(target, "new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot"]
    assert (target / "inside").read_text() == "x"


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=4096) | st.text(max_size=512))
def test_any_content_comes_back_as_written(
    tmp_path_factory: pytest.TempPathFactory, data: bytes | str
) -> None:
    target = tmp_path_factory.mktemp("replace") / "f"
    replace_file(target, data, durable=False)
    assert target.read_bytes() == (data.encode() if isinstance(data, str) else data)
