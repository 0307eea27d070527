"""dtnkit against a real XRootD 5.5 (XrdHttp + HTTP-TPC over TLS, throwaway CA) on loopback.

XRootD runs without authorization (no SciTokens plugin installed, see tests/support/xrootd.py);
the dtnkit side checks its bearer tokens as usual.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.support.xrootd import TOKENS, Pki, Xrootd, adler, running_dtnkit, running_xrootd

from dtnkit.cli.cp import cp
from dtnkit.transfer.client.tpc import TpcResult, request_copy
from dtnkit.transfer.server import ServerHandle

pytestmark = pytest.mark.needs_xrootd

DATA = os.urandom(3 << 20) + b"odd tail"  # 3 MiB and a bit: several 512 KiB blocks


@pytest.fixture(scope="module")
def xrd(pki: Pki) -> Iterator[Xrootd]:
    with running_xrootd(pki) as server:
        yield server


@pytest.fixture(scope="module")
def dk(pki: Pki) -> Iterator[ServerHandle]:
    with running_dtnkit(pki, tokens=TOKENS, marker_interval=0.2) as server:
        yield server


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if "dtnkit-part" in p.name)


def run_cp(pki: Pki, *args: str) -> tuple[int, str, str]:
    out = CliRunner().invoke(cp, ["--ca-file", str(pki.ca_file), *args])
    return out.exit_code, out.stdout, f"{out.stderr}{out.exception or ''}"


@pytest.mark.parametrize("streams", [1, 4])
def test_cp_download_from_xrootd(xrd: Xrootd, pki: Pki, tmp_path: Path, streams: int) -> None:
    xrd.put(f"down{streams}.bin", DATA)
    dst = tmp_path / "got.bin"
    code, out, err = run_cp(
        pki,
        "--checksum",
        "adler32",
        "--verify",
        "block",
        "--json",
        "--streams",
        str(streams),
        "--block-size",
        "512KiB",
        f"{xrd.url}down{streams}.bin",
        str(dst),
    )
    assert code == 0, err
    assert dst.read_bytes() == DATA
    summary = json.loads(out)
    assert summary["digest"] == adler(DATA) and summary["streams"] == streams
    assert xrd.digest(f"down{streams}.bin") == f"adler32={adler(DATA)}"
    assert leftovers(tmp_path) == []


def test_cp_upload_to_xrootd(xrd: Xrootd, pki: Pki, tmp_path: Path) -> None:
    src = tmp_path / "up.bin"
    src.write_bytes(DATA)
    code, out, err = run_cp(
        pki, "--checksum", "adler32", "--verify", "block", "--json", str(src), f"{xrd.url}up.bin"
    )
    assert code == 0, err
    assert json.loads(out)["digest"] == adler(DATA)
    assert (xrd.root / "up.bin").read_bytes() == DATA
    # XRootD computes its own adler32 (and caches it in an xattr): the same value
    assert xrd.digest("up.bin") == f"adler32={adler(DATA)}"


def _check_markers(res: TpcResult, status: int) -> None:
    assert res.ok, res.final
    assert res.status == status
    assert res.final == "success: Created"
    assert res.markers, "no performance marker parsed"
    assert all(m.stripe_count == 1 and m.timestamp for m in res.markers)


def test_dtnkit_active_pull_from_xrootd(xrd: Xrootd, dk: ServerHandle, pki: Pki) -> None:
    xrd.put("tpc-src.bin", DATA)
    res = request_copy(
        dk.url + "pulled.bin",
        source=xrd.url + "tpc-src.bin",
        token="rw-token",
        streams=2,
        timeout=30,
        ca_file=str(pki.ca_file),
    )
    _check_markers(res, 202)
    assert res.bytes == len(DATA)
    assert (dk.root / "pulled.bin").read_bytes() == DATA
    assert leftovers(dk.root) == []


def test_dtnkit_active_push_to_xrootd(xrd: Xrootd, dk: ServerHandle, pki: Pki) -> None:
    (dk.root / "push-src.bin").write_bytes(DATA)
    res = request_copy(
        dk.url + "push-src.bin",
        destination=xrd.url + "pushed.bin",
        token="ro-token",
        timeout=30,
        ca_file=str(pki.ca_file),
        checksum="adler32",
    )
    _check_markers(res, 202)
    assert (xrd.root / "pushed.bin").read_bytes() == DATA
    assert xrd.digest("pushed.bin") == f"adler32={adler(DATA)}"


@pytest.mark.parametrize("streams", [1, 4])
def test_xrootd_active_pull_from_dtnkit(
    xrd: Xrootd, dk: ServerHandle, streams: int, pki: Pki
) -> None:
    (dk.root / "x-src.bin").write_bytes(DATA)
    name = f"xpulled{streams}.bin"
    res = request_copy(
        xrd.url + name,
        source=dk.url + "x-src.bin",
        streams=streams,
        transfer_headers={"Authorization": "Bearer ro-token"},
        timeout=30,
        ca_file=str(pki.ca_file),
    )
    _check_markers(res, 201)  # XRootD 5.5.3 answers 201, not 202
    # XRootD's markers carry an extra key (RemoteConnections: tcp:127.0.0.1:<dtnkit port>)
    assert str(dk.port) in res.markers[-1].extra.get("remoteconnections", "")
    assert (xrd.root / name).read_bytes() == DATA
    assert xrd.digest(name) == f"adler32={adler(DATA)}"


def test_xrootd_active_push_to_dtnkit_cli(xrd: Xrootd, dk: ServerHandle, pki: Pki) -> None:
    xrd.put("x-push-src.bin", DATA)
    code, out, err = run_cp(
        pki,
        "--tpc",
        "push",
        "--remote-token",
        "rw-token",
        "--json",
        xrd.url + "x-push-src.bin",
        dk.url + "xpushed.bin",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["final"] == "success: Created" and summary["markers"] >= 1
    assert summary["digest"] == adler(DATA)  # dtnkit's digest of what XRootD pushed
    assert (dk.root / "xpushed.bin").read_bytes() == DATA
    assert leftovers(dk.root) == []


def test_xrootd_pull_of_missing_source_fails_and_leaves_nothing(
    xrd: Xrootd, dk: ServerHandle, pki: Pki
) -> None:
    # XRootD 5.5.3 answers 201, ends with "failure: Remote side failed with status code 404"
    # and leaves a 0-byte destination; cp --tpc removes it (it did not exist before).
    code, _out, err = run_cp(
        pki,
        "--tpc",
        "pull",
        "--remote-token",
        "ro-token",
        dk.url + "no-such-file.bin",
        xrd.url + "never.bin",
    )
    assert code != 0
    assert "404" in err and "removed the partial destination" in err
    assert not (xrd.root / "never.bin").exists()


def test_dtnkit_pull_of_missing_xrootd_source_fails_and_leaves_nothing(
    xrd: Xrootd, dk: ServerHandle, pki: Pki
) -> None:
    res = request_copy(
        dk.url + "never.bin",
        source=xrd.url + "no-such-file.bin",
        token="rw-token",
        timeout=30,
        ca_file=str(pki.ca_file),
    )
    assert not res.ok and res.final.startswith("failure:") and "404" in res.final
    assert not (dk.root / "never.bin").exists() and leftovers(dk.root) == []


def test_require_checksum_verification_against_xrootd(
    xrd: Xrootd, dk: ServerHandle, pki: Pki
) -> None:
    # XRootD is configured for adler32/md5/crc32c only: asked for sha-256 it silently answers
    # with adler32, so dtnkit cannot verify a sha-256 pull.
    xrd.put("nosha.bin", DATA)
    res = request_copy(
        dk.url + "sha-strict.bin",
        source=xrd.url + "nosha.bin",
        token="rw-token",
        checksum="sha256",
        timeout=30,
        ca_file=str(pki.ca_file),
        require_checksum=True,
    )
    assert not res.ok and "offered no sha256" in res.final
    assert not (dk.root / "sha-strict.bin").exists()
    res = request_copy(
        dk.url + "sha-lax.bin",
        source=xrd.url + "nosha.bin",
        token="rw-token",
        checksum="sha256",
        timeout=30,
        ca_file=str(pki.ca_file),
        require_checksum=False,
    )
    assert res.ok, res.final
    assert (dk.root / "sha-lax.bin").read_bytes() == DATA
    assert leftovers(dk.root) == []
