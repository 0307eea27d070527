"""A URL that urllib cannot split (an unclosed ``[``, brackets around no address) is one
error line from ``dtnkit cp`` (exit 9, bad input), not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment


@pytest.mark.parametrize(
    "url", ["http://[::1/x", "http://[::1::2]/x", "https://[]/x", "davs://[fe80::1%25%41]/x"]
)
def test_cp_refuses_a_url_it_cannot_split_in_one_line(
    tmp_path: Path, environment: Environment, url: str
) -> None:
    rc = main(["cp", url, str(tmp_path / "out")], environment)
    err = taken(environment.stderr)
    assert rc == 9, err
    assert err.count("\n") == 1 and err.startswith("dtnkit: error: URL "), err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
