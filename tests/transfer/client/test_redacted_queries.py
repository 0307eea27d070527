"""``dtnkit cp`` never prints a URL's query string in an error (a presigned URL's query is
its credential: ``X-Amz-Signature``, ``sig``, ``authz``): the one catch site shows it as
``?REDACTED``, on stderr and in the JSON error document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import HIDDEN, DtnkitError, hide_queries
from dtnkit.transfer.server import start_server

SECRET = "X-Amz-Signature=0123456789abcdef&X-Amz-Credential=AKIAEXAMPLE"


@pytest.mark.parametrize("fmt", ["table", "json"])
@pytest.mark.parametrize("where", ["missing", "refused-port"])
def test_a_failed_copy_does_not_show_the_query(
    tmp_path: Path, environment: Environment, fmt: str, where: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with start_server(root, anonymous_read=True, quiet=True) as h:
        url = f"{h.url}nope?{SECRET}" if where == "missing" else f"http://127.0.0.1:9/f?{SECRET}"
        code = main(
            ["cp", url, str(tmp_path / "out"), "--retries", "0", "--format", fmt], environment
        )
    err, out = taken(environment.stderr), taken(environment.stdout)
    assert code in (20, 22)
    assert "0123456789abcdef" not in err + out and "AKIAEXAMPLE" not in err + out
    assert f"/{'nope' if where == 'missing' else 'f'}{HIDDEN}" in err
    if fmt == "json":
        assert HIDDEN in json.loads(out)["error"]["what"]


def test_every_part_of_an_error_is_cleaned() -> None:
    exc = DtnkitError(
        "GET https://h/f?sig=1",
        "redirected to davs://o:1094/p?authz=2: 403",
        "retry https://h/f?sig=3.",
    )
    assert "sig=" not in exc.render() and "authz=" not in exc.render()
    assert exc.render() == (
        "dtnkit: error: GET https://h/f?REDACTED: redirected to "
        "davs://o:1094/p?REDACTED: 403. Next: retry https://h/f?REDACTED."
    )
    assert all(v.count("?REDACTED") == 1 for k, v in exc.as_dict().items() if k != "exit_status")


QUERY_CHARS = st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="'\"")


@given(
    st.text(QUERY_CHARS, max_size=30),
    st.text(QUERY_CHARS, max_size=30),
    st.sampled_from(["", ": HTTP 403", ".", " and more", "' (quoted)"]),
)
def test_no_query_survives_and_the_message_around_it_does(
    before: str, after_secret: str, after: str
) -> None:
    text = f"GET https://host:443/a/b?{before}S3CR3T{after_secret}{after}"
    shown = hide_queries(text)
    assert "S3CR3T" not in shown
    assert shown.startswith("GET https://host:443/a/b?REDACTED")
    assert shown.endswith(after.lstrip(":."))
