"""A third-party copy that dtnkit serve refuses because the other server's address is not
public (and not in its --tpc-allow): the server and `dtnkit cp --tpc` say so and name the fix
(`dtnkit serve --tpc-allow`), not the token's scope; following the hint makes the copy work.

Real `dtnkit serve` processes on 127.0.0.1 (not a public address) and `dtnkit cp` as a user
runs it.
"""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.hostile_server import Reply, Request, hostile

from dtnkit.errors import ExitStatus
from dtnkit.transfer.client.tpc import TpcError, request_copy
from dtnkit.transfer.wire import markers

TOKEN = "tpc-hint-token"
DATA = os.urandom(300_000)


@contextmanager
def serve(root: Path, *extra: str) -> Iterator[str]:
    """`dtnkit serve ROOT` on 127.0.0.1 (a port the kernel picks): its URL."""
    root.mkdir()
    tokens = root.parent / f"{root.name}.tokens"
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
            "--quiet",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", line)
        assert m, line
        yield m.group(1)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def cp(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "cp",
            *argv,
            "--token-file",
            str(token),
            "--remote-token-file",
            str(token),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_a_refused_remote_names_the_allow_list_and_the_fix_works(tmp_path: Path, mode: str) -> None:
    with ExitStack() as stack:
        a = stack.enter_context(serve(tmp_path / "a"))
        b = stack.enter_context(serve(tmp_path / "b"))
        (tmp_path / "a" / "f").write_bytes(DATA)
        done = cp(tmp_path, "--tpc", mode, a + "f", b + "g")
        active = b if mode == "pull" else a
        side = "Source" if mode == "pull" else "Destination"
        assert done.returncode == ExitStatus.REFUSED, done.stderr
        err = done.stderr.strip()
        assert len(err.splitlines()) == 1 and err.count("Next:") == 1, err
        assert "scope" not in err and "Traceback" not in err, err
        assert f"may not reach the {side} host 127.0.0.1" in err, err
        assert "not public" in err and "--tpc-allow" in err, err
        assert (
            f"the admin of 127.0.0.1:{urlsplit(active).port} can allow it with "
            "`dtnkit serve --tpc-allow 127.0.0.1`" in err
        ), err
        assert "without --tpc" in err, err
        assert not (tmp_path / "b" / "g").exists()

    # the hint followed: the active server started with --tpc-allow 127.0.0.1
    with ExitStack() as stack:
        allow = ("--tpc-allow", "127.0.0.1")
        a = stack.enter_context(serve(tmp_path / "a2", *(allow if mode == "push" else ())))
        b = stack.enter_context(serve(tmp_path / "b2", *(allow if mode == "pull" else ())))
        (tmp_path / "a2" / "f").write_bytes(DATA)
        done = cp(tmp_path, "--tpc", mode, a + "f", b + "g")
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "b2" / "g").read_bytes() == DATA


def test_the_servers_answer_says_why_and_who_can_fix_it(tmp_path: Path) -> None:
    """What curl, gfal-copy or FTS get: 403, the side refused in its header, and a body
    naming the host, the reason and the allow-list (and never the address it resolved to)."""
    with serve(tmp_path / "b") as b:
        parts = urlsplit(b)
        conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
        conn.request(
            "COPY",
            "/g",
            headers={"Authorization": f"Bearer {TOKEN}", "Source": "http://localhost:9/f"},
        )
        r = conn.getresponse()
        body = r.read().decode()
        conn.close()
    assert r.status == 403 and r.getheader(markers.REFUSED_REMOTE) == "Source"
    assert body.startswith("COPY /g: the Source host localhost is not allowed"), body
    assert "not public" in body and "dtnkit serve --tpc-allow localhost" in body, body
    assert "127.0.0.1" not in body and "::1" not in body, body


@settings(max_examples=40, deadline=None)
@given(value=st.text(max_size=40), status=st.sampled_from([403, 401, 409, 500]))
def test_a_hostile_refusal_header_is_only_read_on_a_403_naming_a_side(
    value: str, status: int
) -> None:
    """Any other value, or any other status, is an ordinary refusal: one error, no
    traceback, and no allow-list hint made up from a server's header."""
    header = value.encode("latin-1", "replace").decode("latin-1")
    header = "".join(c for c in header if c.isprintable() and c not in "\r\n:").strip()

    def script(req: Request) -> Reply:
        return Reply(
            status,
            [(markers.REFUSED_REMOTE, header)] if header else [],
            b"no: because\n",
            close=True,
        )

    with hostile(script) as server, pytest.raises(TpcError) as got:
        request_copy(server.url("/g"), source="http://192.0.2.1:8080/f", token="t", timeout=10)
    text = got.value.render()
    named = status == 403 and header in ("Source", "Destination")
    assert ("--tpc-allow" in text) == named, text
    assert text.count("Next:") == 1 and "\n" not in text
