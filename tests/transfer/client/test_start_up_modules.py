"""`dtnkit cp` starts without modules it does not use (issue 11: start-up is part of every
copy's time; `python -m bench cp-start` measures it, this keeps it without timing anything).

Each case runs the command in a fresh interpreter (``python -c``: cp's real import path, from
``dtnkit.cli.main``) and reads ``sys.modules`` at its end: a module on the lists below was
loaded by something the command did not need.  The lists name what a plain download or
``cp --help`` never uses; a change that needs one of them on that path should import it where
it is used (inside the function), as the modules listed in the comments do.
"""

from __future__ import annotations

import subprocess
import sys
import xml.sax.saxutils
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.loaded import offending
from tests.support.served import holding
from tests.support.xrootd import Pki

from dtnkit.transfer.server import ServerHandle
from dtnkit.transfer.wire import multistatus

#: never on `dtnkit cp URL FILE`'s path (a download that neither resumes nor fails)
NOT_FOR_A_DOWNLOAD = (
    "concurrent.futures", "logging",  # --parallel N only (copy.py)
    "hashlib", "_hashlib", "hmac", "secrets",  # md5/sha* checksums, journals, server tags
    "xml.sax", "xml.parsers.expat", "urllib.request", "tempfile",  # PROPFIND only
    "dtnkit.transfer.wire.multistatus",  # by session.py's PROPFIND
    "dtnkit.transfer.client.upload", "dtnkit.transfer.client.upload_session",
    "dtnkit.transfer.client.relay", "dtnkit.transfer.client.tree",  # by copy.py when needed
    "dtnkit.transfer.client.tpc", "dtnkit.transfer.server",
    "rich", "dtnkit.cli.render",  # a progress bar or table on a terminal only
    "dtnkit.tune", "dtnkit.lab", "dtnkit.measure", "dtnkit.diagnose", "sqlite3",
)
#: with --streams N nothing reads the host's buffer limits or routes (`ip -j route get`);
#: json: also --format json and the journals of a resumed or failed copy
NOT_WITH_FIXED_STREAMS = ("dtnkit.transfer.client.autostreams", "dtnkit.host", "subprocess",
                          "json")
#: `dtnkit cp --help` parses options and prints; it moves nothing
NOT_FOR_HELP = (*NOT_FOR_A_DOWNLOAD, *NOT_WITH_FIXED_STREAMS, "http.client", "ssl", "email",
                "socket", "dtnkit.transfer.client.copy", "dtnkit.transfer.client.session",
                "dtnkit.transfer.client.download", "dtnkit.transfer.files", "ctypes")

_RUN = """
import sys
from dtnkit.cli.main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write("\\n".join(["MODULES", *sorted(sys.modules)]))
sys.exit(code)
"""


def loaded_by(tmp_path: Path, *argv: str) -> set[str]:
    """The modules ``dtnkit ARGV`` has loaded when it ends (it must succeed)."""
    listing = tmp_path / "modules.txt"
    proc = subprocess.run([sys.executable, "-c", _RUN, str(listing), *argv],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    head, *names = listing.read_text().split("\n")
    assert head == "MODULES"
    return set(names)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerHandle, bytes]]:
    data = bytes(range(256)) * 4
    with holding(tmp_path / "root", {"f": data}) as handle:
        yield handle, data


def test_the_check_sees_a_banned_module(tmp_path: Path) -> None:
    """The listing is the child's, and a banned package counts with its submodules."""
    loaded = loaded_by(tmp_path, "cp", "--help")
    assert "click" in loaded and "dtnkit.cli.cp" in loaded
    assert offending(loaded | {"xml.sax.handler"}, ("xml.sax",)) == ["xml.sax.handler"]


def test_cp_help_loads_no_transfer_machinery(tmp_path: Path) -> None:
    assert offending(loaded_by(tmp_path, "cp", "--help"), NOT_FOR_HELP) == []


@pytest.mark.parametrize("streams", ["auto", "1"])
def test_a_download_loads_only_what_it_uses(served: tuple[ServerHandle, bytes], streams: str,
                                            tmp_path: Path) -> None:
    handle, data = served
    dst = tmp_path / "copy"
    loaded = loaded_by(tmp_path, "cp", "--streams", streams, handle.url + "f", str(dst))
    assert dst.read_bytes() == data
    assert "http.client" in loaded  # it did download
    banned = NOT_FOR_A_DOWNLOAD + (NOT_WITH_FIXED_STREAMS if streams == "1" else ())
    assert offending(loaded, banned) == []


def test_an_overwriting_download_loads_no_ctypes(served: tuple[ServerHandle, bytes],
                                               tmp_path: Path) -> None:
    """ctypes is for renameat2 (a commit that must not replace) and openat2 (the server)."""
    handle, data = served
    dst = tmp_path / "copy"
    dst.write_bytes(b"old")
    loaded = loaded_by(tmp_path, "cp", "-f", "--streams", "1", handle.url + "f", str(dst))
    assert dst.read_bytes() == data
    assert offending(loaded, (*NOT_FOR_A_DOWNLOAD, *NOT_WITH_FIXED_STREAMS, "ctypes")) == []
    dst.unlink()
    assert "ctypes" in loaded_by(tmp_path, "cp", "--streams", "1", handle.url + "f", str(dst))


def test_a_tls_download_loads_only_what_it_uses(pki: Pki, tmp_path: Path) -> None:
    dst = tmp_path / "copy"
    with holding(tmp_path / "root", {"f": b"x" * 1024}, tls=(pki.cert, pki.key)) as handle:
        loaded = loaded_by(tmp_path, "cp", "--ca-file", str(pki.ca_file), handle.url + "f",
                           str(dst))
    assert handle.url.startswith("https://") and dst.read_bytes() == b"x" * 1024
    assert offending(loaded, NOT_FOR_A_DOWNLOAD) == []


def test_the_json_summary_still_loads_json(served: tuple[ServerHandle, bytes],
                                           tmp_path: Path) -> None:
    """--format json imports json where it prints (cli/output.py), and prints JSON."""
    handle, _ = served
    loaded = loaded_by(tmp_path, "cp", "--format", "json", handle.url + "f",
                       str(tmp_path / "copy"))
    assert "json" in loaded


@given(st.text())
def test_xml_escape_is_saxutils_escape(text: str) -> None:
    """multistatus escapes as xml.sax.saxutils.escape did (it no longer imports xml.sax)."""
    assert multistatus.xml_escape(text) == xml.sax.saxutils.escape(text)
