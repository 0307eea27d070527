"""Grid habits for credentials: the CA found in $X509_CERT_DIR (a hashed directory, as gfal2,
xrdcp and davix read it), WLCG bearer-token discovery, --token-file (no token in `ps`), and
serve's warning about a token file others can read.  A real TLS `dtnkit serve` subprocess and
real `dtnkit cp` subprocesses; tokens never appear in what they print."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.xrootd import Pki, make_pki

from dtnkit.errors import BadInput
from dtnkit.transfer.client import bearer

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

GOOD = "good-tok-7f3a9c"
BAD = "bad-tok-00c1de"
DATA = b"grid credentials\n" * 1000


def _clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The process environment without any credential variable, X509_CERT_DIR pointing at
    an empty place, XDG_RUNTIME_DIR at a fresh directory (so nothing of the host leaks in)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("X509_", "BEARER_", "DTNKIT_TOKEN", "XDG_RUNTIME"))
    }
    env["X509_CERT_DIR"] = str(tmp / "no-such-ca-dir")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@contextlib.contextmanager
def _serve(tmp: Path, pki: Pki, token_mode: int = 0o600) -> Iterator[tuple[str, str]]:
    """A TLS `dtnkit serve` whose only token is GOOD (read): its URL and its stderr so far."""
    root = tmp / "served"
    root.mkdir()
    (root / "f").write_bytes(DATA)
    tokfile = tmp / "tokens"
    tokfile.write_text(f"{GOOD} read\n")
    tokfile.chmod(token_mode)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "serve",
            "--root",
            str(root),
            "--port",
            "0",
            "--cert",
            str(pki.cert),
            "--key",
            str(pki.key),
            "--tokens",
            str(tokfile),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=_clean_env(tmp),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (https://127\.0\.0\.1:[0-9]+/)", line)
        assert m, line + (proc.stderr.read() if proc.poll() is not None else "")
        yield m.group(1), ""
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        _serve.last_stderr = err  # type: ignore[attr-defined]


def _cp(tmp: Path, url: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    dst = tmp / f"got-{len(list(tmp.iterdir()))}"
    return subprocess.run(
        [sys.executable, "-m", "dtnkit", "cp", *args, url + "f", str(dst)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _no_token_shown(proc: subprocess.CompletedProcess[str]) -> None:
    for text in (proc.stdout, proc.stderr):
        assert GOOD not in text and BAD not in text
        assert "Traceback" not in text


def test_ca_found_only_through_x509_cert_dir(tmp_path: Path, pki: Pki) -> None:
    """No --ca-file: the copy verifies the server with the hashed CA directory alone, and
    without it the certificate is refused (exit 22) with a hint naming X509_CERT_DIR."""
    tokf = tmp_path / "tok"
    tokf.write_text(GOOD + "\n")
    with _serve(tmp_path, pki) as (url, _):
        trusted = _cp(
            tmp_path,
            url,
            "--token-file",
            str(tokf),
            env=_clean_env(tmp_path, X509_CERT_DIR=str(pki.ca_dir)),
        )
        untrusted = _cp(tmp_path, url, "--token-file", str(tokf), env=_clean_env(tmp_path))
    assert trusted.returncode == 0, trusted.stderr
    assert [p.read_bytes() for p in tmp_path.glob("got-*")] == [DATA]
    assert untrusted.returncode == 22, untrusted.stderr
    assert "certificate" in untrusted.stderr and "X509_CERT_DIR" in untrusted.stderr
    _no_token_shown(trusted)
    _no_token_shown(untrusted)


# the discovery sources, in order; each is set to the token under test, the later ones to
# the other token: the first one set must win
SOURCES = ("BEARER_TOKEN", "BEARER_TOKEN_FILE", "XDG_RUNTIME_DIR")


def _sources_env(tmp: Path, pki: Pki, first: int, token: str, other: str) -> dict[str, str]:
    env = _clean_env(tmp, X509_CERT_DIR=str(pki.ca_dir))
    run = tmp / f"xdg-{first}-{token}"
    run.mkdir()
    values = {i: (token if i == first else other) for i in range(first, len(SOURCES))}
    if 0 in values:
        env["BEARER_TOKEN"] = values[0]
    if 1 in values:
        f = tmp / f"btf-{first}-{token}"
        f.write_text(values[1] + "\n")
        env["BEARER_TOKEN_FILE"] = str(f)
    if 2 in values:
        (run / f"bt_u{os.getuid()}").write_text(values[2])
        env["XDG_RUNTIME_DIR"] = str(run)
    return env


@pytest.mark.parametrize("first", range(len(SOURCES)), ids=SOURCES)
def test_token_discovery_order(tmp_path: Path, pki: Pki, first: int) -> None:
    """Without --token the first discovery source set is the one sent: the serve accepts
    the copy when that source holds its token, refuses it (401, exit 22) when that source
    holds another token though a later source holds the right one."""
    with _serve(tmp_path, pki) as (url, _):
        ok = _cp(tmp_path, url, env=_sources_env(tmp_path, pki, first, GOOD, BAD))
        refused = _cp(tmp_path, url, env=_sources_env(tmp_path, pki, first, BAD, GOOD))
    assert ok.returncode == 0, ok.stderr
    assert refused.returncode == 22, refused.stderr
    assert "401" in refused.stderr and "--token-file" in refused.stderr
    _no_token_shown(ok)
    _no_token_shown(refused)


@pytest.mark.needs_root
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare (a private /tmp for /tmp/bt_u$UID)",
)
def test_token_discovery_falls_back_to_tmp(tmp_path: Path, pki: Pki) -> None:
    """Last source: /tmp/bt_u$UID, in a private mount namespace (a tmpfs over /tmp, so no
    other process on the machine sees the file); a token file of another user is refused."""
    # the test's files (under /tmp too) are bound back into the fresh /tmp through /mnt, and
    # so is the checkout (its .venv runs the copy) when it lives under /tmp
    keep = os.path.commonpath([tmp_path, pki.dir])
    checkout = Path(__file__).resolve().parents[2]
    keep_too = str(checkout) if checkout.is_relative_to("/tmp") else ""
    script = (
        'mount --bind /tmp /mnt && mount -t tmpfs dkfh-tmp /tmp && mkdir -p "$KEEP" '
        '&& mount --bind "/mnt/${KEEP#/tmp/}" "$KEEP" '
        '&& { [ -z "$KEEP_TOO" ] || { mkdir -p "$KEEP_TOO" '
        '&& mount --bind "/mnt/${KEEP_TOO#/tmp/}" "$KEEP_TOO"; }; } '
        '&& printf "%s\\n" "$TOK" > /tmp/bt_u$(id -u) '
        '&& chown "$OWNER" /tmp/bt_u$(id -u) && exec "$@"'
    )
    with _serve(tmp_path, pki) as (url, _):
        runs = {}
        for name, tok, owner in (
            ("good", GOOD, "0"),
            ("bad", BAD, "0"),
            ("foreign", GOOD, "65534"),
        ):
            env = _clean_env(
                tmp_path,
                X509_CERT_DIR=str(pki.ca_dir),
                TOK=tok,
                OWNER=owner,
                KEEP=keep,
                KEEP_TOO=keep_too,
            )
            runs[name] = subprocess.run(
                [
                    "unshare",
                    "--mount",
                    "sh",
                    "-c",
                    script,
                    "sh",
                    sys.executable,
                    "-m",
                    "dtnkit",
                    "cp",
                    url + "f",
                    str(tmp_path / f"tmp-{name}"),
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                check=False,
            )
    assert runs["good"].returncode == 0, runs["good"].stderr
    assert runs["bad"].returncode == 22, runs["bad"].stderr
    assert runs["foreign"].returncode == 9, runs["foreign"].stderr
    assert "belongs to uid 65534" in runs["foreign"].stderr
    for proc in runs.values():
        _no_token_shown(proc)


def test_token_file_keeps_the_token_out_of_ps(tmp_path: Path) -> None:
    """`ps` shows cp's argv: with --token-file it names the file, never the token (the
    copy is held on a listening socket of the test's until ps has been read)."""
    tokf = tmp_path / "tok"
    tokf.write_text(GOOD)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(60)
        port = listener.getsockname()[1]
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "cp",
                "--token-file",
                str(tokf),
                f"http://127.0.0.1:{port}/f",
                str(tmp_path / "dst"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_clean_env(tmp_path),
        )
        try:
            conn, _ = listener.accept()  # cp is running and connected
            with conn:
                shown = subprocess.run(
                    ["ps", "-ww", "-o", "args=", "-p", str(proc.pid)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
        finally:
            proc.kill()
            proc.communicate(timeout=30)
    assert "--token-file" in shown and str(tokf) in shown
    assert GOOD not in shown


def test_token_and_token_file_together_refused(tmp_path: Path) -> None:
    tokf = tmp_path / "tok"
    tokf.write_text(GOOD)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "cp",
            "--token",
            BAD,
            "--token-file",
            str(tokf),
            "http://127.0.0.1:9/f",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        env=_clean_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 9
    assert proc.stderr.startswith("dtnkit: error: --token and --token-file: ")
    _no_token_shown(proc)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("mode,warned", [(0o600, False), (0o640, True), (0o604, True)])
def test_serve_warns_about_a_token_file_others_read(
    tmp_path: Path, pki: Pki, mode: int, warned: bool
) -> None:
    with _serve(tmp_path, pki, token_mode=mode):
        pass
    err = _serve.last_stderr  # type: ignore[attr-defined]
    assert ("warning: token file" in err) == warned, err
    if warned:
        assert f"mode {mode:04o}" in err and "chmod 600" in err
    assert GOOD not in err


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_hostile_token_file_one_clear_error(tmp_path: Path, raw: bytes) -> None:
    """Whatever a token file holds: its token (one printable word) or one BadInput that names
    the file and never repeats the content."""
    path = tmp_path / "t"
    path.write_bytes(raw)
    try:
        token = bearer.read_token_file(path, "--token-file")
    except BadInput as exc:
        text = exc.render()
        assert str(path) in text and "Next:" in text
        stripped = raw.strip()
        if len(stripped) >= 6:
            assert stripped.decode("latin-1") not in text
    else:
        assert token == raw.decode("ascii").strip()
        assert token and token.isprintable() and not any(c.isspace() for c in token)


def test_token_file_too_large_or_a_directory(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"a" * (bearer.MAX_TOKEN_FILE + 1))
    with pytest.raises(BadInput) as exc:
        bearer.read_token_file(big, "--token-file")
    assert "larger than" in exc.value.render()
    with pytest.raises(BadInput) as exc:
        bearer.read_token_file(tmp_path, "--token-file")
    assert "cannot be read" in exc.value.render() or "not a regular" in exc.value.render()
