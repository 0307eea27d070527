"""`dtnkit probe e2e` with its default mover, dtnkit cp, against a TLS `dtnkit serve` whose CA
the system does not trust: the probe's error is dtnkit cp's own (one line, one next step),
the options it names are the probe's (--ca-file, --insecure, --token-file, passed on to
dtnkit cp), and following it makes the probe work.  A next step naming a dtnkit cp option
the probe does not pass on says how to give it (--command).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.xrootd import Pki

from dtnkit.errors import ExitStatus
from dtnkit.measure.tools.dtnkit_cp import cp_failure

TOKEN = "e2e-hint-token"
DATA = os.urandom(200_000)


@pytest.fixture(scope="module")
def server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`dtnkit serve` over TLS (the test CA's certificate) on 127.0.0.1: URL and root."""
    base = tmp_path_factory.mktemp("e2e-hints")
    root = base / "root"
    root.mkdir()
    (root / "f").write_bytes(DATA)
    tokens = base / "tokens"
    tokens.write_text(f"{TOKEN} read,write\n")
    tokens.chmod(0o600)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "serve",
            "--root",
            str(root),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--tokens",
            str(tokens),
            "--cert",
            str(pki.cert),
            "--key",
            str(pki.key),
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        m = re.search(r"listening on https://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        assert m
        yield f"https://localhost:{m.group(1)}/", root
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def dtnkit(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`dtnkit ARGV` as a user runs it: no token in the environment, the system's trust
    store (which does not hold the test CA), a results database of the test's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if "TOKEN" not in k and not k.startswith(("SSL_CERT", "X509_"))
    }
    env.update(
        DTNKIT_DB=str(tmp_path / "results.sqlite"), X509_CERT_DIR=str(tmp_path / "no-ca-dir")
    )
    return subprocess.run(
        [sys.executable, "-m", "dtnkit", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def options_of(tmp_path: Path, *words: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", dtnkit(tmp_path, *words, "--help").stdout))


def the_error(done: subprocess.CompletedProcess[str]) -> str:
    err = done.stderr.strip()
    assert err.count("dtnkit: error:") == 1 and err.count("Next:") == 1, err
    assert "Traceback" not in err
    return err.splitlines()[-1]


def test_a_certificate_refused_names_the_probes_own_ca_file(
    server: tuple[str, Path], pki: Pki, tmp_path: Path
) -> None:
    url, _root = server
    token = tmp_path / "token"
    token.write_text(TOKEN)
    out = tmp_path / "out"
    done = dtnkit(tmp_path, "probe", "e2e", url + "f", str(out), "--token-file", str(token))
    assert done.returncode == ExitStatus.ERROR
    err = the_error(done)
    assert err.startswith("dtnkit: error: the transfer with dtnkit cp failed: GET "), err
    assert "TLS certificate was not accepted" in err, err
    named = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", err.split("Next:", 1)[1]))
    assert "--ca-file" in named and named <= options_of(tmp_path, "probe", "e2e"), err

    done = dtnkit(
        tmp_path,
        "probe",
        "e2e",
        url + "f",
        str(out),
        "--token-file",
        str(token),
        "--ca-file",
        str(pki.ca_file),
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == DATA
    assert f"--ca-file {pki.ca_file}" in done.stdout  # the mover's command line, kept


def test_a_bad_token_names_the_probes_token_file(
    server: tuple[str, Path], pki: Pki, tmp_path: Path
) -> None:
    url, _root = server
    (tmp_path / "bad").write_text("not-the-token")
    (tmp_path / "good").write_text(TOKEN)
    common = ("probe", "e2e", url + "f", str(tmp_path / "out"), "--ca-file", str(pki.ca_file))
    err = the_error(dtnkit(tmp_path, *common, "--token-file", str(tmp_path / "bad")))
    assert "HTTP 401" in err and "pass a valid --token-file" in err, err
    assert "--command" not in err  # --token-file is the probe's own
    done = dtnkit(tmp_path, *common, "--token-file", str(tmp_path / "good"))
    assert done.returncode == 0, done.stderr


def test_a_next_step_naming_another_cp_option_says_how_to_give_it(
    server: tuple[str, Path], pki: Pki, tmp_path: Path
) -> None:
    """An upload into a missing collection: dtnkit cp says -p/--parents, an option the
    probe does not pass on: the probe says to give it in a --command."""
    url, _root = server
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "src").write_bytes(DATA)
    err = the_error(
        dtnkit(
            tmp_path,
            "probe",
            "e2e",
            str(tmp_path / "src"),
            url + "no/such/dir/f",
            "--ca-file",
            str(pki.ca_file),
            "--token-file",
            str(tmp_path / "token"),
        )
    )
    assert "rerun with -p/--parents" in err, err
    assert err.endswith(
        "(dtnkit cp's option: measure with it as --command 'dtnkit cp -f OPTIONS {src} {dst}')"
    ), err


def test_the_mover_options_are_refused_with_a_command(tmp_path: Path, pki: Pki) -> None:
    (tmp_path / "src").write_bytes(b"x")
    done = dtnkit(
        tmp_path,
        "probe",
        "e2e",
        str(tmp_path / "src"),
        str(tmp_path / "dst"),
        "--command",
        "cp {src} {dst}",
        "--ca-file",
        str(pki.ca_file),
    )
    assert done.returncode == ExitStatus.BAD_INPUT
    assert "--ca-file with --command" in the_error(done)
    assert not (tmp_path / "dst").exists()


@pytest.mark.parametrize("words", [("probe", "e2e"), ("diagnose",), ("experiment",)])
def test_every_command_running_the_mover_has_its_options(
    tmp_path: Path, words: tuple[str, ...]
) -> None:
    assert {"--ca-file", "--insecure", "--token-file"} <= options_of(tmp_path, *words)


def test_a_token_file_that_is_not_a_file_is_one_error(
    server: tuple[str, Path], pki: Pki, tmp_path: Path
) -> None:
    url, _root = server
    done = dtnkit(
        tmp_path,
        "probe",
        "e2e",
        url + "f",
        str(tmp_path / "out"),
        "--ca-file",
        str(pki.ca_file),
        "--token-file",
        "/dev/zero",
    )
    assert done.returncode == ExitStatus.ERROR
    assert "--token-file /dev/zero: is not a regular file" in the_error(done)
    assert not (tmp_path / "out").exists()


@settings(max_examples=300, deadline=None)
@given(
    stdout=st.one_of(
        st.text(max_size=300),
        st.builds(
            lambda what, why, step, junk: (
                junk + json.dumps({"error": {"what": what, "why": why, "next": step}}, indent=2)
            ),
            st.one_of(st.text(max_size=40), st.integers(), st.none()),
            st.one_of(st.text(max_size=40), st.none()),
            st.one_of(
                st.text(max_size=60),
                st.sampled_from(["pass --ca-file X", "rerun with -p/--parents", "--help"]),
                st.none(),
            ),
            st.text(max_size=40),
        ),
    ),
    stderr=st.text(max_size=100),
    code=st.integers(1, 255),
)
def test_whatever_the_mover_prints_the_error_is_one_with_one_next_step(
    stdout: str, stderr: str, code: int
) -> None:
    """dtnkit cp's output read back (a JSON error document or anything else): never a
    traceback, always the probe's one error with a next step."""
    proc = subprocess.CompletedProcess(["dtnkit", "cp"], code, stdout, stderr)
    err = cp_failure(proc, "dtnkit cp a b")
    assert err.what == "the transfer with dtnkit cp failed" and err.next_step
    shown = err.render()
    assert shown.count(". Next: ") >= 1 and shown.startswith("dtnkit: error: ")
