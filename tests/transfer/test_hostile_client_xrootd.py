"""The listing checks of `cp -r` (names confined to the destination) accept what a real
server lists: a tree with odd names downloaded from XRootD 5.5 over TLS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import taken
from tests.support.xrootd import XROOTD_USER, Pki, Xrootd, running_xrootd

from dtnkit.cli.main import main
from dtnkit.environment import Environment

pytestmark = pytest.mark.needs_xrootd

FILES = {
    "a.bin": b"a" * 1000,
    "sub/with space.bin": b"b" * 70000,
    "sub/deeper/a&b;c=d+e.bin": b"c" * 10,
    "sub/deeper/ünï.bin": b"d" * 5,
}


@pytest.fixture(scope="module")
def xrd(pki: Pki) -> Iterator[Xrootd]:
    with running_xrootd(pki) as server:
        yield server


def test_cp_r_from_xrootd_keeps_every_name(
    xrd: Xrootd, pki: Pki, tmp_path: Path, environment: Environment
) -> None:
    import pwd

    top = xrd.root / "hostile_client_tree"
    for name, data in FILES.items():
        path = top / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if os.geteuid() == 0:
        ent = pwd.getpwnam(XROOTD_USER)
        for p in [top, *top.rglob("*")]:
            os.chown(p, ent.pw_uid, ent.pw_gid)
    code = main(
        [
            "cp",
            "-r",
            "--ca-file",
            str(pki.ca_file),
            "--verify",
            "none",
            f"{xrd.url}hostile_client_tree/",
            str(tmp_path / "out"),
        ],
        environment,
    )
    assert code == 0, taken(environment.stderr)
    got = {
        str(p.relative_to(tmp_path / "out")): p.read_bytes()
        for p in (tmp_path / "out").rglob("*")
        if p.is_file()
    }
    assert got == FILES
