"""Part files, commit by rename, the checksum cache, free space."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dtnkit.transfer import files, paths


def test_part_files_and_commit(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    part = files.part_for(target)
    assert part.parent == tmp_path and paths.is_part_name(part.name)
    assert files.part_for(target, "u1").name == paths.part_name("f", "u1")
    cache = files.ChecksumCache()
    fd = files.create_part(part, tmp_path)
    try:
        files.write_all(fd, memoryview(b"new bytes"))
        files.pwrite_all(fd, memoryview(b"N"), 0)
        os.fsync(fd)
        assert files.commit_part(cache, fd, part, target, {"md5": b"x" * 16}, tmp_path) is True
    finally:
        os.close(fd)
    assert target.read_bytes() == b"New bytes" and not part.exists()
    assert os.stat(target).st_mode & 0o777 == 0o640  # the replaced file's mode is kept
    key = files.file_key(os.stat(target))
    assert cache.lookup(target, key) == {"md5": b"x" * 16}
    with pytest.raises(FileExistsError):
        os.close(files.create_part(tmp_path / "f", tmp_path))


def test_commit_of_a_new_file_without_digests(tmp_path: Path) -> None:
    target = tmp_path / "g"
    cache = files.ChecksumCache()
    part = files.part_for(target)
    fd = files.create_part(part, tmp_path, readable=True)
    try:
        assert files.commit_part(cache, fd, part, target, {}, tmp_path) is False
    finally:
        os.close(fd)
    assert target.exists()
    with pytest.raises(OSError):
        files.commit_part(
            cache, -1, part.parent / "missing" / part.name, tmp_path / "missing" / "h", {}, tmp_path
        )


def test_checksum_cache_keys_and_bounds(tmp_path: Path) -> None:
    cache = files.ChecksumCache(max_entries=2)
    a, b, c = (tmp_path / n for n in "abc")
    cache.store(a, (1, 1, 1, 1), {"md5": b"1"})
    cache.store(a, (1, 1, 1, 1), {"sha256": b"2"})  # same version: merged
    assert cache.lookup(a, (1, 1, 1, 1)) == {"md5": b"1", "sha256": b"2"}
    assert cache.lookup(a, (2, 1, 1, 1)) == {}  # another version of the file
    cache.store(a, (2, 1, 1, 1), {"md5": b"3"})  # replaces, not merges
    assert cache.lookup(a, (2, 1, 1, 1)) == {"md5": b"3"}
    cache.store(b, (1, 1, 1, 1), {"md5": b"b"})
    cache.store(c, (1, 1, 1, 1), {"md5": b"c"})  # evicts the least recently used (a)
    assert cache.lookup(a, (2, 1, 1, 1)) == {}
    cache.forget(b)
    assert cache.lookup(b, (1, 1, 1, 1)) == {}


def test_free_space_and_fsync_dir(tmp_path: Path) -> None:
    free = files.free_space(tmp_path)
    assert free is not None and free >= 0
    assert files.free_space(tmp_path / "nope") is None
    files.fsync_dir(tmp_path)
    assert files.stat_or_none(tmp_path / "nope") is None
