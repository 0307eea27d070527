"""gfal-copy/xrdcp habits against a real XRootD 5.5.3 (XrdHttp over TLS, throwaway CA):
davs:// URLs, no overwrite without -f (XRootD ignores If-None-Match on a PUT, so the
client's HEAD is what keeps the file), and Overwrite: F on a COPY, which XRootD honours."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import taken
from tests.support.xrootd import TOKENS, Pki, Xrootd, adler, running_dtnkit, running_xrootd

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.transfer.client.tpc import TpcError, request_copy
from dtnkit.transfer.server import ServerHandle

pytestmark = pytest.mark.needs_xrootd

DATA = os.urandom(2 << 20) + b"tail"


@pytest.fixture(scope="module")
def xrd(pki: Pki) -> Iterator[Xrootd]:
    with running_xrootd(pki) as server:
        yield server


@pytest.fixture(scope="module")
def dk(pki: Pki) -> Iterator[ServerHandle]:
    with running_dtnkit(pki, tokens=TOKENS, marker_interval=0.2) as server:
        yield server


def cp(environment: Environment, pki: Pki, *argv: str) -> tuple[int, str, str]:
    code = main(["cp", "--ca-file", str(pki.ca_file), *argv], environment)
    return code, taken(environment.stdout), taken(environment.stderr)


def davs(xrd: Xrootd, name: str) -> str:
    return "davs://" + xrd.url[len("https://") :] + name


def test_davs_download_with_k_and_a_hex_digest(
    xrd: Xrootd, pki: Pki, tmp_path: Path, environment: Environment
) -> None:
    xrd.put("habits-down", DATA)
    code, out, err = cp(
        environment,
        pki,
        davs(xrd, "habits-down"),
        str(tmp_path / "f"),
        "-K",
        "adler32",
        "--format",
        "json",
    )
    assert code == 0, err
    assert (tmp_path / "f").read_bytes() == DATA and json.loads(out)["digest"] == adler(DATA)


def test_upload_to_xrootd_keeps_an_existing_file_without_force(
    xrd: Xrootd, pki: Pki, tmp_path: Path, environment: Environment
) -> None:
    # XRootD 5.5.3 answers 200 to a PUT with If-None-Match: * over an existing file (it
    # ignores the header): only the client's HEAD first keeps the file
    target = xrd.put("habits-up", b"precious")
    src = tmp_path / "f"
    src.write_bytes(DATA)
    code, _out, err = cp(environment, pki, str(src), davs(xrd, "habits-up"))
    assert code == ExitStatus.REFUSED and "exists" in err and "--force" in err
    assert target.read_bytes() == b"precious"
    code, _out, err = cp(environment, pki, str(src), davs(xrd, "habits-up"), "-f")
    assert code == 0, err
    assert target.read_bytes() == DATA


def test_xrootd_pull_honours_overwrite_f(
    xrd: Xrootd, dk: ServerHandle, pki: Pki, environment: Environment
) -> None:
    (dk.root / "habits-src").write_bytes(DATA)
    target = xrd.put("habits-tpc", b"precious")
    with pytest.raises(TpcError) as caught:  # XRootD opens exclusively: 412 "file exists"
        request_copy(
            xrd.url + "habits-tpc",
            source=dk.url + "habits-src",
            timeout=20,
            transfer_headers={"Authorization": "Bearer ro-token"},
            ca_file=str(pki.ca_file),
            overwrite=False,
        )
    assert "412" in caught.value.render()
    assert target.read_bytes() == b"precious"
    code, _out, err = cp(
        environment,
        pki,
        "--tpc",
        "pull",
        "--remote-token",
        "ro-token",
        dk.url + "habits-src",
        xrd.url + "habits-tpc",
    )
    assert code == ExitStatus.REFUSED and "exists" in err
    assert target.read_bytes() == b"precious"
    code, _out, err = cp(
        environment,
        pki,
        "--tpc",
        "pull",
        "--remote-token",
        "ro-token",
        "-f",
        dk.url + "habits-src",
        xrd.url + "habits-tpc",
    )
    assert code == 0, err
    assert target.read_bytes() == DATA
