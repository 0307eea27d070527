"""What `dtnkit cp` builds and loads before its first byte, checked without timing anything
(issue 11: start-up is part of every copy's time; `python -m bench cp-start` measures it).

tests/transfer/test_s18s_startup.py lists the modules a download must not load; this adds
what session 22 took off the path, so that a future import does not bring it back silently:

* the dataclasses a download builds: each frozen or plain dataclass compiles its generated
  methods at import (3-5 M instructions, ~1-2 ms); the copy's plain classes are
  ``dtnkit.records`` (record / mutable_record), so only the ones listed here remain;
* ``dtnkit.host.parsers`` (rtnetlink, ethtool netlink, tc, iproute...: ~7 ms of imports):
  ``--streams auto`` reads sysctls and runs ``ip route get`` through ``dtnkit.host.host``,
  which imports its parsers only where an audit uses them;
* the rest of ``dtnkit`` outside the CLI's ``cp`` and the transfer client.

click is loaded (the command line is click's), and so are http.client (with email and ssl,
which http.client imports) and socket: the copy speaks HTTP through them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.loaded import offending, probe
from tests.support.served import holding
from tests.support.xrootd import Pki

from dtnkit.transfer.server import ServerHandle

#: dataclasses a download may build: Environment (cli/main.py, used by every command),
#: first.py's Opened (it gains a field(default_factory) on the --streams auto branch), and,
#: with --streams auto, autostreams' Limits and Decision and the Host that reads the limits
#: (with its command Result, WriteRecord and namespace _Batch);
#: the bearer token's record (client/bearer.py: WLCG token discovery runs for every copy)
DATACLASSES_FIXED = {"Bearer", "Environment", "Opened"}
DATACLASSES_AUTO = DATACLASSES_FIXED | {"Decision", "Host", "Limits", "Result", "WriteRecord",
                                        "_Batch"}
#: dtnkit packages a download never loads (audits, labs, measurements, results, servers)
NOT_LOADED = ("dtnkit.host.parsers", "dtnkit.host.facts", "dtnkit.host.nsfork",
              "dtnkit.host.replay", "dtnkit.tune", "dtnkit.lab", "dtnkit.measure",
              "dtnkit.diagnose", "dtnkit.sweep", "dtnkit.fleet", "dtnkit.monitor",
              "dtnkit.db.backend", "dtnkit.transfer.server", "dtnkit.transfer.tokens",
              "dtnkit.htmlpage", "dtnkit.progress", "rich")

def run_cp(tmp_path: Path, *argv: str) -> dict[str, Any]:
    """``dtnkit cp ARGV`` in a fresh interpreter (it must succeed): what it had loaded and
    the dataclasses of dtnkit's modules, at its exit."""
    listing = tmp_path / "loaded.json"
    proc = probe(listing, "cp", *argv)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, Any] = json.loads(listing.read_text())
    return found


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, bytes]]:
    data = bytes(range(256)) * 40
    with holding(tmp_path / "root", {"f": data}) as handle:
        yield handle, data


def test_the_probe_sees_dataclasses_and_modules(tmp_path: Path,
                                                served: tuple[ServerHandle, bytes]) -> None:
    """The listing is the child's: it saw the command's Environment and the copy's click."""
    handle, _ = served
    found = run_cp(tmp_path, "--streams", "1", handle.url + "f", str(tmp_path / "copy"))
    assert "Environment" in found["dataclasses"]
    assert {"click", "dtnkit.cli.cp", "dtnkit.transfer.client.download"} <= set(found["modules"])


@pytest.mark.parametrize("streams", ["auto", "1"])
def test_a_download_builds_only_the_listed_dataclasses(
        served: tuple[ServerHandle, bytes], streams: str, tmp_path: Path) -> None:
    handle, data = served
    dst = tmp_path / "copy"
    found = run_cp(tmp_path, "--streams", streams, handle.url + "f", str(dst))
    assert dst.read_bytes() == data
    allowed = DATACLASSES_AUTO if streams == "auto" else DATACLASSES_FIXED
    assert set(found["dataclasses"]) - allowed == set()
    assert offending(found["modules"], NOT_LOADED) == []
    if streams == "auto":  # it did read the host (autostreams' limits), without its parsers
        assert "dtnkit.host.host" in found["modules"]


def test_a_tls_download_builds_only_the_listed_dataclasses(pki: Pki, tmp_path: Path) -> None:
    dst = tmp_path / "copy"
    with holding(tmp_path / "root", {"f": b"y" * 4096}, tls=(pki.cert, pki.key)) as handle:
        found = run_cp(tmp_path, "--ca-file", str(pki.ca_file), handle.url + "f", str(dst))
    assert handle.url.startswith("https://") and dst.read_bytes() == b"y" * 4096
    assert set(found["dataclasses"]) - DATACLASSES_AUTO == set()
    assert offending(found["modules"], NOT_LOADED) == []
