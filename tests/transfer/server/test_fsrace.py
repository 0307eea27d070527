"""A local user swapping a served directory with a symlink to an outside directory
(``renameat2(RENAME_EXCHANGE)``, in a loop, in its own process) while requests hammer it:
nothing may be read from, created in or removed from the outside directory.

Each operation runs through its real handler (no socket: thousands of tries in a second or
two) until the attacker has made at least 10,000 swaps, once with ``openat2`` and once with the
``O_NOFOLLOW`` walk forced; ``test_fsrace_http.py`` repeats a few hundred over real HTTP.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import platform
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support import fsrace
from tests.support.fsrace import INSIDE, OUTSIDE, OUTSIDE_ONLY, Layout, run

from dtnkit.transfer import fsroot
from dtnkit.transfer.server.exchange import Services
from dtnkit.transfer.server.registry import SessionRegistry

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the attacker calls renameat2 as syscall 316 (x86_64)"
)

SWAPS = 10_000
MIN_TRIES = 600
MAX_SECONDS = 8.0  # per operation: a stop, not a target (the swaps usually take < 1 s)


@pytest.fixture(params=["openat2", "walk"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "openat2" and not fsroot.has_openat2():
        pytest.skip("this kernel has no openat2")
    saved = fsroot.FALLBACK
    fsroot.FALLBACK = request.param == "walk"
    yield request.param
    fsroot.FALLBACK = saved


@pytest.fixture
def layout() -> Iterator[Layout]:
    base = Path(tempfile.mkdtemp(prefix="dk11fs-"))
    lay = Layout.make(base)
    yield lay
    lay.close()
    shutil.rmtree(base)


def hammer(
    layout: Layout, one: Callable[[int], bool], changed: set[str] | None = None
) -> tuple[int, int, int]:
    """Call ``one(i)`` (True: it escaped) while the swapper runs, until it has made SWAPS
    swaps and MIN_TRIES tries were made; (tries, escapes, swaps).  With *changed* (the
    outside names before), an escape is a name created or removed outside instead."""
    import time

    tries = escapes = 0
    deadline = time.monotonic() + MAX_SECONDS
    with fsrace.swapping(layout) as swapper:
        while tries < MIN_TRIES or (swapper.swaps() < SWAPS and time.monotonic() < deadline):
            escapes += one(tries)
            tries += 1
    if changed is not None:
        escapes = len(layout.outside_names() ^ changed)
    print(f"\n{tries} tries, {escapes} escapes, {swapper.final} swaps")
    return tries, escapes, swapper.final or 0


def check(layout: Layout, result: tuple[int, int, int], before: set[str]) -> None:
    tries, escapes, swaps = result
    assert swaps >= SWAPS, f"only {swaps} swaps in {tries} tries"
    assert escapes == 0, f"{escapes} escapes in {tries} tries"
    assert layout.outside_names() == before  # nothing created or removed outside
    assert (layout.outside / "file").read_bytes() == OUTSIDE


def _svc(layout: Layout) -> Services:
    return fsrace.services(layout.root)


def test_get(mode: str, layout: Layout) -> None:
    svc, before = _svc(layout), layout.outside_names()
    served = []

    def one(i: int) -> bool:
        body = run(svc, "GET", "/d/file").body
        served.append(body == INSIDE)
        return OUTSIDE[:20] in body

    check(layout, hammer(layout, one), before)
    assert sum(served) > 0  # the requests that met the real directory were served


def _served_names(layout: Layout, prefix: str) -> int:
    return len([n for n in layout.inside_names() if n.startswith(prefix)])


def test_head_digest(mode: str, layout: Layout) -> None:
    svc, before = _svc(layout), layout.outside_names()
    leak = base64.b64encode(hashlib.sha256(OUTSIDE).digest()).decode()

    def one(i: int) -> bool:
        svc.cache.forget(layout.root.resolve() / "d" / "file")
        reply = run(
            svc, "HEAD", "/d/file", {"Want-Digest": "sha-256", "Want-Content-Digest": "sha-256=1"}
        )
        served.append(any(good in value for _name, value in reply.headers))
        return any(leak in value for _name, value in reply.headers)

    served: list[bool] = []
    good = base64.b64encode(hashlib.sha256(INSIDE).digest()).decode()
    check(layout, hammer(layout, one), before)
    assert sum(served) > 0


def test_listing(mode: str, layout: Layout) -> None:
    svc, before = _svc(layout), layout.outside_names()

    def one(i: int) -> bool:
        reply = run(svc, "PROPFIND", "/d/", {"Depth": "1"}) if i % 2 else run(svc, "GET", "/d/")
        served.append(b"file" in reply.body)
        return OUTSIDE_ONLY.encode() in reply.body

    served: list[bool] = []
    check(layout, hammer(layout, one), before)
    assert sum(served) > 0


def test_put(mode: str, layout: Layout) -> None:
    svc, before = _svc(layout), layout.outside_names()
    check(
        layout,
        hammer(layout, lambda i: not run(svc, "PUT", f"/d/put-{i}", body=b"new"), before),
        before,
    )
    assert _served_names(layout, "put-") > 0


def test_mkcol(mode: str, layout: Layout) -> None:
    svc, before = _svc(layout), layout.outside_names()
    check(layout, hammer(layout, lambda i: not run(svc, "MKCOL", f"/d/col-{i}"), before), before)
    assert _served_names(layout, "col-") > 0


def test_delete(mode: str, layout: Layout) -> None:
    svc = _svc(layout)
    for i in range(MIN_TRIES * 4):
        for fd in (layout.inside_fd, layout.outside_fd):
            os.close(os.open(f"victim-{i}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    before = layout.outside_names()

    def one(i: int) -> bool:
        run(svc, "DELETE", f"/d/victim-{i % (MIN_TRIES * 4)}")
        return False

    check(layout, hammer(layout, one, before), before)
    assert _served_names(layout, "victim-") < MIN_TRIES * 4


def test_upload_session(mode: str, layout: Layout) -> None:
    registry = SessionRegistry(layout.root.resolve(), 3600.0)
    try:
        svc = fsrace.services(layout.root, registry)
        before = layout.outside_names()

        def one(i: int) -> bool:
            target = f"/d/up-{i}"
            reply = run(svc, "POST", target, {"Dtnkit-Upload": "start", "Upload-Length": "4"})
            ident = dict(reply.headers).get("Dtnkit-Upload-Id")
            if ident is not None:
                run(
                    svc,
                    "PUT",
                    target,
                    {"Dtnkit-Upload-Id": ident, "Content-Range": "bytes 0-3/4"},
                    b"abcd",
                )
                run(svc, "POST", target, {"Dtnkit-Upload": "commit", "Dtnkit-Upload-Id": ident})
            return False

        check(layout, hammer(layout, one, before), before)
        assert _served_names(layout, "up-") > 0
    finally:
        registry.close()


# --------------------------------------------------------------------------- the module itself


def test_both_ways_refuse_every_symlink(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "walk":  # the walk must not fall back on openat2 by accident

        def boom(*args: object) -> int:
            raise AssertionError("openat2 called in walk mode")

        monkeypatch.setattr(fsroot, "_raw_openat2", boom)
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "in" / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "in" / "f").write_bytes(b"in")
    (outside / "f").write_bytes(b"out")
    (root / "out").symlink_to(outside)
    (root / "inlink").symlink_to("in")  # even a link that stays inside
    (root / "in" / "flink").symlink_to("f")
    with fsroot.Root(root) as fs:
        fd = fs.open(("in", "f"), os.O_RDONLY)
        assert os.read(fd, 10) == b"in"
        os.close(fd)
        for rel in (("out", "f"), ("inlink", "f"), ("in", "flink"), ("out",)):
            with pytest.raises(OSError) as info:
                os.close(fs.open(rel, os.O_RDONLY))
            assert info.value.errno in (errno.ELOOP, errno.ENOTDIR), rel
        for bad in (("out", "new"), ("inlink", "new")):
            with pytest.raises(OSError):
                fs.mkdir(bad)
            with pytest.raises(OSError):
                os.close(fs.open(bad, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
            with pytest.raises(OSError):
                fs.remove((*bad[:-1], "f"))
        with pytest.raises(OSError):
            fs.listdir(("out",))
        for bad_name in ("..", ".", "a/b", ""):
            with pytest.raises(OSError):
                fs.lstat(("in", bad_name))
        assert {n for n, _st in fs.listdir(("in",))} == {"f", "sub", "flink"}
        assert stat.S_ISLNK(fs.lstat(("out",)).st_mode)  # lstat: the link itself
        fs.mkdir(("in", "new"))
        assert fs.remove(("in", "new")) is True
        assert fs.remove(("out",)) is False  # DELETE removes a link, not its target
    assert sorted(os.listdir(outside)) == ["f"] and (outside / "f").read_bytes() == b"out"
    assert not (root / "out").exists()


def test_openat2_probe_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    first = fsroot.has_openat2()

    def boom(*args: object) -> int:
        raise AssertionError("probed twice")

    monkeypatch.setattr(fsroot, "_raw_openat2", boom)
    assert fsroot.has_openat2() is first
    monkeypatch.setattr(fsroot, "FALLBACK", True)
    assert not fsroot.uses_openat2()


def test_a_swapped_root_changes_nothing_once_pinned(tmp_path: Path) -> None:
    root = tmp_path / "served"
    root.mkdir()
    (root / "f").write_bytes(b"in")
    fsroot.pin(root)  # what the server does at start
    try:
        root.rename(tmp_path / "old")
        root.symlink_to("/")  # a user who owns the parent swaps the root for a link
        with fsroot.Root(root) as fs:
            assert fs.lstat(("f",)).st_size == 2  # still the directory opened at start
            with pytest.raises(FileNotFoundError):
                fs.lstat(("etc",))
    finally:
        fsroot.unpin(root)
    with fsroot.Root(root) as fs:  # not pinned any more: the path as it is now
        assert stat.S_ISDIR(fs.lstat(("etc",)).st_mode)
