"""gfal2 (gfal-copy, gfal-ls, gfal-sum) and davix (davix-put/-get/-ls) against a TLS dtnkit serve
with bearer tokens; the server's CA is a throwaway one made by the test."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.xrootd import TOKENS, Pki, adler, gfal_env, running_dtnkit

from dtnkit.transfer.server import ServerHandle

DATA = os.urandom(2 << 20) + b"tail"


@pytest.fixture(scope="module")
def dk(pki: Pki) -> Iterator[ServerHandle]:
    with running_dtnkit(pki, tokens=TOKENS) as server:
        yield server


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


def davs(dk: ServerHandle, name: str) -> str:
    return f"davs://127.0.0.1:{dk.port}/{name}"


def server_digest(dk: ServerHandle, name: str, pki: Pki) -> str:
    import http.client
    import ssl

    conn = http.client.HTTPSConnection(
        "127.0.0.1",
        dk.port,
        timeout=10,
        context=ssl.create_default_context(cafile=str(pki.ca_file)),
    )
    try:
        conn.request(
            "HEAD",
            "/" + name,
            headers={"Authorization": "Bearer ro-token", "Want-Digest": "adler32"},
        )
        resp = conn.getresponse()
        resp.read()
        return resp.getheader("Digest") or ""
    finally:
        conn.close()


def no_parts(root: Path) -> bool:
    return not any("dtnkit-part" in p.name for p in root.iterdir())


@pytest.mark.needs_gfal
def test_gfal_copy_upload_download_with_token(dk: ServerHandle, pki: Pki, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(DATA)
    env = gfal_env(pki, "rw-token")  # gfal2 2.21 reads the bearer token from BEARER_TOKEN
    up = run(
        [
            "gfal-copy",
            "-vv",
            "-K",
            "adler32",
            "--checksum-mode",
            "both",
            f"file://{src}",
            davs(dk, "gfal-up.bin"),
        ],
        env,
    )
    assert up.returncode == 0, up.stderr + up.stdout
    assert (dk.root / "gfal-up.bin").read_bytes() == DATA
    assert server_digest(dk, "gfal-up.bin", pki) == f"adler32={adler(DATA)}"
    # gfal2 really compared checksums at both ends (source and destination checksum events)
    text = up.stdout + up.stderr
    assert "SOURCE http_plugin CHECKSUM:EXIT" in text
    assert "DESTINATION http_plugin CHECKSUM:EXIT" in text and "Want-Digest: adler32" in text
    dst = tmp_path / "down.bin"
    down = run(
        [
            "gfal-copy",
            "-K",
            "adler32",
            "--checksum-mode",
            "both",
            davs(dk, "gfal-up.bin"),
            f"file://{dst}",
        ],
        gfal_env(pki, "ro-token"),
    )
    assert down.returncode == 0, down.stderr + down.stdout
    assert dst.read_bytes() == DATA
    summed = run(["gfal-sum", davs(dk, "gfal-up.bin"), "ADLER32"], env)
    assert summed.returncode == 0 and summed.stdout.split()[-1] == adler(DATA)
    assert no_parts(dk.root)


@pytest.mark.needs_gfal
def test_gfal_copy_with_a_wrong_token_fails_cleanly(
    dk: ServerHandle, pki: Pki, tmp_path: Path
) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(DATA)
    bad = run(
        [
            "gfal-copy",
            "-K",
            "adler32",
            "--checksum-mode",
            "both",
            f"file://{src}",
            davs(dk, "gfal-denied.bin"),
        ],
        gfal_env(pki, "not-a-token"),
    )
    assert bad.returncode != 0 and "401" in bad.stderr
    ro = run(["gfal-copy", f"file://{src}", davs(dk, "gfal-denied.bin")], gfal_env(pki, "ro-token"))
    assert ro.returncode != 0 and "403" in ro.stderr
    assert not (dk.root / "gfal-denied.bin").exists() and no_parts(dk.root)


@pytest.mark.needs_gfal
def test_gfal_ls_lists_via_propfind(dk: ServerHandle, pki: Pki) -> None:
    (dk.root / "listed").mkdir(exist_ok=True)
    (dk.root / "listed" / "a.bin").write_bytes(b"x" * 1234)
    out = run(["gfal-ls", "-l", davs(dk, "listed/")], gfal_env(pki, "ro-token"))
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.rstrip().endswith("a.bin"))
    assert "1234" in line.split()


@pytest.mark.needs_davix
def test_davix_put_get_ls(dk: ServerHandle, pki: Pki, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(DATA)
    ca = ["--capath", str(pki.ca_dir)]
    rw = ["-H", "Authorization: Bearer rw-token"]
    put = run(["davix-put", *ca, *rw, str(src), davs(dk, "davix.bin")])
    assert put.returncode == 0, put.stderr
    assert (dk.root / "davix.bin").read_bytes() == DATA
    # davix-get does not verify: compare the content and the server's digest ourselves
    dst = tmp_path / "got.bin"
    get = run(
        ["davix-get", *ca, "-H", "Authorization: Bearer ro-token", davs(dk, "davix.bin"), str(dst)]
    )
    assert get.returncode == 0, get.stderr
    assert dst.read_bytes() == DATA
    assert server_digest(dk, "davix.bin", pki) == f"adler32={adler(dst.read_bytes())}"
    ls = run(["davix-ls", *ca, "-H", "Authorization: Bearer ro-token", "-l", davs(dk, "")])
    assert ls.returncode == 0, ls.stderr
    assert any(
        ln.endswith("davix.bin") and str(len(DATA)) in ln.split() for ln in ls.stdout.splitlines()
    )
    denied = run(["davix-put", *ca, str(src), davs(dk, "davix-anon.bin")])
    assert denied.returncode != 0 and not (dk.root / "davix-anon.bin").exists()
    assert no_parts(dk.root)
